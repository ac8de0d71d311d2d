#!/usr/bin/env python3
"""Test data for the grammar matcher: for each schema in a folder, random JSON texts that the
schema's grammar (engine/grammar/json_schema.h) accepts, and mutated texts that it must reject.

  gen_instances.py --out DIR [--schemas DIR] [--valid N] [--invalid N] [--seed S]
                    [--check-gbnf CONVERTER]

Writes <out>/<schema>.valid.jsonl and <out>/<schema>.invalid.jsonl, one JSON string (the text of
one document) a line. Every valid text is checked with jsonschema (formats included) and every
invalid one fails to parse or to validate, so the files hold no guess: a failure here is a bug in
this generator. Deterministic for a seed.

--check-gbnf CONVERTER (the test tool json_schema_gbnf: schema file in, GBNF out) also reads each
schema's grammar as a Python regex, where the grammar does not recurse, and checks that it accepts
every valid text and rejects every invalid one: the converter against a real validator, without the
grammar engine.

The valid texts stay inside the subset the converter writes, so that "valid -> accepted" can be
asserted of the matcher: properties in the schema's order (extra keys after them), all prefixItems,
no extra keys where additionalProperties is absent beside properties, numbers spelled as the
grammar spells them (no exponent when bounded, at most 16 integer and fraction digits, no "-0",
fractions of bounded numbers end in a non-zero digit), strings escaped as Python's json.dumps does
with ensure_ascii off (pattern-constrained ones: ASCII around the match), whitespace between tokens
as the grammar's `ws` allows (nothing, one space, or a newline and up to 32 spaces or tabs).
Exit status 77 (skipped) when jsonschema is not installed, 1 under CI.
"""
import argparse
import copy
import json
import os
import random
import re
import string
import subprocess
import sys
import uuid
from decimal import Decimal

try:
    import jsonschema
except ImportError:
    print("python3-jsonschema is not installed (apt-get install python3-jsonschema): skipped")
    sys.exit(1 if os.environ.get("CI", "") not in ("", "0", "false") else 77)

try:
    import re._parser as sre_parse  # Python 3.11+
    import re._constants as sre_c
except ImportError:  # pragma: no cover - older Pythons
    import sre_parse
    import sre_constants as sre_c

ANNOTATIONS = {"title", "description", "examples", "default", "$schema", "$id", "$comment",
               "deprecated", "readOnly", "writeOnly", "$defs", "definitions"}
TEXT_POOL = string.ascii_letters + string.digits + " .,;:!?-_/'\"\\()[]{}@#" + "éüßñ東京€😀"
KEY_POOL = string.ascii_lowercase + "_"
DEEP = 4  # beyond this nesting, only what the schema requires


class Unsupported(Exception):
    pass


