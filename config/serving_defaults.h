// How a model is served when nobody says otherwise. The daemon's configuration (config.h) takes
// them as its defaults, which its --help prints, and the engine's SchedulerParams starts from
// them: each is stated here only. Plain constants at the bottom floor (target `config_defaults`,
// header-only), so the engine reads them without linking the configuration, and the
// configuration reads nothing of the engine.
#pragma once

namespace ggufd::config::defaults {

inline constexpr int kSlots = 4;        // concurrent sequences per model
inline constexpr int kBatchSize = 512;  // token budget of one engine step
inline constexpr int kMaxQueue = 64;    // requests waiting for a slot before the queue is full

}  // namespace ggufd::config::defaults
