"""Tool loops through every conformance chat template and those of templates/: ggufd's Jinja
engine must render each conversation byte for byte as real Jinja2 does, or raise where Jinja2
raises.

Jinja2 is set up the way Hugging Face renders chat templates and the way the conformance data in
../shared/conformance/chat_templates was made (see its README): trim_blocks, lstrip_blocks, the
loopcontrols extension, tojson as json.dumps(ensure_ascii=False) with its indent, separators and
sort_keys arguments, raise_exception(msg), strftime_now fixed at 2024-07-26 12:00:00. ggufd's side
is `ggufd-run template --cases-jsonl`, one process per template for all of its conversations.

The conversations are what an OpenAI client sends in a tool loop, keys in its order: tool calls
with arguments as an object (how ggufd's server hands them to the template) and as a JSON string,
parallel calls, tool results with tool_call_id and name, `tools` as function specs, reasoning
(reasoning_content, enable_thinking) and both add_generation_prompt values.

Where Jinja2 raises, ggufd must raise too; where the error came from raise_exception, ggufd's
message must end with the same text.

Usage: tool_loops.py BIN_DIR. Exits 77 (skipped) without python3-jinja2 or the conformance data,
except under CI.
"""
import copy
import datetime
import glob
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
TEMPLATES = os.path.normpath(
    os.path.join(REPO, "..", "shared", "conformance", "chat_templates", "templates"))
# Templates of models ggufd runs that the conformance folder lacks (Phi-3.5-mini, Phi-4-mini, Qwen3),
# as their tokenizer_config.json ships them.
OWN_TEMPLATES = os.path.join(HERE, "templates")
UNDER_CI = os.environ.get("CI", "") not in ("", "0", "false")


def skip(reason):
    if UNDER_CI:
        sys.exit(reason + " under CI")
    print(reason + ": skipped")
    sys.exit(77)


try:
    import jinja2
    import jinja2.ext
except ImportError:
    skip("python3-jinja2 is missing (scripts/install-deps.sh installs it)")

NOW = "2024-07-26 12:00:00"

# Differences from Jinja2 known and accepted: conversation name -> why. Its cases may differ on any
# template, and must differ on at least one, so the list cannot go stale.
KNOWN_DIFFERENCES = {
    "big_integer": "ggufd's integers are 64-bit: a JSON integer beyond int64 becomes a float "
                   "(1.2345678901234567e+19), where Python keeps every digit",
}


class RaisedByTemplate(Exception):
    """What raise_exception throws, so its message can be told from Jinja2's own errors."""


def jinja2_environment():
    def raise_exception(message):
        raise RaisedByTemplate(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.strptime(NOW, "%Y-%m-%d %H:%M:%S").strftime(fmt)

    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True,
                             extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


# --- the conversations -----------------------------------------------------------------------

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather",
        "description": "Météo actuelle d'une ville — température et ciel",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Zürich"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    }},
    {"type": "function", "function": {
        "name": "set_thermostat",
        "description": "Set the target \"comfort\" temperature.\nUse sparingly\t(costly) \\ 🌡",
        "parameters": {
            "type": "object",
            "properties": {
                "target": {"type": "number", "minimum": -273.15, "maximum": 1e3,
                           "default": 20.0, "multipleOf": 0.5},
                "mode": {"anyOf": [{"type": "string", "enum": ["eco", "boost"]},
                                   {"type": "null"}]},
                "schedule": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"at": {"type": "string", "format": "time"},
                                   "delta": {"type": "integer"}},
                    "required": ["at"], "additionalProperties": False}},
            },
            "required": ["target"],
            "additionalProperties": False,
        },
        "strict": True,
    }},
    {"type": "function", "function": {
        "name": "ping",
        "description": "",
        "parameters": {"type": "object", "properties": {}},
    }},
    {"type": "function", "function": {
        "name": "search_places",
        "description": "Search places near a point",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "filters": {
                    "type": "object",
                    "properties": {
                        "open_now": {"type": "boolean"},
                        "max_results": {"type": "integer", "minimum": 1},
                        "tags": {"type": "array", "items": {"type": "string"}},
                    },
                    "required": ["open_now"],
                },
            },
            "required": ["query", "filters"],
        },
    }},
]

