#include "engine/whisper/transcribe.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <unordered_map>

#include "engine/kernels/ops.h"

namespace ggufd::whisper {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int64_t kMinFrames = 10;  // whisper_full skips input under 100 ms
constexpr double kFrameSeconds = 0.01;
constexpr double kTimestampSeconds = 0.02;

// log(sum(exp(x))) over [begin, end).
double log_sum_exp(const std::vector<float>& x, int64_t begin, int64_t end) {
    float mx = kNegInf;
    for (int64_t i = begin; i < end; ++i) mx = std::max(mx, x[i]);
    if (mx == kNegInf) return -std::numeric_limits<double>::infinity();
    double s = 0.0;
    for (int64_t i = begin; i < end; ++i) s += std::exp(static_cast<double>(x[i] - mx));
    return static_cast<double>(mx) + std::log(s);
}

double entropy_of_last(const std::vector<int32_t>& tokens, size_t n) {
    const size_t k = std::min(n, tokens.size());
    std::map<int32_t, int> counts;
    for (size_t i = tokens.size() - k; i < tokens.size(); ++i) ++counts[tokens[i]];
    double h = 0.0;
    for (const auto& [id, c] : counts) {
        const double p = static_cast<double>(c) / static_cast<double>(k);
        h -= p * std::log(p);
    }
    return h;
}

std::string clock(double seconds, char sep, bool hours_always) {
    const auto ms = static_cast<int64_t>(std::llround(seconds * 1000.0));
    const int64_t h = ms / 3600000, m = ms / 60000 % 60, s = ms / 1000 % 60, r = ms % 1000;
    char buf[48];
    if (hours_always || h > 0) {
        std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld%c%03lld", static_cast<long long>(h),
                      static_cast<long long>(m), static_cast<long long>(s), sep,
                      static_cast<long long>(r));
    } else {
        std::snprintf(buf, sizeof buf, "%02lld:%02lld%c%03lld", static_cast<long long>(m),
                      static_cast<long long>(s), sep, static_cast<long long>(r));
    }
    return buf;
}

std::string trimmed(const std::string& s) {
    const size_t b = s.find_first_not_of(' ');
    if (b == std::string::npos) return {};
    return s.substr(b, s.find_last_not_of(' ') - b + 1);
}

}  // namespace

std::vector<int32_t> tokenize_text(const Model& m_, std::string_view text) {
    const Specials& sp = m_.specials();
    std::unordered_map<std::string, int32_t> by_bytes;
    size_t longest = 1;
    for (int32_t id = 0; id < sp.eot; ++id) {
        std::string b = m_.token_bytes(id);
        if (b.empty()) continue;
        longest = std::max(longest, b.size());
        by_bytes.emplace(std::move(b), id);
    }
    std::vector<int32_t> out;
    size_t i = 0;
    while (i < text.size()) {
        size_t len = std::min(longest, text.size() - i);
        for (; len > 0; --len) {
            const auto it = by_bytes.find(std::string(text.substr(i, len)));
            if (it != by_bytes.end()) {
                out.push_back(it->second);
                break;
            }
        }
        i += len > 0 ? len : 1;  // a byte no token covers is dropped
    }
    return out;
}

std::vector<int32_t> Transcriber::prompt_tokens(const TranscribeOptions& options,
                                                int language) const {
    const Specials& sp = m_.specials();
    std::vector<int32_t> p;
    if (!options.prompt.empty()) {
        std::vector<int32_t> text = tokenize(options.prompt);
        const auto keep = static_cast<size_t>(m_.hparams().n_text_ctx / 2 - 1);
        if (text.size() > keep) text.erase(text.begin(), text.end() - static_cast<ptrdiff_t>(keep));
        p.push_back(sp.sot_prev);
        p.insert(p.end(), text.begin(), text.end());
    }
    p.push_back(sp.sot);
    if (sp.multilingual()) {
        p.push_back(sp.lang_begin + std::max(0, std::min(language, sp.n_lang - 1)));
        p.push_back(options.translate ? sp.translate : sp.transcribe);
    }
    if (!options.timestamps) p.push_back(sp.no_timestamps);
    return p;
}

