#!/usr/bin/env bash
# Fuzz the GGUF reader (or the tokenizer) with libFuzzer for N seconds.
#   tests/fuzz/run.sh [SECONDS] [JOBS]            GGUF reader, default 60 s
#   QG_FUZZ_TARGET=tokenizer tests/fuzz/run.sh S  tokenizers (seeded with the
#       llama.cpp vocabulary test strings when ../shared exists)
#   QG_FUZZ_TARGET=readers tests/fuzz/run.sh S    suite files, JSONL, CSV and every
#       benchmark reader (seeded with the suites in the repo and small records)
#   QG_FUZZ_TARGET=safetensors tests/fuzz/run.sh S  the safetensors reader (seeded
#       with the hf-stories260K checkpoints when ../shared exists)
#   QG_FUZZ_TARGET=http tests/fuzz/run.sh S       request bodies against a real
#       `qgate serve` on loopback, and answers as the HTTP backend reads them
# Builds with clang, AddressSanitizer and UBSan in build-fuzz/, seeds the
# corpus with the generated fixtures (valid synthetic models and every
# malformed case) and with the GGUF files under ../shared/models when that
# folder exists (files up to 2 MiB). Crashes land in build-fuzz/fuzz-artifacts/.
set -euo pipefail
secs=${1:-60}
jobs=${2:-1}
root=$(cd "$(dirname "$0")/../.." && pwd)
b="$root/build-fuzz"
CC=clang cmake -S "$root" -B "$b" -DQG_FUZZ=ON -DQG_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$b" -j"$(nproc)" --target fuzz_gguf fuzz_tokenizer fuzz_http fuzz_readers fuzz_safetensors gguf_fixtures >/dev/null
if [ "${QG_FUZZ_TARGET:-gguf}" = safetensors ]; then
  seeds="$b/fuzz-st-seeds"; corpus="$b/fuzz-st-corpus"
  mkdir -p "$seeds" "$corpus" "$b/fuzz-artifacts"
  h='{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F8_E4M3","shape":[2,2],"data_offsets":[8,12]},"__metadata__":{"format":"pt"}}'
  python3 -c "import struct,sys; h=sys.argv[1].encode(); sys.stdout.buffer.write(struct.pack('<Q',len(h))+h+bytes(range(12)))" "$h" > "$seeds/two"
  for f in "$root"/../shared/models/hf-stories260K/*/model.safetensors; do
    if [ -f "$f" ] && [ "$(stat -c %s "$f")" -le 2097152 ]; then cp "$f" "$seeds/$(basename "$(dirname "$f")").safetensors"; fi
  done
  cd "$b"
  exec "$b/tests/fuzz_safetensors" -max_total_time="$secs" -max_len=65536 -timeout=30 -print_final_stats=1 \
    -artifact_prefix="$b/fuzz-artifacts/st-" "$corpus" "$seeds"
fi
if [ "${QG_FUZZ_TARGET:-gguf}" = http ]; then
  seeds="$b/fuzz-http-seeds"; corpus="$b/fuzz-http-corpus"
  mkdir -p "$seeds" "$corpus" "$b/fuzz-artifacts"
  printf '\000{"prompt":[1,5,9],"echo":true,"logprobs":2,"max_tokens":2,"temperature":0}' > "$seeds/completion"
  printf '\000{"prompt":"the girl","max_tokens":3,"stop":["\\n"],"temperature":0.7,"top_p":0.9,"seed":3}' > "$seeds/text"
  printf '\001{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"max_tokens":2}' > "$seeds/chat"
  printf '\002{"content":"the girl saw the ball","add_special":false}' > "$seeds/tokenize"
  printf '\003{"tokens":[1,5,9,300]}' > "$seeds/detokenize"
  printf '\005{"choices":[{"text":"","logprobs":{"tokens":["a","b"],"token_ids":[1,5],"token_logprobs":[null,-1.5],"top_logprobs":[null,{"b":-1.5}],"text_offset":[0,1]}}]}' > "$seeds/answer"
  printf '\007{"choices":[{"text":"","prompt_logprobs":[null,{"5":{"logprob":-1.5,"rank":2,"decoded_token":"b"},"7":{"logprob":-0.4,"rank":1}}]}]}' > "$seeds/vllm"
  printf '\301{"tokens":[{"id":1,"piece":"a"},{"id":5,"piece":[226,130]},{"id":9,"piece":" the"}]}' > "$seeds/tokens"
  printf '\300{"tokens":[1,5,9],"count":3}' > "$seeds/tokens-plain"
  cd "$b"
  exec "$b/tests/fuzz_http" -max_total_time="$secs" -max_len=4096 -timeout=30 -print_final_stats=1 \
    -artifact_prefix="$b/fuzz-artifacts/http-" "$corpus" "$seeds"
fi
if [ "${QG_FUZZ_TARGET:-gguf}" = readers ]; then
  seeds="$b/fuzz-readers-seeds"; corpus="$b/fuzz-readers-corpus"
  mkdir -p "$seeds" "$corpus" "$b/fuzz-artifacts"
  n=0
  for f in "$root"/suites/*.json "$root"/suites/*/suite.json; do
    { printf '\000'; cat "$f"; } > "$seeds/suite-$n"; n=$((n + 1))
  done
  printf '\000{"name":"s","tasks":[{"name":"m","kind":"custom","data":"d.jsonl","sha256":"0","fields":{"id":"id","context":"q","choices":"c","gold":"g"}},{"name":"p","kind":"perplexity","data":"d.txt","sha256":"0"},{"name":"b","benchmark":"mmlu","data":"d.csv","sha256":"0"}]}' > "$seeds/suite-custom"
  for f in "$root"/suites/default/*.jsonl; do { printf '\001'; cat "$f"; } > "$seeds/jsonl-$(basename "$f")"; done
  printf '\002a,"b ""q"" c",d\r\n"multi\nline",2,3\n\n' > "$seeds/csv"
  printf '\003{"ind":1,"activity_label":"Cooking","ctx_a":"A man","ctx_b":"cuts","endings":["a","b","c","d"],"label":"2"}\n' > "$seeds/hellaswag"
  printf '\005Sky?,blue,green,red,black,A\n' > "$seeds/mmlu"
  printf '\006{"goal":"open a jar","sol1":"twist","sol2":"smash"}\n' > "$seeds/piqa"
  printf '\007{"id":"x","question":{"stem":"Sky?","choices":[{"text":"blue","label":"A"},{"text":"red","label":"B"}]},"answerKey":"A"}\n' > "$seeds/arc"
  printf '\010{"question":"is it","passage":"yes it is","answer":true}\n' > "$seeds/boolq"
  printf '\011{"sentence":"The cup fell because _ was full.","option1":"it","option2":"the jar","answer":"1"}\n' > "$seeds/winogrande"
  printf '\013{"question":"2+2?","answer":"so #### 4"}\n' > "$seeds/gsm8k"
  cd "$b"
  exec "$b/tests/fuzz_readers" -max_total_time="$secs" -max_len=8192 -timeout=20 -print_final_stats=1 \
    -artifact_prefix="$b/fuzz-artifacts/readers-" "$corpus" "$seeds"
fi
if [ "${QG_FUZZ_TARGET:-gguf}" = tokenizer ]; then
  seeds="$b/fuzz-tok-seeds"; corpus="$b/fuzz-tok-corpus"
  mkdir -p "$seeds" "$corpus" "$b/fuzz-artifacts"
  printf 'Once upon a time, there was a little girl.' > "$seeds/a.txt"
  printf ' \t\n  <s>a</s> \303\251\342\202\254\360\237\230\200 \377\376' > "$seeds/b.txt"
  inp="$root/../shared/models/llamacpp-vocab/ggml-vocab-llama-spm.gguf.inp"
  [ -f "$inp" ] && cp "$inp" "$seeds/vocab-tests.txt"
  cd "$b"
  exec "$b/tests/fuzz_tokenizer" -max_total_time="$secs" -max_len=4096 -timeout=20 -print_final_stats=1 \
    -artifact_prefix="$b/fuzz-artifacts/tok-" "$corpus" "$seeds"
fi
seeds="$b/fuzz-seeds"
corpus="$b/fuzz-corpus"
mkdir -p "$seeds" "$corpus" "$b/fuzz-artifacts"
"$b/tests/gguf_fixtures" "$seeds"
if [ -d "$root/../shared/models" ]; then
  find "$root/../shared/models" -name '*.gguf' -size -2048k -exec cp -f {} "$seeds/" \;
else
  echo "note: ../shared/models is absent; seeding with generated fixtures only"
fi
echo "fuzzing the GGUF reader for ${secs}s with $(ls "$seeds" | wc -l) seed files"
par=()
[ "$jobs" -gt 1 ] && par=(-jobs="$jobs" -workers="$jobs")  # logs go to fuzz-N.log then
cd "$b"
"$b/tests/fuzz_gguf" -max_total_time="$secs" -max_len=2097152 -timeout=20 -rss_limit_mb=4096 \
  "${par[@]}" -print_final_stats=1 -artifact_prefix="$b/fuzz-artifacts/" "$corpus" "$seeds"
