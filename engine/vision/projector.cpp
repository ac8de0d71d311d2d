#include "engine/vision/projector.h"

#include <cmath>
#include <set>

#include "engine/kernels/formats.h"

namespace ggufd::vision {

namespace {

constexpr ProjectorDesc kGemma3{
    .name = "gemma3",
    .sizing = Sizing::square,
    .merge = Merge::avg_pool,
    .projection = Projection::soft_emb,
    .swap_ffn_updown = true,
    .image_begin = "<start_of_image>",
    .image_end = "<end_of_image>",
    .non_causal_image = true,
};

constexpr ProjectorDesc kIdefics3{
    .name = "idefics3",
    .sizing = Sizing::slices,
    .tile_resampler = Resampler::bicubic,
    .merge = Merge::pixel_shuffle,
    .projection = Projection::fc,
    .swap_ffn_updown = true,
    .image_begin = {},  // its tiles' own layout (vision/prompt.cpp)
    .image_end = {},
};

constexpr ProjectorDesc kQwen25Vl{
    .name = "qwen2.5vl_merger",
    .sizing = Sizing::smart,
    .patch_kernels = 2,
    .patch_bias = false,
    .positions = Positions::none,
    .norm = VisionNorm::rms,
    .norm_bias = false,
    .ffn = VisionFfn::swiglu,
    .rope_2d = true,
    .window_attention = true,
    .patches_in_merge_order = true,
    .merge = Merge::merge_2x2,
    .projection = Projection::mlp,
    .swap_ffn_updown = true,
    .image_begin = "<|vision_start|>",
    .image_end = "<|vision_end|>",
};

constexpr ProjectorDesc kQwen3Vl{
    .name = "qwen3vl_merger",
    .sizing = Sizing::smart,
    .patch_kernels = 2,
    .positions = Positions::interpolated,
    .fused_qkv = true,
    .rope_2d = true,
    .patches_in_merge_order = true,
    .merge = Merge::merge_2x2,
    .projection = Projection::mlp,
    .deepstack = true,
    .image_begin = "<|vision_start|>",
    .image_end = "<|vision_end|>",
};

constexpr const ProjectorDesc* kProjectors[] = {&kGemma3, &kIdefics3, &kQwen25Vl, &kQwen3Vl};

std::string join(const std::vector<std::string_view>& names) {
    std::string s;
    for (auto n : names) s += (s.empty() ? "" : ", ") + std::string(n);
    return s;
}

// Binds tensors by name, remembering which, so that what is left unbound can be refused.
class Binder {
  public:
    explicit Binder(const gguf::File& f) : f_(f) {}

    const gguf::TensorInfo* find(const std::string& name, bool required) {
        const gguf::TensorInfo* t = f_.find_tensor(name);
        if (!t) {
            if (required) throw gguf::Error("mmproj: tensor '" + name + "' is missing");
            return nullptr;
        }
        bound_.insert(name);
        return t;
    }

    Vector vec(const std::string& name, int64_t n, bool required) {
        const gguf::TensorInfo* t = find(name, required);
        if (!t) return {};
        if (t->ne[0] != n || static_cast<int64_t>(t->n_elements) != n) {
            throw gguf::Error("mmproj: tensor '" + name + "' has shape " + t->shape_string() +
                              ", expected [" + std::to_string(n) + "]");
        }
        return floats(*t, name);
    }

    Matrix mat(const std::string& name, int64_t cols, int64_t rows, bool required) {
        const gguf::TensorInfo* t = find(name, required);
        if (!t) return {};
        if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != 1 || t->ne[3] != 1) {
            throw gguf::Error("mmproj: tensor '" + name + "' has shape " + t->shape_string() +
                              ", expected [" + std::to_string(cols) + ", " + std::to_string(rows) +
                              "]");
        }
        return matrix(*t, name, cols, rows);
    }

    // A matrix whose input spans several dimensions (the patch kernels).
    Matrix flat(const std::string& name, std::array<int64_t, 4> ne, bool required) {
        const gguf::TensorInfo* t = find(name, required);
        if (!t) return {};
        if (t->ne != ne) {
            throw gguf::Error("mmproj: tensor '" + name + "' has shape " + t->shape_string() +
                              " where the hyperparameters make [" + std::to_string(ne[0]) + ", " +
                              std::to_string(ne[1]) + ", " + std::to_string(ne[2]) + ", " +
                              std::to_string(ne[3]) + "]");
        }
        return matrix(*t, name, ne[0] * ne[1] * ne[2], ne[3]);
    }

    Vector floats(const gguf::TensorInfo& t, const std::string& name) {
        check_type(t, name, t.ne[0]);
        Vector v(t.n_elements);
        const int64_t row = t.ne[0];
        for (uint64_t r = 0; r < t.n_elements / row; ++r) {
            kernels::dequantize_row(t.type, t.data + r * t.row_bytes(), v.data() + r * row, row);
        }
        return v;
    }

