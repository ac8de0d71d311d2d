#!/usr/bin/env bash
# The official client libraries against a running ggufd. The first server serves stories260K, a
# random-weight model with Qwen 2's vocabulary (its <tool_call>, <think> and fill-in-the-middle
# tokens) with a Hermes-style template (agent) and with a thinking template (thinker), the same
# model with a real chat template of each family (conformance folder), and the conformance
# folder's bert-mean encoder and bert-rank reranker. Against it: client_test.mjs and tools_test.mjs
# (openai), anthropic_test.mjs (@anthropic-ai/sdk), families_test.mjs, embeddings_test.mjs,
# infill_test.mjs (openai's `suffix`, llama.vscode's /infill), ollama_test.mjs (ollama) and
# responses_test.mjs (openai's Responses API), vision_test.mjs (openai with an image, to the
# conformance folder's tiny Qwen2.5-VL and its projector), audio_test.mjs (openai's
# audio.transcriptions against the conformance folder's Whisper model). Then forced_test.mjs against the same model with
# every template of both folders, and the built-in demo.
# Usage: run.sh BIN_DIR CONFORMANCE_DIR. Exits 77 (skipped) when Node.js is missing, except under
# CI, where .ci/run installs it.
set -euo pipefail
bin_dir=$1
conf=${GGUFD_CONFORMANCE_DIR:-$2}
here=$(cd "$(dirname "$0")" && pwd)
ci=false; case "${CI:-}" in ""|0|false) ;; *) ci=true ;; esac
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  $ci && { echo "Node.js missing under CI"; exit 1; }
  echo "Node.js not found: skipped"; exit 77
fi
if [ ! -d "$conf" ]; then
  $ci && { echo "conformance data missing at $conf"; exit 1; }
  echo "conformance data not found: skipped"; exit 77
fi
work="$bin_dir/../client-test"
mkdir -p "$work"
cp "$here/package.json" "$here/client_test.mjs" "$here/tools_test.mjs" "$here/families_test.mjs" \
  "$here/tool_support.mjs" "$here/embeddings_test.mjs" "$here/forced_test.mjs" \
  "$here/infill_test.mjs" "$here/anthropic_test.mjs" "$here/ollama_test.mjs" \
  "$here/responses_test.mjs" "$here/vision_test.mjs" "$here/audio_test.mjs" "$work/"
(cd "$work" && npm install --no-audit --no-fund --loglevel=error >/dev/null)

# One model per family: NAME TEMPLATE FAMILY (the family its template is detected as).
families=(
  qwen25 Qwen-Qwen2.5-7B-Instruct hermes
  hermes2pro NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use hermes
  qwq Qwen-QwQ-32B hermes
  qwen35 Qwen3.5-4B qwen3-coder
  llama31 meta-llama-Llama-3.1-8B-Instruct llama3
  llama32 meta-llama-Llama-3.2-3B-Instruct llama3
  mistral32 Mistral-Small-3.2-24B-Instruct-2506 mistral
  ministral mistralai-Ministral-3-14B-Reasoning-2512 mistral
  r1qwen deepseek-ai-DeepSeek-R1-Distill-Qwen-32B deepseek-r1
  r1llama deepseek-ai-DeepSeek-R1-Distill-Llama-8B deepseek-r1
  dsv32 deepseek-ai-DeepSeek-V3.2 deepseek-v3.2
  granite ibm-granite-granite-3.3-2B-Instruct granite
  firefunction fireworks-ai-llama-3-firefunction-v2 firefunction
  functionary meetkai-functionary-medium-v3.1 functionary-v3.1
  kimi moonshotai-Kimi-K2 kimi-k2
  glm GLM-4.7-Flash glm
  apriel unsloth-Apriel-1.5 apriel
  commandrplus CohereForAI-c4ai-command-r-plus-tool_use command-r-plus
  lfm2 LFM2-8B-A1B generic
)
family_flags=()
family_pairs=()
# The conformance folder holds no gpt-oss or Command R7B template: their output formats are read
# through --tool-parser, the prompt rendered by the Hermes-style template.
for family in harmony command-r7b; do
  family_flags+=(--model "$family=$work/agent.gguf" --chat-template-file "$family=$here/hermes_tools.jinja"
    --tool-parser "$family=$family")
  family_pairs+=("$family=$family")
