// Random-weight models of any supported architecture, written as GGUF: for tests, benchmarks at
// realistic sizes (e.g. a 1.1B model in Q4_0) without downloading one, and the server's built-in
// demo model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "gguf/writer.h"

namespace ggufd::model {

struct RandomModelSpec {
    std::string arch = "llama";  // any supported architecture: its tensors are what it binds
    std::string name = "random";
    uint32_t n_embd = 256;
    uint32_t n_layer = 2;
    uint32_t n_head = 4;
    uint32_t n_head_kv = 2;
    uint32_t n_ff = 768;
    uint32_t n_ctx = 2048;
    uint32_t head_dim = 0;  // 0: n_embd / n_head; else written as key_length and value_length
    uint32_t n_rot = 0;     // RoPE dimensions, 0: the whole head
    bool tied = false;      // no output.weight: the head is token_embd
    float rms_eps = 1e-5f;  // written to the architecture's epsilon key
    float rope_freq_base = 10000.0f;
    gguf::TensorType type = gguf::TensorType::F32;  // every matrix...
    std::optional<gguf::TensorType> output_type;    // ...except the output head, when given
    // Mixture of experts (architectures with ArchDesc::experts): expert_count, expert_used_count
    // and expert_feed_forward_length (0: n_ff). An architecture that requires experts gets 8, 2
    // used, when n_expert is 0.
    uint32_t n_expert = 0;
    uint32_t n_expert_used = 0;
    uint32_t n_ff_expert = 0;
    // DeepSeek's layout (ArchDesc::dense_leading_blocks, shared_experts_fused): the dense
    // leading blocks and the shared experts' count (each expert_feed_forward_length wide).
    uint32_t n_dense_lead = 0;
    uint32_t n_expert_shared = 1;
    // Multi-head latent attention (ArchDesc::latent_attention): head_dim (0: n_embd / n_head) is
    // key_length_mla, of which n_rot (0: a third, even) are RoPE dims and the rest the nope dims
    // and value_length_mla; the KV compression kv_lora_rank (0: 4 head_dim) and the query's
    // q_lora_rank (0: attn_q straight from the input).
    uint32_t kv_lora_rank = 0;
    uint32_t q_lora_rank = 0;
    // Mamba (BlockKind::mamba): ssm.conv_kernel, ssm.state_size, ssm.inner_size (0: 2 n_embd)
    // and ssm.time_step_rank (0: n_embd / 16 rounded up), as Mamba's defaults make them. LFM2's
    // shortconv.l_cache is ssm_d_conv too; its even blocks are short convolutions.
    uint32_t ssm_d_conv = 4;
    uint32_t ssm_d_state = 16;
    uint32_t ssm_d_inner = 0;
    uint32_t ssm_dt_rank = 0;
    // ssm.group_count: the gated delta net's key heads (qwen35, qwen35moe, qwen3next; 0:
    // n_head_kv), Mamba-2's B/C groups (granitehybrid, nemotron_h; 0: 1), dividing the heads. The
    // gated delta net: ssm_d_conv taps, key heads of ssm_d_state, value heads ssm_dt_rank (0:
    // n_head) of ssm_d_inner in all (0: as wide as the keys), full attention every
    // full_attn_interval blocks. Mamba-2: ssm.time_step_rank is its head count (0: heads of 64, or
    // of ssm.inner_size when smaller).
    uint32_t ssm_n_group = 0;
    uint32_t full_attn_interval = 2;
    // RWKV (rwkv6, rwkv7): the WKV head size is head_dim, else n_embd / n_head; every LoRA
    // (RWKV-6's token shift and decay, RWKV-7's decay, learning rate, value mix and gate) has
    // this rank, 0: 32, and RWKV-6 halves the state every rwkv_rescale_every blocks (0: never).
    uint32_t lora_rank = 0;
    uint32_t rwkv_rescale_every = 0;
    uint64_t seed = 42;
    // Copy the tokenizer.* keys (vocabulary, merges, special ids, chat template) from this file;
    // without one, a byte-level vocabulary of 256 byte tokens plus BOS and EOS is built.
    const gguf::File* vocab = nullptr;
};

// Builds the model in memory; throws gguf::Error when a dimension does not fit the type's block
// size or the heads do not divide the embedding.
gguf::Writer make_random_model(const RandomModelSpec& spec);

// A random LoRA adapter for a base model (lora.h's layout): a pair for every adaptable matrix
// whose name contains one of `targets` (all when empty). A's entries have standard deviation
// 1/sqrt(n_in) and B's 1/sqrt(rank), so with alpha = rank an adapter changes a matrix about as
// much as the matrix itself: tests see it in every logit.
struct RandomLoraSpec {
    uint32_t rank = 8;
    float alpha = 8.0f;  // 0: not written (the scale is then the request's alone)
    gguf::TensorType type = gguf::TensorType::F32;  // of A and B (B's rows are rank long)
    std::vector<std::string> targets = {};
    uint64_t seed = 7;
};
class Model;
gguf::Writer make_random_lora(const Model& base, const RandomLoraSpec& spec);

// A random projector (mmproj, engine/vision) at other sizes in the layout of `like`, a
// projector file of the same family (the conformance folder's tiny ones): like's keys with the
// sizes replaced, and its tensors with every shape recomputed from them, block 0's tensors
// repeated for every block. Each shape rule is first checked to give back like's own shapes,
// so a family with tensors the rules do not know is refused rather than written wrong.
struct RandomProjectorSpec {
    uint32_t n_embd = 0;  // 0 keeps like's value, for each size
    uint32_t n_ff = 0;
    uint32_t n_layer = 0;
    uint32_t n_head = 0;
    uint32_t image_size = 0;
    uint32_t patch_size = 0;
    uint32_t preproc_image_size = 0;  // idefics3: the tiles' canvas
    uint32_t wa_pattern = 0;          // qwen2.5vl: every n-th block attends to the whole image
    std::vector<uint32_t> deepstack_layers = {};    // qwen3vl: blocks feeding deepstack mergers
    gguf::TensorType type = gguf::TensorType::F16;  // of the matrices; vectors stay F32
    uint64_t seed = 11;
};
gguf::Writer make_random_projector(const gguf::File& like, const RandomProjectorSpec& spec);

// The byte-level vocabulary on its own (tokenizer.* keys), as GPT-2's byte-to-unicode mapping
// with no merges: every byte is one token.
void add_byte_level_vocab(gguf::Writer& w);

}  // namespace ggufd::model
