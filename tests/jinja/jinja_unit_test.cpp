// Unit tests of the template engine. The table-driven cases' expected outputs were produced by
// real Jinja2 3.1 configured as Hugging Face configures it (SandboxedEnvironment, trim_blocks,
// lstrip_blocks, loopcontrols, tojson = json.dumps(ensure_ascii=False)); the other tests check
// errors, limits, thread safety and the chat-context helpers.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "jinja/chat_template.h"
#include "tests/jinja/render_helpers.h"

namespace {

using ggufd::jinja::ChatContext;
using ggufd::jinja::RenderOptions;
using ggufd::jinja::Template;
using ggufd::jinja::TemplateError;
using ggufd::jinja::testing::expect_all;
using ggufd::jinja::testing::expect_error;
using ggufd::jinja::testing::render;
using ggufd::jinja::testing::RenderCase;
using json = nlohmann::ordered_json;

// clang-format off
const RenderCase kWhitespace[] = {
    {R"J(a
  {% if true %}
b
  {% endif %}
c)J",
     R"J({})J",
     R"J(a
b
c)J"},
    {R"J(  {% for x in [1, 2] %}
  - {{ x }}
  {% endfor %})J",
     R"J({})J",
     R"J(  - 1
  - 2
)J"},
    {R"J({{ 'a' }}   {% if true %}x{% endif %})J",
     R"J({})J",
     R"J(a   x)J"},
    {R"J({% if true -%}
   a
{%- endif %})J",
     R"J({})J",
     R"J(a)J"},
    {R"J({%- if true %}  a  {% endif -%}  

   b)J",
     R"J({})J",
     R"J(  a  b)J"},
    {R"J(x {#- comment -#} y)J",
     R"J({})J",
     R"J(xy)J"},
    {R"J(x
  {# comment #}
y)J",
     R"J({})J",
     R"J(x
y)J"},
    {R"J({% for i in range(2) %}{{ i }}
{% endfor %})J",
     R"J({})J",
     R"J(0
1
)J"},
    {R"J({{ "x" -}}
   {{- "y" }})J",
     R"J({})J",
     R"J(xy)J"},
    {R"J(line
trailing newline is dropped
)J",
     R"J({})J",
     R"J(line
trailing newline is dropped)J"},
    {R"J(  {%+ if true %}kept{% endif %})J",
     R"J({})J",
     R"J(  kept)J"},
    {R"J({% raw %}{{ not rendered }} {% if %}{% endraw %} after)J",
     R"J({})J",
     R"J({{ not rendered }} {% if %} after)J"},
    {R"J({%- for message in [{'role': 'user'}] %}
{{- '<|im_start|>' + message.role + '\n' }}
{%- endfor %})J",
     R"J({})J",
     R"J(<|im_start|>user
)J"},
};

const RenderCase kExpressions[] = {
    {R"J({{ 1/2 }} {{ 7//2 }} {{ -7//2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2**10 }} {{ 2**-1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 3 * 1.0 }})J",
     R"J({})J",
     R"J(0.5 3 -4 2 -2 1024 0.5 3.0 0.5 3.0)J"},
    {R"J({{ 1e20 }} {{ 1.0 }} {{ 0.1+0.2 }} {{ 1e16 }} {{ 1e15 }} {{ 1.5e-5 }} {{ 0.0001 }} {{ 123456789.123 }} {{ 2.0 ** 0.5 }})J",
     R"J({})J",
     R"J(1e+20 1.0 0.30000000000000004 1e+16 1000000000000000.0 1.5e-05 0.0001 123456789.123 1.4142135623730951)J"},
    {R"J({{ {'a': [1, 'x', none, true, 1.5]} }} {{ ('a',) }} {{ (1, 2) }} {{ ["it's", 'say "hi"', "a\nb", 'back\\slash'] }})J",
     R"J({})J",
     R"J({'a': [1, 'x', None, True, 1.5]} ('a',) (1, 2) ["it's", 'say "hi"', 'a\nb', 'back\\slash'])J"},
    {R"J({{ 'x' ~ none }} {{ [1] == (1,) }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' < 'b' }} {{ [1,2] < [1,3] }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }})J",
     R"J({})J",
     R"J(xNone False True True True True True False)J"},
    {R"J({{ 1 if true else 2 if false else 3 }} {{ -2 ** 2 }} {{ 2 + 3 * 4 }} {{ (2 + 3) * 4 }} {{ 10 - 2 - 3 }} {{ not true == false }})J",
     R"J({})J",
     R"J(1 4 14 20 5 True)J"},
    {R"J({{ 'yes' if n > 3 else 'no' }} {{ 'x' if false }}| {{ n > 3 and 'a' or 'b' }} {{ not n }} {{ 0 or '' or 'z' }} {{ n and 0 }})J",
     R"J({"n": 5})J",
     R"J(yes | a False z 0)J"},
    {R"J({{ 'a' in 'abc' }} {{ 1 in [1,2] }} {{ 'b' in d }} {{ 'z' not in d }} {{ 'x' in [] }})J",
     R"J({"d": {"b": 1}})J",
     R"J(True True True True False)J"},
    {R"J({{ 'a' 'b' }} {{ "q\"x" }} {{ 'tab\t|' }} {{ '\u00e9\x41' }} {{ 1 ~ 2 }} {{ 1.5 ~ '' }} {{ true ~ '' }} {{ none ~ '' }})J",
     R"J({})J",
     R"J(ab q"x tab	| éA 12 1.5 True None)J"},
    {R"J({{ n * 'ab' }} {{ [1] * 3 }} {{ [1] + [2] }} {{ -n }} {{ (1, 2) + (3,) }})J",
     R"J({"n": 5})J",
     R"J(ababababab [1, 1, 1] [1, 2] -5 (1, 2, 3))J"},
    {R"J({{ [1, [2, {'a': None}], (3,)] | string }} {{ {'a': 1.0, 1: 'x', none: true} }} {{ "\u00a0\u200b" }} {{ ["\u00a0", "\u200b", "é", "\U0001F600"] }})J",
     R"J({})J",
     R"J([1, [2, {'a': None}], (3,)] {'a': 1.0, 1: 'x', None: True}  ​ ['\xa0', '\u200b', 'é', '😀'])J"},
};

