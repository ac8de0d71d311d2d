#include "engine/model/context.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

#include "engine/kernels/formats.h"
#include "engine/kernels/ops.h"

namespace ggufd::model {
namespace {

constexpr int kDefaultContextCap = 4096;

// A thread count asked for, `fallback` for 0.
int thread_count(int requested, int fallback, const char* what) {
    if (requested < 0) {
        throw std::invalid_argument(std::string("Context: negative ") + what);
    }
    return requested == 0 ? fallback : requested;
}

}  // namespace

int default_context_size(const HParams& hp, int requested, int64_t pool_cells) {
    if (requested > 0) return requested;
    const int train = hp.n_ctx_train > 0
                          ? static_cast<int>(std::min<uint32_t>(hp.n_ctx_train, 1u << 30))
                          : kDefaultContextCap;
    if (pool_cells > 0) return static_cast<int>(std::min<int64_t>(train, pool_cells));
    return std::min(train, kDefaultContextCap);
}

Context::Context(std::shared_ptr<const Model> model, const ContextParams& params)
    : model_(std::move(model)),
      threads_(thread_count(params.n_threads, kernels::physical_core_count(), "n_threads")),
      threads_batch_(thread_count(params.n_threads_batch, threads_, "n_threads_batch")),
      pool_(std::max(threads_, threads_batch_)),
      cache_(model_->hparams(),
             {.n_seq = params.n_seq,
              .n_ctx = default_context_size(model_->hparams(), params.n_ctx, params.kv_pool_cells),
              .kv_types = params.kv_type,
              .swa_batch = params.swa_batch,
              .pool_cells = params.kv_pool_cells}),
      kv_(cache_.kv()),
      seq_adapters_(static_cast<size_t>(cache_.n_seq())),
      ops_(*model_, pool_) {
    // LongRoPE's long factors serve a context beyond the original one, as llama.cpp decides by
    // its context size (Hugging Face decides per sequence length, which would change a
    // sequence's earlier keys as it grows).
    const Weights& w = model_->weights();
    const bool long_context =
        static_cast<uint32_t>(cache_.n_ctx()) > model_->hparams().rope_n_ctx_orig;
    const float* rope_factors = nullptr;
    if (w.rope_factors_long) {
        rope_factors =
            model_->vector_weight(long_context ? w.rope_factors_long : w.rope_factors_short);
    } else if (w.rope_freqs) {
        rope_factors = model_->vector_weight(w.rope_freqs);
    }
    blocks_ = build_blocks({.model = *model_,
                            .ops = ops_,
                            .cache = cache_,
                            .scratch = block_scratch_,
                            .rope_factors = rope_factors,
                            .f16_accumulator = params.f16_accumulator});
}

KvCache& Context::kv() {
    return const_cast<KvCache&>(std::as_const(*this).kv());
}

const KvCache& Context::kv() const {
    if (!kv_) throw std::logic_error("this model has no attention blocks, hence no KV cache");
    return *kv_;
}

void Context::validate(std::span<const BatchToken> batch) const {
    const int32_t n_vocab = this->n_vocab();
    std::vector<int32_t> next(static_cast<size_t>(cache_.n_seq()));
    for (int s = 0; s < cache_.n_seq(); ++s) next[static_cast<size_t>(s)] = cache_.length(s);
    for (size_t i = 0; i < batch.size(); ++i) {
        const BatchToken& t = batch[i];
        const std::string at = "batch token " + std::to_string(i) + ": ";
        if (t.seq < 0 || t.seq >= cache_.n_seq()) {
            throw std::invalid_argument(at + "sequence " + std::to_string(t.seq) +
                                        " does not exist");
        }
        if (!t.embd && (t.token < 0 || t.token >= n_vocab)) {
            throw std::invalid_argument(at + "token id " + std::to_string(t.token) +
                                        " is outside the vocabulary (" + std::to_string(n_vocab) +
                                        ")");
        }
        if (t.logits && !model_->weights().output) {
            throw std::invalid_argument(at +
                                        "the model has no vocabulary head (an encoder): it "
                                        "gives embeddings, not logits");
        }
        int32_t& expect = next[static_cast<size_t>(t.seq)];
        if (t.pos != expect) {
            throw std::invalid_argument(at + "position " + std::to_string(t.pos) +
                                        " does not continue sequence " + std::to_string(t.seq) +
                                        " (next position " + std::to_string(expect) + ")");
        }
        if (const gguf::TensorInfo* pe = model_->weights().pos_embd; pe && t.pos >= pe->ne[1]) {
            throw std::invalid_argument(at + "position " + std::to_string(t.pos) +
                                        " is beyond the model's learned positions (" +
                                        std::to_string(pe->ne[1]) + ")");
        }
        if (expect >= cache_.n_ctx()) {
            throw std::invalid_argument(at + "sequence " + std::to_string(t.seq) +
                                        " is full (context " + std::to_string(cache_.n_ctx()) +
                                        ")");
        }
        ++expect;
    }
    int64_t growth = 0;
    for (int s = 0; s < cache_.n_seq(); ++s)
        growth += cache_.growth(s, next[static_cast<size_t>(s)]);
    if (growth > cache_.pool_room()) {
        throw std::length_error("the batch needs " + std::to_string(growth) +
                                " more KV cells; the pool has " +
                                std::to_string(cache_.pool_room()) + " of " +
                                std::to_string(cache_.pool_cells()) + " free");
    }
}

// --- LoRA adapters ---

void Context::set_adapters(int32_t seq, std::vector<AdapterUse> adapters) {
    if (seq < 0 || seq >= cache_.n_seq()) {
        throw std::invalid_argument("sequence " + std::to_string(seq) + " does not exist");
    }
    for (const AdapterUse& u : adapters) {
        if (!u.adapter || &u.adapter->base() != model_.get()) {
            throw std::invalid_argument("a LoRA adapter of another model");
        }
        if (!std::isfinite(u.scale)) {
            throw std::invalid_argument("a LoRA adapter's scale is not a finite number");
        }
        if (std::count_if(adapters.begin(), adapters.end(),
                          [&](const AdapterUse& o) { return o.adapter == u.adapter; }) > 1) {
            throw std::invalid_argument("a LoRA adapter is listed twice");
        }
    }
    std::erase_if(adapters, [](const AdapterUse& u) { return u.scale == 0.0f; });
    std::vector<AdapterUse>& current = seq_adapters_[static_cast<size_t>(seq)];
    if (adapters == current) return;
    cache_.clear(seq);
    current = std::move(adapters);
}

const std::vector<AdapterUse>& Context::adapters(int32_t seq) const {
    return seq_adapters_.at(static_cast<size_t>(seq));
}

void Context::prepare_embeddings(float* x, const int32_t* positions, int64_t n) {
    const HParams& hp = model_->hparams();
    const Weights& w = model_->weights();
    if (hp.embd_scale != 1.0f) kernels::scale(x, hp.embd_scale, x, n * hp.n_embd, &pool_);
    // The embedding norm (bloom, the encoders) sees the sum with the positions and types.
    add_positions_and_types(x, positions, n);
    if (w.tok_embd_norm) ops_.norm(w.tok_embd_norm, w.tok_embd_norm_b, x, x, n);
}

void Context::add_positions_and_types(float* x, const int32_t* positions, int64_t n) {
    const Weights& w = model_->weights();
    const int64_t embd = model_->hparams().n_embd;
    float* row = grow(tmp_, static_cast<size_t>(embd));
    if (w.token_types) {
        kernels::kernels_for(w.token_types->type).to_float(w.token_types->data, row, embd);
        for (int64_t i = 0; i < n; ++i) kernels::add(x + i * embd, row, x + i * embd, embd);
    }
    if (!w.pos_embd) return;
    const kernels::FormatKernels& pe = kernels::kernels_for(w.pos_embd->type);
    for (int64_t i = 0; i < n; ++i) {
        pe.to_float(
            w.pos_embd->data + static_cast<uint64_t>(positions[i]) * w.pos_embd->row_bytes(), row,
            embd);
        kernels::add(x + i * embd, row, x + i * embd, embd);
    }
}

void Context::final_softcap(float* logits, int64_t m) {
    const HParams& hp = model_->hparams();
    const float cap = hp.final_softcap;
    if (cap <= 0.0f) return;
    const int64_t vocab = hp.n_vocab;
    // Once per returned row, after the output matrix that costs n_embd times more.
    pool_.parallel_for(m, 1, [&](int64_t r0, int64_t r1, int) {
        for (float* p = logits + r0 * vocab; p < logits + r1 * vocab; ++p) {
            *p = cap * std::tanh(*p / cap);
        }
    });
}

void Context::eval(std::span<const BatchToken> batch, std::vector<float>& logits) {
    logits.clear();
    if (batch.empty()) return;
    validate(batch);
    // A sliding layer's ring takes a bounded number of one sequence's tokens per step: larger
    // batches run as consecutive steps, each with at most that many tokens of any sequence.
    const int32_t limit = cache_.max_tokens_per_step();
    std::vector<int32_t> taken(static_cast<size_t>(cache_.n_seq()), 0);
    std::vector<float> part;
    size_t begin = 0;
    while (begin < batch.size()) {
        std::fill(taken.begin(), taken.end(), 0);
        size_t end = begin;
        while (end < batch.size() && taken[static_cast<size_t>(batch[end].seq)] < limit) {
            ++taken[static_cast<size_t>(batch[end].seq)];
            ++end;
        }
        if (begin == 0 && end == batch.size()) {
            eval_step(batch, logits);
            return;
        }
        eval_step(batch.subspan(begin, end - begin), part);
        logits.insert(logits.end(), part.begin(), part.end());
        begin = end;
    }
}

void Context::eval_step(std::span<const BatchToken> batch_in, std::vector<float>& logits) {
    logits.clear();

    const HParams& hp = model_->hparams();
    const Weights& w = model_->weights();
    const int64_t n = static_cast<int64_t>(batch_in.size());
    const int64_t embd = hp.n_embd;

    // Work in an order where each sequence's tokens are contiguous, as attention wants them.
    std::vector<size_t> order(batch_in.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return batch_in[a].seq < batch_in[b].seq; });
    std::vector<BatchToken> batch(order.size());
    std::vector<int32_t> positions(order.size()), row_seqs(order.size()), tokens(order.size());
    for (size_t i = 0; i < order.size(); ++i) {
        batch[i] = batch_in[order[i]];
        positions[i] = batch[i].pos;
        row_seqs[i] = batch[i].seq;
        tokens[i] = batch[i].token;
    }
    std::vector<SeqGroup> groups;
    for (int64_t i = 0; i < n; ++i) {
        const BatchToken& t = batch[static_cast<size_t>(i)];
        if (groups.empty() || groups.back().seq != t.seq) {
            groups.push_back({t.seq, i, 0, true});
        }
        ++groups.back().count;
        groups.back().non_causal = groups.back().non_causal && t.non_causal;
    }
    // A prompt's chunk (or a pooled batch) runs on --threads-batch threads, a step of single
    // decode tokens on --threads.
    const bool prompt = pooled_ || std::any_of(groups.begin(), groups.end(),
                                               [](const SeqGroup& g) { return g.count > 1; });
    const int step_threads = prompt ? threads_batch_ : threads_;
    if (pool_.size() != step_threads) pool_.set_size(step_threads);

