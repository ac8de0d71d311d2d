#include "engine/scheduler/prefix_cache.h"

#include <algorithm>
#include <unordered_set>

namespace ggufd::scheduler {
namespace {

size_t shared_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
    const size_t n = std::min(a.size(), b.size());
    size_t i = 0;
    while (i < n && a[i] == b[i]) ++i;
    return i;
}

// The key and the prefix of a lookup: same adapters (another adapter gives other keys and values).
bool same_adapters(const std::vector<model::AdapterUse>& a,
                   const std::vector<model::AdapterUse>& b) {
    return a == b;
}

}  // namespace

SnapshotCost SnapshotCost::of(const model::Model& model) {
    const model::HParams& hp = model.hparams();
    double params = 0;
    for (const gguf::TensorInfo& t : model.file().tensors()) {
        // Vectors (norms, biases) and lookups (token, position, per-layer embeddings) cost no
        // multiply per weight; a tied output matrix is left out with its embedding.
        if (t.n_dims < 2 || t.name.find("embd") != std::string::npos) continue;
        double n = static_cast<double>(t.n_elements);
        if (t.name.find("_exps") != std::string::npos && hp.n_expert > 0) {
            n = n * hp.n_expert_used / hp.n_expert;
        }
        params += n;
    }
    return SnapshotCost{.flops_per_token = 2.0 * params};
}

size_t PrefixCache::Entry::bytes() const {
    return snapshot.size + tokens.size() * sizeof(int32_t) + sizeof(Entry);
}

PrefixCache::PrefixCache(PrefixCacheParams params) : params_(params) {
    params_.block_tokens = std::max<int32_t>(params_.block_tokens, 1);
}

std::vector<uint64_t> PrefixCache::block_hashes(std::span<const int32_t> tokens) const {
    std::vector<uint64_t> out;
    const size_t block = static_cast<size_t>(params_.block_tokens);
    out.reserve(tokens.size() / block);
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the token ids, carried from block to block
    for (size_t i = 0; i + block <= tokens.size(); i += block) {
        for (size_t j = i; j < i + block; ++j) {
            h = (h ^ static_cast<uint32_t>(tokens[j])) * 0x100000001b3ull;
        }
        out.push_back(h);
    }
    return out;
}

PrefixCache::Match PrefixCache::find(std::span<const int32_t> prompt,
                                     const std::vector<model::AdapterUse>& adapters, int32_t limit,
                                     const Usable& usable) {
    Match best;
    if (!enabled() || entries_.empty() || limit <= 0) return best;
    std::unordered_set<uint64_t> seen;
    Entry* chosen = nullptr;
    for (const uint64_t h : block_hashes(prompt)) {
        const auto it = by_block_.find(h);
        if (it == by_block_.end()) break;  // no entry shares this block, so none the next
        for (const uint64_t id : it->second) {
            if (!seen.insert(id).second) continue;
            Entry& e = entries_.at(id);
            if (!same_adapters(e.adapters, adapters)) continue;
            const auto shared = static_cast<int32_t>(
                std::min<size_t>(shared_prefix(e.tokens, prompt), static_cast<size_t>(limit)));
            const int32_t m = usable(e, shared);
            // The longest resume point; of equals, the smaller copy.
            if (m > best.length ||
                (m == best.length && m > 0 && e.snapshot.size < chosen->snapshot.size)) {
                best = {&e, m};
                chosen = &e;
            }
        }
    }
    if (chosen) chosen->used = ++clock_;
    return best;
}

bool PrefixCache::covers(std::span<const int32_t> tokens,
                         const std::vector<model::AdapterUse>& adapters, bool every_prefix,
                         int32_t base) const {
    const std::vector<uint64_t> hashes = block_hashes(tokens);
    if (hashes.empty()) return false;
    const auto it = by_block_.find(hashes.back());
    if (it == by_block_.end()) return false;
    for (const uint64_t id : it->second) {
        const Entry& e = entries_.at(id);
        if (!same_adapters(e.adapters, adapters) || e.snapshot.base > base) continue;
        const bool longer_ok =
            every_prefix ? e.tokens.size() >= tokens.size() : e.tokens.size() == tokens.size();
        if (longer_ok && shared_prefix(e.tokens, tokens) == tokens.size()) return true;
    }
    return false;
}

