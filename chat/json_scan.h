// Where a JSON object or array ends in text that is still arriving.
//
// A streamed tool call must be decided as soon as its bytes allow: the parser waits while the
// text so far could still become valid JSON and gives up at the first byte that cannot (a `<` of
// markup where a value should be, a stray quote), so a broken call costs no more waiting than it
// must. nlohmann's parser cannot tell "incomplete" from "invalid", hence this scanner: a
// pushdown automaton of RFC 8259's syntax (strings with their escapes, numbers, literals) over a
// top-level object or array. UTF-8 inside strings is left to the JSON parser that reads the
// value once the scanner has found its end.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ggufd::chat::detail {

enum class Scan : unsigned char {
    ok,    // decided: the construct is complete
    more,  // the text so far is a valid beginning; wait for more
    bad,   // the text cannot be the construct
};

struct JsonExtent {
    Scan status;
    size_t length;  // of the value, when ok
};

// Reads an object or array as its bytes arrive, so a long value is read once however many pieces
// it comes in.
class JsonScanner {
  public:
    // Reads `more`, the bytes after those already read (the first must be `{` or `[`): ok once
    // the value is complete (length()), bad when the text cannot be JSON, more otherwise. Once
    // ok or bad, further calls read nothing and answer the same.
    Scan feed(std::string_view more);
    // Bytes read: the value's length once ok; once bad, the offset of the first byte that
    // cannot continue the value (the text before it is a valid beginning).
    size_t length() const { return read_; }

  private:
    enum class St : unsigned char;
    std::vector<char> stack_;
    St st_{};
    bool key_ = false;          // the string being read is an object key
    int hex_left_ = 0;          // \uXXXX digits still to read
    std::string_view literal_;  // the rest of true / false / null (a static string)
    size_t read_ = 0;
    Scan status_ = Scan::more;
};

// The compact form of a JSON value's beginning `text` (a valid beginning, as the scanner
// judged it): blanks outside strings removed, escapes and numbers written as nlohmann's dump
// writes them (so a complete value gives exactly the dump of its parse), and only what is decided:
// a number, an escape or a UTF-8 character still arriving is left out until it is complete. The
// compact form of a longer text extends that of a shorter one, so a call's arguments can stream.
// Bytes that are not UTF-8 and lone surrogates become U+FFFD.
std::string compact_json_prefix(std::string_view text);

// compact_json_prefix read on as the text grows, so a long value streamed in many pieces is read
// once: compact(text) takes the same text as before, longer, and returns the compact form so far.
class JsonCompactor {
  public:
    const std::string& compact(std::string_view text);
    const std::string& out() const { return out_; }

  private:
    std::string out_;
    size_t read_ = 0;  // bytes of the text whose compact form is in out_
    bool in_string_ = false;
};

// The scanners of the JSON values of a region still arriving, by their offset in the stream: a
// streamed region is parsed again with each piece, and its values are read on, not again.
class JsonScanners {
  public:
    JsonScanner& at(size_t offset);
    // The compactor of the value at `offset` (references stay valid until drop_before).
    JsonCompactor& compactor_at(size_t offset);
    // Forgets the values before `offset` (the stream was consumed up to it).
    void drop_before(size_t offset);

  private:
    struct Entry {
        size_t offset;
        JsonScanner scanner;
        JsonCompactor compactor;
    };
    std::deque<Entry> entries_;
    Entry& entry(size_t offset);
};

// The object or array at the start of `text` (its first byte must be `{` or `[`). `at_end`: no
// more text will come, so an unfinished value is bad rather than more.
JsonExtent scan_json(std::string_view text, bool at_end);

// Containers nested deeper than this are refused (bad).
inline constexpr size_t kMaxJsonDepth = 256;

}  // namespace ggufd::chat::detail
