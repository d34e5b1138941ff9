#!/bin/bash
# Times the README's main command as a new user meets it: a fresh clone of this repository
# (its committed HEAD), an empty keras_adapters cache, pip's download cache as it is. Prints
# the installing and main-job minutes and the CPU that measured them. Run it alone on the
# machine: another CPU-heavy job spoils the time.
#
#   bash scripts/time_fresh_clone.sh [work folder, default /tmp/keras_adapters_fresh]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/tmp/keras_adapters_fresh}
rm -rf "$work"
mkdir -p "$work"
git clone -q "$repo" "$work/clone"
cd "$work/clone"
export KERAS_ADAPTERS_CACHE="$work/cache"
start=$(date +%s.%N)
bash scripts/setup.sh > "$work/setup.log" 2>&1 || { echo "set-up failed: see $work/setup.log"; exit 1; }
installed=$(date +%s.%N)
.venv/bin/python experiments/run_classification.py > "$work/run.log" 2>&1 \
  || { echo "main job failed: see $work/run.log"; exit 1; }
end=$(date +%s.%N)
TF_CPP_MIN_LOG_LEVEL=3 .venv/bin/python - "$start" "$installed" "$end" 2>/dev/null <<'EOF'
import sys
from keras_adapters.utils import cpu_kernels
start, installed, end = map(float, sys.argv[1:])
machine = cpu_kernels.machine_record()
avx512 = any(e.startswith("avx512") for e in machine["vector_extensions"])
print(f"installing {(installed - start) / 60:.1f} min, main job {(end - installed) / 60:.1f} min, "
      f"total {(end - start) / 60:.1f} min on {machine['cpu_count']} cores of "
      f"{machine['cpu_model']} ({'AVX-512' if avx512 else 'no AVX-512'}; "
      f"oneDNN {machine['kernels']['onednn']})")
EOF
grep -h "Trained" "$work/run.log"