const RenderCase kSlicing[] = {
    {R"J({{ l[10] }}|{{ l[-1] }}|{{ l[1:] }}|{{ l[::2] }}|{{ l[:-1] }}|{{ l[::-1] }}|{{ 'hello'[1:3] }}|{{ 'hello'[-3:] }}|{{ u[1] }}|{{ u[1:4] }}|{{ u[::-1] }}|{{ u | length }})J",
     R"J({"l": [3, 1, 2], "u": "héllo wörld"})J",
     R"J(|2|[1, 2]|[3, 2]|[3, 1]|[2, 1, 3]|el|llo|é|éll|dlröw olléh|11)J"},
};

const RenderCase kStatements[] = {
    {R"J({% if false %}a{% elif 0 %}b{% elif 'x' %}c{% else %}d{% endif %})J",
     R"J({})J",
     R"J(c)J"},
    {R"J({% for a in [1,2,3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}-{{ loop.nextitem }}{{ loop.cycle('x','y') }}{{ loop.depth }};{% endfor %})J",
     R"J({})J",
     R"J(1032TrueFalse3-2x1;2121FalseFalse31-3y1;3210FalseTrue32-x1;)J"},
    {R"J({% for m in [{'r': 's'}, {'r': 'u'}, {'r': 'a'}] if m.r != 's' %}{{ loop.index }}:{{ m.r }}{{ loop.length }} {% else %}none{% endfor %}|{% for m in [] %}x{% else %}empty{% endfor %})J",
     R"J({})J",
     R"J(1:u2 2:a2 |empty)J"},
    {R"J({% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %})J",
     R"J({})J",
     R"J(0134)J"},
    {R"J({% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}{% for a, b in [(1, 2), (3, 4)] %}{{ a }}{{ b }}{% endfor %}{% set p, q = 1, 2 %}{{ p }}{{ q }})J",
     R"J({"d": {"b": 1, "A": 2}})J",
     R"J(b=1;A=2;bA123412)J"},
    {R"J({% for x in [[1, [2, 3]], [4, []]] recursive %}[{{ x[0] if x is sequence and x[0] is number else x }}{% if x is sequence and x|length > 1 and x[1] is sequence %}{{ loop(x[1]) }}{% endif %}]{% endfor %})J",
     R"J({})J",
     R"J([1[2][3]][4])J"},
    {R"J({% for i in range(2) %}{% for j in range(2) %}{{ loop.index }}{{ i }}{% endfor %}{{ loop.index }};{% endfor %})J",
     R"J({})J",
     R"J(10201;11212;)J"},
    {R"J({% set x = 1 %}{% for i in range(3) %}{{ x }}{% if i == 1 %}{% set x = 5 %}{% endif %}{{ x }}|{% endfor %}{{ x }})J",
     R"J({})J",
     R"J(11|15|11|1)J"},
    {R"J({% if true %}{% set leaked = 'yes' %}{% endif %}{{ leaked }})J",
     R"J({})J",
     R"J(yes)J"},
    {R"J({% set ns = namespace(found=false, n=0) %}{% for i in range(3) %}{% set ns.found = true %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.found }}{{ ns.n }}{{ ns['n'] }})J",
     R"J({})J",
     R"J(True33)J"},
    {R"J({% set x %}block {{ 1 + 1 }}{% endset %}[{{ x }}]{% set y | upper %}up{% endset %}{{ y }})J",
     R"J({})J",
     R"J([block 2]UP)J"},
    {R"J({% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}])J",
     R"J({})J",
     R"J(3[])J"},
    {R"J({% filter upper %}hello {{ 'x' }}{% endfilter %})J",
     R"J({})J",
     R"J(HELLO X)J"},
};

