#include "engine/whisper/model.h"

#include <algorithm>
#include <set>

#include "engine/kernels/formats.h"

namespace ggufd::whisper {

namespace {

const std::string kArch = "whisper";

// Binds tensors by name, remembering which, so that what is left unbound can be refused.
class Binder {
  public:
    explicit Binder(const gguf::File& f) : f_(f) {}

    const gguf::TensorInfo& find(const std::string& name) {
        const gguf::TensorInfo* t = f_.find_tensor(name);
        if (!t) throw gguf::Error("whisper: tensor '" + name + "' is missing");
        bound_.insert(name);
        return *t;
    }

    Vector vec(const std::string& name, int64_t n) {
        const gguf::TensorInfo& t = find(name);
        // whisper.cpp's own files store conv biases as [1, n]: the same bytes.
        if (static_cast<int64_t>(t.n_elements) != n || (t.ne[0] != n && t.ne[0] != 1)) {
            throw gguf::Error("whisper: tensor '" + name + "' has shape " + t.shape_string() +
                              ", expected [" + std::to_string(n) + "]");
        }
        return floats(t, name);
    }

    Vector table(const std::string& name, int64_t cols, int64_t rows) {
        const gguf::TensorInfo& t = find(name);
        check_shape(t, name, {cols, rows, 1, 1});
        return floats(t, name);
    }

    Matrix mat(const std::string& name, std::array<int64_t, 4> ne) {
        const gguf::TensorInfo& t = find(name);
        check_shape(t, name, ne);
        const int64_t cols = ne[0] * (ne[2] > 1 ? ne[1] : 1);
        const int64_t rows = ne[2] > 1 ? ne[2] : ne[1];
        check_type(t, name, cols);
        return Matrix{.tensor = &t, .rows = rows, .cols = cols};
    }

    Linear linear(const std::string& name, int64_t in, int64_t out, bool bias) {
        Linear l;
        l.w = mat(name + ".weight", {in, out, 1, 1});
        if (bias) l.b = vec(name + ".bias", out);
        return l;
    }

    Norm norm(const std::string& name, int64_t n) {
        return Norm{.w = vec(name + ".weight", n), .b = vec(name + ".bias", n)};
    }

    Attention attention(const std::string& pre, int64_t n) {
        return Attention{.q = linear(pre + "_q", n, n, true),
                         .k = linear(pre + "_k", n, n, false),
                         .v = linear(pre + "_v", n, n, true),
                         .o = linear(pre + "_o", n, n, true)};
    }

    void refuse_unbound() const {
        for (const auto& t : f_.tensors()) {
            if (!bound_.contains(t.name)) {
                throw gguf::Error("whisper: tensor '" + t.name +
                                  "' is not part of the Whisper layout");
            }
        }
    }

  private:
    static void check_shape(const gguf::TensorInfo& t, const std::string& name,
                            std::array<int64_t, 4> ne) {
        if (t.ne != ne) {
            int dims = 4;
            while (dims > 1 && ne[dims - 1] == 1) --dims;
            std::string want = "[" + std::to_string(ne[0]);
            for (int i = 1; i < dims; ++i) want += ", " + std::to_string(ne[i]);
            throw gguf::Error("whisper: tensor '" + name + "' has shape " + t.shape_string() +
                              " where the hyperparameters make " + want + "]");
        }
    }

    static void check_type(const gguf::TensorInfo& t, const std::string& name, int64_t cols) {
        if (!kernels::find_kernels(t.type)) {
            throw gguf::Error("whisper: tensor '" + name + "' has type " +
                              std::string(gguf::type_name(t.type)) +
                              ", which ggufd cannot compute");
        }
        if (cols % gguf::type_info(t.type).block_size != 0) {
            throw gguf::Error("whisper: tensor '" + name + "' rows are not whole blocks of " +
                              std::string(gguf::type_name(t.type)));
        }
    }

    static Vector floats(const gguf::TensorInfo& t, const std::string& name) {
        check_type(t, name, t.ne[0]);
        Vector v(t.n_elements);
        const int64_t row = t.ne[0];
        for (uint64_t r = 0; r < t.n_elements / row; ++r) {
            kernels::dequantize_row(t.type, t.data + r * t.row_bytes(), v.data() + r * row, row);
        }
        return v;
    }

