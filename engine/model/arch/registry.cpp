// The supported architectures. A new one: its description file next to this one, its line here
// and in engine/model/CMakeLists.txt.
#include <array>

#include "engine/model/arch.h"

namespace ggufd::model {
namespace arch {
extern const ArchDesc llama, qwen2, gemma, phi3, gpt2, gptneox, falcon, smollm3, mistral3;
extern const ArchDesc starcoder2, stablelm, granite, mpt, bloom, gptj;  // layout variants
extern const ArchDesc qwen3, gemma2, gemma3, olmo2, cohere2;  // attention and norm-placement extras
extern const ArchDesc qwen3moe, gpt_oss, qwen2moe, llama4;    // mixtures of experts
extern const ArchDesc bert, nomic_bert;                       // encoders
extern const ArchDesc mamba, rwkv6, rwkv7;                    // recurrent
extern const ArchDesc lfm2, qwen35, qwen35moe, qwen3next, granitehybrid, nemotron_h;  // hybrids
extern const ArchDesc gemma4;              // layers of different shapes
extern const ArchDesc deepseek2, glm4moe;  // latent attention and DeepSeek's routing
extern const ArchDesc qwen2vl, qwen3vl;    // text models of vision models (M-RoPE)
}  // namespace arch

namespace {
const std::array<const ArchDesc*, 40> kArchs = {
    &arch::llama, &arch::qwen2, &arch::gemma, &arch::phi3, &arch::gpt2, &arch::gptneox,
    &arch::falcon, &arch::smollm3, &arch::mistral3,
    // layout variants
    &arch::starcoder2, &arch::stablelm, &arch::granite, &arch::mpt, &arch::bloom, &arch::gptj,
    // attention and norm-placement extras
    &arch::qwen3, &arch::gemma2, &arch::gemma3, &arch::olmo2, &arch::cohere2,
    // mixtures of experts
    &arch::qwen3moe, &arch::gpt_oss, &arch::qwen2moe, &arch::llama4,
    // encoders
    &arch::bert, &arch::nomic_bert,
    // recurrent
    &arch::mamba, &arch::rwkv6, &arch::rwkv7,
    // hybrids
    &arch::lfm2, &arch::qwen35, &arch::qwen35moe, &arch::qwen3next, &arch::granitehybrid,
    &arch::nemotron_h,
    // layers of different shapes
    &arch::gemma4,
    // latent attention and DeepSeek's routing
    &arch::deepseek2, &arch::glm4moe,
    // text models of vision models
    &arch::qwen2vl, &arch::qwen3vl};
}  // namespace

const ArchDesc* find_arch(std::string_view name) {
    for (const ArchDesc* a : kArchs) {
        if (a->name == name) return a;
    }
    return nullptr;
}

std::span<const ArchDesc* const> supported_archs() {
    return kArchs;
}

std::string supported_arch_names() {
    std::string s;
    for (const ArchDesc* a : kArchs) {
        if (!s.empty()) s += ", ";
        s += a->name;
    }
    return s;
}

namespace {
constexpr std::array<std::string_view, 5> kPoolingNames = {"none", "mean", "cls", "last", "rank"};
}  // namespace

std::string_view pooling_name(Pooling pooling) {
    return kPoolingNames[static_cast<size_t>(pooling)];
}

std::optional<Pooling> pooling_from_name(std::string_view name) {
    for (size_t i = 0; i < kPoolingNames.size(); ++i) {
        if (kPoolingNames[i] == name) return static_cast<Pooling>(i);
    }
    return std::nullopt;
}

}  // namespace ggufd::model