const RenderCase kMacros[] = {
    {R"J({%- macro f(a, b=a) -%}{{ a }}{{ b }}{{ kwargs }}{%- endmacro -%}{{ f(1) }}{{ f(1, c=3) }}{{ f(b=2, a=1) }})J",
     R"J({})J",
     R"J(11{}11{'c': 3}12{})J"},
    {R"J({% macro g() %}{{ varargs }}{% endmacro %}{{ g(1, 2) }})J",
     R"J({})J",
     R"J((1, 2))J"},
    {R"J({% macro m(x) %}<{{ caller(x) }}>{% endmacro %}{% call(v) m(5) %}got {{ v }}{% endcall %})J",
     R"J({})J",
     R"J(<got 5>)J"},
    {R"J({% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(5) }})J",
     R"J({})J",
     R"J(54321)J"},
    {R"J({% set a = 1 %}{% macro show() %}{{ a }}{% endmacro %}{% set a = 2 %}{{ show() }}{% for i in [1] %}{% set a = 3 %}{{ show() }}{% endfor %}{{ a }})J",
     R"J({})J",
     R"J(222)J"},
    {R"J({% macro m(p) %}{{ p is defined }}{% endmacro %}{{ m() }}{{ m(1) }})J",
     R"J({})J",
     R"J(FalseTrue)J"},
};