    // Token embeddings: one row of token_embd per token, converted to float.
    float* x = grow(x_, static_cast<size_t>(n * embd));
    const kernels::FormatKernels& emb = kernels::kernels_for(w.tok_embd->type);
    const uint64_t emb_row = w.tok_embd->row_bytes();
    bool inputs = false;
    for (int64_t i = 0; i < n; ++i) {
        const BatchToken& t = batch[static_cast<size_t>(i)];
        inputs = inputs || t.embd;
        emb.to_float(w.tok_embd->data + static_cast<uint64_t>(t.embd ? 0 : t.token) * emb_row,
                     x + i * embd, embd);
    }
    prepare_embeddings(x, positions.data(), n);
    // Input rows replace the prepared embedding: what scales and positions token embeddings is
    // already in them (llama.cpp's batches of embeddings).
    for (int64_t i = 0; inputs && i < n; ++i) {
        const BatchToken& t = batch[static_cast<size_t>(i)];
        if (t.embd) std::copy_n(t.embd, embd, x + i * embd);
    }

    std::vector<std::array<int32_t, 3>> rope;
    std::vector<const float*> input_rows;
    if (inputs) {
        input_rows.resize(batch.size());
        for (size_t i = 0; i < batch.size(); ++i) input_rows[i] = batch[i].embd;
    }
    if (std::any_of(batch.begin(), batch.end(),
                    [](const BatchToken& t) { return t.rope[0] >= 0; })) {
        rope.resize(batch.size());
        for (size_t i = 0; i < batch.size(); ++i) {
            const BatchToken& t = batch[i];
            rope[i] = t.rope[0] >= 0 ? t.rope : std::array<int32_t, 3>{t.pos, t.pos, t.pos};
        }
    }

