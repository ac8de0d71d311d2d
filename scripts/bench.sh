#!/usr/bin/env bash
# The whole performance benchmark of docs/performance.md on this machine:
#   1. makes the three TinyLlama-1.1B-shaped random models if missing (Q4_0, Q8_0, Q4_K + Q6_K head),
#   2. engine mode for each (pp128, tg32, load time, peak RSS) and its roofline fractions,
#      then a depth sweep on the first model (pp128 and tg32 after 0, 2048, 8192 tokens already
#      in the KV cache),
#   3. starts ggufd --parallel 8 on one model: time to ready, the concurrency sweep, daemon RSS
#      against file size + KV cache,
#   4. prints a summary; every raw output stays in the results folder.
#
# Settings (environment):
#   GGUFD_BENCH_MODELS   folder of the models (default models/bench, ignored by git)
#   GGUFD_BENCH_OUT      results folder (default bench-results/<date-time>)
#   GGUFD_BENCH_THREADS  threads for the engine and the daemon (default 2)
#   GGUFD_BENCH_REPS     engine repetitions (default 3)
#   GGUFD_BENCH_TYPES    which models (default "q4_0 q8_0 q4_k_m"; also q5_k_m)
#   GGUFD_BENCH_SERVER_MODEL  which model the daemon serves, one of those names (default q4_0)
#   GGUFD_BENCH_CONCURRENCY   levels of the sweep (default 1,2,4,8,16)
#   GGUFD_BENCH_REQUESTS      requests per client per level (default 2)
#   GGUFD_BENCH_DEPTHS   depths of the depth sweep (default 0,2048,8192)
#   GGUFD_BENCH_SKIP     space-separated parts to skip: engine depth roofline server
#   GGUFD_LLAMA_BENCH    a llama.cpp llama-bench binary: if set, it runs on each model right after
#                        ggufd's engine mode (same settings), so the two are compared in the same
#                        minutes (docs/performance.md says how to build one without network)
#   BUILD_DIR            where the binaries are (default build/bin; built with the release preset
#                        when missing)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

models=${GGUFD_BENCH_MODELS:-models/bench}
out=${GGUFD_BENCH_OUT:-bench-results/$(date +%Y%m%d-%H%M%S)}
threads=${GGUFD_BENCH_THREADS:-2}
reps=${GGUFD_BENCH_REPS:-3}
server_model=${GGUFD_BENCH_SERVER_MODEL:-q4_0}
concurrency=${GGUFD_BENCH_CONCURRENCY:-1,2,4,8,16}
requests=${GGUFD_BENCH_REQUESTS:-2}
depths=${GGUFD_BENCH_DEPTHS:-0,2048,8192}
skip=" ${GGUFD_BENCH_SKIP:-} "
bin=${BUILD_DIR:-build/bin}
vocab=${GGUFD_CONFORMANCE_DIR:-../shared/conformance}/tokenizer/ggml-vocab-llama-spm.gguf

for tool in ggufd ggufd-bench ggufd-mkmodel gguf-inspect; do
  if [ ! -x "$bin/$tool" ]; then
    echo "bench: $bin/$tool missing; building the release preset" >&2
    { cmake --preset release >/dev/null && cmake --build --preset release -j"$(nproc)"; } || exit 1
    break
  fi
done
mkdir -p "$models" "$out"
echo "bench: results in $out" >&2

# name -> ggufd-mkmodel type options. Q4_K_M here is Q4_K everywhere with a Q6_K head (Q5_K_M
# likewise with Q5_K); llama.cpp's also store half of attn_v/ffn_down in Q6_K (a larger file).
declare -A type_args=(
  [q4_0]="--type Q4_0"
  [q8_0]="--type Q8_0"
  [q4_k_m]="--type Q4_K --output-type Q6_K"
  [q5_k_m]="--type Q5_K --output-type Q6_K"
)
read -r -a names <<<"${GGUFD_BENCH_TYPES:-q4_0 q8_0 q4_k_m}"
for name in "${names[@]}"; do
  [ -n "${type_args[$name]:-}" ] || { echo "bench: unknown model type '$name'" >&2; exit 1; }
done
for name in "${names[@]}" "$server_model"; do
  f="$models/tl-$name.gguf"
  [ -f "$f" ] && continue
  [ -f "$vocab" ] || { echo "bench: $vocab not found (set GGUFD_CONFORMANCE_DIR)" >&2; exit 1; }
  echo "bench: making $f" >&2
  # shellcheck disable=SC2086
  "$bin/ggufd-mkmodel" --out "$f.tmp" --vocab "$vocab" --n-embd 2048 --n-layer 22 --n-head 32 \
    --n-head-kv 4 --n-ff 5632 ${type_args[$name]}
  mv "$f.tmp" "$f"
