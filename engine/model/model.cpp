#include "engine/model/model.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <new>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "engine/kernels/formats.h"
#include "engine/kernels/threadpool.h"

namespace ggufd::model {

namespace {

// Rows of a matrix, or of all the experts of a stacked [cols, rows, n_expert] tensor.
int64_t matrix_rows(const gguf::TensorInfo& t) {
    return t.ne[0] > 0 ? static_cast<int64_t>(t.n_elements / static_cast<uint64_t>(t.ne[0])) : 0;
}

// Below this many bytes of repackable matrices, repacking at load takes a few milliseconds.
constexpr size_t kBackgroundBytes = size_t{16} << 20;

}  // namespace

// One anonymous mapping holding every repacked matrix, asked to use huge pages: the kernels
// stream it in order, so fewer TLB misses, and filling it faults in 512 times fewer pages.
struct Model::RepackedStore {
    struct Entry {
        const gguf::TensorInfo* tensor;
        kernels::RepackedMatrix matrix;
        std::atomic<bool> ready{false};  // set (release) once `matrix` is filled
    };

    void* region = nullptr;
    size_t size = 0;
    std::deque<Entry> entries;  // never moved once filled in: ready is read concurrently
    std::unordered_map<const gguf::TensorInfo*, Entry*> by_tensor;
    std::atomic<bool> stop{false};
    std::atomic<bool> finished{false};
    std::thread worker;

    ~RepackedStore() {
        stop = true;
        if (worker.joinable()) worker.join();
        if (region) munmap(region, size);
    }

