#!/usr/bin/env bash
# The chat page in headless Chromium (browser_test.mjs) against two live daemons: the built-in demo
# behind an API key, and a generating model with a thinking template (tests/client's) beside an
# encoder (both random-weight files written by ggufd-mkmodel). The screenshot is WORK_DIR/chat.png.
# Usage: run.sh BIN_DIR WORK_DIR. Exits 77 (skipped) when Node.js or Chromium is missing (Debian's
# `chromium`, or the browser named by $CHROMIUM), except under CI, where .ci/run installs them.
set -euo pipefail
bin_dir=$1
work=$2
here=$(cd "$(dirname "$0")" && pwd)
ci=false; case "${CI:-}" in ""|0|false) ;; *) ci=true ;; esac
chromium=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -n "$chromium" ] && [ ! -x "$chromium" ]; then chromium=""; fi
if ! command -v node >/dev/null; then
  $ci && { echo "Node.js missing under CI"; exit 1; }
  echo "Node.js not found: skipped"; exit 77
fi
if [ -z "$chromium" ]; then
  $ci && { echo "chromium missing under CI"; exit 1; }
  echo "chromium not found: skipped"; exit 77
fi
rm -rf "$work"
mkdir -p "$work"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
wait_healthy() {
  for _ in $(seq 600); do  # up to 60 s: a sanitizer build starts slowly
    curl -sf "http://127.0.0.1:$1/health" >/dev/null && return 0
    sleep 0.1
  done
  echo "ggufd on port $1 did not become healthy"; return 1
}

key=webui-test-key
demo_port=$(free_port)
"$bin_dir/ggufd" --port "$demo_port" --api-key "$key" --threads 1 --parallel 2 >"$work/ggufd-demo.log" 2>&1 &
pids+=($!)

"$bin_dir/ggufd-mkmodel" --out "$work/chat.gguf" --n-embd 64 --n-layer 1 --n-ff 128 >/dev/null 2>&1
"$bin_dir/ggufd-mkmodel" --out "$work/embed.gguf" --arch bert --n-embd 64 --n-layer 1 --n-ff 128 >/dev/null 2>&1
models_port=$(free_port)
"$bin_dir/ggufd" --port "$models_port" --model "chat=$work/chat.gguf" --model "embed=$work/embed.gguf" \
  --chat-template-file "chat=$here/../client/thinking.jinja" --threads 1 --parallel 1 >"$work/ggufd-models.log" 2>&1 &
pids+=($!)
wait_healthy "$demo_port"
wait_healthy "$models_port"

node "$here/browser_test.mjs" "$chromium" "$work" "http://127.0.0.1:$demo_port" "$key" \
  "http://127.0.0.1:$models_port"