    void refuse_unbound() const {
        for (const auto& t : f_.tensors()) {
            if (!bound_.contains(t.name)) {
                throw gguf::Error("mmproj: tensor '" + t.name +
                                  "' is not part of this projector type's layout");
            }
        }
    }

  private:
    static void check_type(const gguf::TensorInfo& t, const std::string& name, int64_t cols) {
        if (!kernels::find_kernels(t.type)) {
            throw gguf::Error("mmproj: tensor '" + name + "' has type " +
                              std::string(gguf::type_name(t.type)) +
                              ", which ggufd cannot compute");
        }
        if (cols % gguf::type_info(t.type).block_size != 0) {
            throw gguf::Error("mmproj: tensor '" + name + "' rows are not whole blocks of " +
                              std::string(gguf::type_name(t.type)));
        }
    }

    static Matrix matrix(const gguf::TensorInfo& t, const std::string& name, int64_t cols,
                         int64_t rows) {
        check_type(t, name, cols);
        Matrix m;
        m.tensor = &t;
        m.cols = cols;
        m.rows = rows;
        return m;
    }

    const gguf::File& f_;
    std::set<std::string> bound_;
};

int64_t get_count(const gguf::File& f, const std::string& key) {
    const auto v = f.get<uint64_t>(key);
    if (v == 0 || v > (1u << 20)) {
        throw gguf::Error("mmproj: metadata key '" + key + "' = " + std::to_string(v) +
                          " is out of range");
    }
    return static_cast<int64_t>(v);
}

std::array<float, 3> get_triple(const gguf::File& f, const std::string& key) {
    const auto v = f.get_array<float>(key);
    if (v.size() != 3) throw gguf::Error("mmproj: metadata key '" + key + "' needs 3 values");
    return {v[0], v[1], v[2]};
}

}  // namespace

const ProjectorDesc* find_projector(std::string_view type) {
    for (const ProjectorDesc* d : kProjectors) {
        if (d->name == type) return d;
    }
    return nullptr;
}

std::vector<std::string_view> supported_projectors() {
    std::vector<std::string_view> v;
    for (const ProjectorDesc* d : kProjectors) v.push_back(d->name);
    return v;
}

int64_t ProjectorHParams::n_embd_out() const {
    int64_t n = 1;
    for (bool b : deepstack_layers) n += b ? 1 : 0;
    return projection_dim * n;
}

std::shared_ptr<const Projector> Projector::load(const std::filesystem::path& path) {
    return from_file(gguf::File::open(path));
}

std::shared_ptr<const Projector> Projector::from_file(gguf::File file) {
    return std::shared_ptr<const Projector>(new Projector(std::move(file)));
}

