#include "engine/scheduler/scheduler.h"

#include "engine/scheduler/draft_model.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <iterator>
#include <span>

namespace ggufd::scheduler {
namespace {

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    const size_t n = std::min(a.size(), b.size());
    size_t i = 0;
    while (i < n && a[i] == b[i]) ++i;
    return i;
}

}  // namespace

Scheduler::Scheduler(std::shared_ptr<const model::Model> model,
                     std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
                     const SchedulerParams& params)
    : model_(std::move(model)),
      tokenizer_(std::move(tokenizer)),
      params_(params),
      context_(model_,
               // A sliding-window layer's ring sized for one step's budget: steps never split.
               model::ContextParams{.n_seq = params.n_slots,
                                    .n_ctx = params.n_ctx,
                                    .n_threads = params.n_threads,
                                    .n_threads_batch = params.n_threads_batch,
                                    .kv_type = params.kv_types,
                                    .swa_batch = std::max(params.batch_size, 1),
                                    .kv_pool_cells = params.kv_pool_cells,
                                    .f16_accumulator = params.f16_accumulator}),
      n_ctx_(context_.cache().n_ctx()),
      prefix_cache_(PrefixCacheParams{.budget_bytes = params.cache_ram_bytes,
                                      .block_tokens = params.cache_block_tokens}),
      snapshot_cost_(SnapshotCost::of(*model_)) {
    if (params.batch_size < 1) throw std::invalid_argument("batch size must be at least 1");
    if (params.checkpoint_interval < 0)
        throw std::invalid_argument("checkpoint interval must be 0 or more");
    // Interval checkpoints for sliding-window and recurrent sequences alone: a transformer's
    // slot keeps every prefix and is saved whole when it is overwritten.
    checkpoints_ = prefix_cache_.enabled() && params.checkpoint_interval > 0 &&
                   !context_.cache().keeps_every_prefix();
    open_store();
    slots_.resize(static_cast<size_t>(params.n_slots));
    for (size_t i = 0; i < slots_.size(); ++i) slots_[i].id = static_cast<int>(i);
    slot_views_ = std::make_unique<SlotView[]>(slots_.size());
    adapters_ = std::make_shared<const std::vector<NamedAdapter>>(params_.adapters);
    if (params_.draft_model) {
        const model::Model& d = *params_.draft_model;
        check_draft_vocabulary(tokenizer_->vocab(), context_.n_vocab(),
                               tokenizer::Vocab::from_gguf(d.file()),
                               static_cast<int64_t>(d.hparams().n_vocab));
        params_.draft_source = std::make_shared<DraftModel>(
            params_.draft_model, model::ContextParams{.n_seq = params.n_slots,
                                                      .n_ctx = n_ctx_,
                                                      .n_threads = params.n_threads,
                                                      .n_threads_batch = params.n_threads_batch,
                                                      .swa_batch = std::max(params.batch_size, 1)});
    }
    histories_.resize(slots_.size());
    stats_.kv_cells_capacity =
        std::min(static_cast<int64_t>(slots_.size()) * n_ctx_, context_.cache().pool_cells());
    thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
    stop();
}

