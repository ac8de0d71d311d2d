// The prefix cache's entries on disk (--cache-dir), so a restart or a replica serving the same
// model starts warm. Files live in a folder named by a key of the model file's identity (its
// size, tensor table and a sample of its tensor data) and the settings a snapshot's layout
// depends on (KV storage types, this format's version); each holds one entry: a header, the
// tokens, the snapshot, and a checksum of all of it. Reading checks every part: a file that is
// truncated, corrupt or of another model or layout is skipped with a warning, never loaded.
// Entries made with LoRA adapters are not written (an adapter file's identity is not tracked).
//
// The folder mirrors the memory tier: an entry is written when it is kept, and its file removed
// when it leaves memory, so the folder stays within --cache-ram too. Used from the scheduler's
// thread only; writes are synchronous (a file per kept prefix, written where a slot is
// overwritten or a checkpoint taken).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <vector>

#include "engine/model/kv_cache.h"
#include "engine/model/sequence_cache.h"
#include "gguf/file.h"

namespace ggufd::scheduler {

class PrefixStore {
  public:
    // The key of a model file and the snapshot-layout settings.
    static uint64_t key_of(const gguf::File& file, model::KvTypes kv_types);

    // Creates dir/<key> when missing; std::filesystem::filesystem_error when it cannot.
    PrefixStore(const std::filesystem::path& dir, uint64_t key);
    const std::filesystem::path& folder() const { return folder_; }

    // Writes an entry's file (atomically: a temporary file renamed); the bytes written, 0 on
    // failure (logged).
    size_t write(std::span<const int32_t> tokens, const model::SequenceSnapshot& snapshot);
    void remove(std::span<const int32_t> tokens);

    // Reads every file of the folder, most recently written first, and hands each valid entry
    // to `take` (which returns false to stop). `expected_bytes(n_tokens)` is the snapshot size
    // the model's cache wants for that many tokens (0: it cannot hold that many); a file that
    // disagrees is skipped with a warning. Returns the entries handed over.
    using Take = std::function<bool(std::vector<int32_t> tokens, model::SequenceSnapshot)>;
    size_t load(const std::function<size_t(int32_t n_tokens)>& expected_bytes, const Take& take);

  private:
    std::filesystem::path file_of(std::span<const int32_t> tokens) const;

    std::filesystem::path folder_;
    uint64_t key_;
};

}  // namespace ggufd::scheduler
