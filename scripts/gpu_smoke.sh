#!/usr/bin/env bash
# GPU smoke: smoke-train the sample run on one CUDA GPU with a 0.5B-class model built from a
# config (Qwen2-0.5B shapes, random weights, byte-level tokenizer: nothing is downloaded), bf16
# autocast, the probe on (K 8), and the TEST-ONLY fault hook making the two founding items
# non-finite together, so the probe and the CUDA diagnostic rows (fp32 weights, padding,
# attention backends) run for real. Then host syncs per micro-step under torch's sync debug mode.
# Prints tokens/s, peak GPU memory, the verdict and the gate; exits non-zero on any failure
# (no CUDA: 3; smoke-train's own exit code; a check below failed: 1). About 1-2 minutes on one
# H200, 5 at most (enforced).
#
#   scripts/gpu_smoke.sh [--model PATH|config:NAME] [more smoke-train options]
#   scripts/gpu_smoke.sh --fetch-wheels     on a machine with network access: the Python packages
#                                           smoke-train needs beyond torch/transformers/peft
#                                           (polars, pydantic, orjson, rapidfuzz) as CPython 3.12
#                                           x86-64 wheels in .whl/, for a GPU machine without them
#
# The GPU machine needs the sample run: it is built when absent (that needs every dependency of
# the pipeline); else bring data/runs/sample along (built here by `editcurate run --config
# data/sample/editcurate.toml`). Env: RUN_DIR (default data/runs/sample), PYTHON (python3),
# WHEELS (.whl).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
WHEELS="${WHEELS:-.whl}"
RUN_DIR="${RUN_DIR:-data/runs/sample}"
NEEDS=(polars pydantic orjson rapidfuzz)
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1

if [ "${1:-}" = "--fetch-wheels" ]; then
  "$PY" -m pip download --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$WHEELS" "${NEEDS[@]}"
  exit 0
fi

if ! "$PY" -c 'import polars, pydantic, orjson, rapidfuzz' 2>/dev/null; then
  if ! ls "$WHEELS"/*.whl >/dev/null 2>&1; then
    echo "gpu_smoke: ${NEEDS[*]} missing and no wheels in $WHEELS (see --fetch-wheels)" >&2
    exit 3
  fi
  "$PY" -m pip install -q --no-index --find-links "$WHEELS" --target /tmp/gpu-smoke-site \
    "${NEEDS[@]}"
  export PYTHONPATH="/tmp/gpu-smoke-site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}"

if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu_smoke: no CUDA device visible to torch; nothing run" >&2
  exit 3
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

if [ ! -f "$RUN_DIR/export/manifest.json" ]; then
  "$PY" -m pipeline.cli run --config data/sample/editcurate.toml
fi

# the founding pair's ids, from the items themselves
PAIR="$("$PY" - "$RUN_DIR" <<'PY'
import sys
import polars as pl
d = pl.concat([pl.read_parquet(f"{sys.argv[1]}/export/{s}.parquet")
               for s in ("train", "validation", "test")], how="diagonal_relaxed")
ids = []
for before in (" rev: v4.5.0", " rev: 6.1.0"):
    hit = d.filter(pl.col("path").str.ends_with(".pre-commit-config.yaml")
                   & pl.col("before").str.contains(before, literal=True))
    assert hit.height == 1, f"founding item {before!r}: {hit.height} matches"
    ids.append(hit["id"][0])
print(",".join(sorted(ids)))
PY
)"

failed() { [ "$rc" -ne 0 ] || rc=1; }
START=$SECONDS
rc=0
timeout 300 "$PY" -m pipeline.cli smoke-train "$RUN_DIR" --device cuda --model config:0.5b \
  --probe-batch 8 --eval-items 8 --max-new-tokens 48 --fault "pair:$PAIR" "$@" || rc=$?
echo "smoke-train: exit $rc after $((SECONDS - START)) s"

"$PY" - "$RUN_DIR/smoke/summary.json" "$PAIR" <<'PY' || failed
import json, sys
s = json.load(open(sys.argv[1]))
pair = sorted(sys.argv[2].split(","))
print(f"model: {s['model']['model']}  ({s['model']['base_parameters']:,} base parameters)")
print(f"device: {s['device']} ({s['dtype']}); grad checkpointing: {s['config']['grad_checkpointing']}")
print(f"tokens/s: {s['tokens_per_s']}  train_s: {s['train_s']}")
print(f"peak GPU memory: {s['peak_gpu_memory_gib']} GiB")
print(f"verdict: {s['verdict']} ({s['reason']})")
print(f"gate: {s['gate']} ({s['gate_reason']}; random weights are not expected to pass)")
p = s["probe"]
print(f"probe: culprits {p['culprits']} found by {p['found_by']}; cost {p['cost']['passes']} passes")
problems = []
if s["verdict"] != "trains":
    problems.append("verdict is not 'trains'")
if pair not in [sorted(c) for c in p["culprits"]]:
    problems.append(f"the injected pair {pair} was not found")
tables = [c for c in s["culprit_tables"] if sorted(c["ids"]) == pair]
rows = {r["condition"]: r["grad_norm"] for r in (tables[0]["table"] if tables else [])}
for r, v in rows.items():
    print(f"  {r:40s} {v}")
for need in ("fp32 weights, no autocast", "padded to a multiple of 128", "attention eager", "attention sdpa"):
    if need not in rows:
        problems.append(f"CUDA diagnostic row missing: {need}")
    elif not rows[need].startswith("NaN"):
        problems.append(f"row {need!r}: {rows[need]} (the injected fault must be NaN there)")
for m in problems:
    print(f"gpu_smoke: FAILED: {m}", file=sys.stderr)
sys.exit(1 if problems else 0)
PY

timeout 120 "$PY" bench/train_speed.py --syncs-only --model config:0.5b --max-syncs 1 || failed
echo "gpu_smoke: exit $rc after $((SECONDS - START)) s"
exit "$rc"
