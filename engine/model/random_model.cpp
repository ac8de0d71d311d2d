#include "engine/model/random_model.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/kernels/formats.h"
#include "engine/model/arch.h"
#include "engine/model/hparams.h"
#include "engine/model/lora.h"
#include "engine/model/model.h"
#include "engine/model/weights.h"
#include "text/utf8.h"

namespace ggufd::model {
namespace {

// splitmix64: fast, well mixed, and reproducible across platforms (std distributions are not).
class Rng {
  public:
    explicit Rng(uint64_t seed) : state_(seed) {}
    uint64_t next() {
        uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    // Approximately normal: the sum of four uniforms, centred and scaled to unit variance.
    float normal() {
        float s = 0;
        for (int i = 0; i < 4; ++i) s += static_cast<float>(next() >> 40) * 0x1p-24f;
        return (s - 2.0f) * 1.7320508f;
    }
    // The state after `draws` more calls of next(): splitmix64's state is a counter, so a row of
    // a matrix can be filled on any thread with exactly the values a sequential fill gives it.
    Rng ahead(uint64_t draws) const { return Rng(state_ + draws * 0x9e3779b97f4a7c15ull); }
    static constexpr uint64_t kDrawsPerNormal = 4;

  private:
    uint64_t state_;
};

// A matrix of any rank: rows of shape[0] elements, as many as the other dimensions make.
void add_matrix(gguf::Writer& w, Rng& rng, const std::string& name, gguf::TensorType type,
                const std::vector<int64_t>& shape, float stddev) {
    const int64_t cols = shape[0];
    int64_t rows = 1;
    for (size_t d = 1; d < shape.size(); ++d) rows *= shape[d];
    const gguf::TypeInfo& info = gguf::type_info(type);
    if (cols % info.block_size != 0) {
        throw gguf::Error("random model: tensor '" + name + "' has rows of " +
                          std::to_string(cols) + " elements, not a multiple of the " +
                          std::string(info.name) + " block size " +
                          std::to_string(info.block_size));
    }
    const kernels::FormatKernels& k = kernels::kernels_for(type);
    if (!k.from_float)
        throw gguf::Error("random model: cannot quantize to " + std::string(info.name));
    const uint64_t row_bytes = gguf::row_bytes(type, static_cast<uint64_t>(cols));
    std::vector<uint8_t> data(row_bytes * static_cast<uint64_t>(rows));
    // Rows are split over the cores (a 7B model's K-quant search takes minutes on one); each
    // starts its generator where a sequential fill would be, so the file is the same bytes.
    const uint64_t draws_per_row = static_cast<uint64_t>(cols) * Rng::kDrawsPerNormal;
    auto fill = [&](int64_t begin, int64_t end) {
        Rng local = rng.ahead(static_cast<uint64_t>(begin) * draws_per_row);
        std::vector<float> row(static_cast<size_t>(cols));
        for (int64_t r = begin; r < end; ++r) {
            for (float& x : row) x = local.normal() * stddev;
            k.from_float(row.data(), data.data() + static_cast<uint64_t>(r) * row_bytes, cols);
        }
    };
    const int64_t workers = std::clamp<int64_t>(
        std::min<int64_t>(std::thread::hardware_concurrency(), rows * cols / (1 << 16)), 1, rows);
    {
        std::vector<std::jthread> threads;
        for (int64_t t = 1; t < workers; ++t)
            threads.emplace_back(fill, rows * t / workers, rows * (t + 1) / workers);
        fill(0, rows / workers);
    }
    rng = rng.ahead(static_cast<uint64_t>(rows) * draws_per_row);
    w.add_tensor(name, type, shape, data);
}

// RWKV's keys: no attention heads (llama.cpp's files say 0), the WKV head size and the LoRA ranks.
void add_rwkv_keys(gguf::Writer& w, const RandomModelSpec& s, const ArchDesc& desc,
                   uint32_t head_size) {
    const std::string p = s.arch + ".";
    const uint32_t rank = s.lora_rank ? s.lora_rank : 32;
    w.set(p + "attention.head_count", uint32_t{0});
    w.set(p + "wkv.head_size", head_size);
    if (desc.block == BlockKind::rwkv6) {
        w.set(p + "time_mix_extra_dim", rank);
        w.set(p + "time_decay_extra_dim", rank);
        w.set(p + "rescale_every_n_layers", s.rwkv_rescale_every);
        return;
    }
    for (const char* key : {"attention.decay_lora_rank", "attention.iclr_lora_rank",
                            "attention.value_residual_mix_lora_rank", "attention.gate_lora_rank"}) {
        w.set(p + key, rank);
    }
}

}  // namespace

void add_byte_level_vocab(gguf::Writer& w) {
    // GPT-2's byte-to-unicode mapping: printable bytes stand for themselves, the others are
    // shifted to code points from 256 up, so every token is visible text.
    std::vector<std::string> tokens;
    uint32_t shifted = 0;
    for (uint32_t b = 0; b < 256; ++b) {
        const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
        text::append_utf8(tokens.emplace_back(), printable ? b : 256 + shifted++);
    }
    std::vector<int32_t> types(256, 1);  // normal
    // Control tokens: BOS, EOS and ChatML's markers, so chat through the default template
    // frames turns with real special tokens, as a chat model's vocabulary does.
    for (const char* special :
         {"<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>", "<|im_end|>"}) {
        tokens.push_back(special);
        types.push_back(3);
    }
    w.set("tokenizer.ggml.model", "gpt2");
    w.set("tokenizer.ggml.pre", "default");
    w.set("tokenizer.ggml.tokens", gguf::Array{tokens});
    w.set("tokenizer.ggml.token_type", gguf::Array{types});
    w.set("tokenizer.ggml.merges", gguf::Array{std::vector<std::string>{}});
    w.set("tokenizer.ggml.bos_token_id", uint32_t{256});
    w.set("tokenizer.ggml.eos_token_id", uint32_t{257});
    w.set("tokenizer.ggml.add_bos_token", true);
}

// Layers of different shapes (ArchDesc::per_layer_shapes), laid out as Gemma 4 31B is: runs of
// five sliding layers (head_dim, n_head_kv heads) before each global one (twice the head, half
// the KV heads, no attn_v, a quarter of its pairs turning through rope_freqs), the last layer
// global; each layer with its output scale.
void add_per_layer_shapes(gguf::Writer& w, const RandomModelSpec& s, uint32_t head_dim,
                          std::set<std::string>& wanted) {
    const std::string p = s.arch + ".";
    const uint32_t global_kv = s.n_head_kv % 2 == 0 ? s.n_head_kv / 2 : s.n_head_kv;
    std::vector<bool> sliding;
    std::vector<uint32_t> kv_heads;
    for (uint32_t il = 0; il < s.n_layer; ++il) {
        const std::string b = "blk." + std::to_string(il) + ".";
        sliding.push_back(il % 6 != 5 && il + 1 != s.n_layer);
        kv_heads.push_back(sliding.back() ? s.n_head_kv : global_kv);
        if (sliding.back()) wanted.insert(b + "attn_v.weight");
        wanted.insert(b + "layer_output_scale.weight");
    }
    w.set(p + "attention.sliding_window_pattern", gguf::Array{sliding});
    w.set(p + "attention.head_count_kv", gguf::Array{kv_heads});
    w.set(p + "attention.key_length", 2 * head_dim);
    w.set(p + "attention.value_length", 2 * head_dim);
    w.set(p + "attention.key_length_swa", head_dim);
    w.set(p + "attention.value_length_swa", head_dim);
    w.set(p + "rope.dimension_count", 2 * head_dim);
    w.set(p + "rope.dimension_count_swa", s.n_rot ? s.n_rot : head_dim);
    w.set(p + "rope.freq_base", 1e6f);
    w.set(p + "rope.freq_base_swa", s.rope_freq_base);
    w.set(p + "final_logit_softcapping", 30.0f);
    // Written as the dense models' files write them (llama.cpp requires both keys).
    w.set(p + "embedding_length_per_layer_input", uint32_t{0});
    w.set(p + "attention.shared_kv_layers", uint32_t{0});
    wanted.insert("rope_freqs.weight");
}

gguf::Writer make_random_model(const RandomModelSpec& s) {
    const ArchDesc* desc = find_arch(s.arch);
    if (!desc) {
        throw gguf::Error("random model: architecture '" + s.arch +
                          "' is not supported (supported: " + supported_arch_names() + ")");
    }
    const bool attention =
        desc->block == BlockKind::attention || desc->hybrid != HybridLayers::none;
    // RWKV's WKV heads are sized like attention heads.
    const bool rwkv = desc->block == BlockKind::rwkv6 || desc->block == BlockKind::rwkv7;
    if ((attention || rwkv) && (s.n_head == 0 || (s.head_dim == 0 && s.n_embd % s.n_head != 0))) {
        throw gguf::Error("random model: n_embd must be a multiple of n_head (or give head_dim)");
    }
    if (attention && (s.n_head_kv == 0 || s.n_head % s.n_head_kv != 0)) {
        throw gguf::Error("random model: n_head_kv must divide n_head");
    }
    const std::string p = s.arch + ".";
    const uint32_t head_dim = !attention ? 0 : s.head_dim ? s.head_dim : s.n_embd / s.n_head;
    gguf::Writer w;
    w.set("general.architecture", s.arch);
    w.set("general.name", s.name);
    w.set("general.quantization_version", uint32_t{2});
    w.set(p + "context_length", s.n_ctx);
    w.set(p + "embedding_length", s.n_embd);
    w.set(p + "block_count", s.n_layer);
    if (desc->block == BlockKind::mamba) {
        // No attention and no FFN: llama.cpp's converter writes both counts as 0.
        w.set(p + "feed_forward_length", uint32_t{0});
        w.set(p + "attention.head_count", uint32_t{0});
        w.set(p + "ssm.conv_kernel", s.ssm_d_conv);
        w.set(p + "ssm.inner_size", s.ssm_d_inner ? s.ssm_d_inner : 2 * s.n_embd);
        w.set(p + "ssm.state_size", s.ssm_d_state);
        w.set(p + "ssm.time_step_rank", s.ssm_dt_rank ? s.ssm_dt_rank : (s.n_embd + 15) / 16);
    } else if (rwkv) {
        w.set(p + "feed_forward_length", s.n_ff);
        add_rwkv_keys(w, s, *desc, s.head_dim ? s.head_dim : s.n_embd / s.n_head);
    } else {
        w.set(p + "feed_forward_length", s.n_ff);
        w.set(p + "attention.head_count", s.n_head);
        w.set(p + "attention.head_count_kv", s.n_head_kv);
    }
    if (desc->hybrid == HybridLayers::no_kv_heads) {
        // Even blocks recurrent, odd ones attending (LFM2 has more of the former).
        std::vector<uint32_t> kv_heads;
        for (uint32_t il = 0; il < s.n_layer; ++il) kv_heads.push_back(il % 2 ? s.n_head_kv : 0);
        w.set(p + "attention.head_count_kv", gguf::Array{kv_heads});
    }
    if (desc->hybrid == HybridLayers::kv_heads_and_ff) {
        // Blocks 0, 3, ... recurrent, 1, 4, ... MLPs, 2, 5, ... attending.
        std::vector<uint32_t> kv_heads, widths;
        for (uint32_t il = 0; il < s.n_layer; ++il) {
            kv_heads.push_back(il % 3 == 2 ? s.n_head_kv : 0);
            widths.push_back(il % 3 == 1 ? s.n_ff : 0);
        }
        w.set(p + "attention.head_count_kv", gguf::Array{kv_heads});
        w.set(p + "feed_forward_length", gguf::Array{widths});
    }
    if (desc->block == BlockKind::mamba2) {
        const uint32_t inner = s.ssm_d_inner ? s.ssm_d_inner : 2 * s.n_embd;
        w.set(p + "ssm.conv_kernel", s.ssm_d_conv);
        w.set(p + "ssm.inner_size", inner);
        w.set(p + "ssm.state_size", s.ssm_d_state);
        w.set(p + "ssm.time_step_rank",
              s.ssm_dt_rank ? s.ssm_dt_rank : std::max<uint32_t>(1, inner / 64));
        w.set(p + "ssm.group_count", s.ssm_n_group ? s.ssm_n_group : 1);
    }
    if (desc->block == BlockKind::short_conv) w.set(p + "shortconv.l_cache", s.ssm_d_conv);
    if (desc->block == BlockKind::gated_delta_net) {
        // Value heads of ssm_d_state (the key head size), as Qwen3.5's are as wide as its keys.
        const uint32_t value_heads = s.ssm_dt_rank ? s.ssm_dt_rank : s.n_head;
        w.set(p + "ssm.conv_kernel", s.ssm_d_conv);
        w.set(p + "ssm.state_size", s.ssm_d_state);
        w.set(p + "ssm.group_count", s.ssm_n_group ? s.ssm_n_group : s.n_head_kv);
        w.set(p + "ssm.time_step_rank", value_heads);
        w.set(p + "ssm.inner_size", s.ssm_d_inner ? s.ssm_d_inner : value_heads * s.ssm_d_state);
        w.set(p + "full_attention_interval", s.full_attn_interval);
    }
    uint32_t rope_dims = s.n_rot ? s.n_rot : head_dim;
    if (desc->latent_attention) {
        // The cache's geometry (key_length, value_length, one KV head) is the latent's.
        rope_dims = s.n_rot ? s.n_rot : std::max(2u, head_dim / 3 / 2 * 2);
        const uint32_t kv_lora = s.kv_lora_rank ? s.kv_lora_rank : 4 * head_dim;
        if (rope_dims >= head_dim) {
            throw gguf::Error("random model: latent attention needs n_rot below the head size");
        }
        w.set(p + "attention.head_count_kv", uint32_t{1});
        w.set(p + "attention.q_lora_rank", s.q_lora_rank);
        w.set(p + "attention.kv_lora_rank", kv_lora);
        w.set(p + "attention.key_length", kv_lora + rope_dims);
        w.set(p + "attention.value_length", kv_lora);
        w.set(p + "attention.key_length_mla", head_dim);
        w.set(p + "attention.value_length_mla", head_dim - rope_dims);
    } else if (s.head_dim && attention && !desc->per_layer_shapes) {
        w.set(p + "attention.key_length", head_dim);
        w.set(p + "attention.value_length", head_dim);
    }
    if (desc->position == PositionKind::rope && !desc->per_layer_shapes) {
        w.set(p + "rope.dimension_count", rope_dims);
        w.set(p + "rope.freq_base", s.rope_freq_base);
    }
    std::set<std::string> wanted;
    if (desc->per_layer_shapes) add_per_layer_shapes(w, s, head_dim, wanted);
    if (desc->rope_sections == RopeSections::sectioned) {
        // Every rotated pair in one of the three runs (Qwen2-VL's 64 pairs: 16, 24, 24).
        const int32_t pairs = static_cast<int32_t>((s.n_rot ? s.n_rot : head_dim) / 2);
        w.set(p + "rope.dimension_sections",
              gguf::Array{std::vector<int32_t>{pairs - 2 * (pairs * 3 / 8), pairs * 3 / 8,
                                               pairs * 3 / 8, 0}});
    }
    if (desc->rope_sections == RopeSections::interleaved) {
        // As many pairs to time, height and width as the interleaving reaches (Qwen3.5's 64
        // rotated dims: 11, 11, 10).
        const int32_t pairs = static_cast<int32_t>((s.n_rot ? s.n_rot : head_dim) / 2);
        w.set(p + "rope.dimension_sections",
              gguf::Array{std::vector<int32_t>{(pairs + 2) / 3, (pairs + 1) / 3, pairs / 3, 0}});
    }
    // Sliding-window architectures whose files must say their window get the common 4096, or
    // the whole context when that is smaller.
    if (desc->swa_period > 0 && desc->swa_window_default == 0) {
        w.set(p + "attention.sliding_window", std::min<uint32_t>(4096, s.n_ctx));
    }
    w.set(p + std::string(desc->eps_key), s.rms_eps);
    if (desc->experts != Need::absent && (s.n_expert > 0 || desc->experts == Need::required)) {
        const uint32_t n_expert = s.n_expert > 0 ? s.n_expert : 8;
        w.set(p + "expert_count", n_expert);
        w.set(p + "expert_used_count",
              s.n_expert_used > 0 ? s.n_expert_used : std::min(2u, n_expert));
        w.set(p + "expert_feed_forward_length", s.n_ff_expert > 0 ? s.n_ff_expert : s.n_ff);
        if (desc->dense_leading_blocks) w.set(p + "leading_dense_block_count", s.n_dense_lead);
        if (desc->shared_experts_fused) w.set(p + "expert_shared_count", s.n_expert_shared);
    }
    if (s.vocab) {
        for (const gguf::KeyValue& kv : s.vocab->metadata().entries()) {
            if (kv.key.starts_with("tokenizer.")) w.set(kv.key, kv.value);
        }
    } else {
        add_byte_level_vocab(w);
    }
    const gguf::Value* tokens = nullptr;
    for (const gguf::KeyValue& kv : w.metadata()) {
        if (kv.key == "tokenizer.ggml.tokens") tokens = &kv.value;
    }
    if (!tokens || !tokens->is_array() || tokens->as_array().size() == 0) {
        throw gguf::Error("random model: the vocabulary file has no tokenizer.ggml.tokens");
    }
    const auto n_vocab = static_cast<int64_t>(tokens->as_array().size());
    w.set(p + "vocab_size", static_cast<uint32_t>(n_vocab));

    // The tensors are what loading this metadata would bind: the same hyperparameters, read the
    // same way, so every architecture's random model has exactly its tensors.
    const HParams hp = read_hparams(gguf::File::from_bytes(w.to_bytes()));
    if (!s.tied) wanted.insert("output.weight");
    Rng rng(s.seed);
    for (const PlannedTensor& t : plan_tensors(hp, wanted)) {
        if (t.name == "rope_freqs.weight" && desc->per_layer_shapes) {
            // Gemma 4's proportional RoPE: the first quarter of the global heads' pairs turn, the
            // rest stand still.
            std::vector<float> factors(static_cast<size_t>(t.shape[0]));
            for (size_t i = 0; i < factors.size(); ++i) {
                factors[i] = i < factors.size() / 4 ? 1.0f : 1e30f;
            }
            w.add_tensor(t.name, t.shape, factors);
            continue;
        }
        if (t.shape.size() == 1 && t.name.ends_with("." + std::string(desc->names.ssm_a))) {
            // The gated delta net's A per head: negative, so each head's state decays.
            std::vector<float> a(static_cast<size_t>(t.shape[0]));
            for (size_t i = 0; i < a.size(); ++i) a[i] = -static_cast<float>(i % 4 + 1) * 0.25f;
            w.add_tensor(t.name, t.shape, a);
            continue;
        }
        if (t.shape.size() == 1) {
            // Norm weights 1 and biases 0: a random model's layers start as the identity's
            // neighbours, whatever the architecture.
            const bool is_bias = t.name.ends_with(".bias");
            w.add_tensor(
                t.name, t.shape,
                std::vector<float>(static_cast<size_t>(t.shape[0]), is_bias ? 0.0f : 1.0f));
            continue;
        }
        if (t.name.ends_with("." + std::string(desc->names.ssm_a))) {
            // A = -(1, 2, ..., d_state) in every channel, Mamba's initialisation: each state
            // index decays at its own rate and the recurrence is stable. Mamba-2's one A per
            // head [1, heads] likewise takes -(1 .. 16) across the heads.
            std::vector<float> a(static_cast<size_t>(t.shape[0] * t.shape[1]));
            const auto period = static_cast<size_t>(t.shape[0] > 1 ? t.shape[0] : 16);
            for (size_t i = 0; i < a.size(); ++i) a[i] = -static_cast<float>(i % period + 1);
            w.add_tensor(t.name, t.shape, a);
            continue;
        }
        if (t.name.ends_with(std::string(desc->names.ssm_norm) + ".weight")) {
            // Mamba-2's grouped norm [d_inner / groups, groups]: weights 1, as the other norms.
            w.add_tensor(t.name, t.shape,
                         std::vector<float>(static_cast<size_t>(t.shape[0] * t.shape[1]), 1.0f));
            continue;
        }
        if (t.name.ends_with(".bias")) {  // the experts' biases [rows, n_expert]
            w.add_tensor(t.name, t.shape,
                         std::vector<float>(static_cast<size_t>(t.shape[0] * t.shape[1]), 0.0f));
            continue;
        }
        const int64_t cols = t.shape[0];
        // RWKV's interpolation weights [n_embd, 1, 1(, mixes)] lie in [0, 1), and like its other
        // vectors (the bonus) and the LoRA matrices too narrow for the type's blocks stay F32.
        if (t.shape[1] == 1) {
            std::vector<float> mu(
                static_cast<size_t>(cols * (t.shape.size() > 3 ? t.shape[3] : 1)));
            for (float& x : mu) x = static_cast<float>(rng.next() >> 40) * 0x1p-24f;
            w.add_tensor(t.name, t.shape, mu);
            continue;
        }
        // So are latent attention's matrices whose rows the head sizes make short.
        const bool short_rows = cols % gguf::type_info(s.type).block_size != 0;
        const bool narrow = (rwkv && (short_rows || t.name.ends_with("time_mix_first.weight"))) ||
                            (desc->latent_attention && short_rows);
        const bool embeddings = t.name == std::string(desc->names.tok_embd) + ".weight";
        const bool head = t.name == std::string(desc->names.output) + ".weight";
        // Routers stay F32, as quantizers leave them: their logits pick the experts.
        const bool router = t.name.ends_with(std::string(desc->names.ffn_gate_inp) + ".weight");
        // Mamba's and LFM2's convolutions and Mamba's time-step projection are small and their
        // rows short (the kernel width, the time-step rank): kept F32, as llama.cpp's quantizer
        // keeps the convolutions.
        const bool small_ssm =
            t.shape[0] == 1 ||  // Mamba-2's D [1, heads]
            t.name.ends_with(std::string(desc->names.ssm_conv1d) + ".weight") ||
            t.name.ends_with(std::string(desc->names.shortconv_conv) + ".weight") ||
            t.name.ends_with(std::string(desc->names.ssm_dt) + ".weight");
        const gguf::TensorType type = router || narrow || small_ssm ? gguf::TensorType::F32
                                      : head                        ? s.output_type.value_or(s.type)
                                                                    : s.type;
        add_matrix(w, rng, t.name, type, t.shape,
                   embeddings ? 1.0f : 1.0f / std::sqrt(static_cast<float>(cols)));
    }
    return w;
}

gguf::Writer make_random_lora(const Model& base, const RandomLoraSpec& spec) {
    if (spec.rank == 0) throw gguf::Error("random adapter: the rank must be at least 1");
    gguf::Writer w;
    w.set("general.architecture", base.file().architecture());
    w.set("general.type", "adapter");
    w.set("general.name", "random lora");
    w.set("adapter.type", "lora");
    if (spec.alpha != 0.0f) w.set("adapter.lora.alpha", spec.alpha);
    Rng rng(spec.seed);
    const auto rank = static_cast<int64_t>(spec.rank);
    size_t written = 0;
    for (const gguf::TensorInfo* m : adaptable_matrices(base)) {
        const bool wanted =
            spec.targets.empty() ||
            std::any_of(spec.targets.begin(), spec.targets.end(),
                        [&](const std::string& t) { return m->name.find(t) != std::string::npos; });
        if (!wanted) continue;
        add_matrix(w, rng, m->name + ".lora_a", spec.type, {m->ne[0], rank},
                   1.0f / std::sqrt(static_cast<float>(m->ne[0])));
        add_matrix(w, rng, m->name + ".lora_b", spec.type, {rank, m->ne[1]},
                   1.0f / std::sqrt(static_cast<float>(rank)));
        ++written;
    }
    if (written == 0) throw gguf::Error("random adapter: no base matrix matches the targets");
    return w;
}

}  // namespace ggufd::model

namespace ggufd::model {
namespace {

// The sizes a projector's tensor shapes are made of.
struct ProjectorSizes {
    int64_t n_embd, n_ff, projection, patch, positions, merge_width, fc_width;
};

ProjectorSizes projector_sizes(const gguf::Metadata& m) {
    const int64_t n = m.get<uint32_t>("clip.vision.embedding_length");
    const int64_t patch = m.get<uint32_t>("clip.vision.patch_size");
    const int64_t side = m.get<uint32_t>("clip.vision.image_size") / patch;
    const int64_t merge = m.get_or<uint32_t>("clip.vision.spatial_merge_size", 2);
    const int64_t scale = m.get_or<uint32_t>("clip.vision.projector.scale_factor", 1);
    return {n,
            m.get<uint32_t>("clip.vision.feed_forward_length"),
            m.get<uint32_t>("clip.vision.projection_dim"),
            patch,
            side * side,
            n * merge * merge,
            n * scale * scale};
}

// One tensor's shape from the sizes, by what its name says it is.
std::vector<int64_t> projector_shape(std::string_view name, uint32_t n_dims,
                                     const ProjectorSizes& z) {
    const bool bias = name.ends_with(".bias");
    auto has = [&](std::string_view part) { return name.find(part) != std::string_view::npos; };
    auto pick = [&](std::vector<int64_t> weight, int64_t bias_len) {
        return bias ? std::vector<int64_t>{bias_len} : weight;
    };
    if (has("patch_embd.weight")) return {z.patch, z.patch, 3, z.n_embd};
    if (has("position_embd")) return {z.n_embd, z.positions};
    if (has("ffn_up.") || has("ffn_gate.")) return pick({z.n_embd, z.n_ff}, z.n_ff);
    if (has("ffn_down.")) return pick({z.n_ff, z.n_embd}, z.n_embd);
    if (has("attn_qkv.")) return pick({z.n_embd, 3 * z.n_embd}, 3 * z.n_embd);
    if (name == "mm.input_projection.weight") return {z.projection, z.n_embd};
    if (name == "mm.model.fc.weight") return {z.fc_width, z.projection};
    // The 2 x 2 mergers (the output one and deepstack's): a norm, a square layer, then out.
    const bool merger = name.starts_with("mm.") || name.starts_with("v.deepstack.");
    if (merger && has(".norm.")) return {z.merge_width};
    if (merger && (name.starts_with("mm.0.") || has(".fc1.")))
        return pick({z.merge_width, z.merge_width}, z.merge_width);
    if (merger && (name.starts_with("mm.2.") || has(".fc2.")))
        return pick({z.merge_width, z.projection}, z.projection);
    if (n_dims == 1) return {z.n_embd};
    return {z.n_embd, z.n_embd};
}

// "v.blk.7.ln1.weight" -> {"v.blk.", 7, ".ln1.weight"}; nullopt for names without an index.
struct Indexed {
    std::string prefix;
    int index = 0;
    std::string rest;
};
std::optional<Indexed> split_index(const std::string& name) {
    for (std::string_view prefix : {std::string_view("v.blk."), std::string_view("v.deepstack.")}) {
        if (!name.starts_with(prefix)) continue;
        const size_t dot = name.find('.', prefix.size());
        if (dot == std::string::npos) return std::nullopt;
        return Indexed{std::string(prefix),
                       std::stoi(name.substr(prefix.size(), dot - prefix.size())),
                       name.substr(dot)};
    }
    return std::nullopt;
}

}  // namespace

gguf::Writer make_random_projector(const gguf::File& like, const RandomProjectorSpec& spec) {
    if (like.get_optional<std::string>("general.architecture").value_or("") != "clip")
        throw gguf::Error("random projector: " + like.name() + " is not a projector (clip) file");
    const ProjectorSizes old = projector_sizes(like.metadata());
    int first_deepstack = -1;
    for (const gguf::TensorInfo& t : like.tensors()) {
        const std::vector<int64_t> want = projector_shape(t.name, t.n_dims, old);
        if (want.size() != t.n_dims || !std::equal(want.begin(), want.end(), t.ne.begin())) {
            throw gguf::Error("random projector: no size rule gives " + t.name + "'s shape " +
                              t.shape_string());
        }
        const auto idx = split_index(t.name);
        if (idx && idx->prefix == "v.deepstack." &&
            (first_deepstack < 0 || idx->index < first_deepstack))
            first_deepstack = idx->index;
    }
    gguf::Writer w;
    for (const gguf::KeyValue& kv : like.metadata().entries()) w.set(kv.key, kv.value);
    const uint32_t n_layer =
        spec.n_layer != 0 ? spec.n_layer : like.get<uint32_t>("clip.vision.block_count");
    auto set_size = [&](const char* key, uint32_t v) {
        if (v != 0) w.set(key, v);
    };
    set_size("clip.vision.embedding_length", spec.n_embd);
    set_size("clip.vision.feed_forward_length", spec.n_ff);
    set_size("clip.vision.block_count", n_layer);
    set_size("clip.vision.attention.head_count", spec.n_head);
    set_size("clip.vision.image_size", spec.image_size);
    set_size("clip.vision.patch_size", spec.patch_size);
    if (like.metadata().contains("clip.vision.preproc_image_size"))
        set_size("clip.vision.preproc_image_size", spec.preproc_image_size);
    if (like.metadata().contains("clip.vision.n_wa_pattern"))
        set_size("clip.vision.n_wa_pattern", spec.wa_pattern);
    std::vector<int> deepstack;
    if (like.metadata().contains("clip.vision.is_deepstack_layers")) {
        std::vector<bool> marks(n_layer, false);
        std::vector<uint32_t> chosen = spec.deepstack_layers;
        if (chosen.empty()) {
            const auto old_marks =
                like.metadata().get_array<bool>("clip.vision.is_deepstack_layers");
            for (size_t l = 0; l < old_marks.size() && l < n_layer; ++l)
                if (old_marks[l]) chosen.push_back(static_cast<uint32_t>(l));
        }
        for (uint32_t l : chosen) {
            if (l >= n_layer)
                throw gguf::Error("random projector: deepstack block " + std::to_string(l) +
                                  " past the last");
            marks[l] = true;
        }
        for (uint32_t l = 0; l < n_layer; ++l)
            if (marks[l]) deepstack.push_back(static_cast<int>(l));
        w.set("clip.vision.is_deepstack_layers", gguf::Array{marks});
    }
    w.set("general.name", "random " +
                              like.get_optional<std::string>("clip.projector_type").value_or("") +
                              " projector");
    w.set("general.file_type", uint32_t{spec.type == gguf::TensorType::F32 ? 0u : 1u});
    // The new sizes, read back through the same function that read the template's.
    gguf::Metadata sized;
    for (const gguf::KeyValue& kv : w.metadata()) sized.add(kv.key, kv.value);
    const ProjectorSizes z = projector_sizes(sized);
    const uint32_t heads = sized.get<uint32_t>("clip.vision.attention.head_count");
    if (heads == 0 || z.n_embd % heads != 0)
        throw gguf::Error("random projector: the heads do not divide the width");

    Rng rng(spec.seed);
    auto add = [&](const std::string& name, uint32_t n_dims) {
        const std::vector<int64_t> shape = projector_shape(name, n_dims, z);
        const bool vector = shape.size() == 1;
        const bool norm =
            name.find("ln") != std::string::npos || name.find("norm") != std::string::npos;
        if (vector && norm && name.ends_with(".weight")) {
            std::vector<float> scale(static_cast<size_t>(shape[0]));
            for (float& x : scale) x = 1.0f + 0.05f * rng.normal();
            w.add_tensor(name, shape, scale);
            return;
        }
        // 1/sqrt(fan-in) keeps activations at their size through the blocks.
        const float stddev = vector ? 0.02f : 1.0f / std::sqrt(static_cast<float>(shape[0]));
        // Position tables stay F32 as converters leave them: they are added, not multiplied.
        const bool f32 = vector || name.find("position_embd") != std::string::npos;
        add_matrix(w, rng, name, f32 ? gguf::TensorType::F32 : spec.type, shape, stddev);
    };
    for (const gguf::TensorInfo& t : like.tensors()) {
        const auto idx = split_index(t.name);
        if (!idx) {
            add(t.name, t.n_dims);
        } else if (idx->prefix == "v.blk.") {
            // Block 0's tensors stand for every block's.
            if (idx->index != 0) continue;
            for (uint32_t l = 0; l < n_layer; ++l)
                add(idx->prefix + std::to_string(l) + idx->rest, t.n_dims);
        } else {
            // Deepstack mergers are named by the block that feeds them.
            if (idx->index != first_deepstack) continue;
            for (int l : deepstack) add(idx->prefix + std::to_string(l) + idx->rest, t.n_dims);
        }
    }
    return w;
}

}  // namespace ggufd::model