Projector::Projector(gguf::File file) : file_(std::move(file)) {
    const gguf::File& f = file_;
    if (f.architecture() != "clip") {
        throw gguf::Error("mmproj: general.architecture is '" + f.architecture() +
                          "', a projector file's is 'clip'");
    }
    if (!f.get_or<bool>("clip.has_vision_encoder", false)) {
        throw gguf::Error(
            "mmproj: clip.has_vision_encoder is not true (only image projectors "
            "are supported)");
    }
    const auto type = f.get<std::string>("clip.projector_type");
    desc_ = find_projector(type);
    if (!desc_) {
        throw gguf::Error("mmproj: clip.projector_type '" + type +
                          "' is not supported (supported: " + join(supported_projectors()) + ")");
    }
    const ProjectorDesc& d = *desc_;
    ProjectorHParams& hp = hparams_;
    const std::string v = "clip.vision.";
    hp.image_size = get_count(f, v + "image_size");
    hp.patch_size = get_count(f, v + "patch_size");
    hp.n_embd = get_count(f, v + "embedding_length");
    hp.n_ff = get_count(f, v + "feed_forward_length");
    hp.n_layer = get_count(f, v + "block_count");
    hp.n_head = get_count(f, v + "attention.head_count");
    hp.projection_dim = get_count(f, v + "projection_dim");
    hp.eps = f.get<float>(v + "attention.layer_norm_epsilon");
    hp.mean = get_triple(f, v + "image_mean");
    hp.std = get_triple(f, v + "image_std");
    for (int c = 0; c < 3; ++c) {
        if (!(hp.std[c] > 0.0f) || !std::isfinite(hp.mean[c])) {
            throw gguf::Error(
                "mmproj: clip.vision.image_std must be positive and image_mean "
                "finite");
        }
    }
    if (hp.n_embd % hp.n_head != 0) {
        throw gguf::Error(
            "mmproj: clip.vision.embedding_length is not a multiple of "
            "clip.vision.attention.head_count");
    }
    const int64_t head_dim = hp.n_embd / hp.n_head;
    if (d.rope_2d && head_dim % 4 != 0) {
        throw gguf::Error("mmproj: the 2-D RoPE needs a head size that is a multiple of 4");
    }
    if (hp.image_size % hp.patch_size != 0) {
        throw gguf::Error(
            "mmproj: clip.vision.image_size is not a multiple of "
            "clip.vision.patch_size");
    }
    const int64_t side = hp.image_size / hp.patch_size;
    // What one picture may cost is bounded by the file: real projectors have grids of 16 to 64
    // patches a side and slice into a few tiles a side.
    if (hp.image_size > 4096 || hp.patch_size > 256) {
        throw gguf::Error("mmproj: clip.vision.image_size " + std::to_string(hp.image_size) +
                          " or patch_size " + std::to_string(hp.patch_size) +
                          " is beyond what projectors use (4096, 256)");
    }
    if (side > 1024) {
        throw gguf::Error("mmproj: clip.vision.image_size / patch_size = " + std::to_string(side) +
                          " patches a side, more than 1024");
    }
    switch (d.merge) {
        case Merge::avg_pool:
            hp.merge = 4;  // clip.cpp's default for Gemma 3: no key carries it
            break;
        case Merge::pixel_shuffle:
            hp.merge = get_count(f, v + "projector.scale_factor");
            break;
        case Merge::merge_2x2:
            hp.merge = f.get_or<uint32_t>(v + "spatial_merge_size", 2);
            if (hp.merge != 2) {
                throw gguf::Error("mmproj: clip.vision.spatial_merge_size " +
                                  std::to_string(hp.merge) + " is not supported (2 only)");
            }
            break;
    }
    if (d.sizing != Sizing::smart && side % hp.merge != 0) {
        throw gguf::Error("mmproj: the patch grid (" + std::to_string(side) +
                          ") is not a multiple of the merge size " + std::to_string(hp.merge));
    }
    if (d.sizing == Sizing::slices) {
        hp.preproc_image_size = get_count(f, v + "preproc_image_size");
        if (hp.preproc_image_size > 16 * hp.image_size) {
            throw gguf::Error(
                "mmproj: clip.vision.preproc_image_size makes more than 16 tiles a "
                "side");
        }
    }
    if (d.window_attention) hp.n_wa_pattern = f.get_or<uint32_t>(v + "n_wa_pattern", 0);
    if (d.deepstack) {
        hp.deepstack_layers = f.get_array<bool>(v + "is_deepstack_layers");
        if (static_cast<int64_t>(hp.deepstack_layers.size()) != hp.n_layer) {
            throw gguf::Error("mmproj: clip.vision.is_deepstack_layers needs one entry per block");
        }
    }

    Binder b(f);
    ProjectorWeights& w = weights_;
    const int64_t p = hp.patch_size;
    const int64_t n = hp.n_embd;
    for (int k = 0; k < d.patch_kernels; ++k) {
        const std::string name =
            k == 0 ? "v.patch_embd.weight" : "v.patch_embd.weight." + std::to_string(k);
        w.patch.push_back(b.flat(name, {p, p, 3, n}, true));
    }
    w.patch_b = b.vec("v.patch_embd.bias", n, d.patch_bias);
    if (d.positions != Positions::none) {
        const gguf::TensorInfo* t = b.find("v.position_embd.weight", true);
        w.n_position = t->ne[1];
        const int64_t want = d.positions == Positions::table ? side * side : w.n_position;
        const auto root = static_cast<int64_t>(std::lround(std::sqrt(double(w.n_position))));
        if (t->ne[0] != n || t->ne[1] != want || t->ne[2] != 1 || t->ne[3] != 1 ||
            root * root != w.n_position) {
            throw gguf::Error(
                "mmproj: tensor 'v.position_embd.weight' has shape " + t->shape_string() +
                ", expected [" + std::to_string(n) + ", a square number of positions" +
                (d.positions == Positions::table ? " = " + std::to_string(want) : std::string()) +
                "]");
        }
        w.position = b.floats(*t, "v.position_embd.weight");
    }
    for (int64_t il = 0; il < hp.n_layer; ++il) {
        const std::string pre = "v.blk." + std::to_string(il) + ".";
        ProjectorLayer L;
        L.ln1 = b.vec(pre + "ln1.weight", n, true);
        L.ln1_b = b.vec(pre + "ln1.bias", n, d.norm_bias);
        L.ln2 = b.vec(pre + "ln2.weight", n, true);
        L.ln2_b = b.vec(pre + "ln2.bias", n, d.norm_bias);
        if (d.fused_qkv) {
            L.qkv = b.mat(pre + "attn_qkv.weight", n, 3 * n, true);
            L.bqkv = b.vec(pre + "attn_qkv.bias", 3 * n, true);
        } else {
            L.q = b.mat(pre + "attn_q.weight", n, n, true);
            L.k = b.mat(pre + "attn_k.weight", n, n, true);
            L.v = b.mat(pre + "attn_v.weight", n, n, true);
            L.bq = b.vec(pre + "attn_q.bias", n, true);
            L.bk = b.vec(pre + "attn_k.bias", n, true);
            L.bv = b.vec(pre + "attn_v.bias", n, true);
        }
        L.out = b.mat(pre + "attn_out.weight", n, n, true);
        L.out_b = b.vec(pre + "attn_out.bias", n, true);
        std::string up = pre + "ffn_up", down = pre + "ffn_down";
        if (d.swap_ffn_updown && hp.n_ff != n) {
            const gguf::TensorInfo* t = f.find_tensor(down + ".weight");
            if (t && t->ne[0] == n) std::swap(up, down);
        }
        if (d.ffn == VisionFfn::swiglu) {
            L.gate = b.mat(pre + "ffn_gate.weight", n, hp.n_ff, true);
            L.gate_b = b.vec(pre + "ffn_gate.bias", hp.n_ff, true);
        }
        L.up = b.mat(up + ".weight", n, hp.n_ff, true);
        L.up_b = b.vec(up + ".bias", hp.n_ff, true);
        L.down = b.mat(down + ".weight", hp.n_ff, n, true);
        L.down_b = b.vec(down + ".bias", n, true);
        w.layers.push_back(std::move(L));
    }
    w.post_ln = b.vec("v.post_ln.weight", n, true);
    w.post_ln_b = b.vec("v.post_ln.bias", n, d.norm_bias);
    const int64_t out = hp.projection_dim;
    switch (d.projection) {
        case Projection::soft_emb: {
            w.soft_emb_norm = b.vec("mm.soft_emb_norm.weight", n, true);
            // Stored [text, vision] and applied as x . W: kept transposed, so the product is the
            // kernels' usual one.
            const Matrix m = b.mat("mm.input_projection.weight", out, n, true);
            const Vector flat = b.floats(*m.tensor, "mm.input_projection.weight");
            w.input_projection.rows = out;
            w.input_projection.cols = n;
            w.input_projection.owned.resize(static_cast<size_t>(out * n));
            for (int64_t i = 0; i < n; ++i) {
                for (int64_t j = 0; j < out; ++j)
                    w.input_projection.owned[j * n + i] = flat[i * out + j];
            }
            break;
        }
        case Projection::fc:
            w.fc = b.mat("mm.model.fc.weight", n * hp.merge * hp.merge, out, true);
            break;
        case Projection::mlp: {
            const int64_t in = n * 4;
            const gguf::TensorInfo* t0 = f.find_tensor("mm.0.weight");
            const int64_t hidden = t0 ? t0->ne[1] : in;
            w.mm0 = b.mat("mm.0.weight", in, hidden, true);
            w.mm0_b = b.vec("mm.0.bias", hidden, true);
            w.mm2 = b.mat("mm.2.weight", hidden, out, true);
            w.mm2_b = b.vec("mm.2.bias", out, true);
            break;
        }
    }
    if (d.deepstack) {
        for (int64_t il = 0; il < hp.n_layer; ++il) {
            if (!hp.deepstack_layers[il]) continue;
            const std::string pre = "v.deepstack." + std::to_string(il) + ".";
            DeepstackWeights ds;
            ds.layer = il;
            const int64_t in = n * 4;
            ds.norm = b.vec(pre + "norm.weight", in, true);
            ds.norm_b = b.vec(pre + "norm.bias", in, true);
            const gguf::TensorInfo* t1 = f.find_tensor(pre + "fc1.weight");
            const int64_t hidden = t1 ? t1->ne[1] : in;
            ds.fc1 = b.mat(pre + "fc1.weight", in, hidden, true);
            ds.fc1_b = b.vec(pre + "fc1.bias", hidden, true);
            ds.fc2 = b.mat(pre + "fc2.weight", hidden, out, true);
            ds.fc2_b = b.vec(pre + "fc2.bias", out, true);
            w.deepstack.push_back(std::move(ds));
        }
    }
    b.refuse_unbound();
}

void Projector::check_fits(int64_t text_n_embd_inp) const {
    if (hparams_.n_embd_out() != text_n_embd_inp) {
        throw gguf::Error(
            "mmproj: clip.vision.projection_dim " + std::to_string(hparams_.projection_dim) +
            (hparams_.deepstack_layers.empty()
                 ? std::string()
                 : " (" + std::to_string(hparams_.n_embd_out()) + " with its deepstack layers)") +
            " does not match the text model's input width " + std::to_string(text_n_embd_inp));
    }
}

}  // namespace ggufd::vision