int Transcriber::detect_language(const EncoderState& enc) {
    const Specials& sp = m_.specials();
    if (!sp.multilingual()) return 0;
    DecoderCache cache = runner_.new_cache();
    const int32_t sot = sp.sot;
    const std::vector<float> logits = runner_.decode(enc, cache, std::span(&sot, 1));
    return static_cast<int>(kernels::argmax(logits.data() + sp.lang_begin, sp.n_lang));
}

void Transcriber::suppress(std::vector<float>& logits, std::span<const int32_t> sampled,
                           const TranscribeOptions& options, double max_initial_seconds) const {
    const Specials& sp = m_.specials();
    const auto n_vocab = static_cast<int32_t>(logits.size());
    const int32_t tb = sp.timestamp_begin;
    for (int32_t id : {sp.no_timestamps, sp.sot, sp.no_speech, sp.sot_lm, sp.translate,
                       sp.transcribe, sp.sot_prev}) {
        logits[id] = kNegInf;
    }
    for (int32_t i = 0; i < sp.n_lang; ++i) logits[sp.lang_begin + i] = kNegInf;
    if (sampled.empty()) {
        // suppress_blank: a window does not start with nothing or a bare space.
        logits[sp.eot] = kNegInf;
        const int32_t space = m_.tokenizer().vocab().find("\xc4\xa0");  // GPT-2's stand-in for ' '
        if (space >= 0) logits[space] = kNegInf;
    }
    if (!options.timestamps) {
        for (int32_t i = tb; i < n_vocab; ++i) logits[i] = kNegInf;
        return;
    }
    // OpenAI's timestamp rules: timestamps come in pairs (except just before <|endoftext|>),
    // never go back, and the first one is at most max_initial_seconds in.
    const size_t n = sampled.size();
    const bool last_ts = n >= 1 && sampled[n - 1] >= tb;
    const bool penultimate_ts = n < 2 || sampled[n - 2] >= tb;
    if (last_ts) {
        if (penultimate_ts) {
            for (int32_t i = tb; i < n_vocab; ++i) logits[i] = kNegInf;
        } else {
            for (int32_t i = 0; i < sp.eot; ++i) logits[i] = kNegInf;
        }
    }
    int32_t last_timestamp = -1;
    for (int32_t t : sampled) {
        if (t >= tb) last_timestamp = t;
    }
    if (last_timestamp >= 0) {
        const int32_t floor = last_ts && !penultimate_ts ? last_timestamp : last_timestamp + 1;
        for (int32_t i = tb; i < std::min(floor, n_vocab); ++i) logits[i] = kNegInf;
    }
    if (n == 0) {
        for (int32_t i = 0; i < tb; ++i) logits[i] = kNegInf;
        const auto last_allowed =
            tb + static_cast<int32_t>(std::lround(max_initial_seconds / kTimestampSeconds));
        for (int32_t i = last_allowed + 1; i < n_vocab; ++i) logits[i] = kNegInf;
    }
    // When the timestamps together are likelier than any one text token, take a timestamp.
    const double lse = log_sum_exp(logits, 0, n_vocab);
    const double ts_logprob = log_sum_exp(logits, tb, n_vocab) - lse;
    float max_text = kNegInf;
    for (int32_t i = 0; i < tb; ++i) max_text = std::max(max_text, logits[i]);
    if (ts_logprob > static_cast<double>(max_text) - lse) {
        for (int32_t i = 0; i < tb; ++i) logits[i] = kNegInf;
    }
}