const RenderCase kFilters[] = {
    {R"J({{ l | sort }} {{ l | sort(reverse=true) }} {{ l | max }} {{ l | min }} {{ l | sum }} {{ l | reverse | list }} {{ l | first }} {{ l | last }} {{ l | length }} {{ l | list }} {{ l | join('-') }} {{ l | unique | list }})J",
     R"J({"l": [3, 1, 2], "d": {"b": 1, "A": 2, "a": 3}})J",
     R"J([1, 2, 3] [3, 2, 1] 3 1 6 [2, 1, 3] 3 2 3 [3, 1, 2] 3-1-2 [3, 1, 2])J"},
    {R"J({{ d | dictsort }} {{ d | dictsort(reverse=true) }} {{ d | dictsort(by='value') }} {{ d | dictsort(true) }} {{ d | items | list }} {{ d | first }} {{ d | list }} {{ d | length }})J",
     R"J({"d": {"b": 1, "A": 2, "a": 3}})J",
     R"J([('A', 2), ('a', 3), ('b', 1)] [('b', 1), ('A', 2), ('a', 3)] [('b', 1), ('A', 2), ('a', 3)] [('A', 2), ('a', 3), ('b', 1)] [('b', 1), ('A', 2), ('a', 3)] b ['b', 'A', 'a'] 3)J"},
    {R"J({{ ['b','A','a','B'] | sort }} {{ ['b','A','a','B'] | unique | list }} {{ ['b','A','a','B'] | sort(case_sensitive=true) }} {{ [{'n': 2}, {'n': 1}] | sort(attribute='n') }})J",
     R"J({})J",
     R"J(['A', 'a', 'b', 'B'] ['b', 'A'] ['A', 'B', 'a', 'b'] [{'n': 1}, {'n': 2}])J"},
    {R"J({{ '  Hello  ' | trim }}|{{ 'xxhixx' | trim('x') }}|{{ 'hello world-foo(bar' | title }} {{ 'hELLO' | capitalize }} {{ 'ab' | upper }}{{ 'AB' | lower }} {{ 'héllo wörld ß' | upper }} {{ 'Hello' | replace('l', 'L') }} {{ 'a-b-c' | replace('-', '+', 1) }})J",
     R"J({})J",
     R"J(Hello|hi|Hello World-Foo(Bar Hello ABab HÉLLO WÖRLD SS HeLLo a+b-c)J"},
    {R"J({{ 'abc' | center(9) }}|{{ 'ab' | center(9) }}|{{ 'a\nb\n\nc' | indent(2) }}|{{ 'a\nb' | indent(2, true) }}|{{ 'a\n\nb' | indent(width='> ', blank=true) }})J",
     R"J({})J",
     R"J(   abc   |    ab   |a
  b

  c|  a
  b|a
> 
> b)J"},
    {R"J({{ 3 | round }} {{ 2.5 | round }} {{ 2.675 | round(2) }} {{ 3.7 | round(0, 'floor') }} {{ 3.2 | round(method='ceil') }} {{ -3.5 | abs }} {{ -3 | abs }})J",
     R"J({})J",
     R"J(3 2.0 2.67 3.0 4.0 3.5 3)J"},
    {R"J({{ 5 | string }} {{ '42' | int + 1 }} {{ '4.7' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ '3.5' | float }} {{ 3 | float }} {{ '0x1f' | int(0, 16) }} {{ '1_000' | int }} {{ 3.9 | int }})J",
     R"J({})J",
     R"J(5 43 4 0 7 3.5 3.0 31 1000 3)J"},
    {R"J({{ [3, 1, 2] | batch(2) | list }} {{ [3, 1, 2] | batch(2, 'x') | list }} {{ [1,2,3,4] | sum(start=10) }} {{ 'one two  three' | wordcount }} {{ 'hello world' | truncate(8) }} {{ 'hello world foo bar baz' | truncate(12, true) }})J",
     R"J({})J",
     R"J([[3, 1], [2]] [[3, 1], [2, 'x']] 20 3 hello world hello wor...)J"},
    {R"J({{ x | default(5) }} {{ '' | default('e') }} {{ '' | default('e', true) }} {{ none | default('n') }} {{ none | d('n', true) }})J",
     R"J({})J",
     R"J(5  e None n)J"},
    {R"J({{ '<b>' | e }} {{ '<b>' | safe }} {{ ('<b>' | safe) + '<i>' }} {{ '<i>' + ('<b>' | safe) }} {{ "%s-%s" | format(1, 2) }} {{ [1, 'a'] | pprint }})J",
     R"J({})J",
     R"J(&lt;b&gt; <b> <b>&lt;i&gt; &lt;i&gt;<b> 1-2 [1, 'a'])J"},
    {R"J({{ ms | map(attribute='role') | join(', ') }} {{ ms | selectattr('role', 'equalto', 'user') | list | length }} {{ ms | rejectattr('role', 'in', ['user']) | map(attribute='role') | list }} {{ ms | selectattr('tool_calls', 'defined') | list | length }} {{ ms | map(attribute='name', default='anon') | list }} {{ ms | map(attribute='content') | map('lower') | list }} {{ [1, 0, 2] | select | list }} {{ [1, 2, 3] | reject('odd') | list }})J",
     R"J({"ms": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}, {"role": "assistant", "content": "A", "tool_calls": [1]}]})J",
     R"J(system, user, assistant 1 ['system', 'assistant'] 1 ['anon', 'anon', 'anon'] ['s', 'u', 'a'] [1, 2] [2])J"},
    {R"J({% if ms | selectattr('role', 'equalto', 'nobody') %}generators are truthy{% endif %}|{{ (ms | selectattr('role'))[0] }}|{{ none | selectattr('x') | list }})J",
     R"J({"ms": [{"role": "user"}]})J",
     R"J(generators are truthy||[])J"},
    {R"J({{ t | tojson }} {{ t | map(attribute='function') | list | tojson(indent=2) }})J",
     R"J({"t": [{"function": {"name": "f", "parameters": {"type": "object"}}}]})J",
     R"J([{"function": {"name": "f", "parameters": {"type": "object"}}}] [
  {
    "name": "f",
    "parameters": {
      "type": "object"
    }
  }
])J"},
    {R"J({{ d | tojson(sort_keys=true) }} {{ d | tojson(separators=(',', ':')) }} {{ d | tojson(ensure_ascii=true) }} {{ {} | tojson(indent=2) }} {{ [] | tojson }} {{ 'x' | tojson }})J",
     R"J({"d": {"b": 1, "a": [1.0, null, true, "é\n\"\u0001"]}})J",
     R"J({"a": [1.0, null, true, "é\n\"\u0001"], "b": 1} {"b":1,"a":[1.0,null,true,"é\n\"\u0001"]} {"b": 1, "a": [1.0, null, true, "\u00e9\n\"\u0001"]} {} [] "x")J"},
};

