#!/usr/bin/env bash
# Sets up a Debian 12 machine (as root, or with sudo), builds ggufd and starts it on the default
# model. Until the HTTP server lands, it shows what the engine reads from that model.
# GGUFD_MODEL overrides the model (a path).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"

model="${GGUFD_MODEL:-../shared/conformance/models/stories260K.gguf}"
exec build/bin/gguf-inspect "$model"
