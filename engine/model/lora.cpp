#include "engine/model/lora.h"

#include <cmath>
#include <map>
#include <string>
#include <string_view>

#include "engine/kernels/formats.h"

namespace ggufd::model {
namespace {

constexpr std::string_view kSuffixA = ".lora_a";
constexpr std::string_view kSuffixB = ".lora_b";

}  // namespace

// The matrices evaluation multiplies through Primitives::linear. The token embeddings are read by
// row (llama.cpp stores their pair the other way round) and the experts as stacks, so adapters
// of those are refused rather than ignored.
std::vector<const gguf::TensorInfo*> adaptable_matrices(const Model& base) {
    std::vector<const gguf::TensorInfo*> out;
    const Weights& w = base.weights();
    for (const LayerWeights& l : w.layers) {
        for (const gguf::TensorInfo* m : l.matrices()) {
            if (m) out.push_back(m);
        }
    }
    if (w.output && w.output != w.tok_embd) out.push_back(w.output);
    return out;
}

std::shared_ptr<const LoraAdapter> LoraAdapter::load(const std::filesystem::path& path,
                                                     std::shared_ptr<const Model> base) {
    return from_file(gguf::File::open(path), std::move(base));
}

std::shared_ptr<const LoraAdapter> LoraAdapter::from_file(gguf::File file,
                                                          std::shared_ptr<const Model> base) {
    return std::shared_ptr<const LoraAdapter>(new LoraAdapter(std::move(file), std::move(base)));
}

LoraAdapter::LoraAdapter(gguf::File file, std::shared_ptr<const Model> base)
    : file_(std::move(file)), base_(std::move(base)) {
    const std::string where = "LoRA adapter '" + file_.name() + "': ";
    auto fail = [&](const std::string& why) { throw gguf::Error(where + why); };
    const auto type = file_.get_optional<std::string>("general.type");
    if (type != "adapter") {
        fail("general.type is " + (type ? "'" + *type + "'" : std::string("missing")) +
             ", not 'adapter' (is this a model rather than an adapter?)");
    }
    const auto adapter_type = file_.get_optional<std::string>("adapter.type");
    if (adapter_type != "lora") {
        fail("adapter.type is " +
             (adapter_type ? "'" + *adapter_type + "'" : std::string("missing")) +
             ", not 'lora' (control vectors and other adapters are not supported)");
    }
    // Activated LoRA switches itself on at invocation tokens: not computed, so refused.
    for (const gguf::KeyValue& kv : file_.metadata().entries()) {
        if (kv.key.starts_with("adapter.alora.")) {
            fail("'" + kv.key + "': activated LoRA (aLoRA) is not supported");
        }
    }
    alpha_ = file_.get_or<float>("adapter.lora.alpha", 0.0f);
    if (!std::isfinite(alpha_)) fail("adapter.lora.alpha is not a finite number");
    if (file_.architecture() != base_->file().architecture()) {
        fail("its architecture is '" + file_.architecture() + "' but the base model's is '" +
             base_->file().architecture() + "'");
    }

    std::map<std::string, const gguf::TensorInfo*, std::less<>> matrices;
    for (const gguf::TensorInfo* m : adaptable_matrices(*base_)) matrices.emplace(m->name, m);
    struct Pair {
        const gguf::TensorInfo* a = nullptr;
        const gguf::TensorInfo* b = nullptr;
    };
    std::map<std::string, Pair> pairs;
    for (const gguf::TensorInfo& t : file_.tensors()) {
        const std::string_view name = t.name;
        const bool is_a = name.ends_with(kSuffixA), is_b = name.ends_with(kSuffixB);
        if (!is_a && !is_b) {
            fail("tensor '" + t.name + "' is not a .lora_a or .lora_b tensor");
        }
        Pair& p = pairs[std::string(name.substr(0, name.size() - kSuffixA.size()))];
        (is_a ? p.a : p.b) = &t;
    }
    if (pairs.empty()) fail("it holds no tensors");
    for (const auto& [name, p] : pairs) {
        if (!p.a || !p.b) {
            fail("'" + name + "' has " + (p.a ? "lora_a" : "lora_b") + " without " +
                 (p.a ? "lora_b" : "lora_a"));
        }
        const auto it = matrices.find(name);
        if (it == matrices.end()) {
            if (base_->file().find_tensor(name)) {
                fail("'" + name +
                     "' is a base tensor ggufd does not adapt (token embeddings, experts, norms "
                     "and biases are not supported)");
            }
            fail("the base model has no tensor '" + name + "' (an adapter for another model?)");
        }
        const gguf::TensorInfo& w = *it->second;
        const int64_t rank = p.a->ne[1];
        const bool two_d = p.a->n_dims == 2 && p.b->n_dims == 2;
        if (!two_d || p.a->ne[0] != w.ne[0] || p.b->ne[1] != w.ne[1] || p.b->ne[0] != rank ||
            rank < 1) {
            fail("'" + name + "' of shape " + w.shape_string() + " has lora_a " +
                 p.a->shape_string() + " and lora_b " + p.b->shape_string() + ", expected [" +
                 std::to_string(w.ne[0]) + ", rank] and [rank, " + std::to_string(w.ne[1]) + "]");
        }
        for (const gguf::TensorInfo* t : {p.a, p.b}) {
            if (!kernels::find_kernels(t->type)) {
                fail("tensor '" + t->name + "' has type " + std::string(gguf::type_name(t->type)) +
                     ", which ggufd cannot compute with");
            }
        }
        weights_.emplace(&w, LoraWeight{p.a, p.b, rank});
    }
}

const LoraWeight* LoraAdapter::find(const gguf::TensorInfo* w) const {
    const auto it = weights_.find(w);
    return it == weights_.end() ? nullptr : &it->second;
}

float LoraAdapter::product_scale(const LoraWeight& w, float scale) const {
    return alpha_ == 0.0f ? scale : scale * alpha_ / static_cast<float>(w.rank);
}

}  // namespace ggufd::model
