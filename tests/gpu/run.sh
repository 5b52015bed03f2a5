#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: build qgate with the CUDA backend, run
# the GPU tests, and print one table of the CPU and GPU (fp32) numbers on
# the shared stories260K-pad256 files: perplexity, their relative
# difference, tokens/s. Usage: tests/gpu/run.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
b=${1:-build-cuda}
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
cmake -S . -B "$b" -DQG_CUDA=ON -DQG_WERROR=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$b" -j"$(nproc)" >/dev/null
ctest --test-dir "$b" --output-on-failure -R '^cuda_' -V | grep -E 'NLL|KLD|passed|failed|SKIP|ok |FAIL' || true
d=../shared/models/stories260K-pad256
t=../shared/data/tinystories_valid_head.txt
[ -d "$d" ] || { echo "no $d: table skipped"; exit 0; }
printf '%-10s %12s %12s %10s %12s %12s\n' file "CPU PPL" "GPU PPL" "rel diff" "CPU tok/s" "GPU tok/s"
for q in F32 BF16 Q8_0 Q6_K Q5_K_M Q5_1 Q5_0 Q4_K_M Q4_1 Q4_0 Q3_K_M Q2_K IQ4_NL IQ4_XS; do
  f=$d/stories260K-pad256-$q.gguf
  c=$("$b"/qgate ppl "$f" --text "$t" --ctx 128 --chunks 400 -q --json)
  g=$("$b"/qgate ppl "$f" --text "$t" --ctx 128 --chunks 400 -q --json --device cuda) || { echo "$q: GPU failed"; continue; }
  python3 - "$q" "$c" "$g" <<'PY'
import json, sys
q, c, g = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
print('%-10s %12.6f %12.6f %10.2e %12.0f %12.0f' % (q, c['ppl'], g['ppl'], abs(g['ppl'] - c['ppl']) / c['ppl'],
      c['tokens_per_second'], g['tokens_per_second']))
PY
done
