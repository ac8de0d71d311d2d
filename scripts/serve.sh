#!/usr/bin/env bash
# Sets up a Debian 12 machine (as root, or with sudo), builds ggufd and starts the server on
# http://127.0.0.1:8080 (open it in a browser for the chat page). With no model configured it
# serves the built-in demo model ("demo-random"); pass flags through, e.g.
# scripts/serve.sh --model stories=path/to/model.gguf, or set GGUFD_MODEL.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target ggufd
exec build/bin/ggufd "$@"