    const LoraRows lora(row_seqs, seq_adapters_);
    const Step step{.n = n,
                    .positions = positions,
                    .tokens = tokens,
                    .groups = groups,
                    .lora = lora,
                    .rope = rope,
                    .inputs = input_rows,
                    .id = ++steps_};
    for (const std::unique_ptr<Block>& block : blocks_) block->forward(step, x);

    for (const SeqGroup& g : groups) {
        cache_.set_length(g.seq, batch[static_cast<size_t>(g.begin + g.count - 1)].pos + 1);
    }

    if (pooled_) pool_states(batch, x);

    // Output head for the positions that asked, in the caller's batch order.
    std::vector<int64_t> rows;  // rows of x (in sorted order) in caller order
    std::vector<int64_t> sorted_index(batch_in.size());
    for (size_t i = 0; i < order.size(); ++i) sorted_index[order[i]] = static_cast<int64_t>(i);
    for (size_t i = 0; i < batch_in.size(); ++i) {
        if (batch_in[i].logits) rows.push_back(sorted_index[i]);
    }
    if (rows.empty()) return;
    const int64_t m = static_cast<int64_t>(rows.size());
    float* xn = grow(xn_, static_cast<size_t>(m * embd));
    const float* on = model_->vector_weight(w.output_norm);
    const float* on_b = model_->vector_weight(w.output_norm_b);
    for (int64_t r = 0; r < m; ++r) {
        const float* row = x + rows[static_cast<size_t>(r)] * embd;
        if (hp.desc->norm == NormKind::rms) {
            kernels::rms_norm(row, on, xn + r * embd, embd, hp.norm_eps);
        } else {
            kernels::layer_norm(row, on, on_b, xn + r * embd, embd, hp.norm_eps);
        }
    }
    logits.resize(static_cast<size_t>(m) * hp.n_vocab);
    std::vector<int32_t> head_seqs(rows.size());
    for (size_t r = 0; r < rows.size(); ++r) {
        head_seqs[r] = batch[static_cast<size_t>(rows[r])].seq;
    }
    ops_.affine(*w.output, w.output_b, xn, m, logits.data(), LoraRows(head_seqs, seq_adapters_));
    if (hp.logit_divisor != 1.0f) {
        kernels::scale(logits.data(), 1.0f / hp.logit_divisor, logits.data(),
                       static_cast<int64_t>(logits.size()), &pool_);
    }
    final_softcap(logits.data(), m);
}