SYSTEM = {"role": "system", "content": "You are a helpful assistant with tools."}
USER = {"role": "user", "content": "What's the weather in Zürich, and a café nearby?"}
WEATHER_ARGS = {"city": "Zürich", "unit": "celsius"}
SEARCH_ARGS = {"query": "café", "filters": {"open_now": True, "max_results": 3,
                                            "tags": ["wifi", "quiet"]}}
THERMOSTAT_ARGS = {"target": 21.5, "mode": None,
                   "schedule": [{"at": "07:00", "delta": -2}, {"at": "22:30", "delta": 0}],
                   "note": "line1\nline2 \"quoted\" \\ \u0001 \u007f \u2028 😀 </s>",
                   "tiny": 1e-07, "max": 9223372036854775807, "min": -9223372036854775808,
                   "ratio": 0.1, "whole": 1.0, "neg_zero": -0.0, "exp": 1.5e300,
                   "floats": [100.0, 1e16, 1e15, 123456789.123456789, 5e-324, 0.30000000000000004,
                              1.7976931348623157e308, -1e-5, 2.5e-4],
                   "città": "\\u00e9 stays as typed", "nested": [[1, [2, []]], {}, [None, True]]}
WEATHER_RESULT = '{"temperature": 21, "sky": "clear"}'
SEARCH_RESULT = '[{"name": "Café Schober", "distance_m": 250}]'
ANSWER = "It is 21 °C and clear in Zürich; Café Schober is 250 m away."
# Call ids as Mistral's templates demand them (nine letters and digits); any other template takes
# them too.
ID_1, ID_2, ID_3 = "A1b2C3d4E", "F5g6H7i8J", "K9l0M1n2O"
REASONING = "The user wants the weather; I should call get_weather first."


def call(call_id, name, args, string_args):
    return {"id": call_id, "type": "function",
            "function": {"name": name,
                         "arguments": json.dumps(args, ensure_ascii=False) if string_args
                         else copy.deepcopy(args)}}


def assistant_calls(calls, content="", reasoning=None):
    m = {"role": "assistant", "content": content}
    if reasoning is not None:
        m["reasoning_content"] = reasoning
    m["tool_calls"] = calls
    return m


def tool_result(call_id, name, content):
    m = {"role": "tool", "tool_call_id": call_id}
    if name is not None:  # OpenAI's own clients leave it out
        m["name"] = name
    m["content"] = content
    return m


def answer(reasoning=None):
    m = {"role": "assistant", "content": ANSWER}
    if reasoning is not None:
        m["reasoning_content"] = reasoning
    return m


def single_loop(string_args=False, content="", reasoning=None):
    return [
        assistant_calls([call(ID_1, "get_weather", WEATHER_ARGS, string_args)], content,
                        reasoning),
        tool_result(ID_1, "get_weather", WEATHER_RESULT),
    ]


def parallel_loop(string_args=False, reasoning=None):
    return [
        assistant_calls([call(ID_1, "get_weather", WEATHER_ARGS, string_args),
                         call(ID_2, "search_places", SEARCH_ARGS, string_args)],
                        "", reasoning),
        tool_result(ID_1, "get_weather", WEATHER_RESULT),
        tool_result(ID_2, "search_places", SEARCH_RESULT),
    ]