class Generator:
    def __init__(self, root, rng):
        self.root = root
        self.rng = rng

    # ---- helpers ----

    def resolve(self, ref):
        if not ref.startswith("#"):
            raise Unsupported(ref)
        node = self.root
        for token in ref[1:].split("/")[1:]:
            token = token.replace("~1", "/").replace("~0", "~")
            node = node[int(token)] if isinstance(node, list) else node[token]
        return node

    def deref(self, s):
        while isinstance(s, dict) and "$ref" in s:
            s = self.resolve(s["$ref"])
        return s

    def types_of(self, s):
        if "type" in s:
            t = s["type"]
            types = list(t) if isinstance(t, list) else [t]
        else:
            implied = [("properties", "object"), ("required", "object"),
                       ("additionalProperties", "object"), ("items", "array"),
                       ("prefixItems", "array"), ("minItems", "array"), ("maxItems", "array"),
                       ("minLength", "string"), ("maxLength", "string"), ("pattern", "string"),
                       ("format", "string"), ("minimum", "number"), ("maximum", "number"),
                       ("exclusiveMinimum", "number"), ("exclusiveMaximum", "number")]
            types = []
            for key, t in implied:
                if key in s and t not in types:
                    types.append(t)
        if s.get("nullable") is True and "null" not in types and (types or "type" in s):
            types.append("null")
        if "number" in types and "integer" in types:
            types.remove("integer")
        return types

    # ---- values (Python objects; dicts keep the grammar's key order) ----

    def value(self, s, depth=0):
        if s is True or s == {} or (isinstance(s, dict) and not (set(s) - ANNOTATIONS)):
            return self.any_value(depth)
        if "$ref" in s:
            return self.value(self.resolve(s["$ref"]), depth)
        for key in ("anyOf", "oneOf"):
            if key in s:
                branches = s[key]
                if depth > DEEP:  # steer recursive schemas towards their end
                    branches = [b for b in branches if "$ref" not in b] or branches
                return self.value(self.rng.choice(branches), depth)
        if "allOf" in s:
            parts = s["allOf"]
            if len(parts) == 1 and not (set(s) - ANNOTATIONS - {"allOf"}):
                return self.value(parts[0], depth)
            merged = {"type": "object", "properties": {}, "required": [],
                      "additionalProperties": False}
            for part in [self.deref(p) for p in parts] + [s]:
                merged["properties"].update(part.get("properties", {}))
                merged["required"] += part.get("required", [])
            return self.obj(merged, depth)
        if "const" in s:
            return copy.deepcopy(s["const"])
        if "enum" in s:
            return copy.deepcopy(self.rng.choice(s["enum"]))
        types = self.types_of(s)
        if not types:
            return self.any_value(depth)
        t = self.rng.choice(types)
        if t == "object":
            return self.obj(s, depth)
        if t == "array":
            return self.arr(s, depth)
        if t == "string":
            return self.string(s)
        if t == "integer":
            return Raw(self.integer(s))
        if t == "number":
            return Raw(self.number(s))
        if t == "boolean":
            return self.rng.random() < 0.5
        return None

    def any_value(self, depth):
        kinds = ["string", "number", "bool", "null"] + (["object", "array"] if depth < 3 else [])
        k = self.rng.choice(kinds)
        if k == "string":
            return self.text(0, 12)
        if k == "number":
            return Raw(self.number({}))
        if k == "bool":
            return self.rng.random() < 0.5
        if k == "null":
            return None
        if k == "object":
            return {self.text(0, 6): self.any_value(depth + 1) for _ in range(self.rng.randint(0, 3))}
        return [self.any_value(depth + 1) for _ in range(self.rng.randint(0, 3))]

    def obj(self, s, depth):
        props = s.get("properties", {})
        required = set(s.get("required", []))
        out = {}
        for name, sub in props.items():
            if name in required or (depth <= DEEP and self.rng.random() < 0.5):
                out[name] = self.value(sub, depth + 1)
        extra = s.get("additionalProperties", "properties" not in s)
        if extra is not False:
            for _ in range(self.rng.randint(0, 2)):
                key = "".join(self.rng.choice(KEY_POOL) for _ in range(self.rng.randint(1, 8)))
                if key in props or key in out:
                    continue
                out[key] = (self.any_value(depth + 1) if extra is True or extra == {}
                            else self.value(extra, depth + 1))
        return out

    def arr(self, s, depth):
        prefix = s.get("prefixItems")
        items = s.get("items")
        if isinstance(items, list):
            prefix, items = items, s.get("additionalItems")
        lo, hi = s.get("minItems", 0), s.get("maxItems")
        out = []
        if prefix is not None:
            n = len(prefix) if hi is None else min(len(prefix), hi)
            out = [self.value(p, depth + 1) for p in prefix[:n]]
            if items is None or items is False:
                return out
        extra_lo = max(0, lo - len(out))
        extra_hi = extra_lo + 3 if hi is None else min(hi - len(out), extra_lo + 3)
        if depth > DEEP:
            extra_hi = extra_lo
        for _ in range(self.rng.randint(extra_lo, extra_hi)):
            out.append(self.any_value(depth + 1) if items in (None, True, {})
                       else self.value(items, depth + 1))
        return out

    def text(self, lo, hi):
        return "".join(self.rng.choice(TEXT_POOL) for _ in range(self.rng.randint(lo, hi)))

    def string(self, s):
        fmt = s.get("format")
        if fmt == "date":
            return self.date()
        if fmt == "time":
            return self.time()
        if fmt == "date-time":
            return self.date() + "T" + self.time()
        if fmt == "uuid":
            u = str(uuid.UUID(int=self.rng.getrandbits(128)))
            return u.upper() if self.rng.random() < 0.2 else u
        if "pattern" in s:
            return self.pattern(s["pattern"])
        lo = s.get("minLength", 0)
        hi = s.get("maxLength", lo + 20)
        return self.text(lo, min(hi, lo + 20))

    def date(self):
        y = self.rng.randint(1000, 9999)
        m = self.rng.randint(1, 12)
        days = [31, 29 if (y % 4 == 0 and y % 100 != 0) or y % 400 == 0 else 28, 31, 30, 31, 30,
                31, 31, 30, 31, 30, 31][m - 1]
        return f"{y:04d}-{m:02d}-{self.rng.randint(1, days):02d}"

    def time(self):
        r = self.rng
        t = f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}"
        if r.random() < 0.3:
            t += "." + "".join(r.choice(string.digits) for _ in range(r.randint(1, 6)))
        if r.random() < 0.5:
            return t + "Z"
        return t + f"{r.choice('+-')}{r.randint(0, 23):02d}:{r.randint(0, 59):02d}"

    # ---- numbers (text as the grammar spells it) ----

    def bounds(self, s):
        lo = hi = None
        lo_x = hi_x = False
        if "minimum" in s:
            lo, lo_x = Decimal(str(s["minimum"])), s.get("exclusiveMinimum") is True
        if isinstance(s.get("exclusiveMinimum"), (int, float)) and not isinstance(
                s.get("exclusiveMinimum"), bool):
            v = Decimal(str(s["exclusiveMinimum"]))
            if lo is None or v >= lo:
                lo, lo_x = v, True
        if "maximum" in s:
            hi, hi_x = Decimal(str(s["maximum"])), s.get("exclusiveMaximum") is True
        if isinstance(s.get("exclusiveMaximum"), (int, float)) and not isinstance(
                s.get("exclusiveMaximum"), bool):
            v = Decimal(str(s["exclusiveMaximum"]))
            if hi is None or v <= hi:
                hi, hi_x = v, True
        return lo, lo_x, hi, hi_x

    def in_bounds(self, v, b):
        lo, lo_x, hi, hi_x = b
        return ((lo is None or (v > lo if lo_x else v >= lo)) and
                (hi is None or (v < hi if hi_x else v <= hi)))

    def whole_in(self, b, digits=15):
        lo, lo_x, hi, hi_x = b
        a = -(10 ** digits) + 1 if lo is None else int(lo) - 1
        z = 10 ** digits - 1 if hi is None else int(hi) + 1
        if self.rng.random() < 0.7:  # mostly small magnitudes, as models write
            a, z = max(a, -1000), min(z, 1000)
        for _ in range(1000):
            v = self.rng.randint(a, z)
            if self.in_bounds(Decimal(v), b):
                return v
        raise Unsupported("no integer in bounds")

    def integer(self, s):
        return str(self.whole_in(self.bounds(s)))

    def number(self, s):
        b = self.bounds(s)
        bounded = b[0] is not None or b[2] is not None
        for _ in range(1000):
            k = self.whole_in(b) if bounded else self.whole_in(b, 12)
            text = str(k)
            if self.rng.random() < 0.6:
                frac = "".join(self.rng.choice(string.digits) for _ in range(self.rng.randint(0, 14)))
                frac += self.rng.choice("123456789")
                sign = "-" if k < 0 or (k == 0 and self.rng.random() < 0.5) else ""
                text = f"{sign}{abs(k)}.{frac}"
            if not bounded and self.rng.random() < 0.15:
                text += self.rng.choice("eE") + self.rng.choice(["", "+", "-"]) + str(
                    self.rng.randint(0, 30))
            if self.in_bounds(Decimal(text), b) and text not in ("-0",):
                return text
        raise Unsupported("no number in bounds")

    # ---- patterns ----

    def pattern(self, p):
        parsed = sre_parse.parse(p)
        core = self.from_regex(list(parsed))
        # The grammar searches like JSON Schema: unanchored branches take anything around them.
        prefix = "".join(self.rng.choice(string.ascii_letters) for _ in range(self.rng.randint(0, 3)))
        suffix = "".join(self.rng.choice(string.ascii_letters) for _ in range(self.rng.randint(0, 3)))
        for candidate in (prefix + core + suffix, core):
            if re.search(p, candidate):
                return candidate
        raise Unsupported(f"pattern {p!r}: generated {core!r} does not match")

    def pick_in(self, items, negate):
        def member(c):
            o = ord(c)
            for op, av in items:
                if op == sre_c.LITERAL and o == av:
                    return True
                if op == sre_c.RANGE and av[0] <= o <= av[1]:
                    return True
                if op == sre_c.CATEGORY:
                    name = str(av)
                    if "DIGIT" in name and ("NOT" in name) != c.isdigit():
                        return True
                    if "WORD" in name and ("NOT" in name) != (c.isalnum() or c == "_"):
                        return True
                    if "SPACE" in name and ("NOT" in name) != (c in " \t\n\r\f\v"):
                        return True
            return False
        pool = string.ascii_letters + string.digits + " _-.,:/@\"\\\t"
        choices = [c for c in pool if member(c) != negate]
        if not choices:
            raise Unsupported("empty class")
        return self.rng.choice(choices)

    def from_regex(self, seq):
        out = []
        for op, av in seq:
            if op == sre_c.LITERAL:
                out.append(chr(av))
            elif op == sre_c.NOT_LITERAL:
                out.append(self.pick_in([(sre_c.LITERAL, av)], True))
            elif op == sre_c.ANY:
                out.append(self.pick_in([(sre_c.LITERAL, 10), (sre_c.LITERAL, 13)], True))
            elif op == sre_c.IN:
                negate = bool(av) and av[0][0] == sre_c.NEGATE
                out.append(self.pick_in(av[1:] if negate else av, negate))
            elif op == sre_c.CATEGORY:
                out.append(self.pick_in([(op, av)], False))
            elif op == sre_c.BRANCH:
                out.append(self.from_regex(list(self.rng.choice(av[1]))))
            elif op == sre_c.SUBPATTERN:
                out.append(self.from_regex(list(av[-1])))
            elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT):
                lo, hi, sub = av
                hi = lo + 4 if hi == sre_c.MAXREPEAT else min(hi, lo + 4)
                for _ in range(self.rng.randint(lo, hi)):
                    out.append(self.from_regex(list(sub)))
            elif op == sre_c.AT:
                pass
            else:
                raise Unsupported(f"regex op {op}")
        return "".join(out)