// --- embeddings ---

int64_t Context::embedding_width(Pooling pooling) const {
    const Weights& w = model_->weights();
    if (pooling == Pooling::rank) return w.cls_out ? w.cls_out->ne[1] : 0;
    return model_->hparams().n_embd;
}

void Context::check_pooled(std::span<const BatchToken> batch, const Pooled& pooled) const {
    if (!pooled.out) throw std::invalid_argument("eval_pooled: no output vector");
    if (pooled.pooling == Pooling::rank && !model_->weights().cls_out) {
        throw std::invalid_argument("rank pooling needs a classifier head, which the model lacks");
    }
    // The batch must be one step (eval splits it only for a sliding layer's ring), so that a
    // pooled sequence is never cut and its rows come out in one piece.
    const int32_t limit = cache_.max_tokens_per_step();
    std::vector<int32_t> count(static_cast<size_t>(cache_.n_seq()), 0);
    for (const BatchToken& t : batch) {
        if (t.seq >= 0 && t.seq < cache_.n_seq() && ++count[static_cast<size_t>(t.seq)] > limit) {
            throw std::invalid_argument("sequence " + std::to_string(t.seq) + " has more than " +
                                        std::to_string(limit) +
                                        " tokens, more than one step of this model takes");
        }
    }
    for (size_t i = 0; i < pooled.seqs.size(); ++i) {
        const int32_t seq = pooled.seqs[i];
        const std::string which = "pooled sequence " + std::to_string(seq) + ": ";
        if (seq < 0 || seq >= cache_.n_seq()) throw std::invalid_argument(which + "does not exist");
        if (std::find(pooled.seqs.begin(), pooled.seqs.begin() + static_cast<ptrdiff_t>(i), seq) !=
            pooled.seqs.begin() + static_cast<ptrdiff_t>(i)) {
            throw std::invalid_argument(which + "listed twice");
        }
        if (cache_.length(seq) != 0) {
            throw std::invalid_argument(which + "must start at position 0 (its cache holds " +
                                        std::to_string(cache_.length(seq)) + " tokens)");
        }
        if (count[static_cast<size_t>(seq)] == 0) {
            throw std::invalid_argument(which + "has no token in the batch");
        }
    }
}

