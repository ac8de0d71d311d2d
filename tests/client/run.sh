#!/usr/bin/env bash
# Runs client_test.mjs (the official openai npm package) against a ggufd serving stories260K.
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
cp "$here/package.json" "$here/client_test.mjs" "$work/"
(cd "$work" && npm install --no-audit --no-fund --loglevel=error >/dev/null)

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin_dir/ggufd" --port "$port" --model "stories=$conf/models/stories260K.gguf" >"$work/ggufd.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  sleep 0.1
done
node "$work/client_test.mjs" "http://127.0.0.1:$port/v1" stories
kill -TERM $pid
wait $pid