class Raw(str):
    """A number's text, written as is."""


def ws(rng):
    r = rng.random()
    if r < 0.5:
        return ""
    if r < 0.75:
        return " "
    return "\n" + "".join(rng.choice(" \t") for _ in range(rng.randint(0, 32)))


def dump(v, rng):
    """The grammar's spelling of a value, with random whitespace between tokens."""
    if isinstance(v, Raw):
        return str(v)
    if isinstance(v, dict):
        if not v:
            return "{" + ws(rng) + "}"
        members = [json.dumps(k, ensure_ascii=False) + ws(rng) + ":" + ws(rng) + dump(x, rng) +
                   ws(rng) for k, x in v.items()]
        return "{" + ws(rng) + join_members(members, rng) + "}"
    if isinstance(v, list):
        if not v:
            return "[" + ws(rng) + "]"
        return "[" + ws(rng) + join_members([dump(x, rng) + ws(rng) for x in v], rng) + "]"
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def join_members(members, rng):
    out = members[0]
    for m in members[1:]:
        out += "," + ws(rng) + m
    return out


def mutations(text, value, rng):
    """Candidate invalid texts: structural edits of the value and byte-level edits of the text."""
    out = []
    if isinstance(value, dict) and value:
        k = rng.choice(list(value))
        smaller = dict(value)
        del smaller[k]
        out.append(json.dumps(smaller, ensure_ascii=False))
        bigger = dict(value)
        bigger["zz_unknown"] = 1
        out.append(json.dumps(bigger, ensure_ascii=False))
        wrong = dict(value)
        wrong[k] = rng.choice([[], {}, "x", 12345678, -1, True, None, "y" * 300, 3.75])
        out.append(json.dumps(wrong, ensure_ascii=False))
    for v in ([], {}, "text", 0, None, True):
        out.append(json.dumps(v))
    if len(text) > 1:
        i = rng.randrange(len(text))
        out.append(text[:i])                        # truncated
        out.append(text[:i] + text[i + 1:])         # a character dropped
        out.append(text[:i] + rng.choice(",:{}[]\"x0-") + text[i:])  # one inserted
        out.append(text + rng.choice(["}", "]", ",", "x"]))
    return out


