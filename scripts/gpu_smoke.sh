#!/usr/bin/env bash
# GPU smoke: smoke-train the sample run on CUDA (bf16 autocast, probe on); print tokens/s and
# the verdict. Usage: scripts/gpu_smoke.sh [LOCAL_CHECKPOINT_DIR] [extra smoke-train options]
# Without a checkpoint the tiny byte-level model is used (still on CUDA). Offline: a checkpoint
# must already be on disk; nothing is downloaded.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-}"
[ $# -gt 0 ] && shift
RUN_DIR="${RUN_DIR:-data/runs/sample}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

if ! python -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu_smoke: no CUDA device visible to torch; nothing run" >&2
  exit 3
fi
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true

if [ ! -f "$RUN_DIR/shapes/manifest.json" ]; then
  python -m pipeline.cli run --config data/sample/editcurate.toml
fi

args=(--device cuda --probe-batch "${PROBE_BATCH:-8}")
[ -n "$MODEL" ] && args+=(--model "$MODEL")
set +e
python -m pipeline.cli smoke-train "$RUN_DIR" "${args[@]}" "$@"
rc=$?
set -e
python - "$RUN_DIR/smoke/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print(f"model: {s['model']['model']}  device: {s['device']} ({s['dtype']})")
print(f"tokens/s: {s['tokens_per_s']}  train_s: {s['train_s']}")
print(f"probe culprits: {s['probe']['culprits']}")
print(f"verdict: {s['verdict']} ({s['reason']})")
PY
exit $rc
