// Projector (mmproj) files: the vision encoder and the projection into a text model's input
// space, as llama.cpp's converters write them (general.architecture "clip", clip.projector_type,
// clip.vision.* keys, v.* and mm.* tensors).
//
// As with the text architectures (engine/model/arch.h), each projector type is a description,
// ProjectorDesc: data saying how its preprocessing, encoder and projection differ from one
// another. The encoder (encoder.h) reads the description, never the type's name. Loading binds
// every tensor the description names, checks the shapes against the hyperparameters and refuses
// any tensor it did not bind, an unknown projector type or a missing key, naming it.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/vision/preprocess.h"
#include "gguf/file.h"

namespace ggufd::vision {

// How a picture becomes the encoder's inputs.
enum class Sizing {
    square,  // fit with black bars into image_size x image_size (Gemma 3)
    smart,   // each side a multiple of 2 patches, fit with black bars (Qwen-VL)
    slices,  // llava-uhd tiles of image_size plus an overview (idefics3)
};
enum class VisionNorm { layer, rms };
enum class VisionFfn { gelu, swiglu };
// Learned positions: none, a table of one row per patch, or a square table resized to the grid.
enum class Positions { none, table, interpolated };
// Patches to tokens after the blocks.
enum class Merge {
    avg_pool,       // mean of k x k patches (k = 4)
    pixel_shuffle,  // k x k patches concatenated, dy outer (k = scale_factor)
    merge_2x2,      // the 4 patches of each 2 x 2 block concatenated (after the post-norm)
};
// The projection of merged tokens into the text model's space.
enum class Projection {
    soft_emb,  // RMSNorm x mm.soft_emb_norm, then x . mm.input_projection (Gemma 3)
    fc,        // mm.model.fc (idefics3)
    mlp,       // mm.0, GELU, mm.2, with biases (Qwen-VL mergers)
};

struct ProjectorDesc {
    std::string_view name;  // clip.projector_type
    Sizing sizing = Sizing::square;
    Resampler tile_resampler = Resampler::bilinear;
    int patch_kernels = 1;  // Qwen-VL: the Conv3D split into v.patch_embd.weight and .weight.1
    bool patch_bias = true;
    Positions positions = Positions::table;
    VisionNorm norm = VisionNorm::layer;
    bool norm_bias = true;
    bool fused_qkv = false;
    VisionFfn ffn = VisionFfn::gelu;
    bool rope_2d = false;                 // per head: pairs (k, k + d/2) turned by row then column
    bool window_attention = false;        // clip.vision.n_wa_pattern
    bool patches_in_merge_order = false;  // the tower sees patches grouped by 2 x 2 blocks
    Merge merge = Merge::avg_pool;
    Projection projection = Projection::soft_emb;
    bool deepstack = false;        // clip.vision.is_deepstack_layers, v.deepstack.N.*
    bool swap_ffn_updown = false;  // old converters wrote ffn_up and ffn_down swapped
    // The text model's side: the text libmtmd puts before and after an image's tokens (control
    // tokens of the text model's vocabulary; Sizing::slices lays its tiles out its own way),
    // and whether an image's tokens attend to each other both ways.
    std::string_view image_begin;
    std::string_view image_end;
    bool non_causal_image = false;
};

// The supported projector types; nullptr for any other.
const ProjectorDesc* find_projector(std::string_view type);
std::vector<std::string_view> supported_projectors();

struct ProjectorHParams {
    int64_t image_size = 0;
    int64_t patch_size = 0;
    int64_t n_embd = 0;  // the tower's width
    int64_t n_ff = 0;
    int64_t n_layer = 0;
    int64_t n_head = 0;
    float eps = 1e-6f;
    std::array<float, 3> mean{};
    std::array<float, 3> std{};
    int64_t projection_dim = 0;      // the text model's input width (per deepstack slice)
    int64_t merge = 4;               // patches per side merged into a token
    int64_t preproc_image_size = 0;  // idefics3's longest side before slicing
    int64_t n_wa_pattern = 0;
    std::vector<bool> deepstack_layers;  // per block
    // Output width of a token: projection_dim times (1 + deepstack layers).
    int64_t n_embd_out() const;
};

// A matrix view into the file, or an owned F32 copy (a transposed one).
struct Matrix {
    const gguf::TensorInfo* tensor = nullptr;
    std::vector<float> owned;  // used when tensor is null: rows x cols
    int64_t rows = 0;
    int64_t cols = 0;
    explicit operator bool() const { return tensor != nullptr || !owned.empty(); }
};
// A vector (norm weight, bias, table) as floats, dequantised at load; empty when absent.
using Vector = std::vector<float>;

struct ProjectorLayer {
    Vector ln1, ln1_b, ln2, ln2_b;
    Matrix q, k, v, qkv, out, gate, up, down;
    Vector bq, bk, bv, bqkv, out_b, gate_b, up_b, down_b;
};

struct DeepstackWeights {
    int64_t layer = 0;
    Vector norm, norm_b;
    Matrix fc1, fc2;
    Vector fc1_b, fc2_b;
};

struct ProjectorWeights {
    std::vector<Matrix> patch;  // [patch * patch * 3 -> n_embd] each
    Vector patch_b;
    Vector position;  // [n_pos][n_embd]
    int64_t n_position = 0;
    std::vector<ProjectorLayer> layers;
    Vector post_ln, post_ln_b;
    Vector soft_emb_norm;
    Matrix input_projection;  // transposed at load to [projection_dim][n_embd]
    Matrix fc;
    Matrix mm0, mm2;
    Vector mm0_b, mm2_b;
    std::vector<DeepstackWeights> deepstack;
};

class Projector {
  public:
    // Opens and checks an mmproj file; gguf::Error names what is wrong.
    static std::shared_ptr<const Projector> load(const std::filesystem::path& path);
    static std::shared_ptr<const Projector> from_file(gguf::File file);

    const ProjectorDesc& desc() const { return *desc_; }
    const ProjectorHParams& hparams() const { return hparams_; }
    const ProjectorWeights& weights() const { return weights_; }
    const gguf::File& file() const { return file_; }

    // Refuses (gguf::Error naming the key) a projector whose output does not feed a text model
    // taking rows of n_embd_inp values.
    void check_fits(int64_t text_n_embd_inp) const;

  private:
    explicit Projector(gguf::File file);
    gguf::File file_;
    const ProjectorDesc* desc_ = nullptr;
    ProjectorHParams hparams_;
    ProjectorWeights weights_;
};

}  // namespace ggufd::vision
