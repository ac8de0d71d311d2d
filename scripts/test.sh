#!/usr/bin/env bash
# Sets up a Debian 12 machine (as root, or with sudo), builds ggufd and runs the whole test suite
# through ctest. The last line printed is ctest's count of passed and failed tests.
# GGUFD_WERROR=1 turns compiler warnings into errors (CI does this).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

werror=OFF
if [ "${GGUFD_WERROR:-0}" = "1" ]; then werror=ON; fi
cmake --preset release -DGGUFD_WERROR="$werror" >/dev/null
cmake --build --preset release -j "$(nproc)"

set +e
ctest --preset release 2>&1 | tee build/ctest.log
status=${PIPESTATUS[0]}
set -e
echo
grep -E '^[0-9]+% tests passed' build/ctest.log | tail -n 1
exit "$status"