void Context::eval_pooled(std::span<const BatchToken> batch, const Pooled& pooled,
                          std::vector<float>& logits) {
    check_pooled(batch, pooled);
    pooled.out->clear();
    struct Reset {
        const Pooled*& p;
        ~Reset() { p = nullptr; }
    } reset{pooled_};
    pooled_ = &pooled;
    eval(batch, logits);
}

void Context::pool_states(std::span<const BatchToken> sorted, const float* x) {
    const HParams& hp = model_->hparams();
    const Weights& w = model_->weights();
    const int64_t embd = hp.n_embd;
    const Pooling pooling = pooled_->pooling;
    std::vector<float>& out = *pooled_->out;
    std::vector<float> states;  // one sequence's final hidden states, output-normed
    for (const int32_t seq : pooled_->seqs) {
        const auto first = std::find_if(sorted.begin(), sorted.end(),
                                        [&](const BatchToken& t) { return t.seq == seq; });
        const auto end =
            std::find_if(first, sorted.end(), [&](const BatchToken& t) { return t.seq != seq; });
        const int64_t begin = first - sorted.begin(), count = end - first;
        const float* h = x + begin * embd;
        if (w.output_norm) {
            // A decoder's final state is its output norm's, as its head reads it.
            states.resize(static_cast<size_t>(count * embd));
            ops_.norm(w.output_norm, w.output_norm_b, h, states.data(), count);
            h = states.data();
        }
        const size_t at = out.size();
        switch (pooling) {
            case Pooling::none:
                out.insert(out.end(), h, h + count * embd);
                break;
            case Pooling::mean: {
                out.resize(at + static_cast<size_t>(embd), 0.0f);
                float* m = out.data() + at;
                for (int64_t r = 0; r < count; ++r) kernels::add(m, h + r * embd, m, embd);
                kernels::scale(m, 1.0f / static_cast<float>(count), m, embd);
                break;
            }
            case Pooling::cls:
                out.insert(out.end(), h, h + embd);
                break;
            case Pooling::last:
                out.insert(out.end(), h + (count - 1) * embd, h + count * embd);
                break;
            case Pooling::rank: {
                // The first token's state through cls (then tanh) and cls.output.
                std::vector<float> in(h, h + embd), mid(static_cast<size_t>(embd));
                if (w.cls) {
                    ops_.affine(*w.cls, w.cls_b, in.data(), 1, mid.data(), LoraRows::none());
                    for (float& v : mid) v = std::tanh(v);
                    in.swap(mid);
                }
                out.resize(at + static_cast<size_t>(w.cls_out->ne[1]));
                ops_.affine(*w.cls_out, w.cls_out_b, in.data(), 1, out.data() + at,
                            LoraRows::none());
                break;
            }
        }
    }
}

}  // namespace ggufd::model
