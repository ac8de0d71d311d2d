// Python's str semantics over UTF-8 std::string: lengths and indices count code points, case
// mapping and whitespace are Unicode's, and numbers print the way Python prints them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ggufd::jinja::pystr {

bool is_ascii(std::string_view s);
// Decodes UTF-8 to code points as text::decode_lenient() reads it.
std::vector<char32_t> decode(std::string_view s);
std::string encode(const std::vector<char32_t>& cps);
// Number of code points.
std::size_t length(std::string_view s);
// Byte offset of every code point start plus the end (size length+1); for indexing/slicing.
std::vector<std::size_t> offsets(std::string_view s);

bool is_space(char32_t c);       // str.isspace()
bool is_line_break(char32_t c);  // what str.splitlines() splits on

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);       // str.title()
std::string capitalize(std::string_view s);  // str.capitalize()
std::string swapcase(std::string_view s);
bool is_cased_upper(std::string_view s);  // str.isupper()
bool is_cased_lower(std::string_view s);  // str.islower()
bool is_alpha(std::string_view s);
bool is_alnum(std::string_view s);
bool is_digit(std::string_view s);
bool is_word_char(char32_t c);   // regex \w
bool is_digit_char(char32_t c);  // regex \d (Unicode decimal digits)

// str.strip/lstrip/rstrip: `chars` absent strips whitespace.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right);
// str.split/rsplit: `sep` absent splits on whitespace runs. maxsplit < 0 means no limit.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               std::int64_t maxsplit, bool from_right);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
// str.replace; count < 0 replaces all.
std::string replace(std::string_view s, std::string_view old, std::string_view with,
                    std::int64_t count);
// str.find/rfind in code points; -1 when absent.
std::int64_t find(std::string_view s, std::string_view sub, bool from_right);
std::int64_t count(std::string_view s, std::string_view sub);
std::string center(std::string_view s, std::int64_t width, char32_t fill);

// repr() of a str: quotes and escapes as Python chooses them.
std::string repr(std::string_view s);
// repr()/str() of a float: shortest round-trip digits, Python's layout (1e+16, 0.0001, 1.0).
std::string float_repr(double d);
// json.dumps of a str.
void append_json_string(std::string& out, std::string_view s, bool ensure_ascii);

// Python int(str, base) and float(str); nullopt when Python raises ValueError.
std::optional<std::int64_t> parse_int(std::string_view s, int base);
std::optional<double> parse_float(std::string_view s);

}  // namespace ggufd::jinja::pystr
