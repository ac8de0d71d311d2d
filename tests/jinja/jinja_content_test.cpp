// Content ranges: which output bytes came from the variables marked as content. Each case shows
// the output with its content ranges in brackets: copied bytes keep exact ranges, anything
// computed from content is content as a whole, and the template's own text never is.
#include <gtest/gtest.h>

#include <string>

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

TEST(ContentRanges, CopiesKeepExactRanges) {
    EXPECT_EQ(bracketed("A{{ m }}B{{ bos }}"), "A[hi]B<s>");
    EXPECT_EQ(bracketed("{{ '<|x|>' + m + '!' }}"), "<|x|>[hi]!");
    EXPECT_EQ(bracketed("{{ '<' ~ m ~ '>' ~ 3 }}"), "<[hi]>3");
    EXPECT_EQ(bracketed("{{ ('<' + m)[0:2] }}|{{ ('<' + m)[::2] }}"), "<[h]|<[i]");
    EXPECT_EQ(bracketed("{{ m[1] }}{{ ('<' + m)[0] }}"), "[i]<");
    EXPECT_EQ(bracketed("{% for c in m %}{{ c }}-{% endfor %}"), "[h]-[i]-");
    EXPECT_EQ(bracketed("{{ m * 2 }}"), "[hihi]");
}

TEST(ContentRanges, TrimAndStripKeepTheRangesOfWhatIsLeft) {
    EXPECT_EQ(bracketed("{{ ('<s>' + pad) | trim }}"), "<s>[  hi]");
    EXPECT_EQ(bracketed("{{ (pad + '</s>').strip() }}"), "[hi  ]</s>");
    EXPECT_EQ(bracketed("{{ (pad + ' ').rstrip() }}|{{ (' ' + pad).lstrip() }}"), "[  hi]|[hi  ]");
    EXPECT_EQ(bracketed("{{ ('xx' + m + 'x').strip('x') }}"), "[hi]");
}

TEST(ContentRanges, JoinKeepsEachPart) {
    EXPECT_EQ(bracketed("{{ ['<a>', m, m] | join('|') }}"), "<a>|[hi]|[hi]");
    EXPECT_EQ(bracketed("{{ ['a', 'b'] | join(m) }}"), "a[hi]b");
    EXPECT_EQ(bracketed("{{ l | join }}"), "[ab]");
}

TEST(ContentRanges, BlocksMacrosAndNamespacesCarryRanges) {
    EXPECT_EQ(bracketed("{% set x %}<a>{{ m }}{% endset %}{{ x }}"), "<a>[hi]");
    EXPECT_EQ(bracketed("{% macro f(v) %}<b>{{ v }}{% endmacro %}{{ f(m) }}"), "<b>[hi]");
    EXPECT_EQ(bracketed("{% set ns = namespace(p='') %}{% for i in [1, 2] %}"
                        "{% set ns.p = ns.p + '<' + m %}{% endfor %}{{ ns.p }}"),
              "<[hi]<[hi]");
    EXPECT_EQ(bracketed("{% filter upper %}<a>{{ m }}{% endfilter %}"), "[<A>HI]");
}

TEST(ContentRanges, TransformedContentIsContentAsAWhole) {
    EXPECT_EQ(bracketed("{{ m | upper }}"), "[HI]");
    EXPECT_EQ(bracketed("{{ ('<s>' + m) | replace('x', 'y') }}"), "[<s>hi]");
    EXPECT_EQ(bracketed("{{ d | tojson }}"), R"([{"<|k|>": "v"}])");
    EXPECT_EQ(bracketed("{{ '<%s>' % m }}"), "[<hi>]");
    EXPECT_EQ(bracketed("{{ '<{}>'.format(m) }}"), "[<hi>]");
    EXPECT_EQ(bracketed("{{ m.split('i') | join('+') }}"), "[h]+");
    EXPECT_EQ(bracketed("{{ [m] }}"), "[['hi']]");
    EXPECT_EQ(bracketed("{{ '<b>' | safe + '<' + m }}"), "<b>&lt;[hi]");
}

TEST(ContentRanges, KeysOfContentAreContent) {
    EXPECT_EQ(bracketed("{% for k in d %}{{ k }}{% endfor %}"), "[<|k|>]");
    EXPECT_EQ(bracketed("{% for k, v in d.items() %}<{{ k }}={{ v }}>{% endfor %}"),
              "<[<|k|>]=[v]>");
    EXPECT_EQ(bracketed("{% macro f() %}{% for k in kwargs %}{{ k }}{% endfor %}{% endmacro %}"
                        "{{ f(**d) }}"),
              "[<|k|>]");
    EXPECT_EQ(bracketed("{{ dict(**d) | list | first }}"), "[<|k|>]");
}

TEST(ContentRanges, TheTemplatesOwnValuesPassedThroughStayOutside) {
    EXPECT_EQ(bracketed("{{ [bos, m] | first }}{{ m | default('x') }}"), "<s>[hi]");
    EXPECT_EQ(bracketed("{{ l | length }}{{ bos if m else 'no' }}"), "2<s>");
    EXPECT_EQ(bracketed("{{ (l | map('upper') | list)[0] }}"), "[A]");
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
