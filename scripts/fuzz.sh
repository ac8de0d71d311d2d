#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang, AddressSanitizer and UBSan in build-fuzz/ and runs
# each for a bounded time. Exits non-zero when any target reports a crash, a sanitizer error, a
# leak, an out-of-memory or a timeout; the input that caused it is left in
# build-fuzz/artifacts/<target>/ (replay it: build-fuzz/bin/<target> <file>).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     default: GGUFD_FUZZ_SECONDS or 60 s for each
#                                             target
#
# GGUFD_FUZZ_BUDGET=N (when no SECONDS is given) shares N seconds among the targets instead, at
# least 10 s each: the test command's bound on the whole phase, which more targets do not lengthen.
#
# Targets run GGUFD_FUZZ_JOBS at a time (default: one per core); each is one libFuzzer process on
# one core, so the wall time is about SECONDS x targets / jobs.
#
# GGUFD_FUZZ_SEED=N makes every target start from libFuzzer's seed N, so a run replays the same
# mutations on the same code (the test command sets it under CI: the gate must not turn red on a
# lucky draw). Without it each run draws its own seed, which is what long discovery runs want.
#
# The committed seeds (fuzz/corpus/<target>) are copied into build-fuzz/work/<target>, which keeps
# what the fuzzer learns between runs on this machine; the repository's corpus never grows. Without
# clang or its libFuzzer runtime the script says so and exits 0 (exit 1 instead when
# GGUFD_FUZZ_REQUIRED=1, as the CI test command sets: a missing fuzzer must not pass silently).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-${GGUFD_FUZZ_SECONDS:-}}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(fuzz_gguf fuzz_model fuzz_lora fuzz_template fuzz_tokenizer fuzz_json_request fuzz_http_request
        fuzz_grammar fuzz_json_schema fuzz_chat fuzz_image fuzz_audio fuzz_multipart)
fi
if [ -z "$seconds" ] && [ -n "${GGUFD_FUZZ_BUDGET:-}" ]; then
    seconds=$((GGUFD_FUZZ_BUDGET / ${#targets[@]}))
    if [ "$seconds" -lt 10 ]; then seconds=10; fi
fi
seconds="${seconds:-60}"
build=build-fuzz

cxx=""
for c in "${GGUFD_FUZZ_CXX:-}" clang++ clang++-14; do
    if [ -n "$c" ] && command -v "$c" >/dev/null 2>&1; then cxx="$(command -v "$c")"; break; fi
done
if [ -z "$cxx" ]; then
    echo "fuzz.sh: clang++ not found; skipping the fuzz run (apt-get install clang libclang-rt-dev)"
    exit "${GGUFD_FUZZ_REQUIRED:-0}"
fi
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' \
    >"$probe/probe.cpp"
if ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe/probe.cpp" -o "$probe/probe" 2>/dev/null; then
    echo "fuzz.sh: $cxx cannot link libFuzzer (missing libclang-rt-dev?); skipping the fuzz run"
    exit "${GGUFD_FUZZ_REQUIRED:-0}"
fi

CXX="$cxx" cmake -S . -B "$build" -G Ninja -DGGUFD_FUZZ=ON -DGGUFD_BUILD_TESTS=OFF \
    -DGGUFD_BUILD_BENCHMARKS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# Quiet when it builds; a failed build shows its errors (and fails the run) instead of ending it
# silently.
if ! cmake --build "$build" -j "${GGUFD_FUZZ_BUILD_JOBS:-2}" --target "${targets[@]}" \
    >"$build/build.log" 2>&1; then
    grep -v '^\[[0-9]*/[0-9]*\]' "$build/build.log" | tail -n 40
    echo "fuzz.sh: the fuzz targets did not build"
    exit 1
fi

# Longest input each target is given: enough for every structure it parses, small enough to keep
# thousands of runs a second.
max_len() {
    case "$1" in
        fuzz_gguf) echo 8192 ;;
        fuzz_model | fuzz_lora) echo 16384 ;;
        fuzz_tokenizer) echo 2048 ;;
        *) echo 4096 ;;
    esac
}

export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# Leaks inside Debian's libraries (scripts/lsan.supp says which and why).
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
mkdir -p "$build/logs"

# run_target <target>: one bounded libFuzzer run; writes its one-line result to logs/<t>.result.
run_target() {
    local t="$1" work="$build/work/$1" artifacts="$build/artifacts/$1" log="$build/logs/$1.log"
    mkdir -p "$work" "$artifacts"
    cp -n fuzz/corpus/"$t"/* "$work"/ 2>/dev/null || true
    local args=(-max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -max_len="$(max_len "$t")"
                -artifact_prefix="$artifacts/" -print_final_stats=1 -close_fd_mask=1)
    if [ -n "${GGUFD_FUZZ_SEED:-}" ]; then args+=(-seed="$GGUFD_FUZZ_SEED"); fi
    local dict="fuzz/dict/$t.dict"
    if [ "$t" = fuzz_http_request ]; then dict=fuzz/dict/fuzz_json_request.dict; fi
    if [ -f "$dict" ]; then args+=(-dict="$dict"); fi
    local start status took runs units
    start=$(date +%s)
    set +e
    "$build/bin/$t" "${args[@]}" "$work" >"$log" 2>&1
    status=$?
    set -e
    took=$(($(date +%s) - start))
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    units=$(find "$work" -type f | wc -l)
    if [ "$status" -ne 0 ]; then
        {
            echo "FAILED $t: exit $status after ${took}s (${runs:-?} runs); see $log"
            grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error|terminate called|  what\(\)|artifact_prefix)' \
                "$log" | head -n 20 || true
        } >"$build/logs/$t.result"
    else
        echo "ok $t: ${runs:-?} runs in ${took}s, corpus $units inputs" >"$build/logs/$t.result"
    fi
}

jobs="${GGUFD_FUZZ_JOBS:-$(nproc)}"
echo "fuzz.sh: ${#targets[@]} targets, ${seconds}s each, $jobs at a time (logs: $build/logs/)"
rm -f "$build"/logs/*.result
running=0
for t in "${targets[@]}"; do
    if [ "$running" -ge "$jobs" ]; then
        wait -n || true
        running=$((running - 1))
    fi
    run_target "$t" &
    running=$((running + 1))
done
wait

echo
failed=()
for t in "${targets[@]}"; do
    result="$build/logs/$t.result"
    if [ ! -f "$result" ]; then
        echo "FAILED $t: no result (the runner died)"
        failed+=("$t")
        continue
    fi
    cat "$result"
    if ! head -n 1 "$result" | grep -q '^ok '; then failed+=("$t"); fi
done
if [ ${#failed[@]} -ne 0 ]; then
    echo "fuzz.sh: failures in: ${failed[*]}"
    exit 1
fi
echo "fuzz.sh: all ${#targets[@]} targets clean"
