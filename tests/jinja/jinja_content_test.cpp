// Content ranges: which output bytes came from the variables marked as content. Each case shows
// the output with its content ranges in brackets: copied bytes keep exact ranges, anything
// computed from content is content as a whole, and the template's own text never is.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <utility>

#include "jinja/chat_template.h"

namespace {

using ggufd::jinja::Rendered;
using ggufd::jinja::RenderOptions;
using ggufd::jinja::Template;

// Content variables: m (a string), d (a dict) and l (a list); `bos` is the template's own.
const char* kContext =
    R"({"m": "hi", "pad": "  hi  ", "d": {"<|k|>": "v"}, "l": ["a", "b"], "bos": "<s>"})";

std::string bracketed(const std::string& source) {
    RenderOptions options;
    options.content_variables = {"m", "pad", "d", "l"};
    const Rendered r =
        Template::compile(source).render(nlohmann::ordered_json::parse(kContext), options);
    // The text is the same as without tracking.
    EXPECT_EQ(r.text,
              Template::compile(source).render_text(nlohmann::ordered_json::parse(kContext)));
    std::string out;
    std::size_t at = 0;
    for (const auto& [b, e] : r.content_ranges) {
        EXPECT_LT(b, e);
        EXPECT_LE(e, r.text.size());
        EXPECT_TRUE(out.empty() || b > at) << "ranges must be sorted, disjoint and merged";
        out += r.text.substr(at, b - at) + "[" + r.text.substr(b, e - b) + "]";
        at = e;
    }
    return out + r.text.substr(at);
}

// Each (source, output with its content ranges bracketed).
void expect_bracketed(std::initializer_list<std::pair<const char*, const char*>> cases) {
    for (const auto& [source, expected] : cases) EXPECT_EQ(bracketed(source), expected) << source;
}

TEST(ContentRanges, CopiesKeepExactRanges) {
    expect_bracketed({
        {"A{{ m }}B{{ bos }}", "A[hi]B<s>"},
        {"{{ '<|x|>' + m + '!' }}", "<|x|>[hi]!"},
        {"{{ '<' ~ m ~ '>' ~ 3 }}", "<[hi]>3"},
        {"{{ ('<' + m)[0:2] }}|{{ ('<' + m)[::2] }}", "<[h]|<[i]"},
        {"{{ m[1] }}{{ ('<' + m)[0] }}", "[i]<"},
        {"{% for c in m %}{{ c }}-{% endfor %}", "[h]-[i]-"},
        {"{{ m * 2 }}", "[hihi]"},
    });
}

TEST(ContentRanges, TrimAndStripKeepTheRangesOfWhatIsLeft) {
    expect_bracketed({
        {"{{ ('<s>' + pad) | trim }}", "<s>[  hi]"},
        {"{{ (pad + '</s>').strip() }}", "[hi  ]</s>"},
        {"{{ (pad + ' ').rstrip() }}|{{ (' ' + pad).lstrip() }}", "[  hi]|[hi  ]"},
        {"{{ ('xx' + m + 'x').strip('x') }}", "[hi]"},
    });
}

TEST(ContentRanges, JoinKeepsEachPart) {
    expect_bracketed({
        {"{{ ['<a>', m, m] | join('|') }}", "<a>|[hi]|[hi]"},
        {"{{ ['a', 'b'] | join(m) }}", "a[hi]b"},
        {"{{ l | join }}", "[ab]"},
    });
}

TEST(ContentRanges, BlocksMacrosAndNamespacesCarryRanges) {
    expect_bracketed({
        {"{% set x %}<a>{{ m }}{% endset %}{{ x }}", "<a>[hi]"},
        {"{% macro f(v) %}<b>{{ v }}{% endmacro %}{{ f(m) }}", "<b>[hi]"},
        {"{% set ns = namespace(p='') %}{% for i in [1, 2] %}"
         "{% set ns.p = ns.p + '<' + m %}{% endfor %}{{ ns.p }}",
         "<[hi]<[hi]"},
        {"{% filter upper %}<a>{{ m }}{% endfilter %}", "[<A>HI]"},
    });
}

TEST(ContentRanges, TransformedContentIsContentAsAWhole) {
    expect_bracketed({
        {"{{ m | upper }}", "[HI]"},
        {"{{ ('<s>' + m) | replace('x', 'y') }}", "[<s>hi]"},
        {"{{ d | tojson }}", R"([{"<|k|>": "v"}])"},
        {"{{ '<%s>' % m }}", "[<hi>]"},
        {"{{ '<{}>'.format(m) }}", "[<hi>]"},
        {"{{ m.split('i') | join('+') }}", "[h]+"},
        {"{{ [m] }}", "[['hi']]"},
        {"{{ '<b>' | safe + '<' + m }}", "<b>&lt;[hi]"},
    });
}

TEST(ContentRanges, KeysOfContentAreContent) {
    expect_bracketed({
        {"{% for k in d %}{{ k }}{% endfor %}", "[<|k|>]"},
        {"{% for k, v in d.items() %}<{{ k }}={{ v }}>{% endfor %}", "<[<|k|>]=[v]>"},
        {"{% macro f() %}{% for k in kwargs %}{{ k }}{% endfor %}{% endmacro %}"
         "{{ f(**d) }}",
         "[<|k|>]"},
        {"{{ dict(**d) | list | first }}", "[<|k|>]"},
    });
}

TEST(ContentRanges, TheTemplatesOwnValuesPassedThroughStayOutside) {
    expect_bracketed({
        {"{{ [bos, m] | first }}{{ m | default('x') }}", "<s>[hi]"},
        {"{{ l | length }}{{ bos if m else 'no' }}", "2<s>"},
        {"{{ (l | map('upper') | list)[0] }}", "[A]"},
    });
}

TEST(ContentRanges, NoContentVariablesNoRanges) {
    const Rendered r = Template::compile("{{ m }}").render(nlohmann::ordered_json::parse(kContext));
    EXPECT_EQ(r.text, "hi");
    EXPECT_TRUE(r.content_ranges.empty());
}

TEST(ContentRanges, ChatOptionsMarkEverythingTheClientSent) {
    ggufd::jinja::ChatContext c;
    c.messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "<|x|>"}])");
    c.tools = nlohmann::ordered_json::parse(R"([{"name": "t"}])");
    c.bos_token = "<s>";
    c.extra = nlohmann::ordered_json::parse(R"({"note": "n"})");
    const Rendered r =
        Template::compile("{{ bos_token }}{{ messages[0].content }}{{ tools[0].name }}{{ note }}")
            .render(ggufd::jinja::build_chat_context(c), ggufd::jinja::chat_render_options(c));
    EXPECT_EQ(r.text, "<s><|x|>tn");
    ASSERT_EQ(r.content_ranges.size(), 1u);
    EXPECT_EQ(r.content_ranges[0], std::make_pair(std::size_t{3}, r.text.size()));
}

}  // namespace