    // Repacks every entry, over `threads` threads (0 = all cores), releasing the file pages of
    // each; stops early when asked to.
    void run(const gguf::File& file, int threads) {
        kernels::ThreadPool pool(threads);
        for (Entry& e : entries) {
            if (stop.load(std::memory_order_relaxed)) break;
            const kernels::RepackedMatrix& m = e.matrix;
            auto* out = const_cast<uint8_t*>(m.data);
            pool.parallel_for(m.rows / kernels::kRepackRows, [&](int64_t g0, int64_t g1, int) {
                kernels::repack_rows(m.type, e.tensor->data, m.rows, m.cols, out,
                                     g0 * kernels::kRepackRows, g1 * kernels::kRepackRows);
            });
            e.ready.store(true, std::memory_order_release);
            // The token embeddings (a tied output head) are still read, a row per token: their
            // pages come back from the page cache as needed.
            file.release_pages(*e.tensor);
        }
        finished.store(true, std::memory_order_release);
        finished.notify_all();
    }
};

Model::~Model() = default;

Model::Model(gguf::File file, const LoadOptions& options)
    : file_(std::move(file)),
      hparams_(read_hparams(file_)),
      weights_(bind_weights(file_, hparams_)) {
    auto add_vector = [this](const gguf::TensorInfo* t, bool transpose = false) {
        if (!t) return;
        const kernels::FormatKernels* k = kernels::find_kernels(t->type);
        if (!k) {
            throw gguf::Error("model: tensor '" + t->name + "' has type " +
                              std::string(gguf::type_name(t->type)) +
                              ", which ggufd cannot compute with");
        }
        std::vector<float> v(static_cast<size_t>(t->n_elements));
        k->to_float(t->data, v.data(), static_cast<int64_t>(t->n_elements));
        if (transpose) {
            const auto cols = static_cast<size_t>(t->ne[0]), rows = v.size() / cols;
            std::vector<float> tr(v.size());
            for (size_t r = 0; r < rows; ++r) {
                for (size_t c = 0; c < cols; ++c) tr[c * rows + r] = v[r * cols + c];
            }
            v.swap(tr);
        }
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
        for (const gguf::TensorInfo* m : l.expert_matrices()) check_matrix(m);
        for (const gguf::TensorInfo* v : l.vectors()) add_vector(v);
        for (const gguf::TensorInfo* v : l.layout_vectors()) add_vector(v);
        for (const gguf::TensorInfo* m : l.rwkv.matrices()) check_matrix(m);
        check_matrix(l.rwkv.stacked_matrix());
        for (const gguf::TensorInfo* v : l.rwkv.vectors()) add_vector(v);
        for (const gguf::TensorInfo* v : l.transposed_vectors()) add_vector(v, true);
        for (const gguf::TensorInfo* m : l.mla.matrices()) check_matrix(m);
        for (const gguf::TensorInfo* m : l.mla.head_matrices()) check_matrix(m);
        for (const gguf::TensorInfo* v : l.mla.vectors()) add_vector(v);
        add_vector(l.exp_probs_b);
    }
    // Multi-token-prediction blocks are not run by the main pass; their kernels must exist.
    for (const NextnWeights& n : weights_.nextn) {
        for (const gguf::TensorInfo* m : n.layer.matrices()) check_matrix(m);
        for (const gguf::TensorInfo* m : n.layer.expert_matrices()) check_matrix(m);
        check_matrix(n.eh_proj);
    }
    plan_repack(options.repack);
}

void Model::plan_repack(Repack mode) {
    repacked_ = std::make_unique<RepackedStore>();
    if (mode == Repack::off) {
        repacked_->finished = true;
        return;
    }
    std::vector<const gguf::TensorInfo*> todo;
    // ne[1] rows per matrix: a stack of experts [cols, rows, n_expert] is repacked as one matrix
    // of all their rows when each expert's rows fill whole groups, so expert e is the view from
    // its first group.
    auto consider = [&](const gguf::TensorInfo* t) {
        if (t && kernels::can_repack(t->type, t->ne[1], t->ne[0]) &&
            std::find(todo.begin(), todo.end(), t) == todo.end()) {
            todo.push_back(t);
        }
    };
    // The output head first: while a matrix is repacked its file pages and its copy are both
    // resident, and this one is the largest (on TinyLlama Q4_K_M, repacked last it raised peak
    // RSS by its 51 MiB).
    consider(weights_.output);
    for (const LayerWeights& l : weights_.layers) {
        for (const gguf::TensorInfo* m : l.matrices()) consider(m);
        for (const gguf::TensorInfo* m : l.expert_matrices()) consider(m);
        for (const gguf::TensorInfo* m : l.rwkv.matrices()) consider(m);
        for (const gguf::TensorInfo* m : l.mla.matrices()) consider(m);
        for (const gguf::TensorInfo* m : l.mla.head_matrices()) consider(m);
    }
    size_t total = 0;
    std::vector<size_t> offsets;
    for (const gguf::TensorInfo* t : todo) {
        offsets.push_back(total);
        total += (kernels::repacked_bytes(t->type, matrix_rows(*t), t->ne[0]) + 63) & ~size_t{63};
    }
    if (total == 0) {
        repacked_->finished = true;
        return;
    }
    void* region = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) throw std::bad_alloc();
    repacked_->region = region;
    repacked_->size = total;
    madvise(region, total, MADV_HUGEPAGE);  // advice only: without it, 4 KiB pages
    for (size_t i = 0; i < todo.size(); ++i) {
        const gguf::TensorInfo* t = todo[i];
        RepackedStore::Entry& e = repacked_->entries.emplace_back();
        e.tensor = t;
        e.matrix = {t->type, static_cast<uint8_t*>(region) + offsets[i], matrix_rows(*t), t->ne[0]};
        repacked_->by_tensor.emplace(t, &e);
    }
    if (total < kBackgroundBytes) {
        repacked_->run(file_, 1);
    } else if (mode == Repack::at_load) {
        repacked_->run(file_, 0);
    } else {
        // One thread, so inference keeps the other cores while it runs.
        repacked_->worker = std::thread([store = repacked_.get(), this] { store->run(file_, 1); });
    }
}

const kernels::RepackedMatrix* Model::repacked(const gguf::TensorInfo* t) const {
    const auto it = repacked_->by_tensor.find(t);
    if (it == repacked_->by_tensor.end() || !it->second->ready.load(std::memory_order_acquire)) {
        return nullptr;
    }
    return &it->second->matrix;
}

size_t Model::repacked_bytes() const {
    return repacked_->size;
}

void Model::wait_for_repack() const {
    repacked_->finished.wait(false, std::memory_order_acquire);
}

std::shared_ptr<const Model> Model::load(const std::filesystem::path& path,
                                         const LoadOptions& options) {
    return from_file(gguf::File::open_set(path), options);
}

std::shared_ptr<const Model> Model::from_file(gguf::File file, const LoadOptions& options) {
    return std::shared_ptr<const Model>(new Model(std::move(file), options));
}

const float* Model::vector_weight(const gguf::TensorInfo* t) const {
    if (!t) return nullptr;
    for (const auto& [info, values] : vectors_) {
        if (info == t) return values.data();
    }
    throw std::logic_error("vector weight '" + t->name + "' was not converted at load");
}

}  // namespace ggufd::model