    const gguf::File& f_;
    std::set<std::string> bound_;
};

// The keys this loader reads; any other whisper.* key is refused, so a variant this code does
// not know is never run as another.
class Keys {
  public:
    explicit Keys(const gguf::File& f) : f_(f) {}

    int64_t count(const std::string& key, int64_t max) {
        read_.insert(key);
        const auto v = f_.get<uint64_t>(key);
        if (v == 0 || v > static_cast<uint64_t>(max)) {
            throw gguf::Error("whisper: metadata key '" + key + "' = " + std::to_string(v) +
                              " is out of range (1.." + std::to_string(max) + ")");
        }
        return static_cast<int64_t>(v);
    }
    int64_t count_or(const std::string& key, int64_t fallback, int64_t max) {
        if (!f_.metadata().contains(key)) return fallback;
        return count(key, max);
    }
    float eps(const std::string& key) {
        read_.insert(key);
        const float v = f_.get_or<float>(key, 1e-5f);
        if (!(v > 0.0f && v < 1.0f)) {
            throw gguf::Error("whisper: metadata key '" + key + "' = " + std::to_string(v) +
                              " is out of range");
        }
        return v;
    }
    std::vector<float> floats(const std::string& key) {
        read_.insert(key);
        return f_.get_array<float>(key);
    }

    void refuse_unread() const {
        for (const auto& kv : f_.metadata().entries()) {
            if (kv.key.starts_with(kArch + ".") && !read_.contains(kv.key)) {
                throw gguf::Error("whisper: metadata key '" + kv.key + "' is not supported");
            }
        }
    }