const RenderCase kTests[] = {
    {R"J({{ x is sequence }} {{ [1,2] is sequence }} {{ {} is sequence }} {{ 'ab' is sequence }} {{ 5 is sequence }} {{ True is number }} {{ 1 is integer }} {{ true is integer }} {{ 1.0 is float }} {{ true is boolean }} {{ none is none }} {{ {} is mapping }} {{ [] is mapping }})J",
     R"J({})J",
     R"J(True True True True False True True False True True True True False)J"},
    {R"J({{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 'a' is string }} {{ 2 is gt 1 }} {{ 2 is ge 2 }} {{ 1 is lt 2 }} {{ 1 is le 0 }} {{ 1 is ne 2 }} {{ 'x' is eq 'x' }} {{ 'x' is equalto 'y' }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ [] is iterable }} {{ 5 is iterable }} {{ 'a' is in ['a'] }} {{ x is defined }} {{ x is undefined }} {{ true is true }} {{ 1 is true }} {{ false is false }} {{ none is sameas none }} {{ range is callable }} {{ 'upper' is filter }} {{ 'odd' is test }})J",
     R"J({})J",
     R"J(True True True True True True True False True True False True True True False True False True True False True True True True True)J"},
};

const RenderCase kMethods[] = {
    {R"J({{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a b c'.rsplit(' ', 1) }} {{ '  s  '.strip() }}|{{ 'xxhixx'.strip('x') }} {{ '  s'.lstrip() }}|{{ 's  '.rstrip() }}| {{ 'a\nb\r\nc'.splitlines() }})J",
     R"J({})J",
     R"J(['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c'] ['a b', 'c'] s|hi s|s| ['a', 'b', 'c'])J"},
    {R"J({{ 'abc'.startswith('a') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'abc'.startswith('b', 1) }} {{ 'abc'.replace('b', 'B') }} {{ 'abc'.find('c') }} {{ 'abc'.find('z') }} {{ 'hello'.count('l') }} {{ ','.join(['a','b']) }} {{ 'x'.zfill(3) }} {{ 'a=b'.partition('=') }} {{ 'ab'.ljust(4, '*') }}{{ 'ab'.rjust(4) }}{{ 'ab'.center(6, '-') }})J",
     R"J({})J",
     R"J(True True True aBc 2 -1 2 a,b 00x ('a', '=', 'b') ab**  ab--ab--)J"},
    {R"J({{ "they're bill's".title() }} {{ 'hELLO wORLD'.capitalize() }} {{ 'Hello World'.swapcase() }} {{ 'abc'.isalpha() }} {{ '123'.isdigit() }} {{ ' '.isspace() }} {{ 'abc'.removeprefix('a') }} {{ 'abc'.removesuffix('c') }} {{ 'ab'.upper() }})J",
     R"J({})J",
     R"J(They'Re Bill'S Hello world hELLO wORLD True True True bc ab AB)J"},
    {R"J({{ '%s and %d' % ('a', 3) }} {{ '%05.1f|%-4s|%x' % (3.14159, 'ab', 255) }} {{ '%(a)s-%(b)d' % {'a': 'x', 'b': 5} }} {{ '%s' % [1, 2] }} {{ '%r' % 'x' }})J",
     R"J({})J",
     R"J(a and 3 003.1|ab  |ff x-5 [1, 2] 'x')J"},
    {R"J({{ "{} x {name}".format(1, name='n') }} {{ "{:>6}|{:<4}|{:^7}|{:.2f}|{:,}".format('r', 'l', 'c', 2.5, 1234567) }} {{ '{!r}'.format('x') }} {{ '{0}{1}{0}'.format('a', 'b') }} {{ '{:05d}'.format(42) }} {{ '{:x}'.format(255) }} {{ '{:+.1f}'.format(2) }} {{ '{:.0%}'.format(0.256) }})J",
     R"J({})J",
     R"J(1 x n      r|l   |   c   |2.50|1,234,567 'x' aba 00042 ff +2.0 26%)J"},
    {R"J({% set lst = [] %}{% set _ = lst.append(1) %}{% set _ = lst.extend([2, 3]) %}{{ lst }}{{ lst.pop() }}{{ lst.pop(0) }}{{ lst }}{% set dd = {} %}{% set _ = dd.update({'a': 1}) %}{{ dd }}{{ dd.get('a') }}{{ dd.get('zz') }}{{ dd.get('zz', 5) }}{{ dd.keys() | list }}{{ dd.values() | list }}{{ dd.items() | list }}{{ lst.index(2) }}{{ lst.count(2) }})J",
     R"J({})J",
     R"J([1, 2, 3]31[2]{'a': 1}1None5['a'][1][('a', 1)]01)J"},
    {R"J({% set c = cycler('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ c.next() }}{{ c.current }}{% set j = joiner('|') %}{% for x in [1, 2, 3] %}{{ j() }}{{ x }}{% endfor %} {{ dict(a=1, b=2) }} {{ dict([('x', 1)]) }} {{ range(3) | list }} {{ range(1, 10, 3) | list }} {{ range(5, 0, -2) | list }})J",
     R"J({})J",
     R"J(abab1|2|3 {'a': 1, 'b': 2} {'x': 1} [0, 1, 2] [1, 4, 7] [5, 3, 1])J"},
};