void Scheduler::stop() {
    {
        std::lock_guard lock(mutex_);
        if (stopping_) {
            if (!thread_.joinable()) return;
        }
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

SubmitResult Scheduler::submit(GenerationRequest request) {
    if (!model_->weights().output) {
        ++stats_.rejected;
        return {SubmitStatus::invalid, "model",
                "this model is an encoder: it serves embeddings, not text generation"};
    }
    const std::shared_ptr<const std::vector<NamedAdapter>> named = this->adapters();
    SubmitResult verdict =
        validate(request, context_.n_vocab(), n_ctx_, *named, params_.speculative);
    if (verdict.accepted() && !params_.draft_source &&
        request.speculative.over(params_.speculative).type == DraftType::model) {
        verdict = {SubmitStatus::invalid, "speculative.type",
                   "'speculative.type' is 'draft', but this model has no draft model"};
    }
    if (!verdict.accepted()) {
        ++stats_.rejected;
        return verdict;
    }
    if (request.media) {
        const std::string why =
            check_media(*request.media, request.prompt, model_->hparams().n_embd_inp(),
                        std::min(n_ctx_, context_.cache().max_tokens_per_step()));
        if (!why.empty()) {
            ++stats_.rejected;
            return {SubmitStatus::invalid, "prompt", why};
        }
    }
    std::vector<model::AdapterUse> adapters = resolve_adapters(request, *named);
    return enqueue(queue_, Pending{std::move(request), Clock::now(), std::move(adapters)},
                   "requests");
}

std::shared_ptr<const std::vector<NamedAdapter>> Scheduler::adapters() const {
    std::lock_guard lock(adapters_mutex_);
    return adapters_;
}

void Scheduler::set_adapters(std::vector<NamedAdapter> adapters) {
    auto list = std::make_shared<const std::vector<NamedAdapter>>(std::move(adapters));
    std::lock_guard lock(adapters_mutex_);
    adapters_ = std::move(list);
}

template <typename Item>
SubmitResult Scheduler::enqueue(std::deque<Item>& queue, Item item, const char* what) {
    {
        std::lock_guard lock(mutex_);
        if (stopping_) {
            ++stats_.rejected;
            return {SubmitStatus::queue_full, {}, "The model is shutting down"};
        }
        if (static_cast<int>(queue.size()) >= params_.max_queue) {
            ++stats_.rejected;
            return {SubmitStatus::queue_full,
                    {},
                    "The server is busy: " + std::to_string(queue.size()) + " " + what +
                        " are waiting for this model; retry later"};
        }
        queue.push_back(std::move(item));
        stats_.queued = static_cast<int>(queue_.size() + embed_queue_.size());
    }
    wake_.notify_one();
    return {};
}

EmbeddingLimits Scheduler::embedding_limits() const {
    // An input is one sequence evaluated in one step: within the context and the most tokens of
    // one sequence a step takes (a sliding layer's ring).
    return {context_.n_vocab(), std::min(n_ctx_, context_.cache().max_tokens_per_step()),
            model_->weights().cls_out != nullptr, model_->hparams().n_embd};
}

SubmitResult Scheduler::submit_embedding(EmbeddingRequest request) {
    SubmitResult verdict = validate(request, embedding_limits());
    if (!verdict.accepted()) {
        ++stats_.rejected;
        return verdict;
    }
    return enqueue(embed_queue_, EmbedJob{std::move(request), 0, {}, false}, "embedding requests");
}

void Scheduler::loop() {
    while (true) {
        step_taken_ = 0;  // admissions come before the step, with the whole pool's room
        resume_preempted();
        std::deque<Pending> incoming;
        {
            std::unique_lock lock(mutex_);
            const bool busy = !embed_jobs_.empty() || !preempted_.empty() ||
                              std::any_of(slots_.begin(), slots_.end(),
                                          [](const Slot& s) { return s.active.has_value(); });
            if (!busy) {
                wake_.wait(
                    lock, [this] { return stopping_ || !queue_.empty() || !embed_queue_.empty(); });
            }
            // Embedding jobs wait for slots on this thread, behind the ones already here.
            while (!embed_queue_.empty()) {
                embed_jobs_.push_back(std::move(embed_queue_.front()));
                embed_queue_.pop_front();
            }
            if (stopping_) {
                incoming.swap(queue_);
                stats_.queued = 0;
                lock.unlock();
                end_embed_jobs(FinishReason::cancelled, {});
                for (Pending& p : incoming)
                    p.request.sink->on_finish(FinishReason::cancelled, {}, {});
                for (Slot& s : slots_) {
                    if (s.active) finish(s, FinishReason::cancelled);
                }
                for (Active& a : preempted_)
                    a.request.sink->on_finish(FinishReason::cancelled, a.usage, {});
                preempted_.clear();
                return;
            }
            // Take as many waiting requests as there are free slots; the rest keep their place.
            int free = 0;
            for (const Slot& s : slots_) free += s.active ? 0 : 1;
            // Waiting embeddings keep one free slot, so generation cannot starve them.
            if (!embed_jobs_.empty() && free > 0) --free;
            // Preempted requests are older than any waiting one: they go first.
            if (!preempted_.empty()) free = 0;
            while (free-- > 0 && !queue_.empty()) {
                incoming.push_back(std::move(queue_.front()));
                queue_.pop_front();
            }
            stats_.queued = static_cast<int>(queue_.size());
        }
        admit(incoming);
        drop_cancelled();
        step();
        publish_slots();
    }
}

void Scheduler::publish_slots() {
    int64_t used = 0;
    for (size_t i = 0; i < slots_.size(); ++i) {
        const Slot& s = slots_[i];
        SlotView& v = slot_views_[i];
        const int32_t cells = s.active ? context_.cache().length(s.id) : 0;
        used += cells;
        v.processing.store(s.active.has_value(), std::memory_order_relaxed);
        v.cells.store(cells, std::memory_order_relaxed);
        v.prompt_tokens.store(s.active ? s.active->usage.prompt_tokens : 0,
                              std::memory_order_relaxed);
        v.decoded.store(s.active ? s.active->usage.completion_tokens : 0,
                        std::memory_order_relaxed);
    }
    stats_.kv_cells_used.store(used, std::memory_order_relaxed);
    stats_.kv_pool_used.store(context_.cache().pool_used(), std::memory_order_relaxed);
}

std::vector<SlotState> Scheduler::slot_states() const {
    std::vector<SlotState> out(slots_.size());
    for (size_t i = 0; i < slots_.size(); ++i) {
        const SlotView& v = slot_views_[i];
        out[i] = {static_cast<int>(i),
                  v.processing.load(std::memory_order_relaxed),
                  n_ctx_,
                  v.cells.load(std::memory_order_relaxed),
                  v.prompt_tokens.load(std::memory_order_relaxed),
                  v.decoded.load(std::memory_order_relaxed)};
    }
    return out;
}

void Scheduler::admit(std::deque<Pending>& incoming) {
    for (Pending& p : incoming) {
        if (p.request.sink->cancelled()) {
            p.request.sink->on_finish(FinishReason::cancelled, {}, {});
            continue;
        }
        // The free slot whose cached tokens share the longest prefix with this prompt.
        Slot* best = nullptr;
        size_t best_len = 0;
        for (Slot& s : slots_) {
            if (s.active) continue;
            // A prefix computed with other adapters has other keys and values.
            const size_t len = context_.adapters(s.id) == p.adapters
                                   ? common_prefix(s.cached, p.request.prompt)
                                   : 0;
            if (!best || len > best_len) {
                best = &s;
                best_len = len;
            }
        }
        if (!best) {  // cannot happen: the loop took no more than the free slots
            std::lock_guard lock(mutex_);
            queue_.push_front(std::move(p));
            continue;
        }
        start(*best, std::move(p));
    }
}

bool Scheduler::start(Slot& slot, Pending pending) {
    Active a;
    a.request = std::move(pending.request);
    a.submitted = pending.submitted;
    try {
        const bool token_bytes = sampling::needs_vocabulary(a.request.sampling);
        if (token_bytes && !grammar_vocab_) {
            grammar_vocab_ = grammar::TokenVocabulary::from_tokenizer(*tokenizer_);
        }
        a.sampler = std::make_unique<sampling::Sampler>(a.request.sampling, context_.n_vocab(),
                                                        token_bytes ? grammar_vocab_ : nullptr);
        const tokenizer::Tokenizer& t = *tokenizer_;
        a.stop = std::make_unique<sampling::StopChecker>(a.request.stop,
                                                         [&t](int32_t id) { return t.is_eog(id); });
        tokenizer::StreamDecoder::Options decode;
        // A lazy grammar's text before its trigger is unconstrained: control tokens keep their
        // usual rendering (the family's markup is in render_ids).
        decode.render_special =
            a.request.sampling.grammar != nullptr && a.request.sampling.grammar_triggers.empty();
        decode.render_ids = a.request.render_tokens;
        std::sort(decode.render_ids.begin(), decode.render_ids.end());
        a.decoder = std::make_unique<tokenizer::StreamDecoder>(*tokenizer_, std::move(decode));
    } catch (const std::exception& e) {
        a.request.sink->on_finish(FinishReason::error, {}, e.what());
        return false;
    }
    a.adapters = std::move(pending.adapters);
    const int32_t reuse = place(slot, a);
    a.prompt_done = static_cast<size_t>(reuse);
    const std::vector<int32_t>& prompt = a.request.prompt;
    const PromptMedia* media = a.request.media.get();
    if (media && !media->spans.empty()) {
        // Penalties see the prompt's text; a picture's placeholders are no tokens.
        std::vector<int32_t> text;
        std::copy_if(prompt.begin(), prompt.end(), std::back_inserter(text),
                     [](int32_t id) { return !is_media_token(id); });
        a.sampler->accept(std::span<const int32_t>(text));
    } else {
        a.sampler->accept(std::span<const int32_t>(prompt));
    }
    a.rope_shift = rope_shift(media, prompt.size());
    a.speculative = a.request.speculative.over(params_.speculative);
    // Drafts come from the text's tokens, which a picture's placeholders are not.
    if (media && !media->spans.empty()) a.speculative.type = DraftType::none;
    a.draft_policy = DraftPolicy(a.speculative.n_max);
    a.usage.prompt_tokens = static_cast<int32_t>(a.request.prompt.size());
    a.usage.cached_prompt_tokens = reuse;
    a.started = Clock::now();
    a.request.sink->on_started();
    slot.active = std::move(a);
    ++stats_.busy_slots;
    if (slot.active->stop->budget_exhausted()) finish(slot, FinishReason::length);
    return true;
}

int32_t Scheduler::place(Slot& slot, const Active& a) {
    // Reuse the longest cached prefix, from this slot or the prefix cache, but evaluate at least
    // the last prompt token to get its logits. The slot's cells may keep less than they share
    // with the prompt: a sliding-window layer's ring no longer holding the window before that
    // point, or a recurrent state that returns only to its checkpoint (the previous whole
    // prompt); a cache entry of such a model resumes only at its end. At worst nothing is reused.
    // A preempted request that was generating feeds its next token after the replay: all of the
    // replay may come from the caches. A prefix never ends inside a picture: its tokens are
    // evaluated together (a replay begins with the prompt, so its pictures sit where they did).
    const bool replay = a.next_token >= 0;
    const std::vector<int32_t>& prompt = replay ? a.replay : a.request.prompt;
    const PromptMedia* media = a.request.media.get();
    const auto limit = static_cast<int32_t>(media_floor(media, prompt.size() - (replay ? 0 : 1)));
    model::SequenceCache& cache = context_.cache();
    // The pool's room for the whole prompt, where idle slots' cells can give it: what a restore
    // copies and the prefill after it need it anyway.
    make_room(cache.growth(slot.id, static_cast<int32_t>(prompt.size()) + 1), &slot, false);
    // A prefix computed with other adapters has other keys and values. The slot's full layers
    // hold the cells of the `held` tokens it shares with the prompt even where its ring or
    // recurrent state cannot go back to them (reuse).
    const bool same_adapters = context_.adapters(slot.id) == a.adapters;
    int32_t held = 0, reuse = 0;
    if (same_adapters) {
        held = static_cast<int32_t>(media_floor(
            media,
            std::min<size_t>(common_prefix(slot.cached, prompt), static_cast<size_t>(limit))));
        reuse = cache.longest_keepable(slot.id, held);
    }
    Resume hit;
    if (reuse < limit) hit = find_resume(prompt, a.adapters, limit, held);
    // A restore beyond the pool's room is not taken: the prompt is evaluated as it gets cells.
    const bool from_cache = hit.entry && hit.length > reuse &&
                            cache.growth(slot.id, hit.length) <= cache.pool_room() - step_taken_;
    // The slot's cells that stay: a restore writes from min(held, its length) on. What is lost
    // beyond them (and beyond what the cache has already) is copied into the cache.
    const int32_t kept = from_cache ? std::min(held, hit.length) : reuse;
    std::optional<SlotCopy> lost;
    if (static_cast<int64_t>(slot.cached.size()) - kept >= prefix_cache_.block_tokens()) {
        lost = snapshot_slot(slot, std::max(kept, slot.in_cache));
    }
    context_.set_adapters(slot.id, a.adapters);
    if (from_cache) {
        // The cells before the entry's base: the slot's own, then each supplier's after them.
        int32_t have = kept;
        for (size_t i = 0; i < hit.suppliers.size(); ++i) {
            const PrefixCache::Entry* next =
                i + 1 < hit.suppliers.size() ? hit.suppliers[i + 1] : hit.entry;
            const int32_t to = next->snapshot.base;
            if (to > have) cache.restore_cells(slot.id, hit.suppliers[i]->snapshot, have, to);
            have = std::max(have, to);
            prefix_cache_.touch(hit.suppliers[i]);
        }
        cache.restore(slot.id, hit.entry->snapshot, hit.length, have);
        slot.cached.assign(prompt.begin(), prompt.begin() + hit.length);
        // The cache has all of it only if the entry needed none of the slot's own cells.
        slot.in_cache =
            base_cells(*hit.entry, 0, nullptr) ? hit.length : std::min(slot.in_cache, held);
        reuse = hit.length;
        (hit.entry->origin == CacheTier::disk ? stats_.cached_tokens_disk
                                              : stats_.cached_tokens_ram) +=
            static_cast<uint64_t>(reuse);
    } else {
        cache.truncate(slot.id, reuse);
        slot.cached.resize(static_cast<size_t>(reuse));
        slot.in_cache = std::min(slot.in_cache, reuse);
        stats_.cached_tokens_slot += static_cast<uint64_t>(reuse);
    }
    stats_.prompt_tokens_looked_up += prompt.size();
    keep(std::move(lost));
    return reuse;
}

Scheduler::Slot* Scheduler::youngest(const Slot* than) {
    Slot* found = nullptr;
    for (Slot& s : slots_) {
        if (!s.active || &s == than) continue;
        if (than && s.active->submitted <= than->active->submitted) continue;
        if (!found || s.active->submitted > found->active->submitted) found = &s;
    }
    return found;
}

bool Scheduler::make_room(int64_t cells, const Slot* for_slot, bool may_preempt) {
    model::SequenceCache& cache = context_.cache();
    auto enough = [&] { return cache.pool_room() - step_taken_ >= cells; };
    if (enough()) return true;
    for (const Slot& s : slots_) cache.release(s.id);
    if (enough()) return true;
    // Idle slots' prefixes: kept in the prefix cache (while its budget holds them), their cells
    // freed; the longest first, which frees the most for one copy.
    std::vector<Slot*> idle;
    for (Slot& s : slots_) {
        if (!s.active && &s != for_slot && cache.held(s.id) > 0) idle.push_back(&s);
    }
    std::sort(idle.begin(), idle.end(),
              [&](const Slot* x, const Slot* y) { return cache.held(x->id) > cache.held(y->id); });
    for (Slot* s : idle) {
        keep_prefix(*s);
        cache.clear(s->id);
        s->cached.clear();
        s->in_cache = 0;
        if (enough()) return true;
    }
    if (!may_preempt) return false;
    while (!enough()) {
        Slot* victim = youngest(for_slot);
        if (!victim) return false;
        preempt(*victim);
    }
    return true;
}

void Scheduler::preempt(Slot& slot) {
    Active a = std::move(*slot.active);
    slot.active.reset();
    --stats_.busy_slots;
    ++stats_.preemptions;
    a.draft.clear();
    // A request preempted again while replaying keeps its whole replay; one that was still
    // evaluating its prompt starts over from the prompt (place() finds what the caches hold).
    if (a.next_token >= 0 && slot.cached.size() >= a.replay.size()) a.replay = slot.cached;
    a.replay_done = 0;
    if (a.next_token < 0) a.prompt_done = 0;
    keep_prefix(slot);
    context_.cache().clear(slot.id);
    slot.cached.clear();
    slot.in_cache = 0;
    spdlog::debug("KV pool full: request submitted {} preempted ({} tokens to resume)",
                  a.submitted.time_since_epoch().count(),
                  a.next_token >= 0 ? a.replay.size() : a.request.prompt.size());
    const auto at = std::find_if(preempted_.begin(), preempted_.end(),
                                 [&](const Active& p) { return p.submitted > a.submitted; });
    preempted_.insert(at, std::move(a));
}

void Scheduler::resume_preempted() {
    for (auto it = preempted_.begin(); it != preempted_.end();) {
        if (it->request.sink->cancelled()) {
            it->request.sink->on_finish(FinishReason::cancelled, it->usage, {});
            it = preempted_.erase(it);
        } else {
            ++it;
        }
    }
    while (!preempted_.empty()) {
        Active& a = preempted_.front();
        Slot* slot = nullptr;
        for (Slot& s : slots_) {
            if (!s.active) slot = &s;
        }
        if (!slot) return;
        // Room for all of its tokens and the next: otherwise it would only be preempted again.
        const bool replay = a.next_token >= 0;
        const auto tokens =
            static_cast<int64_t>(replay ? a.replay.size() : a.request.prompt.size()) + 1;
        if (!make_room(tokens, nullptr, false)) return;
        const int32_t reuse = place(*slot, a);
        (replay ? a.replay_done : a.prompt_done) = static_cast<size_t>(reuse);
        slot->active = std::move(a);
        preempted_.pop_front();
        ++stats_.busy_slots;
    }
}

Scheduler::Resume Scheduler::find_resume(const std::vector<int32_t>& prompt,
                                         const std::vector<model::AdapterUse>& adapters,
                                         int32_t limit, int32_t held) {
    const model::SequenceCache& cache = context_.cache();
    const PrefixCache::Match m = prefix_cache_.find(
        prompt, adapters, limit, [&](const PrefixCache::Entry& e, int32_t shared) {
            const int32_t at = cache.restorable(e.snapshot, shared);
            // A partial entry resumes past its base, with its cells before it to be had.
            return at > e.snapshot.base && base_cells(e, held, nullptr) ? at : 0;
        });
    Resume r;
    if (!m.entry) return r;
    r.entry = m.entry;
    r.length = m.length;
    base_cells(*m.entry, held, &r.suppliers);
    return r;
}

bool Scheduler::base_cells(const PrefixCache::Entry& e, int32_t held,
                           std::vector<const PrefixCache::Entry*>* chain) const {
    // Each supplier is an entry of the same tokens with a smaller base; a few suffice (every
    // overwrite of a slot adds at most one link).
    constexpr int kMaxLinks = 8;
    std::vector<const PrefixCache::Entry*> links;
    for (const PrefixCache::Entry* at = &e; at->snapshot.base > held;) {
        if (static_cast<int>(links.size()) == kMaxLinks) return false;
        const auto before =
            std::span<const int32_t>(at->tokens).first(static_cast<size_t>(at->snapshot.base));
        const PrefixCache::Entry* s = prefix_cache_.supplier(before, e.adapters);
        if (!s || s->snapshot.base >= at->snapshot.base) return false;
        links.push_back(s);
        at = s;
    }
    if (chain) chain->assign(links.rbegin(), links.rend());
    return true;
}

std::optional<Scheduler::SlotCopy> Scheduler::snapshot_slot(const Slot& slot, int32_t base) {
    model::SequenceCache& cache = context_.cache();
    const auto n = static_cast<int32_t>(slot.cached.size());
    // A base inside the first block could not be found again by the hash chain: copy it all.
    base = base < prefix_cache_.block_tokens() ? 0 : std::min(base, n);
    if (!prefix_cache_.enabled() || n == 0 || cache.length(slot.id) != n ||
        !cache.can_snapshot(slot.id, n)) {
        return std::nullopt;
    }
    const size_t bytes = cache.snapshot_bytes(n, base);
    if (!prefix_cache_.worth_keeping(slot.cached.size(), bytes) ||
        !snapshot_cost_.worth(n - base, bytes)) {
        return std::nullopt;
    }
    const std::vector<model::AdapterUse>& adapters = context_.adapters(slot.id);
    const bool every_prefix = cache.keeps_every_prefix();
    if (prefix_cache_.covers(slot.cached, adapters, every_prefix, base)) return std::nullopt;
    try {
        return SlotCopy{slot.cached, adapters, cache.snapshot(slot.id, n, base), every_prefix};
    } catch (const std::bad_alloc&) {
        spdlog::warn("prefix cache: no memory for a snapshot of {} tokens; not kept", n);
        return std::nullopt;
    }
}

bool Scheduler::keep(std::optional<SlotCopy> copy) {
    if (!copy) return false;
    const PrefixCache::Entry* e =
        prefix_cache_.insert(std::move(copy->tokens), std::move(copy->adapters),
                             std::move(copy->snapshot), copy->every_prefix);
    // Only whole snapshots go to disk: a partial one's first cells live in this run alone.
    if (e && store_ && e->adapters.empty() && e->snapshot.base == 0) {
        disk_bytes_ += store_->write(e->tokens, e->snapshot);
    }
    publish_cache_stats();
    return e != nullptr;
}

void Scheduler::keep_prefix(Slot& slot) {
    const model::SequenceCache& cache = context_.cache();
    const auto n = static_cast<int32_t>(slot.cached.size());
    if (slot.in_cache >= n) return;
    // Covered already: nothing to copy.
    if (prefix_cache_.enabled() &&
        prefix_cache_.covers(slot.cached, context_.adapters(slot.id), cache.keeps_every_prefix(),
                             slot.in_cache)) {
        slot.in_cache = n;
        return;
    }
    if (keep(snapshot_slot(slot, slot.in_cache))) slot.in_cache = n;
}

namespace {

// Bytes of an entry's file (PrefixStore's layout: header, tokens, snapshot, checksum).
uint64_t file_bytes(const PrefixCache::Entry& e) {
    return 32 + e.tokens.size() * sizeof(int32_t) + e.snapshot.size + 8;
}

}  // namespace

void Scheduler::open_store() {
    if (params_.cache_dir.empty() || !prefix_cache_.enabled()) return;
    try {
        store_.emplace(params_.cache_dir, PrefixStore::key_of(model_->file(), params_.kv_types));
    } catch (const std::exception& e) {
        spdlog::warn("prefix cache: cannot use --cache-dir {}: {}", params_.cache_dir, e.what());
        return;
    }
    prefix_cache_.on_erase = [this](const PrefixCache::Entry& e) {
        if (!e.adapters.empty() || e.snapshot.base != 0) return;  // never written
        store_->remove(e.tokens);
        disk_bytes_ -= std::min(disk_bytes_, file_bytes(e));
    };
    const model::SequenceCache& cache = context_.cache();
    const bool every_prefix = cache.keeps_every_prefix();
    const size_t loaded = store_->load(
        [&](int32_t n) { return n <= n_ctx_ ? cache.snapshot_bytes(n) : 0; },
        [&](std::vector<int32_t> tokens, model::SequenceSnapshot snap) {
            // Newest first: what no longer fits the budget is an older run's and goes.
            if (prefix_cache_.bytes() + snap.size > prefix_cache_.budget()) {
                store_->remove(tokens);
                return true;
            }
            if (const PrefixCache::Entry* e = prefix_cache_.insert(
                    std::move(tokens), {}, std::move(snap), every_prefix, CacheTier::disk)) {
                disk_bytes_ += file_bytes(*e);
            }
            return true;
        });
    if (loaded > 0) {
        spdlog::info("prefix cache: {} prompt prefixes ({} bytes) read from {}",
                     prefix_cache_.size(), prefix_cache_.bytes(), store_->folder().string());
    }
    publish_cache_stats();
}

void Scheduler::publish_cache_stats() {
    stats_.cache_disk_bytes = disk_bytes_;
    stats_.cache_ram_bytes = prefix_cache_.bytes();
    stats_.cache_entries = prefix_cache_.size();
    stats_.cache_evictions = prefix_cache_.evictions();
}

void Scheduler::drop_cancelled() {
    for (Slot& s : slots_) {
        if (s.active && s.active->request.sink->cancelled()) finish(s, FinishReason::cancelled);
    }
}

void Scheduler::finish(Slot& slot, FinishReason reason, const std::string& error) {
    Active& a = *slot.active;
    if (reason != FinishReason::error && a.stop && !a.stop->finished()) {
        // Whatever was held back (a possible stop-string start, half a character) is shown now.
        std::string tail = a.stop->finish();
        if (a.decoder) tail += a.decoder->flush();
        if (!tail.empty() && reason != FinishReason::cancelled)
            a.request.sink->on_token(TokenEvent{tail, -1, {}});
    }
    // Release the slot before telling the client, so whoever reacts to the finish sees it free.
    if (a.first_token_sent)
        a.usage.generation_s =
            std::chrono::duration<double>(Clock::now() - a.first_token_at).count();
    const std::shared_ptr<GenerationSink> sink = a.request.sink;
    const Usage usage = a.usage;
    slot.active.reset();
    --stats_.busy_slots;
    sink->on_finish(reason, usage, error);
}

void Scheduler::step() {
    batch_.clear();
    struct Row {
        Slot* slot;
        size_t batch_index;
        size_t rows;  // 1, or 1 + the draft of a drafting slot
    };
    std::vector<Row> wants_logits;
    std::vector<std::pair<Slot*, size_t>> fed;  // slot and how many tokens it feeds this step

    model::SequenceCache& cache = context_.cache();
    step_taken_ = 0;
    // The oldest prompt that got no cells last step gets those of the youngest request now, so
    // that the pool never holds requests that all wait for each other.
    if (starved_ && starved_->active) {
        if (Slot* victim = youngest(starved_)) preempt(*victim);
    }
    starved_ = nullptr;
    // A generating slot decodes once a preempted request's replay is back in its cells.
    auto decoding = [](const Slot& s) {
        return s.active && s.active->next_token >= 0 &&
               s.active->replay_done >= s.active->replay.size();
    };
    // The pool's cells for every decode token, oldest request first: where the pool is short,
    // the youngest requests are preempted, the one short of room itself when it is the youngest.
    std::vector<Slot*> by_age;
    for (Slot& s : slots_) {
        if (s.active) by_age.push_back(&s);
    }
    std::sort(by_age.begin(), by_age.end(), [](const Slot* x, const Slot* y) {
        return x->active->submitted < y->active->submitted;
    });
    for (Slot* s : by_age) {
        if (!decoding(*s)) continue;  // preempted meanwhile, or still in its prompt
        const int64_t need = cache.growth(s->id, cache.length(s->id) + 1);
        if (!make_room(need, s, true)) {
            preempt(*s);
            continue;
        }
        step_taken_ += need;
    }
    // Decode tokens first: every generating slot advances by one, and a drafting slot brings its
    // draft after it, within what the budget leaves beside the other slots' decode tokens. A
    // draft source's drafts are made for all its sequences at once (a draft model's batch).
    int draft_room = params_.batch_size;
    for (const Slot& s : slots_) draft_room -= decoding(s) ? 1 : 0;
    std::vector<std::pair<Slot*, int32_t>> decoders;  // slot and its draft's most tokens
    draft_jobs_.clear();
    for (Slot& s : slots_) {
        if (!decoding(s)) continue;
        Active& a = *s.active;
        const int32_t pos = cache.length(s.id);
        if (pos >= n_ctx_) {
            finish(s, FinishReason::length);
            continue;
        }
        a.draft.clear();
        // A draft takes only cells the pool has free; they are held for it through the step.
        const auto pool_left =
            static_cast<int32_t>(std::min<int64_t>(INT32_MAX, cache.pool_room() - step_taken_));
        const int32_t len = draft_length(s, std::min({draft_room, n_ctx_ - pos - 1, pool_left}));
        step_taken_ += cache.growth(s.id, pos + 1 + len) - cache.growth(s.id, pos + 1);
        if (len > 0) {
            std::vector<int32_t>& history = histories_[static_cast<size_t>(s.id)];
            history.assign(s.cached.begin(), s.cached.end());
            history.push_back(a.next_token);
            if (a.speculative.type == DraftType::model) {
                draft_jobs_.push_back({.slot = s.id,
                                       .history = history,
                                       .max_tokens = len,
                                       .p_min = a.speculative.p_min,
                                       .out = &a.draft});
                draft_room -= len;
            } else {
                ngram_draft(history, a.speculative.ngram, len, a.draft);
                draft_room -= static_cast<int>(a.draft.size());
            }
        }
        decoders.emplace_back(&s, len);
    }
    if (!draft_jobs_.empty()) {
        try {
            params_.draft_source->draft_all(draft_jobs_);
        } catch (const std::exception& e) {
            // Drafts are guesses: without them the step decodes as it would anyway.
            spdlog::warn("drafting failed: {}", e.what());
            for (const DraftJob& j : draft_jobs_) j.out->clear();
        }
        // A source that ran and proposed nothing (a draft model unsure of its first token) cost
        // its evaluation all the same: the policy counts it as a rejected draft, so a draft
        // model that never gets past p_min pauses as one that is never accepted does.
        for (const DraftJob& j : draft_jobs_) {
            if (j.out->empty())
                slots_[static_cast<size_t>(j.slot)].active->draft_policy.record(1, 0);
        }
    }
    for (auto [slot, len] : decoders) {
        Slot& s = *slot;
        Active& a = *s.active;
        const int32_t pos = context_.cache().length(s.id);
        trim_draft(s, len);
        wants_logits.push_back({&s, batch_.size(), 1 + a.draft.size()});
        batch_.push_back({s.id, a.next_token, pos, true});
        for (size_t i = 0; i < a.draft.size(); ++i) {
            batch_.push_back({s.id, a.draft[i], pos + 1 + static_cast<int32_t>(i), true});
        }
        if (a.rope_shift != 0) {
            for (size_t i = batch_.size() - 1 - a.draft.size(); i < batch_.size(); ++i) {
                const int32_t r = batch_[i].pos - a.rope_shift;
                batch_[i].rope = {r, r, r};
            }
        }
        fed.emplace_back(&s, 1 + a.draft.size());
    }
    // Then embedding inputs and prompt chunks (and preempted requests' replays) within what is
    // left of the budget and of the pool. A prompt short of cells waits for them (its request
    // is the one that takes them when it is the oldest: see `starved`).
    int budget = params_.batch_size - static_cast<int>(batch_.size());
    add_embedding_inputs(budget);
    Slot* starved = nullptr;  // the oldest prompt that got no cells
    bool first_chunk = true;
    for (Slot& s : slots_) {
        if (budget <= 0) break;
        if (!s.active || decoding(s)) continue;
        Active& a = *s.active;
        const bool replay = a.next_token >= 0;
        const std::vector<int32_t>& tokens = replay ? a.replay : a.request.prompt;
        const size_t done = replay ? a.replay_done : a.prompt_done;
        size_t take = std::min(tokens.size() - done, static_cast<size_t>(budget));
        PromptMedia* media = a.request.media.get();
        const MediaSpan* span = span_at(media, done);
        // A chunk ends at the next checkpoint of a sequence that cannot keep every prefix.
        if (checkpoints_ && !replay && !span) {
            const auto every = static_cast<size_t>(params_.checkpoint_interval);
            take = std::min(take, every - a.prompt_done % every);
        }
        // A picture is a chunk of its own, whole; text stops before it.
        take = media_take(media, done, take, first_chunk);
        if (take == 0) continue;
        const int32_t base = cache.length(s.id);
        if (!make_room(cache.growth(s.id, base + static_cast<int32_t>(take)), &s, false)) {
            const int64_t room = cache.pool_room() - step_taken_;
            const int64_t fits = int64_t{cache.held(s.id)} - base + room;
            const size_t want = take;
            take = static_cast<size_t>(std::clamp<int64_t>(fits, 0, static_cast<int64_t>(take)));
            if (span && take < want) take = 0;  // a picture is never split
            if (take == 0) {
                if (!starved || a.submitted < starved->active->submitted) starved = &s;
                continue;
            }
        }
        const float* rows = nullptr;
        if (span) {
            try {
                rows =
                    media->rows(static_cast<size_t>(span - media->spans.data()), context_.pool());
            } catch (const std::exception& e) {
                finish(s, FinishReason::error, e.what());
                continue;
            }
        }
        first_chunk = false;
        step_taken_ += cache.growth(s.id, base + static_cast<int32_t>(take));
        const int32_t shift = rope_shift(media, done);
        for (size_t i = 0; i < take; ++i) {
            const bool last = !replay && done + i + 1 == tokens.size();
            if (last) wants_logits.push_back({&s, batch_.size(), 1});
            const int32_t pos = base + static_cast<int32_t>(i);
            model::BatchToken t{s.id, tokens[done + i], pos, last};
            if (rows) {
                t.token = 0;
                t.embd = rows + static_cast<int64_t>(i) * media->row_width;
                t.non_causal = span->non_causal;
                if (!span->rope.empty()) {
                    // The picture's rotary positions start at its first cell's.
                    const std::array<int32_t, 3>& r = span->rope[i];
                    t.rope = {r[0] + base - shift, r[1] + base - shift, r[2] + base - shift};
                }
            } else if (shift != 0) {
                t.rope = {pos - shift, pos - shift, pos - shift};
            }
            batch_.push_back(t);
        }
        fed.emplace_back(&s, take);
        budget -= static_cast<int>(take);
    }
    starved_ = starved;
    if (batch_.empty()) return;

    try {
        if (embed_inputs_.empty()) {
            context_.eval(batch_, logits_);
        } else {
            context_.eval_pooled(batch_,
                                 {.seqs = embed_seqs_,
                                  .pooling = embed_inputs_.front().job->request.pooling,
                                  .out = &pooled_},
                                 logits_);
        }
    } catch (const std::exception& e) {
        spdlog::error("engine step failed: {}", e.what());
        finish_embedding_inputs(e.what());
        for (auto& [slot, n] : fed) {
            context_.cache().clear(slot->id);
            slot->cached.clear();
            if (slot->active) finish(*slot, FinishReason::error, e.what());
        }
        return;
    }
    ++stats_.steps;
    stats_.last_batch_tokens = static_cast<int>(batch_.size());
    if (params_.observer) params_.observer->on_step(static_cast<int>(batch_.size()));
    finish_embedding_inputs({});

    // Record what each slot's cells now hold.
    size_t cursor = 0;
    for (auto& [slot, n] : fed) {
        Active& a = *slot->active;
        // A picture's tokens are kept as their placeholders, which tell pictures apart.
        const bool replaying = a.replay_done < a.replay.size();
        const std::vector<int32_t>& source = replaying ? a.replay : a.request.prompt;
        const size_t from = replaying ? a.replay_done : a.prompt_done;
        for (size_t i = 0; i < n; ++i) {
            const model::BatchToken& t = batch_[cursor + i];
            slot->cached.push_back(t.embd ? source[from + i] : t.token);
        }
        if (replaying) {
            a.replay_done += n;
            if (a.replay_done == a.replay.size()) {
                a.replay.clear();
                a.replay_done = 0;
            }
        } else if (a.next_token < 0) {
            a.prompt_done += n;
            stats_.prompt_tokens += n;
            // A recurrent state can come back to this point for a prompt that continues this
            // one (a KV cache keeps every prefix anyway). A sequence that cannot keep every
            // prefix also leaves a snapshot in the prefix cache at its prompt's end and every
            // checkpoint_interval tokens of it, for later prompts sharing that much.
            const bool prompt_end = a.prompt_done == a.request.prompt.size();
            if (prompt_end) context_.cache().save_checkpoint(slot->id);
            if (!context_.cache().keeps_every_prefix() &&
                (prompt_end ||
                 (checkpoints_ &&
                  a.prompt_done % static_cast<size_t>(params_.checkpoint_interval) == 0))) {
                keep_prefix(*slot);
            }
        }
        cursor += n;
    }
    // Logit rows come back in batch order of the tokens that asked for them.
    std::sort(wants_logits.begin(), wants_logits.end(),
              [](const Row& x, const Row& y) { return x.batch_index < y.batch_index; });
    const size_t V = static_cast<size_t>(context_.n_vocab());
    size_t r = 0;
    for (const Row& row : wants_logits) {
        Slot& s = *row.slot;
        const std::span<const float> rows(logits_.data() + r * V, row.rows * V);
        r += row.rows;
        if (!s.active) continue;
        try {
            verify_draft(s, rows);
        } catch (const std::exception& e) {
            // A sampler that cannot choose (no token allowed, a grammar past its limits) ends
            // its request; the others go on.
            if (s.active) finish(s, FinishReason::error, e.what());
        }
    }
}

int32_t Scheduler::draft_length(Slot& slot, int32_t room) {
    Active& a = *slot.active;
    const SpeculativeParams& sp = a.speculative;
    // A recurrent state cannot be cut back to the accepted prefix (only to its checkpoint, and
    // the accepted tokens would then be evaluated again): recurrent and hybrid models do not
    // draft.
    if (sp.type == DraftType::none || sp.n_max <= 0 || context_.cache().recurrent()) return 0;
    if (sp.type == DraftType::model && !params_.draft_source) return 0;
    // The step gives at most 1 + draft tokens: none beyond max_tokens, nor beyond what one step
    // may add to a sequence (a sliding-window ring).
    int32_t len = std::min(room, context_.cache().max_tokens_per_step() - 1);
    if (a.request.stop.max_tokens >= 0)
        len = std::min(len, a.request.stop.max_tokens - a.usage.completion_tokens - 1);
    if (len < std::max(1, sp.n_min)) return 0;
    len = std::min(len, a.draft_policy.next_length());
    if (len < std::max(1, sp.n_min) || a.sampler->forcing_reasoning_end()) return 0;
    return len;
}

void Scheduler::trim_draft(Slot& slot, int32_t len) {
    Active& a = *slot.active;
    if (a.draft.size() > static_cast<size_t>(len)) a.draft.resize(static_cast<size_t>(len));
    const auto bad = std::find_if(a.draft.begin(), a.draft.end(),
                                  [&](int32_t t) { return t < 0 || t >= context_.n_vocab(); });
    a.draft.erase(bad, a.draft.end());
    // A first token the grammar forbids would be rejected: not worth its place in the batch.
    if (!a.draft.empty() && !a.sampler->grammar_allows(a.draft.front())) a.draft.clear();
    if (a.draft.size() < static_cast<size_t>(a.speculative.n_min)) a.draft.clear();
}

// Verification samples each position with the request's own sampler, exactly as generation
// without a draft would (the same chain, state and random draws), and keeps the draft's next
// token while it is the token sampled. For a draft that proposes one token with certainty (the
// lookup, a greedy draft model) this is the standard rejection rule: the draft token is kept
// with probability p(token), and otherwise the token drawn is one from p without it,
// renormalized: the residual distribution. So the output is the one generation without a draft
// gives, token for token with the same seed, and in distribution whatever the seed.
void Scheduler::verify_draft(Slot& slot, std::span<const float> rows) {
    Active& a = *slot.active;
    const size_t V = static_cast<size_t>(context_.n_vocab());
    const size_t drafted = a.draft.size();
    const int32_t fed_end = context_.cache().length(slot.id);
    a.usage.draft_tokens += static_cast<int32_t>(drafted);
    stats_.draft_tokens += drafted;
    size_t accepted = 0;
    // The cache keeps the tokens whose successors were sampled: the fed token and the draft's
    // accepted prefix. What follows the first rejection is cut away.
    auto cut = [&] {
        const int32_t keep = fed_end - static_cast<int32_t>(drafted - accepted);
        if (keep < fed_end) {
            context_.cache().truncate(slot.id, keep);
            slot.cached.resize(static_cast<size_t>(keep));
        }
    };
    try {
        for (size_t j = 0;; ++j) {
            handle_logits(slot, rows.subspan(j * V, V));
            if (!slot.active || j == drafted || a.next_token != a.draft[j]) break;
            ++accepted;
            ++a.usage.draft_accepted;
            ++stats_.draft_accepted;
        }
    } catch (...) {
        cut();
        throw;
    }
    cut();
    if (!slot.active) return;
    if (drafted > 0)
        a.draft_policy.record(static_cast<int32_t>(drafted), static_cast<int32_t>(accepted));
    if (context_.cache().length(slot.id) >= n_ctx_) finish(slot, FinishReason::length);
}

void Scheduler::handle_logits(Slot& slot, std::span<const float> logits) {
    Active& a = *slot.active;
    const int32_t token = a.sampler->sample(logits);
    TokenEvent event;
    event.token = token;
    if (a.request.sampling.top_logprobs >= 0) {
        for (const sampling::Logprob& lp : a.sampler->logprobs(logits, token)) {
            event.logprobs.push_back({lp.token, tokenizer_->token_to_piece(lp.token), lp.logprob});
        }
    }
    a.sampler->accept(token);
    ++stats_.generated_tokens;
    ++a.usage.completion_tokens;
    const Clock::time_point now = Clock::now();
    if (!a.first_token_sent) {
        a.first_token_sent = true;
        a.usage.time_to_first_token_s = std::chrono::duration<double>(now - a.submitted).count();
        a.usage.prompt_s = std::chrono::duration<double>(now - a.started).count();
        a.first_token_at = now;
    } else if (params_.observer) {
        params_.observer->on_token_interval(
            std::chrono::duration<double>(now - a.last_token_at).count());
    }
    a.last_token_at = now;

    std::string text;
    if (!a.stop->ends_generation(token)) text = a.decoder->push(token);
    const sampling::StopChecker::Step step = a.stop->on_token(token, text);
    event.text = step.text;
    if (step.finished()) {
        if (step.reason == sampling::StopReason::end_of_generation) --a.usage.completion_tokens;
        if (step.reason == sampling::StopReason::max_tokens) event.text += a.decoder->flush();
        if (step.reason == sampling::StopReason::stop_string)
            a.usage.stop_string = step.stop_string;
        if (!event.text.empty() || !event.logprobs.empty()) a.request.sink->on_token(event);
        finish(slot, step.reason == sampling::StopReason::max_tokens ? FinishReason::length
                                                                     : FinishReason::stop);
        return;
    }
    a.request.sink->on_token(event);
    a.next_token = token;
}

// --- embeddings ---

void Scheduler::add_embedding_inputs(int& budget) {
    embed_inputs_.clear();
    embed_seqs_.clear();
    // Cancelled jobs leave first; a job whose inputs all have slots waits for its rows.
    for (auto it = embed_jobs_.begin(); it != embed_jobs_.end();) {
        if (it->request.sink->cancelled()) {
            it->request.sink->on_finish({}, FinishReason::cancelled, {});
            it = embed_jobs_.erase(it);
        } else {
            ++it;
        }
    }
    // One step pools one way: inputs are taken in order while their jobs agree with the first.
    std::vector<Slot*> free;
    for (Slot& s : slots_) {
        if (!s.active) free.push_back(&s);
    }
    // Slots without a cached prefix first, so generation keeps the prefixes it may reuse.
    std::stable_sort(free.begin(), free.end(), [](const Slot* a, const Slot* b) {
        return a->cached.size() < b->cached.size();
    });
    size_t next_free = 0;
    for (EmbedJob& job : embed_jobs_) {
        if (!embed_inputs_.empty() &&
            job.request.pooling != embed_inputs_.front().job->request.pooling) {
            break;
        }
        while (job.next_input < job.request.inputs.size() && next_free < free.size()) {
            const std::vector<int32_t>& ids = job.request.inputs[job.next_input];
            // An input longer than the budget goes alone, so that it is never left waiting.
            if (!embed_inputs_.empty() && static_cast<int>(ids.size()) > budget) return;
            // Its cells come from the pool: it waits when the pool is short.
            const auto cells = static_cast<int64_t>(ids.size());
            if (!make_room(cells, free[next_free], false)) return;
            step_taken_ += cells;
            Slot& slot = *free[next_free++];
            keep_prefix(slot);
            context_.cache().clear(slot.id);
            context_.set_adapters(slot.id, {});  // embeddings are the base model's
            slot.cached.clear();
            for (size_t p = 0; p < ids.size(); ++p) {
                batch_.push_back({slot.id, ids[p], static_cast<int32_t>(p), false});
            }
            embed_inputs_.push_back({&job, &slot});
            embed_seqs_.push_back(slot.id);
            budget -= static_cast<int>(ids.size());
            ++job.next_input;
        }
        if (next_free == free.size()) return;
    }
}

void Scheduler::finish_embedding_inputs(const std::string& error) {
    if (embed_inputs_.empty()) return;
    const model::Pooling pooling = embed_inputs_.front().job->request.pooling;
    const size_t width = static_cast<size_t>(context_.embedding_width(pooling));
    size_t row = 0;  // into pooled_, in rows of width
    for (const EmbedInput& in : embed_inputs_) {
        EmbedJob& job = *in.job;
        const int32_t tokens = context_.cache().length(in.slot->id);
        context_.cache().clear(in.slot->id);
        if (!error.empty()) {
            job.failed = true;
            continue;
        }
        // Pooling::none gives a row per token.
        const size_t rows = pooling == model::Pooling::none ? static_cast<size_t>(tokens) : 1;
        const float* begin = pooled_.data() + row * width;
        job.result.rows.insert(job.result.rows.end(), begin, begin + rows * width);
        job.result.width = static_cast<int64_t>(width);
        job.result.prompt_tokens += tokens;
        row += rows;
        ++stats_.embedded_inputs;
        stats_.embedded_tokens += static_cast<uint64_t>(tokens);
    }
    embed_inputs_.clear();
    embed_seqs_.clear();
    // Every input given a slot is done after its step: a job whose inputs all had one is
    // complete. A failed job ends at once, its other inputs unevaluated.
    for (auto it = embed_jobs_.begin(); it != embed_jobs_.end();) {
        if (it->failed) {
            it->request.sink->on_finish({}, FinishReason::error, error);
        } else if (it->next_input == it->request.inputs.size()) {
            it->request.sink->on_finish(std::move(it->result), FinishReason::stop, {});
        } else {
            ++it;
            continue;
        }
        it = embed_jobs_.erase(it);
    }
}

void Scheduler::end_embed_jobs(FinishReason reason, const std::string& error) {
    std::deque<EmbedJob> jobs;
    jobs.swap(embed_jobs_);
    for (EmbedJob& job : jobs) job.request.sink->on_finish({}, reason, error);
}

}  // namespace ggufd::scheduler
