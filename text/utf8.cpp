#include "text/utf8.h"

namespace ggufd::text {

namespace {

bool is_continuation(uint8_t b) {
    return (b & 0xC0) == 0x80;
}

// The value of a sequence whose lead byte and continuation bytes were already checked.
uint32_t value_of(std::string_view sequence) {
    const auto lead = static_cast<uint8_t>(sequence[0]);
    if (sequence.size() == 1) return lead;
    uint32_t cp = lead & (0x7Fu >> sequence.size());
    for (size_t k = 1; k < sequence.size(); ++k) {
        cp = (cp << 6) | (static_cast<uint8_t>(sequence[k]) & 0x3Fu);
    }
    return cp;
}

// One step of strict UTF-8 validation (Unicode 15, table 3-7) at the start of `s`.
struct Step {
    size_t length;    // bytes consumed: the character, or the maximal ill-formed subpart
    bool valid;       // a well-formed character
    bool incomplete;  // `s` ended inside a sequence that could still become valid
};

Step validate_step(std::string_view s) {
    const auto b0 = static_cast<uint8_t>(s[0]);
    if (b0 < 0x80) return {1, true, false};
    size_t need;
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 1;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 2;
        if (b0 == 0xE0) lo = 0xA0;
        if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 3;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;
    } else {
        return {1, false, false};
    }
    for (size_t k = 1; k <= need; ++k) {
        if (k >= s.size()) return {k, false, true};
        const auto b = static_cast<uint8_t>(s[k]);
        const bool ok = k == 1 ? (b >= lo && b <= hi) : is_continuation(b);
        if (!ok) return {k, false, false};
    }
    return {need + 1, true, false};
}

}  // namespace

uint32_t next_lenient(std::string_view s, size_t& i) {
    const auto b0 = static_cast<uint8_t>(s[i]);
    // The length the lead byte's high bits announce; 0 for a continuation byte or 0xF8..0xFF.
    const size_t len = b0 < 0x80             ? 1
                       : (b0 & 0xE0) == 0xC0 ? 2
                       : (b0 & 0xF0) == 0xE0 ? 3
                       : (b0 & 0xF8) == 0xF0 ? 4
                                             : 0;
    bool ok = len != 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) ok = is_continuation(static_cast<uint8_t>(s[i + k]));
    if (!ok) {
        ++i;
        return kReplacementChar;
    }
    const uint32_t cp = value_of(s.substr(i, len));
    i += len;
    return cp <= kMaxCodePoint ? cp : kReplacementChar;
}

std::vector<uint32_t> decode_lenient(std::string_view s) {
    std::vector<uint32_t> out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) out.push_back(next_lenient(s, i));
    return out;
}

std::optional<uint32_t> next_well_formed(std::string_view s, size_t& i) {
    if (i >= s.size()) return std::nullopt;
    const Step step = validate_step(s.substr(i));
    if (!step.valid) return std::nullopt;
    const uint32_t cp = value_of(s.substr(i, step.length));
    i += step.length;
    return cp;
}

void append_utf8(std::string& out, uint32_t cp) {
    if (cp > kMaxCodePoint) cp = kReplacementChar;
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

std::string sanitize_utf8(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size());
    size_t i = 0;
    while (i < bytes.size()) {
        const Step step = validate_step(bytes.substr(i));
        if (step.valid) {
            out.append(bytes.substr(i, step.length));
        } else {
            append_utf8(out, kReplacementChar);
        }
        i += step.length;
    }
    return out;
}

size_t complete_prefix_length(std::string_view bytes) {
    size_t i = 0;
    while (i < bytes.size()) {
        const Step step = validate_step(bytes.substr(i));
        if (step.incomplete) break;
        i += step.length;
    }
    return i;
}

std::string Utf8Joiner::push(std::string_view piece) {
    held_.append(piece);
    const size_t complete = complete_prefix_length(held_);
    std::string out = sanitize_utf8(std::string_view(held_).substr(0, complete));
    held_.erase(0, complete);
    return out;
}

std::string Utf8Joiner::finish() {
    std::string out = sanitize_utf8(held_);
    held_.clear();
    return out;
}

}  // namespace ggufd::text