const RenderCase kUndefined[] = {
    {R"J({{ missing }}|{{ missing | length }}|{{ missing | list }}|{{ missing | join(',') }}|{{ missing ~ 'a' }}|{{ missing is defined }}|{% for x in missing %}x{% endfor %}|{{ missing | default('d') }}|{{ not missing }}|{{ missing == missing }}|{{ missing | upper }}|{{ missing | first }}|{{ 'a' in missing }})J",
     R"J({})J",
     R"J(|0|[]||a|False||d|True|True|||False)J"},
    {R"J({{ d.b }}|{{ d['b'] }}|{{ d.b is defined }}|{{ none.x }}|{{ (none.x) is defined }}|{{ [1][5] }}|{{ 'x'.nope }}|{{ d.items is defined }}
)J",
     R"J({"d": {"a": 1}})J",
     R"J(||False||False|||True)J"},
};

// clang-format on

TEST(TemplateJinja2Semantics, WhitespaceControlTrimAndLstripBlocks) {
    expect_all(kWhitespace);
}
TEST(TemplateJinja2Semantics, Expressions) {
    expect_all(kExpressions);
}
TEST(TemplateJinja2Semantics, Slicing) {
    expect_all(kSlicing);
}
TEST(TemplateJinja2Semantics, Statements) {
    expect_all(kStatements);
}
TEST(TemplateJinja2Semantics, Macros) {
    expect_all(kMacros);
}
TEST(TemplateJinja2Semantics, Filters) {
    expect_all(kFilters);
}
TEST(TemplateJinja2Semantics, Tests) {
    expect_all(kTests);
}
TEST(TemplateJinja2Semantics, Methods) {
    expect_all(kMethods);
}
TEST(TemplateJinja2Semantics, Undefined) {
    expect_all(kUndefined);
}

TEST(TemplateSyntax, CrLfNormalisedAndOneTrailingNewlineDropped) {
    EXPECT_EQ(render("a\r\nb\r\n"), "a\nb");
    EXPECT_EQ(render("a\n\n"), "a\n");
    EXPECT_EQ(Template::compile("a\n", {.keep_trailing_newline = true}).render_text(json::object()),
              "a\n");
}

TEST(TemplateSyntax, ErrorsCarryLineAndColumn) {
    try {
        Template::compile("line one\n{% if true %}\n  {{ 1 + }}\n{% endif %}");
        FAIL() << "expected a syntax error";
    } catch (const TemplateError& e) {
        EXPECT_EQ(e.line(), 3);
        EXPECT_EQ(e.column(), 10);
        EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
    }
}

TEST(TemplateSyntax, ReportsMalformedTemplates) {
    auto compile_error = [](const std::string& src, const std::string& needle) {
        try {
            Template::compile(src);
            ADD_FAILURE() << "no error for: " << src;
        } catch (const TemplateError& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
            EXPECT_GT(e.line(), 0);
        }
    };
    compile_error("{% if x %}never closed", "endif");
    compile_error("{% for x in y %}{% endif %}", "Encountered unknown tag 'endif'");
    compile_error("{% frobnicate %}", "unknown tag 'frobnicate'");
    compile_error("{{ 'unterminated }}", "unexpected end of string");
    compile_error("{# comment", "Missing end of comment tag");
    compile_error("{{ x ) }}", "unexpected ')'");
    compile_error("{{ x", "expected '}}'");
    compile_error("{% break %}", "outside of a loop");
    compile_error("{% set 1 = 2 %}", "can't assign");
    compile_error("{{ x is defined is string }}", "chain multiple tests");
    // Deep nesting is refused instead of overflowing the stack.
    compile_error("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}",
                  "nested too deeply");
    compile_error(std::string(2000, '{'), "");
}

TEST(TemplateErrors, RaiseExceptionStopsWithTheMessage) {
    TemplateError e = expect_error(
        "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}"
        "{% endif %}",
        "System role not supported", json{{"messages", json::array({{{"role", "system"}}})}});
    EXPECT_EQ(e.message(), "System role not supported");
    EXPECT_EQ(e.line(), 1);
}

