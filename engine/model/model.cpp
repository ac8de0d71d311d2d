#include "engine/model/model.h"

#include <sys/mman.h>

#include <algorithm>
#include <new>
#include <stdexcept>
#include <unordered_map>

#include "engine/kernels/formats.h"
#include "engine/kernels/threadpool.h"

namespace ggufd::model {

// One anonymous mapping holding every repacked matrix, asked to use huge pages: the kernels
// stream it in order, so fewer TLB misses, and loading faults in 512 times fewer pages.
struct Model::RepackedStore {
    void* region = nullptr;
    size_t size = 0;
    std::unordered_map<const gguf::TensorInfo*, kernels::RepackedMatrix> matrices;

    ~RepackedStore() {
        if (region) munmap(region, size);
    }
};

Model::~Model() = default;

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
        if (!kernels::find_kernels(t->type)) {
            throw gguf::Error("model: tensor '" + t->name + "' has type " +
                              std::string(gguf::type_name(t->type)) +
                              ", which ggufd has no kernels for yet");
        }
    };
    check_matrix(weights_.tok_embd);
    check_matrix(weights_.output);
    add_vector(weights_.output_norm);
    for (const LayerWeights& l : weights_.layers) {
        for (const gguf::TensorInfo* m :
             {l.wq, l.wk, l.wv, l.wo, l.ffn_gate, l.ffn_up, l.ffn_down}) {
            check_matrix(m);
        }
        for (const gguf::TensorInfo* v : {l.attn_norm, l.ffn_norm, l.bq, l.bk, l.bv}) add_vector(v);
    }
    repack_matrices();
}

void Model::repack_matrices() {
    repacked_ = std::make_unique<RepackedStore>();
    std::vector<const gguf::TensorInfo*> todo;
    auto consider = [&](const gguf::TensorInfo* t) {
        if (kernels::can_repack(t->type, t->ne[1], t->ne[0]) &&
            std::find(todo.begin(), todo.end(), t) == todo.end()) {
            todo.push_back(t);
        }
    };
    for (const LayerWeights& l : weights_.layers) {
        for (const gguf::TensorInfo* m :
             {l.wq, l.wk, l.wv, l.wo, l.ffn_gate, l.ffn_up, l.ffn_down}) {
            consider(m);
        }
    }
    consider(weights_.output);
    if (todo.empty()) return;

    std::vector<size_t> offsets;
    size_t total = 0;
    for (const gguf::TensorInfo* t : todo) {
        offsets.push_back(total);
        total += (kernels::repacked_bytes(t->type, t->ne[1], t->ne[0]) + 63) & ~size_t{63};
    }
    void* region = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) throw std::bad_alloc();
    repacked_->region = region;
    repacked_->size = total;
    madvise(region, total, MADV_HUGEPAGE);  // advice only: without it, 4 KiB pages

    // Small models repack on the loading thread; large ones over all cores.
    constexpr size_t kParallelBytes = size_t{16} << 20;
    kernels::ThreadPool pool(total >= kParallelBytes ? 0 : 1);
    for (size_t i = 0; i < todo.size(); ++i) {
        const gguf::TensorInfo& t = *todo[i];
        const int64_t rows = t.ne[1], cols = t.ne[0];
        auto* out = static_cast<uint8_t*>(region) + offsets[i];
        pool.parallel_for(rows / kernels::kRepackRows, [&](int64_t g0, int64_t g1, int) {
            kernels::repack_rows(t.type, t.data, rows, cols, out, g0 * kernels::kRepackRows,
                                 g1 * kernels::kRepackRows);
        });
        repacked_->matrices.emplace(&t, kernels::RepackedMatrix{t.type, out, rows, cols});
        // The token embeddings (a tied output head) are still read, a row per token: their pages
        // come back from the page cache as needed.
        file_.release_pages(t);
    }
}

const kernels::RepackedMatrix* Model::repacked(const gguf::TensorInfo* t) const {
    const auto it = repacked_->matrices.find(t);
    return it == repacked_->matrices.end() ? nullptr : &it->second;
}

size_t Model::repacked_bytes() const {
    return repacked_->size;
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
