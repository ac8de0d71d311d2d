// ggufd-bench: how fast the engine and the server are, and how close to this machine's limits.
//   engine:   ggufd-bench --model M -p 128 -n 32 -t 2 -r 3 [-d 0,2048]  (lists as llama-bench)
//   roofline: ggufd-bench --roofline [--model M ...]
//   agent:    ggufd-bench --agent-trace --model M [--trace-system 2048] [--parallel 2] ...
//   image:    ggufd-bench --mmproj P --image IMG [-t 2] [-r 3]
//   server:   ggufd-bench --server http://127.0.0.1:8080 --concurrency 1,2,4,8,16 --max-tokens 64
// Each mode lives in its own file; this one only reads options and dispatches.
#include <boost/program_options.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "tools/ggufd-bench/agent_trace.h"
#include "tools/ggufd-bench/engine_mode.h"
#include "tools/ggufd-bench/image_mode.h"
#include "tools/ggufd-bench/roofline.h"
#include "tools/ggufd-bench/server_mode.h"
#include "tools/ggufd-bench/stats.h"

namespace po = boost::program_options;
using namespace ggufd::bench;

int main(int argc, char** argv) {
    EngineOptions engine;
    RooflineOptions roof;
    AgentTraceOptions trace;
    ImageOptions image;
    bool agent_trace = false;
    SweepOptions sweep;
    std::string server, concurrency = "1,2,4,8,16", plot;
    std::vector<std::string> n_prompt, n_gen, threads, depth;
    bool csv = false, roofline = false, no_repack = false;
    po::options_description d(
        "usage:\n"
        "  ggufd-bench --model M [-p 128] [-n 32] [-t 2] [-d 0] [-r 3] [--no-repack] [--csv]\n"
        "      engine speed; -p -n -t -d take comma lists and may repeat (-t 1,2 -d 0,2048):\n"
        "      every thread count x depth runs every pp and tg length\n"
        "  ggufd-bench --roofline [--model M ...] [--buffer-mib 512]         ceilings\n"
        "  ggufd-bench --agent-trace --model M [--trace-sessions 4] [--parallel 2] ...\n"
        "      sessions sharing a system prompt, turns interleaved: tokens evaluated and TTFT\n"
        "      per turn with the prefix cache and without\n"
        "  ggufd-bench --mmproj P --image IMG [--image IMG] [-t 2] [-r 3]\n"
        "      milliseconds to encode each picture with a projector (mmproj) model\n"
        "  ggufd-bench --server URL [--concurrency 1,2,4] [--max-tokens 64] [--plot out.png]\n"
        "options");
    // clang-format off
    d.add_options()
        ("help,h", "show this help")
        ("model,m", po::value<std::string>(), "engine/roofline: GGUF file; server: \"model\" name")
        ("n-prompt,p", po::value(&n_prompt)->composing()->default_value({"128"}, "128"), "prompt tokens per pp test (0 = none)")
        ("n-gen,n", po::value(&n_gen)->composing()->default_value({"32"}, "32"), "generated tokens per tg test (0 = none)")
        ("threads,t", po::value(&threads)->composing()->default_value({"0"}, "0"), "threads (0 = physical cores)")
        ("threads-batch", po::value(&engine.threads_batch)->default_value(0), "engine: threads of the pp tests, as ggufd's --threads-batch (0 = the -t value)")
        ("n-depth,d", po::value(&depth)->composing()->default_value({"0"}, "0"), "tokens already in the KV cache when a test starts")
        ("cache-type-k", po::value<std::string>()->default_value("f16"), "engine: KV cache storage of keys (f16, q8_0, q4_0)")
        ("cache-type-v", po::value<std::string>()->default_value("f16"), "engine: KV cache storage of values (f16, q8_0, q4_0)")
        ("repetitions,r", po::value(&engine.reps)->default_value(engine.reps), "repetitions")
        ("no-repack", po::bool_switch(&no_repack), "engine: keep the weights in the file's layout (to measure what repacking gains)")
        ("lora", po::value(&engine.lora_path), "engine: evaluate with this LoRA adapter of the model at scale 1 (to measure what adapters cost)")
        ("roofline", po::bool_switch(&roofline), "measure memory bandwidth and int8/fp32 rates; with --model, engine figures as fractions of them")
        ("buffer-mib", po::value(&roof.buffer_mib)->default_value(roof.buffer_mib), "roofline: bytes read per bandwidth pass (MiB, >= 64, well above the LLC)")
        ("server", po::value(&server), "server mode: base URL, http://HOST:PORT")
        ("concurrency", po::value(&concurrency)->default_value(concurrency), "server: concurrent clients per level")
        ("max-tokens", po::value(&sweep.max_tokens)->default_value(sweep.max_tokens), "server: tokens per request")
        ("requests-per-client", po::value(&sweep.requests_per_client)->default_value(sweep.requests_per_client), "server: requests each client sends per level")
        ("duration", po::value(&sweep.duration_s)->default_value(0), "server: seconds per level instead of a request count")
        ("prompt", po::value(&sweep.prompt)->default_value(sweep.prompt), "server: prompt text")
        ("api-key", po::value(&sweep.api_key), "server: bearer key")
        ("plot", po::value(&plot), "server: PNG chart of the sweep (needs gnuplot)")
        ("agent-trace", po::bool_switch(&agent_trace), "agent trace: sessions sharing a system prompt, several turns each, more sessions than slots")
        ("trace-sessions", po::value(&trace.sessions)->default_value(trace.sessions), "agent trace: sessions")
        ("trace-turns", po::value(&trace.turns)->default_value(trace.turns), "agent trace: turns per session")
        ("trace-system", po::value(&trace.system)->default_value(trace.system), "agent trace: tokens of the shared system prompt")
        ("trace-message", po::value(&trace.message)->default_value(trace.message), "agent trace: tokens of each turn's new message")
        ("trace-reply", po::value(&trace.reply)->default_value(trace.reply), "agent trace: tokens generated per turn")
        ("parallel", po::value(&trace.slots)->default_value(trace.slots), "agent trace: slots")
        ("cache-ram", po::value(&trace.cache_ram_mib)->default_value(trace.cache_ram_mib), "agent trace: prefix cache MiB")
        ("mmproj", po::value(&image.mmproj_path), "image: the projector (mmproj) GGUF")
        ("image", po::value(&image.images)->composing(), "image: a picture to encode (repeatable)")
        ("csv", po::bool_switch(&csv), "machine-readable output");
    // clang-format on
    try {
        po::variables_map vm;
        po::store(po::parse_command_line(argc, argv, d), vm);
        if (vm.count("help")) {
            std::cout << d;
            return 0;
        }
        po::notify(vm);
        engine.repack = !no_repack;
        engine.n_prompt = parse_int_lists(n_prompt, "-p", 0);
        engine.n_gen = parse_int_lists(n_gen, "-n", 0);
        engine.threads = parse_int_lists(threads, "-t", 0);
        engine.depth = parse_int_lists(depth, "-d", 0);
        engine.kv_types = {ggufd::kernels::parse_kv_type(vm["cache-type-k"].as<std::string>()),
                           ggufd::kernels::parse_kv_type(vm["cache-type-v"].as<std::string>())};
        const std::string model = vm.count("model") ? vm["model"].as<std::string>() : "";

        if (!image.mmproj_path.empty()) {
            if (image.images.empty()) throw std::invalid_argument("--mmproj needs --image");
            image.threads = engine.threads;
            image.reps = engine.reps;
            image.csv = csv;
            run_image(image);
            return 0;
        }
        if (agent_trace) {
            if (model.empty()) throw std::invalid_argument("--agent-trace needs --model");
            trace.model_path = model;
            trace.threads = engine.threads.front();
            trace.csv = csv;
            run_agent_trace(trace);
            return 0;
        }
        if (!server.empty()) {
            if (roofline) throw std::invalid_argument("--roofline and --server are separate runs");
            sweep.endpoint = parse_url(server);
            sweep.concurrency = parse_int_list(concurrency);
            sweep.model = model;
            if (!plot.empty()) require_gnuplot();  // fail before a long sweep, not after
            const auto levels = run_sweep(sweep);
            print_sweep(levels, csv);
            if (!plot.empty()) plot_sweep(levels, plot);
            return 0;
        }
        if (!plot.empty()) throw std::invalid_argument("--plot charts a server sweep (--server)");
        if (roofline) {
            if (engine.threads.size() != 1) {
                throw std::invalid_argument("--roofline measures one thread count (one -t value)");
            }
            roof.threads = engine.threads.front();
            roof.reps = std::max(engine.reps, 3);
            const Ceilings c = measure_ceilings(roof);
            if (model.empty()) {
                print_ceilings(c, csv);
                return 0;
            }
            engine.model_path = model;
            const EngineResult e = run_engine(engine);
            if (!csv) {
                print_ceilings(c, false);
                print_engine(e, false);
            }
            print_roofline(c, e, csv);
            return 0;
        }
        if (model.empty()) throw std::invalid_argument("give --model, --roofline or --server");
        engine.model_path = model;
        print_engine(run_engine(engine), csv);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ggufd-bench: %s\n", e.what());
        return 1;
    }
}
