#include "engine/whisper/convert.h"

#include <array>
#include <cstdio>
#include <cstring>
#include <utility>

#include "engine/tokenizer/unicode.h"
#include "engine/whisper/model.h"
#include "text/utf8.h"

namespace ggufd::whisper {

namespace {

constexpr uint32_t kMagic = 0x67676d6c;  // "ggml"
constexpr int32_t kQuantVersion = 2;     // whisper.cpp's ftype of a quantised file: + 1000 x this
constexpr int32_t kTimestamps = 1501;    // <|0.00|> .. <|30.00|>

// One name in each naming: GGUF's (T5-style) and whisper.cpp's (PyTorch's). Block parts keep
// their index; `to_bin` chooses the direction. Empty when the name is not Whisper's.
std::string rename(const std::string& name, bool to_bin) {
    static const std::pair<const char*, const char*> kWhole[] = {
        {"enc.conv1d.0.", "encoder.conv1."},
        {"enc.conv1d.1.", "encoder.conv2."},
        {"enc.position_embd.weight", "encoder.positional_embedding"},
        {"enc.output_norm.", "encoder.ln_post."},
        {"token_embd.weight", "decoder.token_embedding.weight"},
        {"dec.position_embd.weight", "decoder.positional_embedding"},
        {"dec.output_norm.", "decoder.ln."},
    };
    static const std::pair<const char*, const char*> kBlock[] = {
        {"attn_norm.", "attn_ln."},
        {"attn_q.", "attn.query."},
        {"attn_k.", "attn.key."},
        {"attn_v.", "attn.value."},
        {"attn_o.", "attn.out."},
        {"cross_attn_norm.", "cross_attn_ln."},
        {"cross_attn_q.", "cross_attn.query."},
        {"cross_attn_k.", "cross_attn.key."},
        {"cross_attn_v.", "cross_attn.value."},
        {"cross_attn_o.", "cross_attn.out."},
        {"ffn_norm.", "mlp_ln."},
        {"ffn_up.", "mlp.0."},
        {"ffn_down.", "mlp.2."},
    };
    for (const auto& [g, b] : kWhole) {
        const std::string from = to_bin ? g : b, to = to_bin ? b : g;
        if (name.starts_with(from)) return to + name.substr(from.size());
    }
    for (const auto& [gp, bp] :
         {std::pair{"enc.blk.", "encoder.blocks."}, std::pair{"dec.blk.", "decoder.blocks."}}) {
        const std::string from = to_bin ? gp : bp, to = to_bin ? bp : gp;
        if (!name.starts_with(from)) continue;
        const size_t dot = name.find('.', from.size());
        if (dot == std::string::npos) return {};
        const std::string index = name.substr(from.size(), dot - from.size() + 1);
        const std::string rest = name.substr(dot + 1);
        for (const auto& [g, b] : kBlock) {
            const std::string f = to_bin ? g : b, t = to_bin ? b : g;
            if (rest.starts_with(f)) return to + index + t + rest.substr(f.size());
        }
    }
    return {};
}

bool is_conv_bias(const std::string& gguf_name) {
    return gguf_name == "enc.conv1d.0.bias" || gguf_name == "enc.conv1d.1.bias";
}

class Reader {
  public:
    explicit Reader(std::span<const uint8_t> b) : b_(b) {}
    std::span<const uint8_t> bytes(size_t n, const char* what) {
        if (n > b_.size() - at_) {
            throw gguf::Error(std::string("whisper .bin: the file ends inside ") + what +
                              " (offset " + std::to_string(at_) + ")");
        }
        const auto s = b_.subspan(at_, n);
        at_ += n;
        return s;
    }
    int32_t i32(const char* what) {
        int32_t v;
        std::memcpy(&v, bytes(4, what).data(), 4);
        return v;
    }
    bool done() const { return at_ == b_.size(); }
    size_t at() const { return at_; }

