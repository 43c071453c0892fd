#!/usr/bin/env bash
# GPU check of issue 28 parts 3 and 7, for a machine with an NVIDIA GPU: a small CUDA
# inference sweep with --energy through the real CLI into a temporary database, once with
# TF32 off (the default) and once with --tf32, then the stored energy figures and numerics
# provenance printed and checked. Needs only the carried .venv (no setup.sh); about 1-2 min.
# Run from anywhere: bash scripts/gpu_check.sh [ENERGY_SECONDS]. Exits non-zero, saying why,
# on anything missing or wrong.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
ENERGY_S="${1:-10}"
fail() { echo "gpu_check: FAILED: $*" >&2; exit 1; }

[ -x "$PY" ] || fail "$PY is missing: carry the project's .venv to this machine"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=index,name,driver_version,power.draw --format=csv,noheader || true
else
  echo "gpu_check: no nvidia-smi on PATH (going on: torch and NVML decide)"
fi
"$PY" - <<'EOF' || fail "CUDA or NVML not usable here (see above)"
import sys
import torch
if not torch.cuda.is_available():
    sys.exit(f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU: "
             "torch.cuda.is_available() is False")
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
      f"{torch.cuda.get_device_name(0)}")
try:
    import pynvml
except ImportError:
    sys.exit("nvidia-ml-py (pynvml) is not installed in .venv")
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
try:
    print(f"NVML total energy counter: {pynvml.nvmlDeviceGetTotalEnergyConsumption(h)} mJ")
except pynvml.NVMLError as exc:
    print(f"NVML has no energy counter here ({exc}): the runs must store that reason")
EOF

DIR="$(mktemp -d)"
DB="$DIR/gpu.duckdb"
trap 'rm -rf "$DIR"' EXIT
RUN=("$PY" -m engine run --model resnet18 --framework torch --runtime eager --device cuda
     --batch 8 --threads 1 --rounds 1 --max-rounds 1 --min-time 1 --min-iters 30
     --warmup 5 --energy-s "$ENERGY_S" --no-table --db "$DB")
echo "== fp32, TF32 off (the default), energy loop ${ENERGY_S} s"
timeout 300 "${RUN[@]}" || fail "the fp32 run exited $?"
echo "== fp32 with --tf32"
timeout 300 "${RUN[@]}" --tf32 || fail "the --tf32 run exited $?"

"$PY" - "$DB" <<'EOF' || fail "the stored rows are not what they should be (see above)"
import json
import sys

import duckdb

con = duckdb.connect(sys.argv[1], read_only=True)
cur = con.execute(
    "SELECT status, reason, median_ms, throughput, energy_source, energy_absent, "
    "energy_j_per_sample, energy_kwh_per_million, energy_loop_s, energy_samples, "
    "energy_counters, numerics FROM runs ORDER BY started_at")
cols = [d[0] for d in cur.description]
rows = [dict(zip(cols, r)) for r in cur.fetchall()]
problems = []
for row, tf32 in zip(rows, (False, True)):
    numerics = json.loads(row.pop("numerics") or "{}")
    print(json.dumps(row, indent=1, default=str))
    print("numerics:", json.dumps(numerics, indent=1))
    if row["status"] != "ok":
        problems.append(f"status {row['status']}: {row['reason']}")
    if row["energy_source"] is None and not row["energy_absent"]:
        problems.append("neither an energy figure nor the reason it is absent")
    if row["energy_source"] is not None and not (row["energy_j_per_sample"] or 0) > 0:
        problems.append(f"a {row['energy_source']} figure that is not positive")
    want = "tf32" if tf32 else "ieee"
    got = (numerics.get("cuda_matmul_fp32_precision"), numerics.get("cudnn_conv_fp32_precision"))
    if got != (want, want) or numerics.get("tf32_asked") is not tf32:
        problems.append(f"tf32 asked {tf32}: read back {got}, tf32_asked "
                        f"{numerics.get('tf32_asked')}")
    if numerics.get("denormals_flushed") is not True or numerics.get("cudnn_benchmark") is not True:
        problems.append(f"numerics not as the policy sets them: {numerics}")
if len(rows) != 2:
    problems.append(f"{len(rows)} rows stored, 2 expected")
if problems:
    sys.exit("\n".join(problems))
print(f"gpu_check: OK: {len(rows)} CUDA runs stored with energy and numerics")
EOF
