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
// The KV pool's memory per model in MiB, which sizes the default context (the model's trained
// one when the pool holds it); 0: half the memory available when the model loads.
inline constexpr int kKvMemoryMiB = 0;
// Host memory for prompt prefixes kept beyond the slots (the prefix cache), in MiB; 0: none.
inline constexpr int kCacheRamMiB = 4096;
// Prompt tokens between two checkpoints of a sliding-window or recurrent sequence's prefill (a
// checkpoint is also taken at every prompt's end); 0: only at prompts' ends.
inline constexpr int kCheckpointInterval = 2048;

}  // namespace ggufd::config::defaults
