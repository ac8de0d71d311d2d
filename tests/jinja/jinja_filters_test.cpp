// Jinja2 3.1's less common builtin filters, tests and globals: the later additions
// (groupby, slice, wordwrap, urlencode, xmlattr, filesizeformat, urlize, random) and the
// arguments and edge cases of the older ones. No Jinja2 was available to run, so unlike
// jinja_unit_test.cpp's tables these expectations were worked out by hand from Jinja2 3.1's
// filters.py/utils.py, Python's textwrap and markupsafe (3.0); each case says which rule it
// pins down.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "jinja/chat_template.h"
#include "tests/jinja/render_helpers.h"

namespace {

using ggufd::jinja::RenderOptions;
using ggufd::jinja::testing::expect_all;
using ggufd::jinja::testing::expect_error;
using ggufd::jinja::testing::render;
using ggufd::jinja::testing::RenderCase;
using json = nlohmann::ordered_json;

// clang-format off
const RenderCase kGroupby[] = {
    // Sorted by the key; each group is a (grouper, list) named tuple.
    {R"J({% for g in users | groupby('city') %}{{ g.grouper }}:{{ g.list | map(attribute='name') | join(',') }};{% endfor %})J",
     R"J({"users": [{"name": "a", "city": "NY"}, {"name": "b", "city": "LA"}, {"name": "c", "city": "NY"}]})J",
     R"J(LA:b;NY:a,c;)J"},
    // Unpacks as a pair, indexes, and prints as a plain tuple.
    {R"J({% for city, items in users | groupby('city') %}{{ city }}={{ items | length }} {% endfor %}{{ (users | groupby('city'))[0][0] }} {{ [{'a': 1}, {'a': 2}, {'a': 1}] | groupby('a') }})J",
     R"J({"users": [{"name": "a", "city": "NY"}, {"name": "b", "city": "LA"}, {"name": "c", "city": "NY"}]})J",
     R"J(LA=1 NY=2 LA [(1, [{'a': 1}, {'a': 1}]), (2, [{'a': 2}])])J"},
    // Case-insensitive by default, reporting the first member's own spelling; case_sensitive.
    {R"J({{ l | groupby('c') | map(attribute='grouper') | list }} {{ l | groupby('c', case_sensitive=true) | map(attribute='grouper') | list }})J",
     R"J({"l": [{"c": "b"}, {"c": "A"}, {"c": "a"}]})J",
     R"J(['A', 'b'] ['A', 'a', 'b'])J"},
    // default= stands in for a missing attribute; dotted paths and integer indices.
    {R"J({{ [{'c': 'x'}, {}] | groupby('c', default='none') | map(attribute='grouper') | list }} {{ [{'u': {'c': 2}}, {'u': {'c': 1}}] | groupby('u.c') | map(attribute='grouper') | list }} {{ [[1, 'a'], [0, 'b'], [1, 'c']] | groupby(0) }})J",
     R"J({})J",
     R"J(['none', 'x'] [1, 2] [(0, [[0, 'b']]), (1, [[1, 'a'], [1, 'c']])])J"},
};

const RenderCase kSlice[] = {
    // The first len % n columns get one item more; fill_with pads the others.
    {R"J({{ [1, 2, 3, 4, 5, 6, 7] | slice(3) | list }} {{ [1, 2, 3, 4, 5, 6, 7] | slice(3, 'x') | list }} {{ [1, 2] | slice(4) | list }} {{ [1, 2] | slice(4, 0) | list }} {{ [1, 2, 3] | slice(-1) | list }} {{ [] | slice(2) | list }})J",
     R"J({})J",
     R"J([[1, 2, 3], [4, 5], [6, 7]] [[1, 2, 3], [4, 5, 'x'], [6, 7, 'x']] [[1], [2], [], []] [[1], [2], [0], [0]] [] [[], []])J"},
    {R"J({% for col in 'abcde' | slice(2) %}<{{ col | join }}>{% endfor %})J",
     R"J({})J",
     R"J(<abc><de>)J"},
};

const RenderCase kWordwrap[] = {
    {R"J({{ 'The quick brown fox jumps over the lazy dog' | wordwrap(10) }}|{{ 'The quick brown fox' | wordwrap(10, wrapstring='<br>') }})J",
     R"J({})J",
     R"J(The quick
brown fox
jumps over
the lazy
dog|The quick<br>brown fox)J"},
    // Long words are cut at the width unless break_long_words is false.
    {R"J({{ 'abcdefghijkl mn' | wordwrap(5) }}|{{ 'abcdefghijkl mn' | wordwrap(5, false) }})J",
     R"J({})J",
     R"J(abcde
fghij
kl mn|abcdefghijkl
mn)J"},
    // Hyphenated words split after the hyphen; break_on_hyphens=false keeps them whole; a
    // long word with hyphens textwrap cannot split breaks after the last hyphen that fits.
    {R"J({{ 'well-known fact' | wordwrap(6) }}|{{ 'well-known fact' | wordwrap(6, break_on_hyphens=false) }}|{{ 'a1-b2-c3-d4e5' | wordwrap(7) }}|{{ 'hello--world' | wordwrap(7) }})J",
     R"J({})J",
     R"J(well-
known
fact|well-k
nown
fact|a1-b2-
c3-d4e5|hello--
world)J"},
    // Existing newlines are kept (each line wraps on its own); leading spaces of the first
    // line stay, spaces at a break go; the default width is 79.
    {R"J({{ 'aaa bbb\n\nccc' | wordwrap(3) }}|{{ '  ab cd' | wordwrap(4) }}|{{ ('x ' * 50) | wordwrap | length }}|{{ '' | wordwrap(0) }})J",
     R"J({})J",
     R"J(aaa
bbb

ccc|  ab
cd|99|)J"},
};

const RenderCase kUrlencodeXmlattrFilesize[] = {
    {R"J({{ 'a b/c&d' | urlencode }} {{ {'q': 'a b', 'x': '/&'} | urlencode }} {{ [('k', 1), ('é', 'ü')] | urlencode }} {{ 42 | urlencode }} {{ none | urlencode }} {{ 'a~b_c.d-e' | urlencode }})J",
     R"J({})J",
     R"J(a%20b/c%26d q=a+b&x=%2F%26 k=1&%C3%A9=%C3%BC 42 None a~b_c.d-e)J"},
    // None and Undefined values are left out; keys and values are HTML-escaped.
    {R"J(<ul{{ {'class': 'my list', 'missing': none, 'gone': nothing, 'id': 'list-42'} | xmlattr }}>|{{ {'title': '<a & "b">'} | xmlattr(false) }}|{{ {} | xmlattr }}|{{ {'a': ('<b>' | safe)} | xmlattr }})J",
     R"J({})J",
     R"J(<ul class="my list" id="list-42">|title="&lt;a &amp; &#34;b&#34;&gt;"|| a="<b>")J"},
    {R"J({{ 1 | filesizeformat }}|{{ 1.5 | filesizeformat }}|{{ 100 | filesizeformat }}|{{ 1000 | filesizeformat }}|{{ 1500000 | filesizeformat }}|{{ 999999 | filesizeformat }}|{{ 1000 | filesizeformat(true) }}|{{ 1024 | filesizeformat(true) }}|{{ '2048' | filesizeformat(binary=true) }}|{{ 1e30 | filesizeformat }}|{{ -1 | filesizeformat }}|{{ 3.5e9 | filesizeformat }})J",
     R"J({})J",
     R"J(1 Byte|1 Bytes|100 Bytes|1.0 kB|1.5 MB|1000.0 kB|1000 Bytes|1.0 KiB|2.0 KiB|1000000.0 YB|-1 Bytes|3.5 GB)J"},
};

const RenderCase kUrlize[] = {
    {R"J({{ 'Visit https://example.com/a?b=1 now' | urlize }})J",
     R"J({})J",
     R"J(Visit <a href="https://example.com/a?b=1" rel="noopener">https://example.com/a?b=1</a> now)J"},
    // www. and bare .com-style domains get https://; trailing punctuation stays outside.
    {R"J({{ 'see www.example.org. or example.com, x.com' | urlize }})J",
     R"J({})J",
     R"J(see <a href="https://www.example.org" rel="noopener">www.example.org</a>. or <a href="https://example.com" rel="noopener">example.com</a>, x.com)J"},
    {R"J({{ 'mail me@example.com or mailto:a@b.co, not a@b' | urlize }})J",
     R"J({})J",
     R"J(mail <a href="mailto:me@example.com">me@example.com</a> or <a href="mailto:a@b.co">a@b.co</a>, not a@b)J"},
    // Brackets the URL opened are balanced from the tail; the text is HTML-escaped first.
    {R"J({{ '(http://x.org/a_(b)) a<b> http://x.com/?a=1&b=2' | urlize }})J",
     R"J({})J",
     R"J((<a href="http://x.org/a_(b)" rel="noopener">http://x.org/a_(b)</a>) a&lt;b&gt; <a href="http://x.com/?a=1&amp;b=2" rel="noopener">http://x.com/?a=1&amp;b=2</a>)J"},
    {R"J({{ 'http://example.com/long/path' | urlize(20) }}|{{ 'www.a.io' | urlize(nofollow=true, target='_blank') }}|{{ 'www.a.io' | urlize(rel='ugc') }})J",
     R"J({})J",
     R"J(<a href="http://example.com/long/path" rel="noopener">http://example.com/l...</a>|<a href="https://www.a.io" rel="nofollow noopener" target="_blank">www.a.io</a>|<a href="https://www.a.io" rel="noopener ugc">www.a.io</a>)J"},
    // IP hosts and ports; extra_schemes.
    {R"J({{ 'http://127.0.0.1:8080/x http://[::1]/ http://1.2.3/ example.foo' | urlize }}|{{ 'ftp://x.org/f tel:123 tel:' | urlize(extra_schemes=['ftp:', 'tel:']) }})J",
     R"J({})J",
     R"J(<a href="http://127.0.0.1:8080/x" rel="noopener">http://127.0.0.1:8080/x</a> <a href="http://[::1]/" rel="noopener">http://[::1]/</a> http://1.2.3/ example.foo|<a href="ftp://x.org/f" rel="noopener">ftp://x.org/f</a> <a href="tel:123" rel="noopener">tel:123</a> tel:)J"},
};

// Filters that existed before: the arguments and corner cases Jinja2 3.1 defines.
const RenderCase kOlderFilters[] = {
    // batch follows Jinja2's loop literally for linecount <= 0.
    {R"J({{ [1, 2, 3] | batch(0) | list }} {{ [1, 2, 3] | batch(-1) | list }} {{ [1, 2, 3] | batch(2, fill_with=0) | list }} {{ 'ab' | center(1) }}|{{ 'a\n\nb' | indent(2, first=true, blank=true) }}|{{ 'a\n\nb' | indent('-', true) }})J",
     R"J({})J",
     R"J([[], [1, 2, 3]] [[1, 2, 3]] [[1, 2], [3, 0]] ab|  a
  
  b|-a

-b)J"},
    {R"J({{ 'hello world' | truncate(5, leeway=0) }} {{ 'foo bar baz qux' | truncate(9, leeway=0) }} {{ 'foo bar baz qux' | truncate(9, true, leeway=0) }} {{ 'foo bar baz' | truncate(9, end='!', leeway=0) }} {{ 'short' | truncate(3, leeway=2) }})J",
     R"J({})J",
     R"J(he... foo... foo ba... foo bar! short)J"},
    {R"J({{ ns | sum(attribute='n', start=10) }} {{ [0.5, 1] | sum }} {{ ['B', 'a', 'C'] | max }} {{ ['B', 'a', 'C'] | max(case_sensitive=true) }} {{ ['B', 'a', 'C'] | min(case_sensitive=true) }} {{ ns | min(attribute='n') }} {{ ns | max(attribute='n') }} {{ [] | max }})J",
     R"J({"ns": [{"n": 3}, {"n": 1}, {"n": 3, "k": 1}]})J",
     R"J(17 1.5 C a B {'n': 1} {'n': 3} )J"},
    // unique compares with Python equality (1 == 1.0 == True) and lower-cases strings unless
    // case_sensitive.
    {R"J({{ [1, 1.0, true, 2, 'A', 'a'] | unique | list }} {{ [1, 'A', 'a'] | unique(case_sensitive=true) | list }} {{ [{'k': 'x', 'v': 1}, {'k': 'X', 'v': 2}] | unique(attribute='k') | map(attribute='v') | list }} {{ [(1, 2), (1, 2)] | unique | list }})J",
     R"J({})J",
     R"J([1, 2, 'A'] [1, 'A', 'a'] [1] [(1, 2)])J"},
    // Several sort keys; parts are not stripped (' m' is a missing key, so ties stay in order);
    // reverse keeps equal items in their order.
    {R"J({{ us | sort(attribute='age,name') | map(attribute='name') | list }} {{ us | sort(attribute='info.n') | map(attribute='name') | list }} {{ [{'n': 1, 'm': 2}, {'n': 1, 'm': 1}] | sort(attribute='n, m') | map(attribute='m') | list }} {{ ['b', 'A', 'a', 'B'] | sort(reverse=true) }} {{ ['b', 'A', 'a', 'B'] | sort(true, true) }} {{ [[2, 'x'], [1, 'y']] | sort(attribute=0) }})J",
     R"J({"us": [{"name": "b", "age": 30, "info": {"n": 2}}, {"name": "a", "age": 30, "info": {"n": 3}}, {"name": "c", "age": 20, "info": {"n": 1}}]})J",
     R"J(['c', 'a', 'b'] ['c', 'b', 'a'] [2, 1] ['b', 'B', 'A', 'a'] ['b', 'a', 'B', 'A'] [[1, 'y'], [2, 'x']])J"},
    {R"J({{ 'abc' | reverse }} {{ {'a': 1, 'b': 2} | reverse | list }} {{ (1, 2) | list }} {{ 12 | string ~ 3 }} {{ 'abc' | int(default=-1) }} {{ '101' | int(base=2) }} {{ 'ff' | int(base=16) }} {{ 'x' | float(1.5) }} {{ '1e3' | float }} {{ -2.5 | abs }})J",
     R"J({})J",
     R"J(cba ['b', 'a'] [1, 2] 123 -1 5 255 1.5 1000.0 2.5)J"},
    // round: negative precision rounds to tens/hundreds, ties to even, ints stay ints.
    {R"J({{ 1234.5678 | round(-2) }} {{ 1250 | round(-2) }} {{ 1350 | round(-2) }} {{ 15 | round(-1) }} {{ 25 | round(-1) }} {{ -25 | round(-1) }} {{ 45.0 | round(-1) }} {{ 55.0 | round(-1) }} {{ 4.0 | round(-1) }} {{ 6.0 | round(-1) }} {{ 3.14159 | round(3) }} {{ 3.14159 | round(2, 'floor') }} {{ 3.14159 | round(2, 'ceil') }} {{ 0.5 | round }} {{ 1.5 | round }} {{ 7 | round(-5) }} {{ -4.0 | round(-1) }} {{ 0.005 | round(2) }} {{ 2.675 | round(2) }} {{ 1e308 | round(300) }} {{ 1e-300 | round(300) }} {{ 123.456 | round(400) }})J",
     R"J({})J",
     R"J(1200.0 1200 1400 20 20 -20 40.0 60.0 0.0 10.0 3.142 3.14 3.15 0.0 2.0 0 -0.0 0.01 2.67 1e+308 1e-300 123.456)J"},
    {R"J({{ '%s=%d' | format('a', 1) }} {{ '%(x)s' | format(x=1) }} {{ '%5.2f' % 3.14159 }} {{ 'hELLO wORLD' | capitalize }} {{ "Hello, world! it's" | wordcount }} {{ "'\"" | e }} {{ '<b>' | escape | e }})J",
     R"J({})J",
     R"J(a=1 1  3.14 Hello world 4 &#39;&#34; &lt;b&gt;)J"},
    // striptags drops comments first, then tags; collapses whitespace; unescapes; returns
    // Markup, so a plain string added to it is escaped.
    {R"J({{ '<p>Hello <b>World</b></p> <!-- c <b>x</b> --> &amp; a &lt; b &#65;&#x42;' | striptags }}|{{ 'a < b' | striptags }}|{{ 'x<br/>y' | striptags }}|{{ ('<b>x</b>' | striptags) + '<' }}|{{ '<!<!-- a -->-- b -->c' | striptags }})J",
     R"J({})J",
     R"J(Hello World & a < b AB|a < b|xy|x&lt;|c)J"},
    // pprint sorts dict keys, as pprint.pformat does.
    {R"J({{ {'b': 1, 'a': [2, {'d': 1, 'c': 2}]} | pprint }} {{ d | attr('a') }}|{{ (d | attr('items'))() | list }} {% set ns = namespace(x=5) %}{{ ns | attr('x') }} {{ [1, 2, 3, 4] | select('divisibleby', 2) | list }} {{ [1, 2, 3, 4] | reject('gt', 2) | list }} {{ [1, 2, 3] | select('>', 1) | list }})J",
     R"J({"d": {"a": 1}})J",
     R"J({'a': [2, {'c': 2, 'd': 1}], 'b': 1} |[('a', 1)] 5 [2, 4] [1, 2] [2, 3])J"},
};

const RenderCase kTestsAndGlobals[] = {
    {R"J({{ 1 is sameas 1 }} {{ [] is sameas [] }} {% set l = [] %}{{ l is sameas l }} {{ {} is iterable }} {{ none is iterable }} {{ (1, 2) is sequence }} {{ cycler is callable }} {{ 'x' is callable }} {{ 'x'.upper is callable }} {{ ('x' | e) is escaped }} {{ 'x' is escaped }} {{ 2 is greaterthan 1 }} {{ 1 is lessthan 2 }} {{ 10 is divisibleby 3 }} {{ 0 is even }} {{ -3 is odd }} {{ 'aB' is lower }} {{ 'A1' is upper }} {{ 2 is in [1, 2] }})J",
     R"J({})J",
     R"J(True False True True False True True False True True False True True False True True False True True)J"},
    {R"J({% set c = cycler(1, 2, 3) %}{{ c.next() }}{{ c.next() }}{{ c.reset() }}{{ c.next() }}{{ c.current }} {% set j = joiner() %}{{ j() }}a{{ j() }}b {% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }} {{ dict(a=1) }} {{ range(2, 8, 3) | list }})J",
     R"J({})J",
     R"J(12None12 a, b 3 {'a': 1} [2, 5])J"},
};
// clang-format on

TEST(TemplateFilters, Groupby) {
    expect_all(kGroupby);
    // Without default=, a missing attribute cannot be ordered against the others.
    expect_error("{{ [{'c': 'x'}, {}] | groupby('c') }}", "'dict object' has no attribute 'c'");
}

TEST(TemplateFilters, Slice) {
    expect_all(kSlice);
    expect_error("{{ [1] | slice(0) | list }}", "division or modulo by zero");
}

TEST(TemplateFilters, Wordwrap) {
    expect_all(kWordwrap);
    expect_error("{{ 'a b' | wordwrap(0) }}", "invalid width 0 (must be > 0)");
}

TEST(TemplateFilters, UrlencodeXmlattrFilesizeformat) {
    expect_all(kUrlencodeXmlattrFilesize);
    expect_error("{{ {'a b': 1} | xmlattr }}", "Invalid character in attribute name: 'a b'");
    expect_error("{{ {'x\"=y': 1} | xmlattr }}", "Invalid character in attribute name");
    expect_error("{{ [1] | xmlattr }}", "has no attribute 'items'");
    expect_error("{{ [(1, 2, 3)] | urlencode }}", "too many values to unpack");
    expect_error("{{ 'big' | filesizeformat }}", "could not convert string to float: 'big'");
}

TEST(TemplateFilters, Urlize) {
    expect_all(kUrlize);
    expect_error("{{ 'x' | urlize(extra_schemes=['ftp']) }}",
                 "'ftp' is not a valid URI scheme prefix.");
}

TEST(TemplateFilters, OlderFiltersFollowJinja2) {
    expect_all(kOlderFilters);
    expect_error("{{ 'abc' | truncate(2) }}", "expected length >= 3, got 2");
    expect_error("{{ 'abc' | truncate(5, leeway=-1) }}", "expected leeway >= 0, got -1");
    expect_error("{{ ['a'] | sum(start='') }}", "can't sum strings");
    expect_error("{{ [[1], [1]] | unique | list }}", "unhashable type: 'list'");
    expect_error("{{ 1.5 | round(method='x') }}", "method must be common, ceil or floor");
}

TEST(TemplateFilters, TestsAndGlobals) {
    expect_all(kTestsAndGlobals);
    // lipsum is left out on purpose: no chat template needs filler text.
    expect_error("{{ lipsum() }}", "'lipsum' is undefined");
}

// |random cannot be checked against Jinja2's output (that is random); what matters for a
// chat prompt is that it is reproducible and still picks among the items.
TEST(TemplateFilters, RandomIsReproducible) {
    const std::string src =
        "{% for i in range(30) %}{{ [1, 2, 3] | random }}{% endfor %}|{{ 'xyz' | random }}";
    std::string first = render(src);
    EXPECT_EQ(render(src), first);
    std::set<char> seen(first.begin(), first.begin() + 30);
    EXPECT_EQ(seen, (std::set<char>{'1', '2', '3'})) << first;
    EXPECT_NE(std::string("xyz").find(first.back()), std::string::npos) << first;
    EXPECT_EQ(render("{{ [7] | random }}|{{ [] | random }}|{{ '' | random }}"), "7||");
    expect_error("{{ {'a': 1} | random }}", "random needs a sequence");
    expect_error("{{ [1] | map('string') | random }}", "not a generator");
}

// Filters that multiply their input stop at the render's limits instead of allocating.
TEST(TemplateFilters, GrowingFiltersRespectLimits) {
    RenderOptions o;
    o.limits.max_output_bytes = 1 << 20;
    expect_error("{{ 'x' | center(100000000000) }}", "exceeds", json::object(), o);
    expect_error("{{ 'a\nb' | indent(100000000000) }}", "exceeds", json::object(), o);
    expect_error("{{ ('a\n' * 1000) | indent('x' * 10000) }}", "exceeds", json::object(), o);
    expect_error("{{ ('a ' * 1000) | wordwrap(1, wrapstring='x' * 100000) }}", "exceeds",
                 json::object(), o);
    expect_error("{{ ('www.a.io ' * 100000) | urlize }}", "exceeds", json::object(), o);
    expect_error("{{ [1] | batch(100000000, 'x') | list }}", "list exceeds", json::object(), o);
    expect_error("{{ [1] | slice(100000000) | list }}", "list exceeds", json::object(), o);
}

}  // namespace