WindowResult Transcriber::decode_window(const EncoderState& enc, std::span<const int32_t> prompt,
                                        const TranscribeOptions& options, float temperature,
                                        double max_initial_seconds) {
    const HParams& hp = m_.hparams();
    const Specials& sp = m_.specials();
    WindowResult r;
    r.temperature = temperature;
    DecoderCache cache = runner_.new_cache();
    std::vector<float> logits = runner_.decode(enc, cache, prompt);
    {
        const double lse = log_sum_exp(logits, 0, hp.n_vocab);
        r.no_speech_prob = std::exp(static_cast<double>(logits[sp.no_speech]) - lse);
    }
    const int64_t max_tokens = std::min<int64_t>(
        hp.n_text_ctx / 2 - 4, hp.n_text_ctx - static_cast<int64_t>(prompt.size()));
    std::vector<float> probs;
    while (static_cast<int64_t>(r.tokens.size()) < max_tokens) {
        suppress(logits, r.tokens, options, max_initial_seconds);
        int32_t next = 0;
        if (temperature <= 0.0f) {
            next = static_cast<int32_t>(kernels::argmax(logits.data(), hp.n_vocab));
        } else {
            probs.resize(logits.size());
            kernels::softmax(logits.data(), probs.data(), hp.n_vocab, 1.0f / temperature);
            // splitmix64: a request's seed gives the same text again.
            rng_ += 0x9e3779b97f4a7c15ULL;
            uint64_t z = rng_;
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
            z ^= z >> 31;
            double u = static_cast<double>(z >> 11) * 0x1.0p-53;
            next = static_cast<int32_t>(hp.n_vocab - 1);
            for (int32_t i = 0; i < hp.n_vocab; ++i) {
                u -= probs[i];
                if (u < 0.0 && probs[i] > 0.0f) {
                    next = i;
                    break;
                }
            }
        }
        r.sum_logprob += static_cast<double>(logits[next]) - log_sum_exp(logits, 0, hp.n_vocab);
        r.tokens.push_back(next);
        if (next == sp.eot) break;
        if (static_cast<int64_t>(r.tokens.size()) >= max_tokens) break;
        logits = runner_.decode(enc, cache, std::span(&next, 1));
    }
    return r;
}

