#!/usr/bin/env bash
# CI: the project as a user installs it from a wheel, not the source tree: build the wheel,
# install it (non-editable) into a fresh venv, and run `editcurate run` on a JSONL file with
# no config from an empty folder. Fails unless the default filter rules (shipped inside the
# wheel) ran and dropped the bot's edit.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python -m pip wheel --no-deps -q -w "$work/dist" "$root"
python -m venv "$work/venv"
"$work/venv/bin/pip" install -q "$work"/dist/*.whl
mkdir "$work/try" && cd "$work/try"
cp "$root/data/sample/edits.jsonl" .
"$work/venv/bin/editcurate" run edits.jsonl --json > summary.json
"$work/venv/bin/python" - <<'PY'
import json, pathlib, pipeline
assert "site-packages" in pipeline.__file__, pipeline.__file__  # the wheel, not the checkout
s = json.load(open("summary.json"))
f = s["stages"]["filter"]["counts"]
assert f["rejected"] > 0, f  # the default rules ran (bot authors, lock files, no-ops)
assert pathlib.Path("runs/edits/export/train.parquet").exists()
print(f"wheel check: filter kept {f['kept']}, rejected {f['rejected']} with the shipped rules")
PY
