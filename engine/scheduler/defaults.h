// How a model is served when nobody says otherwise. SchedulerParams starts from these, and the
// daemon's configuration (config/config.h) takes them as its defaults, which its --help prints:
// each is stated here only. Header-only, so the configuration reads them without linking the
// engine.
#pragma once

namespace ggufd::scheduler::defaults {

inline constexpr int kSlots = 4;        // concurrent sequences per model
inline constexpr int kBatchSize = 512;  // token budget of one engine step
inline constexpr int kMaxQueue = 64;    // requests waiting for a slot before the queue is full

}  // namespace ggufd::scheduler::defaults