Transcription Transcriber::run(std::span<const float> samples, const TranscribeOptions& options,
                               const std::function<bool()>& stop) {
    const HParams& hp = m_.hparams();
    const Specials& sp = m_.specials();
    rng_ = options.seed;
    Transcription out;
    out.duration = static_cast<double>(samples.size()) / static_cast<double>(hp.sample_rate);
    const Mel mel = log_mel(samples, m_.mel_filters(), hp.n_mels);
    const int64_t window = hp.window_frames();
    const int64_t seek_end = mel.n_len_org;
    int language = options.language;
    int64_t seek = 0;
    while (seek_end - seek >= kMinFrames && !(stop && stop())) {
        const int64_t segment_frames = std::min(window, seek_end - seek);
        const EncoderState enc = runner_.encode(mel_window(mel, seek, window));
        if (language < 0) language = detect_language(enc);
        const std::vector<int32_t> prompt = prompt_tokens(options, language);

        WindowResult r;
        for (float t = options.temperature;; t += 0.2f) {
            r = decode_window(enc, prompt, options, t);
            if (options.temperature <= 0.0f || t + 0.2f > 1.0f + 1e-6f) break;
            const size_t n = r.tokens.size();
            const bool repetitive =
                n > 32 && entropy_of_last(r.tokens, 32) < options.entropy_threshold;
            const double avg = r.sum_logprob / static_cast<double>(std::max<size_t>(1, n));
            const bool improbable = avg < options.logprob_threshold;
            if (!repetitive && !improbable) break;
        }
        const double avg_logprob =
            r.sum_logprob / static_cast<double>(std::max<size_t>(1, r.tokens.size()));
        if (r.no_speech_prob > options.no_speech_threshold &&
            avg_logprob < options.logprob_threshold) {
            seek += segment_frames;  // silence: no segment
            continue;
        }
        std::vector<int32_t> toks = r.tokens;
        if (!toks.empty() && toks.back() == sp.eot) toks.pop_back();
        const double t0 = static_cast<double>(seek) * kFrameSeconds;
        const double window_end = t0 + static_cast<double>(segment_frames) * kFrameSeconds;
        // A timestamp past the audio (the model sees the padding as 30 s) ends at the audio's end.
        auto make = [&](size_t b, size_t e, double start, double end) {
            Segment s;
            s.start = std::min(start, window_end);
            s.end = std::max(s.start, std::min(end, window_end));
            s.tokens.assign(toks.begin() + static_cast<ptrdiff_t>(b),
                            toks.begin() + static_cast<ptrdiff_t>(e));
            for (int32_t t : s.tokens) s.text += m_.token_bytes(t);
            s.avg_logprob = avg_logprob;
            s.no_speech_prob = r.no_speech_prob;
            s.entropy = entropy_of_last(r.tokens, 32);
            s.temperature = r.temperature;
            if (!s.text.empty()) out.segments.push_back(std::move(s));
        };
        auto ts_seconds = [&](int32_t t) {
            return t0 + static_cast<double>(t - sp.timestamp_begin) * kTimestampSeconds;
        };
        if (!options.timestamps) {
            make(0, toks.size(), t0, window_end);
            seek += segment_frames;
            continue;
        }
        // Segments lie between consecutive timestamp pairs.
        std::vector<size_t> cuts;
        for (size_t i = 1; i < toks.size(); ++i) {
            if (toks[i - 1] >= sp.timestamp_begin && toks[i] >= sp.timestamp_begin) {
                cuts.push_back(i);
            }
        }
        const bool single_ending = toks.size() >= 2 && toks.back() >= sp.timestamp_begin &&
                                   toks[toks.size() - 2] < sp.timestamp_begin;
        if (!cuts.empty()) {
            size_t last = 0;
            for (size_t c : cuts) {
                make(last, c, ts_seconds(toks[last]), ts_seconds(toks[c - 1]));
                last = c;
            }
            if (single_ending) {
                if (last < toks.size()) {
                    make(last, toks.size(), ts_seconds(toks[last]), ts_seconds(toks.back()));
                }
                seek += segment_frames;
            } else {
                const int32_t last_ts = toks[last - 1] - sp.timestamp_begin;
                seek += std::max<int64_t>(1, std::min<int64_t>(segment_frames, 2 * last_ts));
            }
        } else {
            double end = window_end;
            for (auto it = toks.rbegin(); it != toks.rend(); ++it) {
                if (*it > sp.timestamp_begin) {
                    end = ts_seconds(*it);
                    break;
                }
            }
            const double start =
                !toks.empty() && toks.front() >= sp.timestamp_begin ? ts_seconds(toks.front()) : t0;
            make(0, toks.size(), start, end);
            seek += segment_frames;
        }
    }
    // Segment texts hold only text tokens.
    for (Segment& s : out.segments) {
        out.text += s.text;
    }
    out.language = sp.multilingual() ? language_codes()[std::max(0, language)] : "en";
    return out;
}

std::string format_srt(const std::vector<Segment>& segments) {
    std::string s;
    for (size_t i = 0; i < segments.size(); ++i) {
        s += std::to_string(i + 1) + "\n" + clock(segments[i].start, ',', true) + " --> " +
             clock(segments[i].end, ',', true) + "\n" + trimmed(segments[i].text) + "\n\n";
    }
    return s;
}

std::string format_vtt(const std::vector<Segment>& segments) {
    std::string s = "WEBVTT\n\n";
    for (const Segment& seg : segments) {
        s += clock(seg.start, '.', true) + " --> " + clock(seg.end, '.', true) + "\n" +
             trimmed(seg.text) + "\n\n";
    }
    return s;
}

}  // namespace ggufd::whisper