done
for ((i = 0; i < ${#families[@]}; i += 3)); do
  name=${families[i]}
  family_flags+=(--model "$name=$work/agent.gguf"
    --chat-template-file "$name=$conf/chat_templates/templates/${families[i + 1]}.jinja")
  family_pairs+=("$name=${families[i + 2]}")
done

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin_dir/ggufd-mkmodel" --out "$work/agent.gguf" --vocab "$conf/tokenizer/ggml-vocab-qwen2.gguf" \
  --n-embd 64 --n-head 2 --n-head-kv 1 --n-layer 1 --n-ff 128 --type Q8_0 >/dev/null
"$bin_dir/ggufd" --port "$port" --model "stories=$conf/models/stories260K.gguf" \
  --model "agent=$work/agent.gguf" --chat-template-file "agent=$here/hermes_tools.jinja" \
  --model "thinker=$work/agent.gguf" --chat-template-file "thinker=$here/thinking.jinja" \
  --model "embed=$conf/embeddings/bert-mean.gguf" --model "rank=$conf/embeddings/bert-rank.gguf" \
  --model "vision=$conf/vision/qwen25vl-text.gguf" --mmproj "vision=$conf/vision/qwen25vl-mmproj.gguf" \
  --model "whisper=$conf/whisper/tiny-whisper.gguf" \
  "${family_flags[@]}" --threads 1 >"$work/ggufd.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 1200); do  # up to 120 s: a sanitizer build loads its many models slowly
  curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  sleep 0.1
done
node "$work/client_test.mjs" "http://127.0.0.1:$port/v1" stories
node "$work/tools_test.mjs" "http://127.0.0.1:$port/v1" agent thinker
node "$work/anthropic_test.mjs" "http://127.0.0.1:$port" stories agent thinker
node "$work/families_test.mjs" "http://127.0.0.1:$port/v1" "${family_pairs[@]}"
node "$work/embeddings_test.mjs" "http://127.0.0.1:$port/v1" embed rank "$conf/embeddings"
# agent's vocabulary (Qwen 2's) has the fill-in-the-middle tokens; stories has none.
node "$work/infill_test.mjs" "http://127.0.0.1:$port/v1" agent stories
node "$work/ollama_test.mjs" "http://127.0.0.1:$port" stories agent thinker embed
node "$work/responses_test.mjs" "http://127.0.0.1:$port/v1" stories agent thinker
node "$work/vision_test.mjs" "http://127.0.0.1:$port/v1" vision stories "$conf/vision/img-a.png"
node "$work/audio_test.mjs" "http://127.0.0.1:$port/v1" whisper "$conf/whisper"
kill -TERM $pid
wait $pid

# forced_test.mjs: every real template of both folders on the same model, then the built-in demo
# (no model configured: demo-random, the ChatML fallback).
forced_flags=()
forced_models=()
for tpl in "$conf"/chat_templates/templates/*.jinja "$here"/../jinja/templates/*.jinja; do
  name="t-$(basename "$tpl" .jinja)"
  forced_flags+=(--model "$name=$work/agent.gguf" --chat-template-file "$name=$tpl")
  forced_models+=("$name")
done
for family in harmony command-r7b; do
  forced_flags+=(--model "$family=$work/agent.gguf" --chat-template-file "$family=$here/hermes_tools.jinja"
    --tool-parser "$family=$family")
  forced_models+=("$family")
done
serve_and_run() {  # the server's flags, then the models to test
  local n=$1 port
  shift
  local flags=("${@:1:n}")
  shift "$n"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$bin_dir/ggufd" --port "$port" "${flags[@]}" --threads 1 --parallel 4 >"$work/ggufd-forced.log" 2>&1 &
  pid=$!
  for _ in $(seq 1200); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
    sleep 0.1
  done
  node "$work/forced_test.mjs" "http://127.0.0.1:$port/v1" "$@"
  kill -TERM $pid
  wait $pid
}
# Under the sanitizers (scripts/sanitize.sh sets ASAN_OPTIONS) a shorter pass: see forced_test.mjs.
if [ -n "${ASAN_OPTIONS:-}" ]; then export GGUFD_FORCED_QUICK=1; fi
serve_and_run ${#forced_flags[@]} "${forced_flags[@]}" "${forced_models[@]}"
serve_and_run 0 demo-random
