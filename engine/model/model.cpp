#include "engine/model/model.h"

#include <algorithm>
#include <stdexcept>

#include "engine/kernels/formats.h"

namespace ggufd::model {

Model::Model(gguf::File file)
    : file_(std::move(file)),
      hparams_(read_hparams(file_)),
      weights_(bind_weights(file_, hparams_)) {
    auto add_vector = [this](const gguf::TensorInfo* t) {
        if (!t) return;
        const kernels::FormatKernels* k = kernels::find_kernels(t->type);
        if (!k) {
            throw gguf::Error("model: tensor '" + t->name + "' has type " +
                              std::string(gguf::type_name(t->type)) +
                              ", which ggufd cannot compute with");
        }
        std::vector<float> v(static_cast<size_t>(t->n_elements));
        k->to_float(t->data, v.data(), static_cast<int64_t>(t->n_elements));
        vectors_.emplace_back(t, std::move(v));
    };
    auto check_matrix = [](const gguf::TensorInfo* t) {
        if (t && !kernels::find_kernels(t->type)) {
            throw gguf::Error("model: tensor '" + t->name + "' has type " +
                              std::string(gguf::type_name(t->type)) +
                              ", which ggufd has no kernels for yet");
        }
    };
    for (const gguf::TensorInfo* m : weights_.matrices()) check_matrix(m);
    for (const gguf::TensorInfo* v : weights_.vectors()) add_vector(v);
    for (const LayerWeights& l : weights_.layers) {
        for (const gguf::TensorInfo* m : l.matrices()) check_matrix(m);
        for (const gguf::TensorInfo* v : l.vectors()) add_vector(v);
    }
}

std::shared_ptr<const Model> Model::load(const std::filesystem::path& path) {
    return from_file(gguf::File::open(path));
}

std::shared_ptr<const Model> Model::from_file(gguf::File file) {
    return std::shared_ptr<const Model>(new Model(std::move(file)));
}

const float* Model::vector_weight(const gguf::TensorInfo* t) const {
    if (!t) return nullptr;
    for (const auto& [info, values] : vectors_) {
        if (info == t) return values.data();
    }
    throw std::logic_error("vector weight '" + t->name + "' was not converted at load");
}

}  // namespace ggufd::model
