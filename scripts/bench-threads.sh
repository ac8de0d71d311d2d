#!/usr/bin/env bash
# The thread sweep of docs/performance.md ("Threads on 16 cores"), ggufd against llama.cpp in the
# same minutes, in one call on any many-core machine:
#   1. builds llama.cpp's llama-bench from a source tree if asked (GGUFD_LLAMA_SRC) while it makes
#      the random models it lacks (TinyLlama-1.1B and LLaMA-7B shapes, Q4_0 and Q4_K_M),
#   2. the machine's ceilings (ggufd-bench --roofline) at every thread count,
#   3. decode (tg) at every thread count on every model, llama.cpp then ggufd per model,
#   4. prefill (pp512), then decode after 4096 tokens of cache, at the thread counts the time
#      budget allows,
#   5. a summary table with ggufd / llama.cpp per row.
# Each phase is skipped, said in the log, when the time budget cannot hold it, so a short lease
# still returns the most important figures first. Every raw CSV is appended to one results file
# as it is made (a run cut short keeps what it measured).
#
# Settings (environment):
#   BUILD_DIR            ggufd's binaries (default build/bin)
#   GGUFD_LLAMA_BENCH    a llama-bench binary; or GGUFD_LLAMA_SRC, a llama.cpp source tree to
#                        build one from (cmake + ninja or make, -DGGML_NATIVE=ON; when that build
#                        cannot run a model, it is rebuilt without AMX, as llama.cpp's AMX path
#                        has crashed on such machines)
#   GGUFD_SWEEP_OUT      results folder (default bench-results/threads-<date-time>)
#   GGUFD_SWEEP_MODELS   folder of the models (default models/bench)
#   GGUFD_SWEEP_THREADS  thread counts (default 1,2,4,6,8,12,16)
#   GGUFD_SWEEP_SECONDS  time budget in seconds (default 3600)
#   GGUFD_SWEEP_SHAPES   which shapes (default "7b tl")
#   GGUFD_CONFORMANCE_DIR  where the vocabulary of the random models is (tokenizer/)
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
budget=${GGUFD_SWEEP_SECONDS:-3600}
bin=${BUILD_DIR:-build/bin}
out=${GGUFD_SWEEP_OUT:-bench-results/threads-$(date +%Y%m%d-%H%M%S)}
models=${GGUFD_SWEEP_MODELS:-models/bench}
threads=${GGUFD_SWEEP_THREADS:-1,2,4,6,8,12,16}
read -r -a shapes <<<"${GGUFD_SWEEP_SHAPES:-7b tl}"
vocab=${GGUFD_CONFORMANCE_DIR:-../shared/conformance}/tokenizer/ggml-vocab-llama-spm.gguf
mkdir -p "$out" "$models"
results=$out/results.csv
log() { echo "[$((SECONDS - start))s] $*" | tee -a "$out/log.txt" >&2; }
left() { echo $((budget - (SECONDS - start))); }
max_threads=${threads##*,}

{ date -u; nproc; lscpu; grep -E 'MemTotal|MemAvailable' /proc/meminfo; uptime
  git log --oneline -1 2>/dev/null || true; } >"$out/machine.txt" 2>&1
log "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
log "flags: $(grep -m1 -o -w -E 'amx_(tile|int8|bf16)|avx512_vnni|avx512f' /proc/cpuinfo | sort -u | tr '\n' ' ')"

# --- llama.cpp, built in the background while the models are made.
llama=${GGUFD_LLAMA_BENCH:-}
build_llama() {  # $1: build folder, $2...: extra cmake options
  local dir=$1; shift
  local gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S "$GGUFD_LLAMA_SRC" -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF "$@" >"$dir.log" 2>&1 &&
    cmake --build "$dir" -j"$(nproc)" --target llama-bench >>"$dir.log" 2>&1
}
llama_build_pid=
if [ -z "$llama" ] && [ -n "${GGUFD_LLAMA_SRC:-}" ]; then
  log "building llama-bench from $GGUFD_LLAMA_SRC"
  build_llama /tmp/llama-native -DGGML_NATIVE=ON &
  llama_build_pid=$!
fi

# --- the models: name -> mkmodel options.
declare -A shape_args=(
  [tl]="--n-embd 2048 --n-layer 22 --n-head 32 --n-head-kv 4 --n-ff 5632"
  [7b]="--n-embd 4096 --n-layer 32 --n-head 32 --n-head-kv 32 --n-ff 11008"
)
declare -A type_args=([q4_0]="--type Q4_0" [q4_k_m]="--type Q4_K --output-type Q6_K")
make_model() {  # $1 shape, $2 type
  local f="$models/$1-$2.gguf"
  [ -f "$f" ] && return 0
  # shellcheck disable=SC2086
  "$bin/ggufd-mkmodel" --out "$f.tmp" --vocab "$vocab" ${shape_args[$1]} ${type_args[$2]} \
    >>"$out/log.txt" 2>&1 && mv "$f.tmp" "$f"
}
for type in q4_0 q4_k_m; do
  for shape in "${shapes[@]}"; do
    make_model "$shape" "$type" || log "could not make $shape-$type"
  done
done
log "models ready: $(ls "$models" | tr '\n' ' ')"

if [ -n "$llama_build_pid" ]; then
  wait "$llama_build_pid" && llama=/tmp/llama-native/bin/llama-bench
  first=$models/${shapes[-1]}-q4_0.gguf
  if [ -z "$llama" ] || ! "$llama" -m "$first" -p 8 -n 1 -t 2 -r 1 >/dev/null 2>>"$out/log.txt"; then
    log "native llama-bench failed to build or run (tail of its log follows); rebuilding without AMX"
    tail -5 /tmp/llama-native.log >>"$out/log.txt" 2>/dev/null
    llama=
    build_llama /tmp/llama-noamx -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON \
      -DGGML_F16C=ON -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON \
      -DGGML_AVX_VNNI=ON && llama=/tmp/llama-noamx/bin/llama-bench
  fi
  log "llama-bench: ${llama:-none}"
fi

# One engine run: appends "# <label>" and the CSV to the results file.
run_ggufd() {  # $1 label, then ggufd-bench arguments
  local label=$1; shift
  log "ggufd $label"
  { echo "# ggufd $label"; "$bin/ggufd-bench" "$@" --csv 2>>"$out/log.txt"; } >>"$results"
}
run_llama() {
  local label=$1; shift
  [ -n "$llama" ] || return 0
  log "llama.cpp $label"
  { echo "# llama.cpp $label"; "$llama" "$@" -o csv 2>>"$out/log.txt"; } >>"$results"
}
# Both engines on the same test, llama.cpp first, when the budget still holds `need` seconds.
pair() {  # $1 label, $2 need, $3 model, then the test's shared arguments
  local label=$1 need=$2 model=$3; shift 3
  [ -f "$model" ] || return 0
  if [ "$(left)" -lt "$need" ]; then log "skipped $label (needs ~${need}s, $(left)s left)"; return; fi
  local fa=()
  [[ " $* " == *" -d "* ]] && fa=(-fa 1)
  run_llama "$label" -m "$model" "$@" "${fa[@]}"
  run_ggufd "$label" -m "$model" "$@"
}

IFS=, read -r -a tlist <<<"$threads"
if [ "$(left)" -gt 30 ]; then
  log "roofline"
  for t in "${tlist[@]}"; do
    { echo "# ggufd roofline t$t"; "$bin/ggufd-bench" --roofline -t "$t" --buffer-mib 1024 --csv \
      2>>"$out/log.txt"; } >>"$results"
  done
fi
# Decode first: the issue's target. The 7B shape leads (the bandwidth target is on it).
for shape in "${shapes[@]}"; do
  for type in q4_0 q4_k_m; do
    m="$models/$shape-$type.gguf"
    [ -f "$m" ] || continue
    need=40; [ "$shape" = 7b ] && need=120
    pair "tg16 $shape-$type" "$need" "$m" -p 0 -n 16 -t "$threads" -r 2
  done
done
[ -f "$models/7b-q4_0.gguf" ] && [ "$(left)" -gt 60 ] &&
  run_ggufd "roofline fractions 7b-q4_0 t$max_threads" --roofline -m "$models/7b-q4_0.gguf" -p 0 \
    -n 16 -t "$max_threads" -r 2
# Prefill: every thread count on the small shape, the wide ones on the 7B.
pair "pp512 tl-q4_0" 60 "$models/tl-q4_0.gguf" -p 512 -n 0 -t "$threads" -r 1
pair "pp512 7b-q4_0" 90 "$models/7b-q4_0.gguf" -p 512 -n 0 -t 4,8,"$max_threads" -r 1
pair "tg16 at depth 4096 tl-q4_0" 60 "$models/tl-q4_0.gguf" -p 0 -n 16 -d 4096 \
  -t 8,"$max_threads" -r 1
pair "pp512 tl-q4_k_m" 30 "$models/tl-q4_k_m.gguf" -p 512 -n 0 -t 8,"$max_threads" -r 1
pair "tg16 at depth 4096 7b-q4_0" 90 "$models/7b-q4_0.gguf" -p 0 -n 16 -d 4096 \
  -t "$max_threads" -r 1
pair "pp512 7b-q4_k_m" 60 "$models/7b-q4_k_m.gguf" -p 512 -n 0 -t "$max_threads" -r 1
log "done in $((SECONDS - start))s"

python3 - "$results" <<'EOF' | tee "$out/summary.txt"
import csv, io, sys
# The results file: "# engine label" lines, each followed by that run's CSV.
runs, cur = [], None
for line in open(sys.argv[1]):
    if line.startswith("# "):
        cur = [line[2:].strip(), []]
        runs.append(cur)
    elif cur is not None and line.strip():
        cur[1].append(line)
rows = {}
for label, lines in runs:
    engine = label.split()[0]
    if "roofline" in label:
        for r in csv.DictReader(io.StringIO("".join(lines))):
            if r.get("ceiling") == "read_bandwidth":
                print(f"read bandwidth {r['threads']:>2} threads: {r['best']} GB/s (median {r['median']})")
            elif "fraction" in r:
                print(f"7B Q4_0 {r['test']} at {label.split()[-1]}: {r['tokens_per_s']} tok/s ="
                      f" {100 * float(r['fraction']):.0f}% of the {r['bound']} ceiling")
        continue
    model = label.split()[-1]
    for r in csv.DictReader(io.StringIO("".join(lines))):
        if engine == "ggufd":
            test, t, v = r["test"].split()[0], r["threads"], float(r["tokens_per_s_median"])
            d = int(r["depth"])
        else:
            n_p, n_g = int(r["n_prompt"]), int(r["n_gen"])
            test = f"pp{n_p}" if n_p else f"tg{n_g}"
            t, v, d = r["n_threads"], float(r["avg_ts"]), int(r.get("n_depth") or 0)
        rows.setdefault((model, test, d, int(t)), {})[engine] = v
print(f"{'model':10} {'test':6} {'depth':>5} {'thr':>3} {'llama.cpp':>10} {'ggufd':>8} {'ratio':>6}")
for (model, test, d, t), e in sorted(rows.items()):
    l, g = e.get("llama.cpp"), e.get("ggufd")
    ratio = f"{g / l:.2f}x" if l and g else ""
    print(f"{model:10} {test:6} {d:5} {t:3} {l or 0:10.2f} {g or 0:8.2f} {ratio:>6}")
EOF
