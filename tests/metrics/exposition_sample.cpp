// Prints the exposition of a Metrics object that saw one of everything, for checking the output
// with Prometheus's own promtool (registered as a test when promtool is installed).
#include <iostream>
#include <memory>

#include "engine/scheduler/scheduler.h"
#include "server/metrics/metrics.h"

int main() {
    ggufd::metrics::Metrics m;
    auto& tiny = m.for_model("tiny");
    tiny.set_load_seconds(0.2);
    tiny.set_total_slots(4);
    tiny.set_kv_cells(100, 4096);
    tiny.on_first_token(0.3);
    tiny.on_token_interval(0.02);
    tiny.on_step(17);
    m.on_request("/v1/chat/completions", "tiny", 200, 1.5);
    m.on_request("/v1/completions", "tiny", 503, 0.01);
    m.on_request("/health", "", 200, 0.0001);
    auto stats = std::make_shared<ggufd::scheduler::SchedulerStats>();
    stats->generated_tokens = 12;
    stats->prompt_tokens = 40;
    stats->steps = 13;
    stats->busy_slots = 1;
    m.watch_scheduler("tiny", stats);
    std::cout << m.render();
}
