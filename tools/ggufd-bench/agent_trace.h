// Agent-trace mode (ggufd-bench --agent-trace): what the prefix cache saves on the traffic of
// coding agents. Sessions share a long system prompt; each sends several turns, every turn its
// whole history plus a new message; turns are interleaved so that there are more sessions than
// slots. The trace runs through a Scheduler in this process, once with the prefix cache and once
// without, and prints per turn the prompt tokens, those evaluated and the time to first token.
#pragma once

#include <cstddef>
#include <string>

namespace ggufd::bench {

struct AgentTraceOptions {
    std::string model_path;
    int threads = 0;    // 0: physical cores
    int slots = 2;      // --parallel
    int sessions = 4;   // more than slots: every slot is taken over between a session's turns
    int turns = 3;      // per session
    int system = 2048;  // tokens of the shared system prompt
    int message = 64;   // tokens of each turn's new message
    int reply = 16;     // tokens generated per turn
    int batch_size = 512;
    size_t cache_ram_mib = 4096;
    bool csv = false;
};

// Runs the trace with and without the cache and prints both; throws on a bad model.
void run_agent_trace(const AgentTraceOptions& options);

}  // namespace ggufd::bench