TEST(TemplateErrors, UndefinedMisuseAndTypeErrorsAsInJinja2) {
    expect_error("{{ missing.attr }}", "'missing' is undefined");
    expect_error("{{ missing['k'] }}", "'missing' is undefined");
    expect_error("{{ d.nope.deeper }}", "'dict object' has no attribute 'nope'",
                 json{{"d", json::object()}});
    expect_error("{{ 'prefix' + missing }}", "'missing' is undefined");
    expect_error("{{ missing() }}", "'missing' is undefined");
    expect_error("{{ missing < 1 }}", "'missing' is undefined");
    expect_error("{{ 'a' + 1 }}", "can only concatenate str (not \"int\") to str");
    // Found by fuzz_template: a slice inside a tuple subscript had no object to slice.
    expect_error("{{ 'abc'[1:, 4] }}", "a slice must be the whole subscript");
    expect_error("{{ [1, 2][:2, ::2] }}", "a slice must be the whole subscript");
    expect_error("{{ 1 < 'a' }}", "'<' not supported between instances of 'int' and 'str'");
    expect_error("{{ 1 // 0 }}", "division or modulo by zero");
    expect_error("{{ 1 / 0 }}", "division by zero");
    expect_error("{% for x in none %}{% endfor %}", "'NoneType' object is not iterable");
    expect_error("{{ 'a' in none }}", "argument of type 'NoneType' is not iterable");
    expect_error("{{ 5 | length }}", "has no len()");
    expect_error("{{ x | nosuchfilter }}", "No filter named 'nosuchfilter'");
    expect_error("{{ x is nosuchtest }}", "No test named 'nosuchtest'");
    expect_error("{% set x = 1 %}{% set x.a = 2 %}", "non-namespace object");
    expect_error("{% macro m() %}{% endmacro %}{{ m(1) }}", "takes not more than 0 argument");
    expect_error("{% macro m() %}{% endmacro %}{{ m(k=1) }}", "no keyword argument 'k'");
    expect_error("{% for a, b in [[1, 2, 3]] %}{% endfor %}", "too many values to unpack");
    expect_error("{{ [1, 2] | map(attribute='x') | tojson }}", "not JSON serializable");
    expect_error("{{ missing | tojson }}", "not JSON serializable");
    expect_error("{{ ([1] | map('string')) | last }}", "not reversible");
    expect_error("{% include 'other.jinja' %}", "no file access");
}

TEST(TemplateLimits, StepBudgetStopsLongLoops) {
    RenderOptions o;
    o.limits.max_steps = 200000;
    expect_error(
        "{% for i in range(100000) %}{% for j in range(100000) %}{{ j }}{% endfor %}"
        "{% endfor %}",
        "evaluation budget", json::object(), o);
}

TEST(TemplateLimits, RecursionDepthIsBounded) {
    expect_error("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}", "recursion depth");
    expect_error("{% for x in [[[]]] recursive %}{{ loop([x]) }}{% endfor %}", "recursion depth");
    // Deep expressions inside deep recursion: the total nesting bound stops it before the
    // native stack could run out.
    std::string nest;
    for (int i = 0; i < 45; ++i) nest += "(0 + ";
    nest += "r(n + 1) | length" + std::string(45, ')');
    RenderOptions o;
    o.limits.max_call_depth = 100000;
    expect_error("{% macro r(n) %}{{ " + nest + " }}{% endmacro %}{{ r(0) }}", "nested too deeply",
                 json::object(), o);
}

TEST(TemplateLimits, OutputAndValueSizesAreBounded) {
    RenderOptions o;
    o.limits.max_output_bytes = 1 << 20;
    expect_error(
        "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s "
        "%}{% endfor %}",
        "exceeds", json::object(), o);
    expect_error("{{ 'x' * 100000000000 }}", "exceeds", json::object(), o);
    expect_error("{% for i in range(100000) %}{{ 'abcdefghijklmnopqrstuvwxyz' }}{% endfor %}",
                 "exceeds", json::object(), o);
    expect_error("{{ range(1000000000) | length }}", "Range too big");
    expect_error("{{ [0] * 100000000 }}", "list exceeds");
}

TEST(TemplateLimits, CyclicValuesFailInsteadOfRecursingForever) {
    expect_error("{% set a = [] %}{% set _ = a.append(a) %}{{ a }}", "cyclic");
    expect_error("{% set a = [] %}{% set _ = a.append(a) %}{{ a | tojson }}", "Circular");
    expect_error("{% set a = [] %}{% set _ = a.append(a) %}{{ a == a }}", "cyclic");
}