bool PrefixCache::worth_keeping(size_t tokens, size_t bytes) const {
    return enabled() && tokens >= static_cast<size_t>(params_.block_tokens) &&
           bytes + tokens * sizeof(int32_t) + sizeof(Entry) <= params_.budget_bytes;
}

const PrefixCache::Entry* PrefixCache::insert(std::vector<int32_t> tokens,
                                              std::vector<model::AdapterUse> adapters,
                                              model::SequenceSnapshot snapshot, bool every_prefix,
                                              CacheTier origin) {
    if (!worth_keeping(tokens.size(), snapshot.size) ||
        tokens.size() != static_cast<size_t>(snapshot.n_tokens) ||
        covers(tokens, adapters, every_prefix, snapshot.base)) {
        return nullptr;
    }
    const std::vector<uint64_t> hashes = block_hashes(tokens);
    if (every_prefix) {
        // Entries whose tokens begin these: this one resumes wherever they would.
        std::vector<uint64_t> covered;
        for (const uint64_t h : hashes) {
            const auto it = by_block_.find(h);
            if (it == by_block_.end()) break;
            for (const uint64_t id : it->second) {
                const Entry& e = entries_.at(id);
                if (same_adapters(e.adapters, adapters) && e.tokens.size() <= tokens.size() &&
                    e.snapshot.base >= snapshot.base &&
                    shared_prefix(e.tokens, tokens) == e.tokens.size()) {
                    covered.push_back(id);
                }
            }
        }
        std::sort(covered.begin(), covered.end());
        covered.erase(std::unique(covered.begin(), covered.end()), covered.end());
        for (const uint64_t id : covered) erase(id);
    }
    Entry e{std::move(tokens), std::move(adapters), std::move(snapshot), origin, ++clock_};
    const size_t need = e.bytes();
    while (bytes_ + need > params_.budget_bytes && !entries_.empty()) {
        const auto lru = std::min_element(
            entries_.begin(), entries_.end(),
            [](const auto& a, const auto& b) { return a.second.used < b.second.used; });
        erase(lru->first);
        ++evictions_;
    }
    const uint64_t id = next_id_++;
    for (const uint64_t h : hashes) by_block_[h].push_back(id);
    bytes_ += need;
    return &entries_.emplace(id, std::move(e)).first->second;
}

const PrefixCache::Entry* PrefixCache::supplier(
    std::span<const int32_t> tokens, const std::vector<model::AdapterUse>& adapters) const {
    const std::vector<uint64_t> hashes = block_hashes(tokens);
    if (hashes.empty()) return nullptr;
    const auto it = by_block_.find(hashes.back());
    if (it == by_block_.end()) return nullptr;
    const Entry* best = nullptr;
    for (const uint64_t id : it->second) {
        const Entry& e = entries_.at(id);
        if (!same_adapters(e.adapters, adapters) || e.tokens.size() < tokens.size() ||
            shared_prefix(e.tokens, tokens) < tokens.size()) {
            continue;
        }
        if (!best || e.snapshot.base < best->snapshot.base) best = &e;
    }
    return best;
}

void PrefixCache::touch(const Entry* e) {
    // Entries are the map's own; a caller holds a const view of one.
    if (e) const_cast<Entry*>(e)->used = ++clock_;
}

void PrefixCache::erase(uint64_t id) {
    const auto it = entries_.find(id);
    if (it == entries_.end()) return;
    if (on_erase) on_erase(it->second);
    for (const uint64_t h : block_hashes(it->second.tokens)) {
        auto list = by_block_.find(h);
        if (list == by_block_.end()) continue;
        std::erase(list->second, id);
        if (list->second.empty()) by_block_.erase(list);
    }
    bytes_ -= it->second.bytes();
    entries_.erase(it);
}

}  // namespace ggufd::scheduler
