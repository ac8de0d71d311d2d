#include "tools/ggufd-bench/agent_trace.h"

#include <cstdio>
#include <ctime>
#include <mutex>
#include <random>
#include <vector>

#include "engine/model/model.h"
#include "engine/scheduler/scheduler.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/support/recording_sink.h"

namespace ggufd::bench {
namespace {

// CPU seconds this process has used (every thread): on a shared machine the time to first token
// includes waiting for a core, the CPU time to it does not.
double process_cpu_s() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Waits for one request and keeps what the trace prints, with the CPU time of its first token.
class TraceSink : public ggufd::testing::RecordingSink {
  public:
    double first_token_cpu_s = 0;

  private:
    void recorded(const scheduler::TokenEvent&, std::unique_lock<std::mutex>&) override {
        if (tokens.size() == 1) first_token_cpu_s = process_cpu_s();
    }
};

struct TurnResult {
    int session, turn;
    int32_t prompt, cached;
    double ttft_s;
    double ttft_cpu_s;  // CPU seconds from submission to the first token
};

std::vector<TurnResult> run_trace(std::shared_ptr<const model::Model> model,
                                  std::shared_ptr<const tokenizer::Tokenizer> tok,
                                  const AgentTraceOptions& o, size_t cache_bytes) {
    scheduler::SchedulerParams p;
    p.n_slots = o.slots;
    p.n_threads = o.threads;
    p.batch_size = o.batch_size;
    p.n_ctx = o.system + o.turns * (o.message + o.reply) + 8;
    p.cache_ram_bytes = cache_bytes;
    scheduler::Scheduler s(model, tok, p);
    // Random tokens past the first few (often control tokens): what they are does not matter to the
    // cost, only how many.
    std::mt19937 rng(7);
    const auto n_vocab = static_cast<int32_t>(model->hparams().n_vocab);
    std::uniform_int_distribution<int32_t> pick(std::min(n_vocab - 1, 3), n_vocab - 1);
    auto tokens = [&](int n) {
        std::vector<int32_t> v(static_cast<size_t>(n));
        for (int32_t& t : v) t = pick(rng);
        return v;
    };
    const std::vector<int32_t> system = tokens(o.system);
    std::vector<std::vector<int32_t>> history(static_cast<size_t>(o.sessions), system);
    std::vector<TurnResult> out;
    for (int turn = 0; turn < o.turns; ++turn) {
        for (int session = 0; session < o.sessions; ++session) {
            std::vector<int32_t>& h = history[static_cast<size_t>(session)];
            const std::vector<int32_t> message = tokens(o.message);
            h.insert(h.end(), message.begin(), message.end());
            auto sink = std::make_shared<TraceSink>();
            scheduler::GenerationRequest r;
            r.prompt = h;
            r.sampling.temperature = 0.0f;
            r.stop.max_tokens = o.reply;
            r.stop.ignore_eos = true;
            r.sink = sink;
            const double cpu_before = process_cpu_s();
            const scheduler::SubmitResult v = s.submit(std::move(r));
            if (!v.accepted()) throw std::runtime_error("trace request refused: " + v.message);
            sink->wait();
            if (!sink->error.empty()) throw std::runtime_error(sink->error);
            out.push_back({session, turn, sink->usage.prompt_tokens,
                           sink->usage.cached_prompt_tokens, sink->usage.time_to_first_token_s,
                           sink->first_token_cpu_s - cpu_before});
            h.insert(h.end(), sink->tokens.begin(), sink->tokens.end());
        }
    }
    return out;
}

}  // namespace

void run_agent_trace(const AgentTraceOptions& o) {
    if (o.slots < 1 || o.sessions < 1 || o.turns < 1 || o.system < 0 || o.message < 1 ||
        o.reply < 1) {
        throw std::invalid_argument(
            "agent trace: slots, sessions, turns, message and reply must "
            "be at least 1");
    }
    auto model = model::Model::load(o.model_path);
    auto tok = std::make_shared<const tokenizer::Tokenizer>(
        tokenizer::Tokenizer(tokenizer::Vocab::from_gguf(model->file())));
    const auto with = run_trace(model, tok, o, o.cache_ram_mib << 20);
    const auto without = run_trace(model, tok, o, 0);
    if (o.csv) {
        std::printf(
            "session,turn,prompt,evaluated_cache,ttft_ms_cache,ttft_cpu_ms_cache,"
            "evaluated_nocache,ttft_ms_nocache,ttft_cpu_ms_nocache\n");
    } else {
        std::printf(
            "agent trace: %d sessions x %d turns, %d slots, system prompt %d tokens, "
            "%d-token messages, %d-token replies\n",
            o.sessions, o.turns, o.slots, o.system, o.message, o.reply);
        std::printf("%7s %4s %7s | %6s %9s %9s | %6s %9s %9s\n", "session", "turn", "prompt",
                    "eval", "ttft ms", "cpu ms", "eval", "ttft ms", "cpu ms");
        std::printf("%20s | %26s | %26s\n", "", "prefix cache", "no prefix cache");
    }
    double ttft_with = 0, ttft_without = 0, cpu_with = 0, cpu_without = 0;
    for (size_t i = 0; i < with.size(); ++i) {
        const TurnResult& a = with[i];
        const TurnResult& b = without[i];
        ttft_with += a.ttft_s;
        ttft_without += b.ttft_s;
        cpu_with += a.ttft_cpu_s;
        cpu_without += b.ttft_cpu_s;
        std::printf(o.csv ? "%d,%d,%d,%d,%.1f,%.1f,%d,%.1f,%.1f\n"
                          : "%7d %4d %7d | %6d %9.1f %9.1f | %6d %9.1f %9.1f\n",
                    a.session, a.turn + 1, a.prompt, a.prompt - a.cached, a.ttft_s * 1e3,
                    a.ttft_cpu_s * 1e3, b.prompt - b.cached, b.ttft_s * 1e3, b.ttft_cpu_s * 1e3);
    }
    if (!o.csv) {
        std::printf(
            "total TTFT: %.0f ms with the prefix cache, %.0f ms without (CPU time: %.0f "
            "ms, %.0f ms)\n",
            ttft_with * 1e3, ttft_without * 1e3, cpu_with * 1e3, cpu_without * 1e3);
    }
}

}  // namespace ggufd::bench
