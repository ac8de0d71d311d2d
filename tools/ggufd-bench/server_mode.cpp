#include "tools/ggufd-bench/server_mode.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "tools/ggufd-bench/stats.h"

namespace ggufd::bench {

namespace {

using Clock = std::chrono::steady_clock;

LevelResult run_level(const SweepOptions& opts, int concurrency, const std::string& body) {
    std::mutex mu;
    std::vector<StreamResult> results;
    const auto t0 = Clock::now();
    const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(opts.duration_s));
    std::vector<std::thread> clients;
    for (int c = 0; c < concurrency; ++c) {
        clients.emplace_back([&] {
            StreamClient client(opts.endpoint);
            for (int i = 0;; ++i) {
                if (opts.duration_s > 0 ? (i > 0 && Clock::now() >= deadline)
                                        : i >= opts.requests_per_client)
                    break;
                StreamResult r = client.post_stream("/v1/completions", body, opts.api_key);
                std::lock_guard lock(mu);
                results.push_back(std::move(r));
            }
        });
    }
    for (auto& t : clients) t.join();

    LevelResult l;
    l.concurrency = concurrency;
    l.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::vector<double> ttft, itl;
    for (const auto& r : results) {
        ++l.requests;
        if (!r.ok) {
            ++l.errors;
            if (l.first_error.empty()) l.first_error = r.error;
            continue;
        }
        if (r.completion_tokens >= 0) l.tokens += r.completion_tokens;
        if (r.completion_tokens < opts.max_tokens) ++l.short_requests;
        if (r.text_events > 0) ttft.push_back(r.ttft_s);
        itl.insert(itl.end(), r.gaps_s.begin(), r.gaps_s.end());
    }
    l.tokens_per_s = l.wall_s > 0 ? static_cast<double>(l.tokens) / l.wall_s : 0;
    if (!ttft.empty()) {
        l.ttft_p50_s = percentile(ttft, 50);
        l.ttft_p95_s = percentile(ttft, 95);
    }
    if (!itl.empty()) {
        l.itl_p50_s = percentile(itl, 50);
        l.itl_p95_s = percentile(itl, 95);
    }
    return l;
}

}  // namespace

std::string completion_body(const SweepOptions& opts) {
    nlohmann::json body = {
        {"prompt", opts.prompt},
        {"max_tokens", opts.max_tokens},
        {"temperature", 0},
        {"stream", true},
        {"stream_options", {{"include_usage", true}}},
        // Generate exactly max_tokens; servers without the field ignore it.
        {"ignore_eos", true},
    };
    if (!opts.model.empty()) body["model"] = opts.model;
    return body.dump();
}

std::vector<LevelResult> run_sweep(const SweepOptions& opts) {
    if (opts.concurrency.empty()) throw std::invalid_argument("no concurrency levels");
    if (opts.max_tokens < 1) throw std::invalid_argument("--max-tokens must be >= 1");
    if (opts.requests_per_client < 1) throw std::invalid_argument("--requests must be >= 1");
    const std::string body = completion_body(opts);
    {
        // Pages the weights in and fills caches so the first level is not penalised.
        StreamClient warm(opts.endpoint);
        StreamResult r = warm.post_stream("/v1/completions", body, opts.api_key);
        if (!r.ok) throw std::runtime_error("warm-up request failed: " + r.error);
    }
    std::vector<LevelResult> levels;
    for (int c : opts.concurrency) {
        std::fprintf(stderr, "ggufd-bench: concurrency %d...\n", c);
        levels.push_back(run_level(opts, c, body));
    }
    return levels;
}

void print_sweep(const std::vector<LevelResult>& levels, bool csv) {
    if (csv) {
        std::printf(
            "concurrency,requests,errors,short_requests,generated_tokens,wall_s,tokens_per_s,"
            "ttft_p50_ms,ttft_p95_ms,itl_p50_ms,itl_p95_ms\n");
        for (const auto& l : levels) {
            std::printf("%d,%d,%d,%d,%lld,%.3f,%.2f,%.1f,%.1f,%.2f,%.2f\n", l.concurrency,
                        l.requests, l.errors, l.short_requests, l.tokens, l.wall_s, l.tokens_per_s,
                        l.ttft_p50_s * 1e3, l.ttft_p95_s * 1e3, l.itl_p50_s * 1e3,
                        l.itl_p95_s * 1e3);
        }
        return;
    }
    std::printf("%5s %5s %7s %9s  %9s %9s  %9s %9s  %s\n", "conc", "reqs", "tokens", "tok/s",
                "ttft p50", "ttft p95", "itl p50", "itl p95", "errors");
    for (const auto& l : levels) {
        std::printf("%5d %5d %7lld %9.2f  %7.1fms %7.1fms  %7.2fms %7.2fms  %d", l.concurrency,
                    l.requests, l.tokens, l.tokens_per_s, l.ttft_p50_s * 1e3, l.ttft_p95_s * 1e3,
                    l.itl_p50_s * 1e3, l.itl_p95_s * 1e3, l.errors);
        if (l.short_requests) std::printf(" (%d stopped early)", l.short_requests);
        if (!l.first_error.empty()) std::printf("  first: %s", l.first_error.c_str());
        std::printf("\n");
    }
}

void require_gnuplot() {
    if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
        throw std::runtime_error(
            "--plot needs gnuplot on PATH (Debian: apt-get install gnuplot-nox)");
    }
}

void plot_sweep(const std::vector<LevelResult>& levels, const std::string& png) {
    require_gnuplot();
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path();
    const std::string stem = "ggufd-bench-" + std::to_string(::getpid());
    const fs::path data = dir / (stem + ".dat"), script = dir / (stem + ".gp");
    {
        std::ofstream d(data);
        for (const auto& l : levels) {
            d << l.concurrency << ' ' << l.tokens_per_s << ' ' << l.ttft_p50_s * 1e3 << ' '
              << l.ttft_p95_s * 1e3 << ' ' << l.itl_p50_s * 1e3 << ' ' << l.itl_p95_s * 1e3 << '\n';
        }
        std::ofstream g(script);
        // The file names are ours (temp dir + pid) or the user's; quote them for gnuplot.
        auto quoted = [](const std::string& s) {
            std::string q = "'";
            for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
            return q + "'";
        };
        g << "set terminal pngcairo size 900,600 noenhanced\n"
          << "set output " << quoted(png) << "\n"
          << "set title 'ggufd server sweep: streamed completions'\n"
          << "set xlabel 'concurrent streams'\nset logscale x 2\n"
          << "set ylabel 'aggregate generated tokens/s'\nset y2label 'latency (ms)'\n"
          << "set ytics nomirror\nset y2tics\nset yrange [0:*]\nset y2range [0:*]\n"
          << "set key top left\nset grid\n"
          << "plot " << quoted(data.string())
          << " using 1:2 with linespoints lw 2 title 'tokens/s' axes x1y1, \\\n"
          << "  '' using 1:5 with linespoints title 'ITL p50 (ms)' axes x1y2, \\\n"
          << "  '' using 1:6 with linespoints title 'ITL p95 (ms)' axes x1y2, \\\n"
          << "  '' using 1:3 with linespoints dt 2 title 'TTFT p50 (ms)' axes x1y2\n";
    }
    const std::string cmd = "gnuplot " + script.string() + " 2>&1";
    const int rc = std::system(cmd.c_str());
    fs::remove(data);
    fs::remove(script);
    if (rc != 0) throw std::runtime_error("gnuplot failed (exit " + std::to_string(rc) + ")");
}

}  // namespace ggufd::bench
