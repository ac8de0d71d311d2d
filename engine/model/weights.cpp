#include "engine/model/weights.h"

#include <algorithm>
#include <initializer_list>
#include <string>

namespace ggufd::model {
namespace {

std::string shape_text(std::initializer_list<int64_t> dims) {
    std::string s = "[";
    for (int64_t d : dims) {
        if (s.size() > 1) s += ", ";
        s += std::to_string(d);
    }
    return s + "]";
}

class Binder {
  public:
    explicit Binder(const gguf::File& f) : file_(f) {}

    const gguf::TensorInfo* require(const std::string& name, std::initializer_list<int64_t> shape) {
        const gguf::TensorInfo* t = file_.find_tensor(name);
        if (!t) throw gguf::Error("model: required tensor '" + name + "' is missing");
        check(*t, shape);
        return t;
    }

    const gguf::TensorInfo* optional(const std::string& name,
                                     std::initializer_list<int64_t> shape) {
        const gguf::TensorInfo* t = file_.find_tensor(name);
        if (t) check(*t, shape);
        return t;
    }

  private:
    static void check(const gguf::TensorInfo& t, std::initializer_list<int64_t> shape) {
        bool same = t.n_dims == shape.size();
        size_t i = 0;
        for (int64_t d : shape) same = same && t.ne[i++] == d;
        if (!same) {
            throw gguf::Error("model: tensor '" + t.name + "' has shape " + t.shape_string() +
                              ", expected " + shape_text(shape));
        }
    }

    const gguf::File& file_;
};

}  // namespace

Weights bind_weights(const gguf::File& file, const HParams& hp) {
    Binder b(file);
    const int64_t embd = hp.n_embd, vocab = hp.n_vocab, ff = hp.n_ff;
    const int64_t q_out = int64_t{hp.head_dim_k} * hp.n_head;
    const int64_t k_out = hp.n_embd_k_gqa(), v_out = hp.n_embd_v_gqa();
    const int64_t attn_out_in = int64_t{hp.head_dim_v} * hp.n_head;

    Weights w;
    w.tok_embd = b.require("token_embd.weight", {embd, vocab});
    w.output_norm = b.require("output_norm.weight", {embd});
    w.output = b.optional("output.weight", {embd, vocab});
    if (!w.output) {
        w.output = w.tok_embd;
        w.tied_output = true;
    }
    // Layers are appended as they bind, so a file claiming more layers than it holds fails at the
    // first missing tensor instead of sizing the table by block_count alone (a 5 KB file claiming
    // 16 M layers asked for 1.8 GB; 2^32-1 layers threw std::bad_alloc).
    w.layers.reserve(std::min<size_t>(hp.n_layer, file.tensors().size()));
    for (uint32_t i = 0; i < hp.n_layer; ++i) {
        const std::string p = "blk." + std::to_string(i) + ".";
        LayerWeights& l = w.layers.emplace_back();
        l.attn_norm = b.require(p + "attn_norm.weight", {embd});
        l.wq = b.require(p + "attn_q.weight", {embd, q_out});
        l.wk = b.require(p + "attn_k.weight", {embd, k_out});
        l.wv = b.require(p + "attn_v.weight", {embd, v_out});
        l.wo = b.require(p + "attn_output.weight", {attn_out_in, embd});
        if (hp.qkv_bias) {
            l.bq = b.require(p + "attn_q.bias", {q_out});
            l.bk = b.require(p + "attn_k.bias", {k_out});
            l.bv = b.require(p + "attn_v.bias", {v_out});
        } else {
            l.bq = b.optional(p + "attn_q.bias", {q_out});
            l.bk = b.optional(p + "attn_k.bias", {k_out});
            l.bv = b.optional(p + "attn_v.bias", {v_out});
        }
        l.ffn_norm = b.require(p + "ffn_norm.weight", {embd});
        l.ffn_gate = b.require(p + "ffn_gate.weight", {embd, ff});
        l.ffn_up = b.require(p + "ffn_up.weight", {embd, ff});
        l.ffn_down = b.require(p + "ffn_down.weight", {ff, embd});
    }
    return w;
}

}  // namespace ggufd::model