  private:
    const gguf::File& f_;
    std::set<std::string> read_;
};

// Whisper's vocabulary has no merges: decoding needs only the token strings, and a prompt is
// tokenized by longest match (transcribe.cpp). The tokenizer library builds a BPE vocabulary
// only with merges, so it gets an empty list.
std::unique_ptr<tokenizer::Tokenizer> make_tokenizer(const gguf::File& f) {
    gguf::Metadata md;
    for (const auto& kv : f.metadata().entries()) {
        if (kv.key.starts_with("tokenizer.")) md.add(kv.key, kv.value);
    }
    // Whisper's text splits as GPT-2's (only prompts are ever tokenized, by longest match).
    if (!md.contains("tokenizer.ggml.pre")) md.add("tokenizer.ggml.pre", gguf::Value("gpt2"));
    if (!md.contains("tokenizer.ggml.merges")) {
        md.add("tokenizer.ggml.merges", gguf::Value(gguf::Array{std::vector<std::string>{}}));
    }
    try {
        return std::make_unique<tokenizer::Tokenizer>(tokenizer::Vocab::from_metadata(md));
    } catch (const std::exception& e) {
        throw gguf::Error(std::string("whisper: vocabulary: ") + e.what());
    }
}

int32_t find_token(const tokenizer::Vocab& v, std::string_view text) {
    const int32_t id = v.find(text);
    if (id == tokenizer::kNoToken) {
        throw gguf::Error("whisper: the vocabulary has no token '" + std::string(text) + "'");
    }
    return id;
}

}  // namespace

const std::vector<std::string>& language_codes() {
    static const std::vector<std::string> codes = {
        "en", "zh", "de", "es",  "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv",
        "it", "id", "hi", "fi",  "vi", "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no",
        "th", "ur", "hr", "bg",  "lt", "la", "mi", "ml", "cy", "sk", "te", "fa", "lv", "bn", "sr",
        "az", "sl", "kn", "et",  "mk", "br", "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw",
        "gl", "mr", "pa", "si",  "km", "sn", "yo", "so", "af", "oc", "ka", "be", "tg", "sd", "gu",
        "am", "yi", "lo", "uz",  "fo", "ht", "ps", "tk", "nn", "mt", "sa", "lb", "my", "bo", "tl",
        "mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su", "yue"};
    return codes;
}

int language_index(std::string_view code) {
    static const std::vector<std::pair<std::string_view, std::string_view>> names = {
        {"english", "en"},    {"chinese", "zh"},    {"german", "de"},  {"spanish", "es"},
        {"russian", "ru"},    {"korean", "ko"},     {"french", "fr"},  {"japanese", "ja"},
        {"portuguese", "pt"}, {"turkish", "tr"},    {"polish", "pl"},  {"dutch", "nl"},
        {"arabic", "ar"},     {"swedish", "sv"},    {"italian", "it"}, {"hindi", "hi"},
        {"ukrainian", "uk"},  {"greek", "el"},      {"czech", "cs"},   {"danish", "da"},
        {"finnish", "fi"},    {"vietnamese", "vi"}, {"hebrew", "he"},  {"indonesian", "id"}};
    std::string lower(code);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    for (const auto& [name, c] : names) {
        if (lower == name) lower = c;
    }
    const auto& codes = language_codes();
    for (size_t i = 0; i < codes.size(); ++i) {
        if (codes[i] == lower) return static_cast<int>(i);
    }
    return -1;
}

bool is_whisper(const gguf::File& file) {
    return file.architecture() == kArch;
}

std::shared_ptr<const Model> Model::load(const std::filesystem::path& path) {
    return from_file(gguf::File::open(path));
}

std::shared_ptr<const Model> Model::from_file(gguf::File file) {
    return std::shared_ptr<const Model>(new Model(std::move(file)));
}

Model::Model(gguf::File file) : file_(std::move(file)) {
    const gguf::File& f = file_;
    if (f.architecture() != kArch) {
        throw gguf::Error("whisper: general.architecture is '" + f.architecture() +
                          "', not 'whisper'");
    }
    Keys k(f);
    const std::string enc = kArch + ".encoder.", dec = kArch + ".decoder.";
    const std::string audio = kArch + ".audio.";
    HParams& hp = hp_;
    hp.n_audio_ctx = k.count(enc + "context_length", 1 << 16);
    hp.n_state = k.count(enc + "embedding_length", 1 << 14);
    hp.n_enc_layer = k.count(enc + "block_count", 256);
    hp.n_mels = k.count(enc + "mels_count", 1024);
    hp.n_head = k.count(enc + "attention.head_count", 1024);
    hp.n_ff = k.count_or(enc + "feed_forward_length", 4 * hp.n_state, 1 << 16);
    hp.enc_eps = k.eps(enc + "attention.layer_norm_epsilon");
    hp.n_text_ctx = k.count(dec + "context_length", 1 << 16);
    const int64_t dec_state = k.count(dec + "embedding_length", 1 << 14);
    hp.n_dec_layer = k.count(dec + "block_count", 256);
    const int64_t dec_head = k.count(dec + "attention.head_count", 1024);
    const int64_t dec_ff = k.count_or(dec + "feed_forward_length", 4 * dec_state, 1 << 16);
    hp.dec_eps = k.eps(dec + "attention.layer_norm_epsilon");
    if (dec_state != hp.n_state || dec_head != hp.n_head || dec_ff != hp.n_ff) {
        throw gguf::Error(
            "whisper: the decoder's width, head count and feed-forward length must equal the "
            "encoder's (every Whisper has them equal)");
    }
    if (hp.n_state % hp.n_head != 0) {
        throw gguf::Error("whisper: " + enc + "embedding_length is not a multiple of " + enc +
                          "attention.head_count");
    }
    hp.sample_rate = k.count_or(audio + "sample_rate", 16000, 1 << 20);
    hp.n_fft = k.count_or(audio + "n_fft", 400, 1 << 14);
    hp.hop_length = k.count_or(audio + "hop_length", 160, 1 << 14);
    hp.chunk_seconds = k.count_or(audio + "chunk_length", 30, 3600);
    if (hp.sample_rate != 16000 || hp.n_fft != 400 || hp.hop_length != 160 ||
        hp.chunk_seconds != 30 || hp.n_audio_ctx != 1500) {
        throw gguf::Error(
            "whisper: only Whisper's front end is supported (16000 Hz, n_fft 400, hop 160, 30 s "
            "windows of 1500 audio positions)");
    }
    mel_filters_ = k.floats(audio + "mel_filters");
    const int64_t n_bins = hp.n_fft / 2 + 1;
    if (static_cast<int64_t>(mel_filters_.size()) != hp.n_mels * n_bins) {
        throw gguf::Error("whisper: " + audio + "mel_filters has " +
                          std::to_string(mel_filters_.size()) + " values, expected " +
                          std::to_string(hp.n_mels) + " x " + std::to_string(n_bins));
    }
    k.refuse_unread();

    tokenizer_ = make_tokenizer(f);
    const tokenizer::Vocab& v = tokenizer_->vocab();
    hp.n_vocab = v.size();
    sp_.eot = find_token(v, "<|endoftext|>");
    sp_.sot = find_token(v, "<|startoftranscript|>");
    sp_.translate = find_token(v, "<|translate|>");
    sp_.transcribe = find_token(v, "<|transcribe|>");
    sp_.sot_lm = find_token(v, "<|startoflm|>");
    sp_.sot_prev = find_token(v, "<|startofprev|>");
    sp_.no_timestamps = find_token(v, "<|notimestamps|>");
    sp_.no_speech = v.find("<|nospeech|>");
    if (sp_.no_speech == tokenizer::kNoToken) sp_.no_speech = find_token(v, "<|nocaptions|>");
    sp_.timestamp_begin = find_token(v, "<|0.00|>");
    if (sp_.timestamp_begin != sp_.no_timestamps + 1) {
        throw gguf::Error("whisper: <|0.00|> does not follow <|notimestamps|>");
    }
    const int32_t en = v.find("<|en|>");
    if (en != tokenizer::kNoToken) {
        sp_.lang_begin = en;
        for (const auto& code : language_codes()) {
            if (v.find("<|" + code + "|>") != en + sp_.n_lang) break;
            ++sp_.n_lang;
        }
    }

    Binder b(f);
    Weights& w = w_;
    const int64_t n = hp.n_state;
    w.conv0.w = b.mat("enc.conv1d.0.weight", {3, hp.n_mels, n, 1});
    w.conv0.b = b.vec("enc.conv1d.0.bias", n);
    w.conv1.w = b.mat("enc.conv1d.1.weight", {3, n, n, 1});
    w.conv1.b = b.vec("enc.conv1d.1.bias", n);
    w.enc_pos = b.table("enc.position_embd.weight", n, hp.n_audio_ctx);
    for (int64_t il = 0; il < hp.n_enc_layer; ++il) {
        const std::string pre = "enc.blk." + std::to_string(il) + ".";
        EncoderLayer L;
        L.attn_norm = b.norm(pre + "attn_norm", n);
        L.attn = b.attention(pre + "attn", n);
        L.ffn_norm = b.norm(pre + "ffn_norm", n);
        L.up = b.linear(pre + "ffn_up", n, hp.n_ff, true);
        L.down = b.linear(pre + "ffn_down", hp.n_ff, n, true);
        w.enc.push_back(std::move(L));
    }
    w.enc_out_norm = b.norm("enc.output_norm", n);
    w.token_embd = b.mat("token_embd.weight", {n, hp.n_vocab, 1, 1});
    w.dec_pos = b.table("dec.position_embd.weight", n, hp.n_text_ctx);
    for (int64_t il = 0; il < hp.n_dec_layer; ++il) {
        const std::string pre = "dec.blk." + std::to_string(il) + ".";
        DecoderLayer L;
        L.attn_norm = b.norm(pre + "attn_norm", n);
        L.attn = b.attention(pre + "attn", n);
        L.cross_norm = b.norm(pre + "cross_attn_norm", n);
        L.cross = b.attention(pre + "cross_attn", n);
        L.ffn_norm = b.norm(pre + "ffn_norm", n);
        L.up = b.linear(pre + "ffn_up", n, hp.n_ff, true);
        L.down = b.linear(pre + "ffn_down", hp.n_ff, n, true);
        w.dec.push_back(std::move(L));
    }
    w.dec_out_norm = b.norm("dec.output_norm", n);
    b.refuse_unbound();
}

std::string Model::token_bytes(int32_t id) const {
    if (id < 0 || id >= sp_.eot) return {};
    return tokenizer_->token_to_piece(id);
}

}  // namespace ggufd::whisper