def conversations():
    """(name, messages, extra context) for each conversation; each is rendered with
    add_generation_prompt true and false."""
    s, u = SYSTEM, USER
    yield "single/pending", [s, u] + single_loop(), {"tools": TOOLS}
    yield "single/answered", [s, u] + single_loop() + [answer()], {"tools": TOOLS}
    yield "single/string_args", [s, u] + single_loop(True) + [answer()], {"tools": TOOLS}
    yield "single/no_tools_spec", [s, u] + single_loop() + [answer()], {}
    yield "single/no_system", [u] + single_loop(), {"tools": TOOLS}
    yield "single/with_content", [s, u] + single_loop(content="Let me check.") + [answer()], \
        {"tools": TOOLS}
    yield "parallel/pending", [s, u] + parallel_loop(), {"tools": TOOLS}
    yield "parallel/answered", [s, u] + parallel_loop() + [answer()], {"tools": TOOLS}
    yield "parallel/string_args", [s, u] + parallel_loop(True) + [answer()], {"tools": TOOLS}
    for thinking in (True, False):
        flag = {"tools": TOOLS, "enable_thinking": thinking}
        tag = "thinking" if thinking else "no_thinking"
        yield ("reasoning/%s/pending" % tag,
               [s, u] + single_loop(reasoning=REASONING), flag)
        yield ("reasoning/%s/answered" % tag,
               [s, u] + single_loop(reasoning=REASONING) + [answer("Both results are in.")],
               flag)
    # Escapes, floats, the int64 bounds, null, nested arrays and an empty object in the
    # arguments; null content beside the calls; a multi-line result; no `name` on the results.
    odd = [assistant_calls([call(ID_1, "set_thermostat", THERMOSTAT_ARGS, False),
                            call(ID_2, "ping", {}, False)], None),
           tool_result(ID_1, None, "ok\n  target=21.5\n"), tool_result(ID_2, None, "pong")]
    yield "odd_values/pending", [s, u] + odd, {"tools": TOOLS}
    yield "odd_values/answered", [s, u] + odd + [answer()], {"tools": TOOLS}
    odd_strings = copy.deepcopy(odd)
    for c in odd_strings[0]["tool_calls"]:
        c["function"]["arguments"] = json.dumps(c["function"]["arguments"], ensure_ascii=False)
    yield "odd_values/string_args", [s, u] + odd_strings + [answer()], {"tools": TOOLS}
    big = [assistant_calls([call(ID_1, "search_places",
                                 {"query": "x", "filters": {"open_now": False,
                                                            "max_results": 12345678901234567890}},
                                 False)]),
           tool_result(ID_1, "search_places", "[]")]
    yield "big_integer", [s, u] + big, {"tools": TOOLS}
    # Shapes clients send besides the common one: an empty tool_calls list beside an answer, a
    # call message without a content key, content as a list of parts, a tool spec without
    # parameters, empty reasoning.
    yield ("shapes/empty_tool_calls",
           [s, u, assistant_calls([], ANSWER), {"role": "user", "content": "Thanks!"}],
           {"tools": TOOLS})
    no_content = single_loop()
    del no_content[0]["content"]
    yield "shapes/no_content_key", [s, u] + no_content, {"tools": TOOLS}
    parts = [s, {"role": "user", "content": [{"type": "text", "text": USER["content"]}]}]
    parts += single_loop()
    parts[-1]["content"] = [{"type": "text", "text": WEATHER_RESULT}]
    yield "shapes/content_parts", parts, {"tools": TOOLS}
    bare_tool = [{"type": "function", "function": {"name": "get_weather"}}]
    yield "shapes/tool_without_parameters", [s, u] + single_loop(), {"tools": bare_tool}
    yield ("reasoning/empty",
           [s, u] + single_loop(reasoning="") + [answer("")],
           {"tools": TOOLS, "enable_thinking": True})
    # Reasoning left inline in the content, as clients that do not split it send it back.
    inline = {"role": "assistant", "content": "<think>\nCheck the weather.\n</think>\n\n" + ANSWER}
    yield ("reasoning/inline_think",
           [s, u] + single_loop() + [inline, {"role": "user", "content": "Thanks!"}],
           {"tools": TOOLS, "enable_thinking": True})
    # Two rounds: an earlier loop (with its reasoning) in the history, then a new question.
    yield ("two_rounds",
           [s, u] + single_loop(reasoning=REASONING) + [answer("Done.")] +
           [{"role": "user", "content": "And a place to eat?"}] +
           [assistant_calls([call(ID_3, "search_places", SEARCH_ARGS, False)], "",
                            "Now search.")] +
           [tool_result(ID_3, "search_places", SEARCH_RESULT)],
           {"tools": TOOLS, "enable_thinking": True})


