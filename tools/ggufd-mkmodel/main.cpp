// ggufd-mkmodel: writes a random-weight GGUF of any supported architecture, dimensions and tensor
// type, for tests and benchmarks. Examples (TinyLlama-1.1B shapes, Llama-2 vocabulary, Q4_K with
// a Q6_K head; a Gemma-3-1B shape in Q8_0):
//   ggufd-mkmodel --out tl-q4_k_m.gguf --vocab ggml-vocab-llama-spm.gguf --n-embd 2048
//       --n-layer 22 --n-head 32 --n-head-kv 4 --n-ff 5632 --type Q4_K --output-type Q6_K
//   ggufd-mkmodel --arch gemma3 --out g3.gguf --n-embd 1152 --n-layer 26 --n-head 4
//       --n-head-kv 1 --head-dim 256 --n-ff 6912 --type Q8_0 --tied
// and a mixture of experts (Qwen3-30B-A3B's proportions, smaller: 64 experts, 8 used per token):
//   ggufd-mkmodel --arch qwen3moe --out moe.gguf --n-embd 1024 --n-layer 8 --n-head 16
//       --n-head-kv 4 --head-dim 64 --n-expert 64 --n-expert-used 8 --n-ff-expert 512 --type Q4_0
// recurrent models, RWKV-7 1.5B's shape (WKV heads of 64):
//   ggufd-mkmodel --arch rwkv7 --out rwkv7.gguf --n-embd 2048 --n-layer 24 --head-dim 64
//       --n-ff 8192 --rwkv-lora-rank 64 --type Q4_0
// and mamba-1.4b's (48 blocks, inner size 2 x 2048, state 16):
//   ggufd-mkmodel --arch mamba --out mamba.gguf --n-embd 2048 --n-layer 48 --type Q8_0 --tied
// A Qwen3.5-4B-like hybrid (gated delta nets, full attention every fourth block):
//   ggufd-mkmodel --arch qwen35 --out q35.gguf --n-embd 2560 --n-layer 32 --n-head 16
//       --n-head-kv 4 --head-dim 256 --n-rot 64 --n-ff 9216 --ssm-state 128 --ssm-groups 16
//       --ssm-dt-rank 32 --ssm-inner 4096 --full-attention-interval 4 --type Q4_K
// Mamba-2 hybrids, Granite-4.0-H-Tiny's proportions (head size 64, state 128, 64 experts) and
// a Nemotron-H-like stack (Mamba-2, MLP and attention blocks in turn; 8 groups):
//   ggufd-mkmodel --arch granitehybrid --out gh.gguf --n-embd 1536 --n-layer 8 --n-head 12
//       --n-head-kv 4 --n-ff 512 --n-expert 64 --n-expert-used 6 --ssm-state 128 --type Q4_0
//   ggufd-mkmodel --arch nemotron_h --out nh.gguf --n-embd 2048 --n-layer 9 --n-head 16
//       --n-head-kv 8 --n-ff 8192 --ssm-state 128 --ssm-groups 8 --type Q4_0
// With --lora-for it writes a random LoRA adapter for that base model instead (--type is then
// the type of its A and B matrices), e.g. rank 16 on the attention's Q and V:
//   ggufd-mkmodel --lora-for tl-q4_k_m.gguf --out tl-lora.gguf --lora-rank 16
//       --lora-targets attn_q,attn_v
// With --projector-like it writes a random projector (mmproj) in the layout of a projector of the
// same family (the conformance folder's tiny ones) at the sizes given (--n-embd, --n-ff, --n-layer,
// --n-head and the options below; any left out keep the template's). Gemma 3's SigLIP encoder:
//   ggufd-mkmodel --projector-like gemma3-mmproj.gguf --out g3-mmproj.gguf --n-embd 1152
//       --n-ff 4304 --n-layer 27 --n-head 16 --image-size 896 --type F16
#include <boost/program_options.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "engine/model/model.h"
#include "engine/model/random_model.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
    ggufd::model::RandomModelSpec spec;
    ggufd::model::RandomLoraSpec lora;
    ggufd::model::RandomProjectorSpec projector;
    std::string out, vocab, type = "F32", output_type, lora_for, lora_targets, projector_like,
                            deepstack;
    po::options_description d("usage: ggufd-mkmodel --out FILE [options]");
    // clang-format off
    d.add_options()
        ("help,h", "show this help")
        ("out,o", po::value(&out)->required(), "file to write")
        ("vocab", po::value(&vocab), "copy the vocabulary (tokenizer.* keys) from this GGUF; default: byte-level")
        ("arch", po::value(&spec.arch)->default_value(spec.arch), "architecture (llama, qwen3, gemma3, ...)")
        ("name", po::value(&spec.name)->default_value(spec.name), "general.name")
        ("n-embd", po::value(&spec.n_embd)->default_value(spec.n_embd), "embedding size")
        ("n-layer", po::value(&spec.n_layer)->default_value(spec.n_layer), "blocks")
        ("n-head", po::value(&spec.n_head)->default_value(spec.n_head), "attention heads")
        ("n-head-kv", po::value(&spec.n_head_kv)->default_value(spec.n_head_kv), "key/value heads")
        ("n-ff", po::value(&spec.n_ff)->default_value(spec.n_ff), "feed-forward size")
        ("n-expert", po::value(&spec.n_expert)->default_value(spec.n_expert), "experts per block (architectures with experts; qwen3moe and gpt-oss default to 8)")
        ("n-expert-used", po::value(&spec.n_expert_used)->default_value(spec.n_expert_used), "experts each token uses (0: 2)")
        ("n-ff-expert", po::value(&spec.n_ff_expert)->default_value(spec.n_ff_expert), "feed-forward size of one expert (0: --n-ff)")
        ("n-dense-lead", po::value(&spec.n_dense_lead)->default_value(spec.n_dense_lead), "deepseek2, glm4moe: dense leading blocks (leading_dense_block_count)")
        ("n-expert-shared", po::value(&spec.n_expert_shared)->default_value(spec.n_expert_shared), "deepseek2, glm4moe: shared experts, each --n-ff-expert wide")
        ("kv-lora-rank", po::value(&spec.kv_lora_rank)->default_value(spec.kv_lora_rank), "deepseek2: KV compression, the cached latent (0: 4 x head-dim)")
        ("q-lora-rank", po::value(&spec.q_lora_rank)->default_value(spec.q_lora_rank), "deepseek2: query compression (0: attn_q straight from the input)")
        ("ssm-conv", po::value(&spec.ssm_d_conv)->default_value(spec.ssm_d_conv), "mamba: convolution width (ssm.conv_kernel)")
        ("ssm-state", po::value(&spec.ssm_d_state)->default_value(spec.ssm_d_state), "mamba: state size (ssm.state_size)")
        ("ssm-inner", po::value(&spec.ssm_d_inner)->default_value(spec.ssm_d_inner), "mamba: inner size (ssm.inner_size; 0: 2 x n-embd)")
        ("ssm-dt-rank", po::value(&spec.ssm_dt_rank)->default_value(spec.ssm_dt_rank), "mamba: time-step rank (ssm.time_step_rank; 0: n-embd / 16); gated delta net: value heads (0: n-head); Mamba-2: its head count (0: heads of 64)")
        ("ssm-groups", po::value(&spec.ssm_n_group)->default_value(spec.ssm_n_group), "ssm.group_count: gated delta net key heads of --ssm-state values (0: n-head-kv); Mamba-2 B and C groups, dividing the heads (0: 1)")
        ("full-attention-interval", po::value(&spec.full_attn_interval)->default_value(spec.full_attn_interval), "qwen35, qwen35moe, qwen3next: every n-th block attends")
        ("n-ctx", po::value(&spec.n_ctx)->default_value(spec.n_ctx), "training context length")
        ("head-dim", po::value(&spec.head_dim)->default_value(spec.head_dim), "size of one attention head, or RWKV's WKV head (0: n-embd / n-head)")
        ("n-rot", po::value(&spec.n_rot)->default_value(spec.n_rot), "dimensions RoPE rotates (0: the whole head)")
        ("rwkv-lora-rank", po::value(&spec.lora_rank)->default_value(spec.lora_rank), "RWKV: rank of every LoRA (0: 32)")
        ("rescale-every", po::value(&spec.rwkv_rescale_every)->default_value(spec.rwkv_rescale_every), "RWKV-6: halve the hidden state after every n-th block (0: never)")
        ("tied", po::bool_switch(&spec.tied), "no output matrix: the head is the token embeddings")
        ("type", po::value(&type)->default_value(type), "type of every matrix (F32, F16, Q8_0, Q4_0, Q4_K, ...)")
        ("output-type", po::value(&output_type), "type of the output head (default: --type)")
        ("seed", po::value(&spec.seed)->default_value(spec.seed), "random seed")
        ("lora-for", po::value(&lora_for), "write a random LoRA adapter for this base model instead of a model")
        ("lora-rank", po::value(&lora.rank)->default_value(lora.rank), "the adapter's rank")
        ("lora-alpha", po::value(&lora.alpha)->default_value(lora.alpha), "adapter.lora.alpha (0: not written)")
        ("lora-targets", po::value(&lora_targets), "comma-separated parts of the base matrices' names to adapt (attn_q,ffn_down,output...; default: every adaptable matrix)")
        ("projector-like", po::value(&projector_like), "write a random projector (mmproj) in this projector file's layout instead of a model")
        ("image-size", po::value(&projector.image_size), "projector: the encoder's image side")
        ("patch-size", po::value(&projector.patch_size), "projector: the side of one patch")
        ("preproc-image-size", po::value(&projector.preproc_image_size), "projector (idefics3): the tiles' canvas side")
        ("wa-pattern", po::value(&projector.wa_pattern), "projector (qwen2.5vl): every n-th block attends to the whole image")
        ("deepstack-layers", po::value(&deepstack), "projector (qwen3vl): comma-separated blocks feeding deepstack mergers");
    // clang-format on
    try {
        po::variables_map vm;
        po::store(po::parse_command_line(argc, argv, d), vm);
        if (vm.count("help")) {
            std::cout << d;
            return 0;
        }
        po::notify(vm);
        auto parse_type = [](const std::string& name) {
            auto t = gguf::type_from_name(name);
            if (!t) throw std::runtime_error("unknown tensor type '" + name + "'");
            return *t;
        };
        spec.type = parse_type(type);
        if (!output_type.empty()) spec.output_type = parse_type(output_type);
        std::optional<gguf::File> vocab_file;
        if (!vocab.empty()) {
            vocab_file.emplace(gguf::File::open(vocab));
            spec.vocab = &*vocab_file;
        }
        const auto t0 = std::chrono::steady_clock::now();
        auto list = [](const std::string& text) {
            std::vector<std::string> items;
            for (size_t at = 0; at < text.size();) {
                const size_t comma = std::min(text.find(',', at), text.size());
                if (comma > at) items.push_back(text.substr(at, comma - at));
                at = comma + 1;
            }
            return items;
        };
        if (!projector_like.empty()) {
            auto given = [&](const char* opt, uint32_t v) { return vm[opt].defaulted() ? 0u : v; };
            projector.n_embd = given("n-embd", spec.n_embd);
            projector.n_ff = given("n-ff", spec.n_ff);
            projector.n_layer = given("n-layer", spec.n_layer);
            projector.n_head = given("n-head", spec.n_head);
            projector.type = vm["type"].defaulted() ? gguf::TensorType::F16 : spec.type;
            for (const std::string& l : list(deepstack))
                projector.deepstack_layers.push_back(static_cast<uint32_t>(std::stoul(l)));
            ggufd::model::make_random_projector(gguf::File::open(projector_like), projector)
                .write(out);
        } else if (!lora_for.empty()) {
            lora.type = spec.type;
            lora.seed = spec.seed;
            lora.targets = list(lora_targets);
            const auto base =
                ggufd::model::Model::load(lora_for, {.repack = ggufd::model::Repack::off});
            ggufd::model::make_random_lora(*base, lora).write(out);
        } else {
            ggufd::model::make_random_model(spec).write(out);
        }
        const double secs =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::fprintf(stderr, "wrote %s in %.1f s\n", out.c_str(), secs);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ggufd-mkmodel: %s\n", e.what());
        return 1;
    }
}
