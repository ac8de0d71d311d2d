#!/usr/bin/env bash
# Sets up a Debian 12 machine (as root, or with sudo), builds ggufd and runs the whole test suite
# through ctest, then a short bounded run of every libFuzzer target (when clang is available) and,
# under CI or with GGUFD_ASAN=1, the suite again under AddressSanitizer + UBSan.
# The last line printed sums up every phase; the exit status is non-zero when any failed.
#
#   GGUFD_WERROR=1        compiler warnings are errors (CI does this)
#   GGUFD_FUZZ_BUDGET=N   seconds of fuzzing shared among the fuzz targets, at least 10 s each
#                         (default 150: 15 s for each of today's 10 targets, run two at a time)
#   GGUFD_FUZZ_SECONDS=N  seconds per fuzz target instead of the budget (0 skips fuzzing)
#   GGUFD_FUZZ_SEED=N     libFuzzer seed for every target (default: 1 under CI, else random)
#   GGUFD_ASAN=0|1        run the ASan+UBSan suite (default: 1 when CI is set, else 0)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

werror=OFF
if [ "${GGUFD_WERROR:-0}" = "1" ]; then werror=ON; fi
ci=0
case "${CI:-}" in "" | 0 | false) ;; *) ci=1 ;; esac
fuzz_seconds="${GGUFD_FUZZ_SECONDS:-}"
fuzz_budget="${GGUFD_FUZZ_BUDGET:-150}"
asan="${GGUFD_ASAN:-$ci}"
# Where ccache is installed, CI's fresh clone (any folder) reuses the objects that builds of the
# same sources compiled in other checkouts on the machine: keys use paths relative to the clone,
# and not the build folder (only the debug information's build folder differs, which no test
# reads).
if [ "$ci" = 1 ]; then
    export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
fi

summary=()
status=0
elapsed() { echo "$(($(date +%s) - $1))s"; }

start=$(date +%s)
cmake --preset release -DGGUFD_WERROR="$werror" >/dev/null
cmake --build --preset release -j "$(nproc)"
echo "test.sh: release build took $(elapsed "$start")"

start=$(date +%s)
set +e
ctest --preset release 2>&1 | tee build/ctest.log
release_status=${PIPESTATUS[0]}
set -e
count=$(grep -E '^[0-9]+% tests passed' build/ctest.log | tail -n 1)
summary+=("release: ${count:-no ctest summary} ($(elapsed "$start"))")
[ "$release_status" -eq 0 ] || status=1

if [ "$fuzz_seconds" != 0 ]; then
    start=$(date +%s)
    # Under CI a fuzzer that cannot be built is a failure, not a skip.
    set +e
    # Under CI the seed is fixed, so the same code is fuzzed the same way on every run: finding
    # new bugs is the job of the long local runs (docs/reliability.md), not of the gate.
    if [ "$ci" = 1 ]; then export GGUFD_FUZZ_SEED="${GGUFD_FUZZ_SEED:-1}"; fi
    GGUFD_FUZZ_REQUIRED="$ci" GGUFD_FUZZ_SECONDS="$fuzz_seconds" GGUFD_FUZZ_BUDGET="$fuzz_budget" \
        bash scripts/fuzz.sh 2>&1 | tee build/fuzz.log
    fuzz_status=${PIPESTATUS[0]}
    set -e
    fuzz_line=$(tail -n 1 build/fuzz.log)
    per_target=$(sed -n 's/^fuzz.sh: [0-9]* targets, \([0-9]*\)s each.*/\1/p' build/fuzz.log | tail -n 1)
    summary+=("fuzz ${per_target:-?}s/target: ${fuzz_line#fuzz.sh: } ($(elapsed "$start"))")
    [ "$fuzz_status" -eq 0 ] || status=1
fi

if [ "$asan" = 1 ]; then
    start=$(date +%s)
    set +e
    bash scripts/sanitize.sh asan 2>&1 | tee build/asan.log
    asan_status=${PIPESTATUS[0]}
    set -e
    count=$(grep -E '^asan: [0-9]+% tests passed' build/asan.log | tail -n 1)
    summary+=("${count:-asan: no ctest summary (build failed?)} ($(elapsed "$start"))")
    [ "$asan_status" -eq 0 ] || status=1
fi

echo
printf 'test.sh: %s\n' "${summary[@]}"
if [ "$status" -eq 0 ]; then
    echo "ALL PASSED: ${summary[*]}"
else
    echo "FAILED: ${summary[*]}"
fi
exit "$status"