def gbnf_regex(gbnf):
    """The root rule as a Python regex (references inlined); None when the grammar recurses."""
    rules = dict(line.split(" ::= ", 1) for line in gbnf.splitlines())

    def rx(name, stack):
        if name in stack:
            return None
        body, out, i = rules[name], "(?:", 0
        while i < len(body):
            c = body[i]
            if c == " ":
                i += 1
            elif c == '"':
                j = i + 1
                while body[j] != '"':
                    if body[j] == "\\":
                        e = body[j + 1]
                        out += "\\" + e if e in "xuUnrt" else re.escape(e)
                        j += 2
                    else:
                        out += re.escape(body[j])
                        j += 1
                i = j + 1
            elif c == "[":
                j = i + 1
                while body[j] != "]":
                    j += 2 if body[j] == "\\" else 1
                out += body[i:j + 1]
                i = j + 1
            elif c == "(":
                out += "(?:"
                i += 1
            elif c in ")|?*+":
                out += c
                i += 1
            elif c == "{":
                j = body.index("}", i)
                out += body[i:j + 1]
                i = j + 1
            else:
                j = i
                while j < len(body) and (body[j].isalnum() or body[j] == "-"):
                    j += 1
                inner = rx(body[i:j], stack + [name])
                if inner is None:
                    return None
                out += inner
                i = j
        return out + ")"

    text = rx("root", [])
    return None if text is None else re.compile(text, re.S)