done

# What else runs here matters on a shared machine: record it with the results.
{ date; uptime; nproc; grep -m1 'model name' /proc/cpuinfo || true; git -C "$root" log --oneline -1 || true; } \
  >"$out/machine.txt"

if [[ "$skip" != *" engine "* ]]; then
  for name in "${names[@]}"; do
    echo "bench: engine $name" >&2
    "$bin/ggufd-bench" --model "$models/tl-$name.gguf" -p 128 -n 32 -t "$threads" -r "$reps" --csv \
      >"$out/engine-$name.csv"
    if [ -n "${GGUFD_LLAMA_BENCH:-}" ]; then
      echo "bench: llama.cpp $name" >&2
      "$GGUFD_LLAMA_BENCH" -m "$models/tl-$name.gguf" -p 128 -n 32 -t "$threads" -r "$reps" -o csv \
        >"$out/llama-$name.csv" 2>/dev/null
    fi
  done
fi
if [[ "$skip" != *" depth "* ]]; then
  # Attention's share grows with the context: the same tests after `depth` tokens of cache.
  name=${names[0]}
  echo "bench: depth sweep $name ($depths)" >&2
  "$bin/ggufd-bench" --model "$models/tl-$name.gguf" -p 128 -n 32 -d "$depths" -t "$threads" \
    -r "$reps" --csv >"$out/depth-$name.csv"
  if [ -n "${GGUFD_LLAMA_BENCH:-}" ]; then
    echo "bench: llama.cpp depth sweep $name" >&2
    "$GGUFD_LLAMA_BENCH" -m "$models/tl-$name.gguf" -p 128 -n 32 -d "$depths" -t "$threads" \
      -r "$reps" -fa 1 -o csv >"$out/llama-depth-$name.csv" 2>/dev/null
  fi
fi
if [[ "$skip" != *" roofline "* ]]; then
  "$bin/ggufd-bench" --roofline -t "$threads" --csv >"$out/ceilings.csv"
  for name in "${names[@]}"; do
    echo "bench: roofline $name" >&2
    "$bin/ggufd-bench" --roofline --model "$models/tl-$name.gguf" -p 128 -n 32 -t "$threads" \
      -r "$reps" --csv >"$out/roofline-$name.csv"
  done
fi

if [[ "$skip" != *" server "* ]]; then
  served="$models/tl-$server_model.gguf"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  url="http://127.0.0.1:$port"
  t0=$(date +%s.%N)
  "$bin/ggufd" --model "bench=$served" --port "$port" --parallel 8 --threads "$threads" \
    >"$out/ggufd.log" 2>&1 &
  pid=$!
  trap 'kill "$pid" 2>/dev/null || true' EXIT
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/health" || true)" = 200 ]; do
    kill -0 "$pid" 2>/dev/null || { echo "bench: ggufd exited; see $out/ggufd.log" >&2; exit 1; }
    sleep 0.01
  done
  t1=$(date +%s.%N)
  echo "time_to_ready_s,$(python3 -c "print(f'{$t1 - $t0:.3f}')")" >"$out/daemon.csv"

  echo "bench: server sweep on $server_model ($concurrency)" >&2
  plot=()
  command -v gnuplot >/dev/null && plot=(--plot "$out/server.png")
  "$bin/ggufd-bench" --server "$url" --model bench --concurrency "$concurrency" --max-tokens 64 \
    --requests-per-client "$requests" --csv "${plot[@]}" >"$out/server.csv"

  # Resident memory against what it should be: the mapped file + the KV cache it allocated.
  curl -s "$url/metrics" >"$out/metrics.txt"
  cells=$(awk '/^ggufd_kv_cache_cells_capacity/ {print $2}' "$out/metrics.txt")
  "$bin/gguf-inspect" --json "$served" >"$out/inspect.json"
  python3 - "$out/inspect.json" "$cells" "$pid" "$served" >>"$out/daemon.csv" <<'EOF'
import json, os, sys
meta = json.load(open(sys.argv[1]))["metadata"]
def get(key):
    v = meta[key]
    return v["value"] if isinstance(v, dict) else v