TEST(TemplateRender, StrftimeNowUsesTheInjectedClock) {
    RenderOptions o;
    o.now = [] {
        std::tm tm{};
        tm.tm_year = 2024 - 1900;
        tm.tm_mon = 6;
        tm.tm_mday = 26;
        tm.tm_hour = 12;
        tm.tm_wday = 5;
        tm.tm_yday = 207;
        return tm;
    };
    EXPECT_EQ(render("{{ strftime_now('%Y-%m-%d %H:%M %A %d %B %Y') }}", json::object(), o),
              "2024-07-26 12:00 Friday 26 July 2024");
    // Without an injected clock it is the current local time: at least it has the year.
    EXPECT_EQ(render("{{ strftime_now('%Y') | length }}"), "4");
}

TEST(TemplateRender, CompiledTemplateRendersConcurrently) {
    const Template t = Template::compile(
        "{%- set ns = namespace(n=0) -%}"
        "{%- for m in messages -%}{%- set ns.n = ns.n + 1 -%}"
        "<{{ m.role }}>{{ m.content | trim }}{{ loop.index }}/{{ loop.length }}"
        "{%- endfor -%}{{ ns.n }}{{ messages | map(attribute='role') | unique | list }}");
    json ctx = {{"messages", json::array()}};
    for (int i = 0; i < 20; ++i) {
        ctx["messages"].push_back({{"role", i % 2 ? "assistant" : "user"},
                                   {"content", " message " + std::to_string(i) + " "}});
    }
    const std::string expected = t.render_text(ctx);
    std::vector<std::thread> threads;
    std::vector<int> mismatches(4, 0);
    for (int k = 0; k < 4; ++k) {
        threads.emplace_back([&, k] {
            for (int i = 0; i < 200; ++i) {
                if (t.render_text(ctx) != expected) ++mismatches[static_cast<std::size_t>(k)];
            }
        });
    }
    for (auto& th : threads) th.join();
    for (int m : mismatches) EXPECT_EQ(m, 0);
    EXPECT_NE(expected.find("20/20"), std::string::npos) << expected;
}

TEST(ChatContextTest, BuildsVariablesAndLeavesMissingTokensUndefined) {
    ChatContext c;
    c.messages = json::array({{{"role", "user"}, {"content", "hi"}}});
    c.add_generation_prompt = true;
    c.eos_token = "</s>";
    c.extra = {{"enable_thinking", false}, {"messages", "ignored"}};
    json ctx = ggufd::jinja::build_chat_context(c);
    EXPECT_EQ(ctx["messages"][0]["content"], "hi");
    EXPECT_EQ(ctx["add_generation_prompt"], true);
    EXPECT_FALSE(ctx.contains("bos_token"));
    EXPECT_FALSE(ctx.contains("tools"));
    EXPECT_EQ(ctx["enable_thinking"], false);
    EXPECT_EQ(render("{{ bos_token is defined }}{{ eos_token }}{{ tools is defined }}"
                     "{{ enable_thinking }}{{ messages | length }}",
                     ctx),
              "False</s>FalseFalse1");
    c.tools = json::array({{{"type", "function"}}});
    c.bos_token = "<s>";
    EXPECT_EQ(render("{{ bos_token }}{{ tools | length }}", ggufd::jinja::build_chat_context(c)),
              "<s>1");
}

TEST(ChatContextTest, ChatMLDefaultTemplate) {
    ChatContext c;
    c.messages = json::array({{{"role", "system"}, {"content", "Be brief."}},
                              {{"role", "user"},
                               {"content", json::array({{{"type", "text"}, {"text", "Hi"}},
                                                        {{"type", "image"}},
                                                        {{"type", "text"}, {"text", " there"}}})}},
                              {{"role", "assistant"}, {"content", "Hello!"}}});
    c.add_generation_prompt = true;
    EXPECT_EQ(Template::compile(ggufd::jinja::kChatMLTemplate)
                  .render_text(ggufd::jinja::build_chat_context(c)),
              "<|im_start|>system\nBe brief.<|im_end|>\n"
              "<|im_start|>user\nHi there<|im_end|>\n"
              "<|im_start|>assistant\nHello!<|im_end|>\n"
              "<|im_start|>assistant\n");
}

TEST(ChatContextTest, ConfigurationOverridesModelTemplateWhichOverridesChatML) {
    using ggufd::jinja::kChatMLTemplate;
    using ggufd::jinja::select_template;
    EXPECT_EQ(select_template(std::nullopt, std::nullopt), kChatMLTemplate);
    EXPECT_EQ(select_template(std::nullopt, std::string("model")), "model");
    EXPECT_EQ(select_template(std::string("config"), std::string("model")), "config");
    EXPECT_EQ(select_template(std::string(""), std::string("")), kChatMLTemplate);
}

}  // namespace