  private:
    std::span<const uint8_t> b_;
    size_t at_ = 0;
};

void put_i32(std::vector<uint8_t>& out, int32_t v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out.insert(out.end(), p, p + 4);
}

// The special tokens' names from <|endoftext|> on, in OpenAI's order.
std::vector<std::string> special_names(int32_t n_lang) {
    std::vector<std::string> s = {"<|endoftext|>", "<|startoftranscript|>"};
    for (int32_t i = 0; i < n_lang; ++i) s.push_back("<|" + language_codes()[i] + "|>");
    for (const char* n : {"<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>",
                          "<|nospeech|>", "<|notimestamps|>"}) {
        s.emplace_back(n);
    }
    for (int32_t i = 0; i < kTimestamps; ++i) {
        char buf[32];  // room for any int, which GCC's format check assumes
        std::snprintf(buf, sizeof buf, "<|%d.%02d|>", i * 2 / 100, i * 2 % 100);
        s.emplace_back(buf);
    }
    return s;
}

}  // namespace

gguf::Writer bin_to_gguf(std::span<const uint8_t> bin, const std::string& name) {
    Reader r(bin);
    if (static_cast<uint32_t>(r.i32("the magic")) != kMagic) {
        throw gguf::Error("whisper .bin: not a whisper.cpp ggml file (no 'ggml' magic)");
    }
    int32_t hp[11];
    for (int32_t& v : hp) {
        v = r.i32("the hyperparameters");
        if (v < 0 || v > (1 << 24))
            throw gguf::Error("whisper .bin: a hyperparameter is out of range");
    }
    const auto [n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer, n_text_ctx,
                n_text_state, n_text_head, n_text_layer, n_mels, ftype] = std::to_array(hp);
    const int32_t n_mel = r.i32("the mel filters"), n_bins = r.i32("the mel filters");
    if (n_mel != n_mels || n_bins <= 0 || n_bins > 4096) {
        throw gguf::Error("whisper .bin: the mel filter bank's size does not match n_mels");
    }
    std::vector<float> filters(static_cast<size_t>(n_mel) * n_bins);
    std::memcpy(filters.data(), r.bytes(filters.size() * 4, "the mel filters").data(),
                filters.size() * 4);

    const int32_t n_words = r.i32("the vocabulary");
    const bool multilingual = n_vocab >= 51865;
    const int32_t eot = multilingual ? 50257 : 50256;
    const int32_t n_lang = n_vocab - eot - 2 - 6 - kTimestamps;
    if (n_words < 0 || n_words > eot || n_lang < 0 ||
        n_lang > static_cast<int32_t>(language_codes().size())) {
        throw gguf::Error("whisper .bin: n_vocab " + std::to_string(n_vocab) + " and " +
                          std::to_string(n_words) + " words are not a Whisper vocabulary");
    }
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    for (int32_t i = 0; i < n_words; ++i) {
        const auto len = static_cast<uint32_t>(r.i32("the vocabulary"));
        const auto word = r.bytes(len, "the vocabulary");
        std::string t;
        for (uint8_t c : word) text::append_utf8(t, tokenizer::unicode::byte_to_code_point(c));
        types.push_back(word.empty() ? 5 : 1);  // the multilingual file's empty token is unused
        tokens.push_back(std::move(t));
    }
    for (int32_t i = n_words; i < eot; ++i) {
        tokens.push_back("[_extra_token_" + std::to_string(i) + "]");
        types.push_back(5);
    }
    for (std::string& s : special_names(n_lang)) {
        tokens.push_back(std::move(s));
        types.push_back(3);
    }

    gguf::Writer w;
    auto u64 = [](int32_t v) { return gguf::Value(static_cast<uint64_t>(v)); };
    w.set("general.architecture", gguf::Value("whisper"));
    w.set("general.name", gguf::Value(name));
    w.set("general.file_type", gguf::Value(static_cast<uint32_t>(ftype % 1000)));
    w.set("whisper.encoder.context_length", u64(n_audio_ctx));
    w.set("whisper.encoder.embedding_length", u64(n_audio_state));
    w.set("whisper.encoder.block_count", u64(n_audio_layer));
    w.set("whisper.encoder.mels_count", u64(n_mels));
    w.set("whisper.encoder.attention.head_count", u64(n_audio_head));
    w.set("whisper.encoder.feed_forward_length", u64(4 * n_audio_state));
    w.set("whisper.decoder.context_length", u64(n_text_ctx));
    w.set("whisper.decoder.embedding_length", u64(n_text_state));
    w.set("whisper.decoder.block_count", u64(n_text_layer));
    w.set("whisper.decoder.attention.head_count", u64(n_text_head));
    w.set("whisper.decoder.feed_forward_length", u64(4 * n_text_state));
    w.set("whisper.encoder.attention.layer_norm_epsilon", gguf::Value(1e-5f));
    w.set("whisper.decoder.attention.layer_norm_epsilon", gguf::Value(1e-5f));
    w.set("whisper.audio.sample_rate", gguf::Value(uint32_t{16000}));
    w.set("whisper.audio.n_fft", gguf::Value(static_cast<uint32_t>(2 * (n_bins - 1))));
    w.set("whisper.audio.hop_length", gguf::Value(uint32_t{160}));
    w.set("whisper.audio.chunk_length", gguf::Value(uint32_t{30}));
    w.set("whisper.audio.mel_filters", gguf::Value(gguf::Array{std::move(filters)}));
    w.set("tokenizer.ggml.model", gguf::Value("gpt2"));
    w.set("tokenizer.ggml.tokens", gguf::Value(gguf::Array{std::move(tokens)}));
    w.set("tokenizer.ggml.token_type", gguf::Value(gguf::Array{std::move(types)}));
    w.set("tokenizer.ggml.bos_token_id", gguf::Value(static_cast<uint32_t>(eot + 1)));
    w.set("tokenizer.ggml.eos_token_id", gguf::Value(static_cast<uint32_t>(eot)));

    while (!r.done()) {
        const int32_t n_dims = r.i32("a tensor header");
        const int32_t name_len = r.i32("a tensor header");
        const int32_t type = r.i32("a tensor header");
        if (n_dims < 1 || n_dims > 4 || name_len <= 0 || name_len > 256) {
            throw gguf::Error("whisper .bin: a bad tensor header at offset " +
                              std::to_string(r.at()));
        }
        std::vector<int64_t> ne;
        uint64_t n = 1;
        for (int32_t d = 0; d < n_dims; ++d) {
            const int32_t v = r.i32("a tensor header");
            if (v <= 0 || v > (1 << 24)) throw gguf::Error("whisper .bin: a bad tensor shape");
            ne.push_back(v);
            n *= static_cast<uint64_t>(v);
        }
        const auto nb = r.bytes(static_cast<size_t>(name_len), "a tensor name");
        const std::string bin_name(nb.begin(), nb.end());
        const std::string gname = rename(bin_name, false);
        if (gname.empty()) {
            throw gguf::Error("whisper .bin: tensor '" + bin_name + "' is not Whisper's");
        }
        const gguf::TypeInfo* info = gguf::find_type(static_cast<uint32_t>(type));
        if (!info || ne[0] % info->block_size != 0) {
            throw gguf::Error("whisper .bin: tensor '" + bin_name + "' has a bad type or shape");
        }
        const auto t = info->type;
        const uint64_t bytes = n / info->block_size * info->block_bytes;
        const auto data = r.bytes(static_cast<size_t>(bytes), "a tensor's data");
        if (is_conv_bias(gname)) ne = {static_cast<int64_t>(n)};  // [1, n] there, [n] here
        w.add_tensor(gname, t, ne, data);
    }
    return w;
}

std::vector<uint8_t> gguf_to_bin(const Model& model) {
    const Model* m = &model;
    const gguf::File& f = model.file();
    const HParams& hp = m->hparams();
    std::vector<uint8_t> out;
    put_i32(out, static_cast<int32_t>(kMagic));
    uint32_t ftype = f.get_or<uint32_t>("general.file_type", 1);
    if (ftype > 1) ftype += kQuantVersion * 1000;
    for (int64_t v : {hp.n_vocab, hp.n_audio_ctx, hp.n_state, hp.n_head, hp.n_enc_layer,
                      hp.n_text_ctx, hp.n_state, hp.n_head, hp.n_dec_layer, hp.n_mels}) {
        put_i32(out, static_cast<int32_t>(v));
    }
    put_i32(out, static_cast<int32_t>(ftype));
    const int64_t n_bins = hp.n_fft / 2 + 1;
    put_i32(out, static_cast<int32_t>(hp.n_mels));
    put_i32(out, static_cast<int32_t>(n_bins));
    const auto* fp = reinterpret_cast<const uint8_t*>(m->mel_filters().data());
    out.insert(out.end(), fp, fp + m->mel_filters().size() * 4);
    const int32_t eot = m->specials().eot;
    put_i32(out, eot);
    const std::vector<std::string> tokens = f.get_array<std::string>("tokenizer.ggml.tokens");
    for (int32_t i = 0; i < eot; ++i) {
        std::string raw;
        for (uint32_t cp : text::decode_lenient(tokens[i])) {
            const int b = tokenizer::unicode::code_point_to_byte(cp);
            if (b < 0)
                throw gguf::Error("whisper: token " + std::to_string(i) + " is not byte-level");
            raw += static_cast<char>(b);
        }
        put_i32(out, static_cast<int32_t>(raw.size()));
        out.insert(out.end(), raw.begin(), raw.end());
    }
    for (const gguf::TensorInfo& t : f.tensors()) {
        const std::string bin_name = rename(t.name, true);
        std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
        if (is_conv_bias(t.name)) ne = {1, t.ne[0]};
        put_i32(out, static_cast<int32_t>(ne.size()));
        put_i32(out, static_cast<int32_t>(bin_name.size()));
        put_i32(out, static_cast<int32_t>(t.type));
        for (int64_t v : ne) put_i32(out, static_cast<int32_t>(v));
        out.insert(out.end(), bin_name.begin(), bin_name.end());
        out.insert(out.end(), t.data, t.data + t.n_bytes);
    }
    return out;
}

}  // namespace ggufd::whisper
