#!/usr/bin/env bash
# Runs client_test.mjs (the official openai npm package) against a ggufd serving stories260K, and
# tools_test.mjs against a random-weight model with Qwen 2's vocabulary (its <tool_call> and <think>
# tokens) served with a Hermes-style template and with a thinking template, and embeddings_test.mjs
# against the conformance folder's bert-mean encoder and bert-rank reranker.
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
cp "$here/package.json" "$here/client_test.mjs" "$here/tools_test.mjs" "$here/embeddings_test.mjs" "$work/"
(cd "$work" && npm install --no-audit --no-fund --loglevel=error >/dev/null)

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin_dir/ggufd-mkmodel" --out "$work/agent.gguf" --vocab "$conf/tokenizer/ggml-vocab-qwen2.gguf" \
  --n-embd 64 --n-head 2 --n-head-kv 1 --n-layer 1 --n-ff 128 --type Q8_0 >/dev/null
"$bin_dir/ggufd" --port "$port" --model "stories=$conf/models/stories260K.gguf" \
  --model "agent=$work/agent.gguf" --chat-template-file "agent=$here/hermes_tools.jinja" \
  --model "thinker=$work/agent.gguf" --chat-template-file "thinker=$here/thinking.jinja" \
  --model "embed=$conf/embeddings/bert-mean.gguf" --model "rank=$conf/embeddings/bert-rank.gguf" \
  >"$work/ggufd.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  sleep 0.1
done
node "$work/client_test.mjs" "http://127.0.0.1:$port/v1" stories
node "$work/tools_test.mjs" "http://127.0.0.1:$port/v1" agent thinker
node "$work/embeddings_test.mjs" "http://127.0.0.1:$port/v1" embed rank "$conf/embeddings"
kill -TERM $pid
wait $pid