arch = get("general.architecture")
n_layer, n_embd = get(f"{arch}.block_count"), get(f"{arch}.embedding_length")
n_head, n_head_kv = get(f"{arch}.attention.head_count"), get(f"{arch}.attention.head_count_kv")
cells = float(sys.argv[2])
kv_bytes = cells * n_layer * 2 * (n_embd // n_head * n_head_kv) * 2  # K and V, F16
status = dict(line.split(":", 1) for line in open(f"/proc/{sys.argv[3]}/status") if ":" in line)
kib = lambda key: int(status[key].split()[0]) * 1024
file_bytes = os.path.getsize(sys.argv[4])
mib = lambda b: f"{b / 2**20:.1f}"
print(f"file_mib,{mib(file_bytes)}\nkv_cells,{int(cells)}\nkv_mib,{mib(kv_bytes)}")
print(f"rss_mib,{mib(kib('VmRSS'))}\nrss_peak_mib,{mib(kib('VmHWM'))}")
print(f"rss_peak_over_file_plus_kv,{kib('VmHWM') / (file_bytes + kv_bytes):.3f}")
EOF
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  trap - EXIT
fi

# Summary.
python3 - "$out" <<'EOF'
import csv, os, sys
out = sys.argv[1]
def rows(name):
    path = os.path.join(out, name)
    return list(csv.DictReader(open(path))) if os.path.exists(path) else []
MODELS = ("q4_0", "q8_0", "q4_k_m", "q5_k_m")
print(f"== ggufd benchmark ({out})")
for name in MODELS:
    for r in rows(f"engine-{name}.csv"):
        print(f"{name:7} {r['test']:6} {float(r['tokens_per_s_median']):8.2f} tok/s "
              f"(min {r['min']}, max {r['max']})  load {r['load_s']} s  peak RSS {r['peak_rss_mib']} MiB  "
              f"waited for a CPU {100 * float(r['cpu_wait']):.0f}%")
for name in MODELS:
    for r in rows(f"depth-{name}.csv"):
        print(f"{name:7} {r['test']:14} {float(r['tokens_per_s_median']):8.2f} tok/s "
              f"(min {r['min']}, max {r['max']})  waited for a CPU {100 * float(r['cpu_wait']):.0f}%")
for name in MODELS:
    for ours_csv, theirs_csv in ((f"engine-{name}.csv", f"llama-{name}.csv"),
                                 (f"depth-{name}.csv", f"llama-depth-{name}.csv")):
        ours = {r["test"]: float(r["tokens_per_s_median"]) for r in rows(ours_csv)}
        for r in rows(theirs_csv):
            test = f"pp{r['n_prompt']}" if int(r["n_prompt"]) else f"tg{r['n_gen']}"
            if int(r.get("n_depth") or 0):
                test += f" @ d{r['n_depth']}"
            theirs = float(r["avg_ts"])
            vs = f"  ggufd/llama.cpp x{ours[test] / theirs:.2f}" if test in ours and theirs else ""
            print(f"{name:7} {test:14} {theirs:8.2f} tok/s llama.cpp llama-bench (mean of the runs){vs}")
for r in rows("ceilings.csv"):
    print(f"ceiling {r['ceiling']:15} {r['best']:>9} {r['unit']} (median {r['median']}, {r['isa']})")
for name in MODELS:
    for r in rows(f"roofline-{name}.csv"):
        print(f"{name:7} {r['test']:6} {float(r['tokens_per_s']):8.2f} tok/s = "
              f"{100 * float(r['fraction']):5.1f}% of the {r['bound']} ceiling "
              f"({float(r['ceiling_tokens_per_s']):.1f} tok/s)")
levels = rows("server.csv")
for r in levels:
    print(f"server c={int(r['concurrency']):<3} {float(r['tokens_per_s']):8.2f} tok/s  "
          f"ttft p50/p95 {r['ttft_p50_ms']}/{r['ttft_p95_ms']} ms  "
          f"itl p50/p95 {r['itl_p50_ms']}/{r['itl_p95_ms']} ms  errors {r['errors']}")
by_c = {int(r["concurrency"]): r for r in levels}
if 1 in by_c and 8 in by_c:
    gain = float(by_c[8]["tokens_per_s"]) / float(by_c[1]["tokens_per_s"])
    itl = float(by_c[8]["itl_p95_ms"]) / max(float(by_c[1]["itl_p95_ms"]), 1e-9)
    print(f"server 8 streams vs 1: throughput x{gain:.2f} (target >= 3), ITL p95 x{itl:.2f} (target < 3)")
daemon = dict(csv.reader(open(os.path.join(out, "daemon.csv")))) if os.path.exists(os.path.join(out, "daemon.csv")) else {}
if daemon:
    print(f"daemon: ready in {daemon['time_to_ready_s']} s (target < 1); peak RSS {daemon['rss_peak_mib']} MiB "
          f"vs file {daemon['file_mib']} + KV {daemon['kv_mib']} MiB: x{daemon['rss_peak_over_file_plus_kv']} (target <= 1.15)")
EOF
