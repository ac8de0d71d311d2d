#include "text/json_escape.h"

namespace ggufd::text {

namespace {

void append_hex4(std::string& out, uint32_t v) {
    static constexpr char kHex[] = "0123456789abcdef";
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(v >> shift) & 0xF];
}

}  // namespace

bool append_json_escape(std::string& out, uint32_t cp) {
    switch (cp) {
        case '"':
            out += "\\\"";
            return true;
        case '\\':
            out += "\\\\";
            return true;
        case '\b':
            out += "\\b";
            return true;
        case '\f':
            out += "\\f";
            return true;
        case '\n':
            out += "\\n";
            return true;
        case '\r':
            out += "\\r";
            return true;
        case '\t':
            out += "\\t";
            return true;
        default:
            break;
    }
    if (cp >= 0x20) return false;
    append_hex4(out, cp);
    return true;
}

void append_json_unicode_escape(std::string& out, uint32_t cp) {
    if (cp < 0x10000) {
        append_hex4(out, cp);
        return;
    }
    const uint32_t v = cp - 0x10000;
    append_hex4(out, 0xD800 + (v >> 10));
    append_hex4(out, 0xDC00 + (v & 0x3FF));
}

}  // namespace ggufd::text
