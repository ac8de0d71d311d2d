// A loaded model: the mapped GGUF file, its hyperparameters and its weights bound in place. One
// Model is shared read-only by every sequence and thread (hold it by shared_ptr<const Model>).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/kernels/repack.h"
#include "engine/model/hparams.h"
#include "engine/model/weights.h"
#include "gguf/file.h"

namespace ggufd::model {

// When the matrices the fast kernels read better repacked (kernels/repack.h) are rearranged.
enum class Repack {
    off,         // never: the kernels read the file's layout
    at_load,     // before load() returns
    background,  // by a thread of the model after load() returns; until a matrix is done the
                 // kernels read the file's layout (same results to rounding). Models under
                 // 16 MiB of such matrices are still repacked at load.
};

struct LoadOptions {
    Repack repack = Repack::at_load;
};

class Model {
  public:
    // Maps, validates and binds a model file; every weight's type must have kernels. Throws
    // gguf::Error saying what is wrong (missing key, bad shape, unsupported tensor type...).
    static std::shared_ptr<const Model> load(const std::filesystem::path& path,
                                             const LoadOptions& options = {});
    // The same over an already opened file (taken over by the model).
    static std::shared_ptr<const Model> from_file(gguf::File file, const LoadOptions& options = {});

    const gguf::File& file() const { return file_; }
    const HParams& hparams() const { return hparams_; }
    const Weights& weights() const { return weights_; }

    // 1-D weights (norms, biases) as float, converted once at load whatever their stored type.
    const float* vector_weight(const gguf::TensorInfo* t) const;

    // The matrix as rearranged for the fast kernels (kernels/repack.h), or nullptr while it is
    // used as stored. The file pages of a repacked matrix are released once it is done.
    const kernels::RepackedMatrix* repacked(const gguf::TensorInfo* t) const;
    // Bytes of the repacked copies (done or under way).
    size_t repacked_bytes() const;
    // Returns once background repacking has finished (at once in the other modes).
    void wait_for_repack() const;

    ~Model();

  private:
    struct RepackedStore;

    Model(gguf::File file, const LoadOptions& options);
    void plan_repack(Repack mode);

    gguf::File file_;
    HParams hparams_;
    Weights weights_;
    std::vector<std::pair<const gguf::TensorInfo*, std::vector<float>>> vectors_;
    std::unique_ptr<RepackedStore> repacked_;
};

}  // namespace ggufd::model
