// The text-processing cores of Jinja2's string filters that carry whole algorithms of their own
// (Python's textwrap for wordwrap, Jinja2's urlize, urllib's quoting, markupsafe's striptags,
// filesizeformat), kept apart from the filter glue in builtins so each can be read against the
// Python it reproduces.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ggufd::jinja::text {

// Called with the size of a string being built; throws when that exceeds the render's limit,
// so a filter that multiplies its input (a long wrapstring on every line) stops early.
using SizeCheck = std::function<void(std::size_t)>;

struct WrapOptions {
    std::int64_t width = 79;
    bool break_long_words = true;
    std::string wrapstring = "\n";
    bool break_on_hyphens = true;
};

// Jinja2's wordwrap: every line of `s` wrapped by textwrap.wrap (tabs kept, whitespace not
// replaced, leading/trailing whitespace of wrapped lines dropped), joined with wrapstring.
// Throws TemplateError for a width below 1.
std::string wordwrap(std::string_view s, const WrapOptions& o, const SizeCheck& check);

// urllib.parse.quote of the UTF-8 bytes; `for_query` quotes '/' too and turns spaces into '+'.
std::string url_quote(std::string_view s, bool for_query);

struct UrlizeOptions {
    std::optional<std::int64_t> trim_url_limit;
    std::string rel;     // already the final attribute value ("noopener" by default); "" = none
    std::string target;  // "" = no target attribute
    std::vector<std::string> extra_schemes;
};

// Jinja2's urlize over text that is already HTML-escaped.
std::string urlize(std::string_view escaped, const UrlizeOptions& o, const SizeCheck& check);
// True when `scheme` is a URI scheme prefix urlize accepts in extra_schemes ("ftp:").
bool valid_scheme_prefix(std::string_view scheme);

// Jinja2's filesizeformat of an already converted number.
std::string filesize_format(double bytes, bool binary);

// markupsafe's Markup.striptags: drops comments, then tags, collapses whitespace, and
// unescapes entities. Unlike html.unescape, only numeric references and amp, lt, gt, quot,
// apos and nbsp (with their semicolon) are known; other entities stay as written.
std::string strip_tags(std::string_view s);

}  // namespace ggufd::jinja::text