def check_against_gbnf(converter, schema_path, valid, invalid):
    """Mismatches between the grammar and the validator (a count; the first few printed)."""
    gbnf = subprocess.run([converter, schema_path], capture_output=True, text=True, check=True).stdout
    regex = gbnf_regex(gbnf)
    if regex is None:
        return None
    bad = 0
    for texts, want in ((valid, True), (invalid, False)):
        for t in texts:
            if bool(regex.fullmatch(t)) != want:
                bad += 1
                if bad <= 3:
                    print(f"{schema_path}: grammar {'rejects' if want else 'accepts'} {t!r}",
                          file=sys.stderr)
    return bad


def is_valid(validator, text):
    try:
        doc = json.loads(text)
    except ValueError:
        return False
    return validator.is_valid(doc)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--schemas", default=os.path.join(here, "schemas"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--valid", type=int, default=300)
    ap.add_argument("--invalid", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--check-gbnf", metavar="CONVERTER")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    failures = 0
    for name in sorted(os.listdir(args.schemas)):
        if not name.endswith(".json"):
            continue
        stem = name[:-5]
        with open(os.path.join(args.schemas, name), encoding="utf-8") as f:
            schema = json.load(f)
        cls = jsonschema.validators.validator_for(schema)
        validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
        rng = random.Random(f"{args.seed}:{stem}")
        gen = Generator(schema, rng)
        valid, invalid = [], []
        tries = 0
        while len(valid) < args.valid and tries < args.valid * 20:
            tries += 1
            value = gen.value(schema)
            text = dump(value, rng)
            if not is_valid(validator, text):
                failures += 1
                print(f"{name}: generated an invalid instance: {text}", file=sys.stderr)
                continue
            valid.append(text)
            for m in mutations(text, json.loads(text), rng):
                if len(invalid) < args.invalid and not is_valid(validator, m):
                    invalid.append(m)
        with open(os.path.join(args.out, stem + ".valid.jsonl"), "w", encoding="utf-8") as f:
            f.writelines(json.dumps(t, ensure_ascii=False) + "\n" for t in valid)
        with open(os.path.join(args.out, stem + ".invalid.jsonl"), "w", encoding="utf-8") as f:
            f.writelines(json.dumps(t, ensure_ascii=False) + "\n" for t in invalid)
        checked = ""
        if args.check_gbnf:
            bad = check_against_gbnf(args.check_gbnf, os.path.join(args.schemas, name), valid,
                                     invalid)
            checked = ", grammar recurses: not checked" if bad is None else f", {bad} mismatches"
            failures += bad or 0
        print(f"{stem}: {len(valid)} valid, {len(invalid)} invalid{checked}")
        if len(valid) < args.valid or len(invalid) < min(args.invalid, 20):
            failures += 1
            print(f"{name}: too few instances", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
