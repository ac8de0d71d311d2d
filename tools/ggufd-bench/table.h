// The text of llama-bench-style tables: Markdown pipes with padded columns, so a run pastes into
// docs/performance.md as it is and lines up in a terminal.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/ggufd-bench/stats.h"

namespace ggufd::bench {

// "| a | b |" rows under a header and a "| --- | ---: |" line, each column padded to its widest
// cell; right_aligned[i] right-aligns column i. Throws std::invalid_argument when a row's cell
// count or right_aligned's size differs from the header's.
std::string markdown_table(const std::vector<std::string>& header,
                           const std::vector<bool>& right_aligned,
                           const std::vector<std::vector<std::string>>& rows);

std::string format_mib(uint64_t bytes);     // "606.53 MiB"
std::string format_params(uint64_t count);  // "1.10 B", "260.10 K" below a million
std::string format_rate(const MeanSd& m);   // "123.45 ± 1.23"

}  // namespace ggufd::bench