def cases():
    for name, messages, extra in conversations():
        for agp in (True, False):
            context = {"messages": copy.deepcopy(messages)}
            context.update(copy.deepcopy(extra))
            context["add_generation_prompt"] = agp
            context["bos_token"] = "<s>"
            context["eos_token"] = "</s>"
            yield "%s/agp=%d" % (name, agp), context


# --- the comparison --------------------------------------------------------------------------

def render_jinja2(template, context):
    """{"text": ...} or {"error": message, "raised": True when raise_exception raised it}."""
    try:
        return {"text": template.render(**copy.deepcopy(context))}
    except RaisedByTemplate as e:
        return {"error": str(e), "raised": True}
    except Exception as e:  # any error of Jinja2's or Python's, as HF would surface it
        return {"error": "%s: %s" % (type(e).__name__, e), "raised": False}


def render_ggufd(ggufd_run, template, contexts):
    """One ggufd-run process renders all contexts; one JSON line back per context."""
    lines = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in contexts)
    proc = subprocess.run([ggufd_run, "template", "--template-file", template, "--now", NOW,
                           "--cases-jsonl", "-"],
                          input=lines.encode("utf-8"), capture_output=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError("ggufd-run failed on %s: %s" % (template, proc.stderr.decode()))
    out = [json.loads(line) for line in proc.stdout.decode("utf-8").split("\n") if line]
    if len(out) != len(contexts):
        raise RuntimeError("ggufd-run gave %d results for %d contexts on %s"
                           % (len(out), len(contexts), template))
    return out


def differs(want, got):
    """Why ggufd's result is not Jinja2's, or None when they agree."""
    if "text" in want:
        if "text" not in got:
            return "Jinja2 renders, ggufd raises: " + got["error"]
        if got["text"] != want["text"]:
            return "texts differ:\n--- Jinja2\n%s\n--- ggufd\n%s" % (want["text"], got["text"])
        return None
    if "error" not in got:
        return "Jinja2 raises (%s), ggufd renders" % want["error"]
    if want["raised"] and not got["error"].endswith(want["error"]):
        return "raise_exception messages differ: Jinja2 %r, ggufd %r" % (want["error"],
                                                                         got["error"])
    return None


def check_template(env, ggufd_run, template):
    """(cases compared, cases Jinja2 raised on, failures, conversations that differed as known)."""
    name = os.path.basename(template)
    with open(template, encoding="utf-8") as f:
        source = f.read()
    named = list(cases())
    compiled = env.from_string(source)
    wants = [render_jinja2(compiled, c) for _, c in named]
    gots = render_ggufd(ggufd_run, template, [c for _, c in named])
    failures, raised, known_seen = [], 0, set()
    for (case, _), want, got in zip(named, wants, gots):
        raised += "error" in want
        why = differs(want, got)
        conversation = case.rsplit("/agp=", 1)[0]
        if why and conversation in KNOWN_DIFFERENCES:
            known_seen.add(conversation)
        elif why:
            failures.append("%s %s: %s" % (name, case, why))
    return len(named), raised, failures, known_seen


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: tool_loops.py BIN_DIR")
    ggufd_run = os.path.join(sys.argv[1], "ggufd-run")
    templates = sorted(glob.glob(os.path.join(TEMPLATES, "*.jinja")))
    if not templates:
        skip("no conformance chat templates at " + TEMPLATES)
    templates += sorted(glob.glob(os.path.join(OWN_TEMPLATES, "*.jinja")))
    env = jinja2_environment()
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(lambda t: check_template(env, ggufd_run, t), templates))
    compared = sum(r[0] for r in results)
    raised = sum(r[1] for r in results)
    failures = [f for r in results for f in r[2]]
    seen = set().union(*(r[3] for r in results))
    failures += ["%s is listed as a known difference but renders like Jinja2 everywhere" % k
                 for k in KNOWN_DIFFERENCES if k not in seen]
    for f in failures:
        print("MISMATCH " + f + "\n")
    print("%d templates x %d cases = %d renders compared (%d raise in Jinja2), %d known "
          "differences (%s), %d failures, %.1f s"
          % (len(templates), compared // len(templates), compared, raised,
             len(KNOWN_DIFFERENCES), ", ".join(sorted(seen)), len(failures),
             time.monotonic() - start))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
