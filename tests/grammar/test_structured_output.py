"""Structured output end to end: the real ggufd serving a random-weight model (which, left alone,
writes gibberish) must answer every constrained request with text that parses and validates.

For each schema in tests/grammar/schemas (real-world shapes: tools, extraction, recursive trees,
tagged unions, formats, patterns), both endpoints are asked through response_format json_schema,
llama-server's json_schema field and response_format json_object with a schema, streamed and not,
at temperature 0 and 1, several requests at a time; the outputs are checked with Debian's
python3-jsonschema (formats included). json_object and GBNF requests are checked by parsing.

A random model rarely picks the one token that closes a string among thousands that continue it,
so every request raises the logits of the tokens that close things (`"`, `}`, `]` and their
merges) with logit_bias: the grammar still decides what is allowed, the bias only makes documents
end within the token budget. A request must finish with "stop" (a whole document), never
"length".

Usage: test_structured_output.py BIN_DIR WORK_DIR. Exits 77 (skipped) without python3-jsonschema
or the conformance data, except under CI.
"""
import concurrent.futures
import glob
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "tools"))
import daemon  # noqa: E402

UNDER_CI = os.environ.get("CI", "") not in ("", "0", "false")
try:
    import jsonschema
except ImportError:
    if UNDER_CI:
        sys.exit("python3-jsonschema is missing under CI (scripts/install-deps.sh installs it)")
    print("python3-jsonschema is not installed: skipped")
    sys.exit(77)

MAX_TOKENS = 400
# The bias ranks what ends things, each step far enough from the next that a random logit never
# reverses two of them: a string's closing quote first; then "@" and "." (so the e-mail and domain
# patterns can be finished: a string that must still hold them cannot close yet); then "]" and
# "}" with their merges; then the values that end a recursion (null, an empty array); then a bare
# ":" (so that merges such as ':{' do not skip the choice of null). "," is left alone: a greedy
# random model that favoured it would repeat array items forever.
CLOSERS = {'"': 30, "@": 26, ".": 22, '"}': 18, '"]': 18, "}": 18, "]": 18, "}]": 18, "]}": 18,
           "}}": 18, " }": 18, " ]": 18, "null": 14, " null": 14, "[]": 14, " []": 14, ":": 10}


def closing_token_bias(port):
    """logit_bias raising every token that is exactly one of CLOSERS in this vocabulary."""
    bias = {}
    for s, value in CLOSERS.items():
        for before in ("a", ":"):  # a word before: no SentencePiece space prefix to merge with
            status, text, _ = daemon.request(port, "POST", "/tokenize",
                                             {"content": before + s, "with_pieces": True})
            assert status == 200, text
            pieces = json.loads(text)["tokens"]
            if len(pieces) >= 2 and pieces[-1]["piece"] == s and "".join(
                    p["piece"] for p in pieces[:-1]).strip() == before:
                bias[str(pieces[-1]["id"])] = value
    assert len(bias) >= 4, f"too few closing tokens found: {bias}"
    return bias


def generate(port, endpoint, body, stream):
    """(text, finish_reason) of one choice, streamed or not."""
    body = dict(body, stream=stream)
    status, payload, _ = daemon.request(port, "POST", endpoint, body, timeout=300)
    assert status == 200, f"{status}: {payload}"
    chat = endpoint.endswith("chat/completions")
    if not stream:
        choice = json.loads(payload)["choices"][0]
        return (choice["message"]["content"] if chat else choice["text"]), choice["finish_reason"]
    text, finish = "", None
    for event in daemon.sse_events(payload):
        for choice in event["choices"]:
            text += (choice["delta"].get("content") or "") if chat else choice["text"]
            finish = choice["finish_reason"] or finish
    return text, finish


def request_body(endpoint, constraint, temperature, seed, bias):
    body = {"max_tokens": MAX_TOKENS, "temperature": temperature, "seed": seed,
            "logit_bias": bias, **constraint}
    if endpoint.endswith("chat/completions"):
        body["messages"] = [{"role": "user", "content": "Answer in JSON."}]
    else:
        body["prompt"] = "The answer, in JSON:"
    return body


def main():
    bin_dir, work = sys.argv[1], sys.argv[2]
    conf = daemon.conformance_dir(os.path.join(REPO, "..", "shared", "conformance"))
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "structured-random.gguf")
    subprocess.run([os.path.join(bin_dir, "ggufd-mkmodel"), "--out", model, "--vocab",
                    os.path.join(conf, "tokenizer", "ggml-vocab-llama-spm.gguf"), "--n-embd", "64",
                    "--n-layer", "1", "--n-head", "2", "--n-head-kv", "1", "--n-ff", "128",
                    "--seed", "7"], check=True, stdout=subprocess.DEVNULL)
    proc, port = daemon.start(bin_dir, "--model", f"rand={model}", "--parallel", "4",
                              "--threads", "1", "--ctx-size", "1024",
                              log_path=os.path.join(work, "structured-ggufd.log"))
    try:
        run(port)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print("ok")


def run(port):
    bias = closing_token_bias(port)
    # Left alone, with the same bias, the model does not write JSON: the grammar is what does.
    text, _ = generate(port, "/v1/completions",
                       request_body("/v1/completions", {}, 0.0, 1, bias) | {"max_tokens": 40},
                       False)
    try:
        json.loads(text)
        raise AssertionError(f"the unconstrained model wrote JSON: {text!r}")
    except json.JSONDecodeError:
        pass
    schemas = {}
    for path in sorted(glob.glob(os.path.join(HERE, "schemas", "*.json"))):
        with open(path) as f:
            schemas[os.path.basename(path)[:-5]] = json.load(f)
    assert len(schemas) >= 15, sorted(schemas)

    # Every way of asking, each paired with what decides whether an output is right.
    jobs = []  # (label, endpoint, constraint, check)
    constraint_forms = [
        lambda s: {"response_format": {"type": "json_schema",
                                       "json_schema": {"name": "out", "strict": True, "schema": s}}},
        lambda s: {"json_schema": s},
        lambda s: {"response_format": {"type": "json_object", "schema": s}},
    ]
    for i, (name, schema) in enumerate(schemas.items()):
        cls = jsonschema.validators.validator_for(schema)
        validator = cls(schema, format_checker=cls.FORMAT_CHECKER)

        def check(text, validator=validator):
            validator.validate(json.loads(text))
        endpoint = "/v1/chat/completions" if i % 2 == 0 else "/v1/completions"
        jobs.append((name, endpoint, constraint_forms[i % 3](schema), check))

    def is_object(text):
        assert isinstance(json.loads(text), dict), text
    for endpoint in ("/v1/chat/completions", "/v1/completions"):
        jobs.append(("json_object", endpoint, {"response_format": {"type": "json_object"}}, is_object))

    # GBNF: a list of one to four lowercase words with optional quantities, as llama-server takes
    # it in `grammar`; checked with an equivalent regex.
    gbnf = 'root ::= item (", " item){0,3} "."\nitem ::= [a-z]{1,8} (" x" [1-9] [0-9]?)?\n'
    pattern = re.compile(r"[a-z]{1,8}( x[1-9][0-9]?)?(, [a-z]{1,8}( x[1-9][0-9]?)?){0,3}\.")

    def matches_gbnf(text):
        assert pattern.fullmatch(text), repr(text)
    for endpoint in ("/v1/chat/completions", "/v1/completions"):
        jobs.append(("gbnf", endpoint, {"grammar": gbnf}, matches_gbnf))

    work = []
    for label, endpoint, constraint, check in jobs:
        for temperature in (0.0, 1.0):
            for stream in (False, True):
                for seed in ((1,) if temperature == 0 else (1, 2)):
                    work.append((label, endpoint, constraint, check, temperature, stream, seed))

    failures = []
    outputs = {}

    def one(item):
        label, endpoint, constraint, check, temperature, stream, seed = item
        body = request_body(endpoint, constraint, temperature, seed, bias)
        text, finish = generate(port, endpoint, body, stream)
        where = f"{label} {endpoint} temperature={temperature} stream={stream} seed={seed}"
        try:
            assert finish == "stop", f"finish_reason {finish}"
            check(text)
        except Exception as e:  # noqa: BLE001  (every failure is reported together)
            failures.append(f"{where}: {e}\n  output: {text[:400]!r}")
        outputs[(label, endpoint, temperature, stream, seed)] = text

    with concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(one, work))
    assert not failures, f"{len(failures)} of {len(work)} outputs wrong:\n" + "\n".join(failures[:20])

    # Streaming changes nothing: the same request streamed and not writes the same text.
    for (label, endpoint, temperature, stream, seed), text in outputs.items():
        if stream:
            assert text == outputs[(label, endpoint, temperature, False, seed)], (label, endpoint)
    distinct = len({t for t in outputs.values()})
    assert distinct > len(jobs), f"only {distinct} distinct outputs: the model is not sampling"
    print(f"{len(work)} constrained outputs valid ({distinct} distinct)")

    check_errors(port)


def check_errors(port):
    """Bad constraints are a 400 that says where, and the daemon keeps serving."""
    def error(body):
        status, text, _ = daemon.request(port, "POST", "/v1/chat/completions",
                                         {"messages": [{"role": "user", "content": "x"}], **body})
        assert status == 400, f"{status}: {text}"
        return json.loads(text)["error"]

    e = error({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "type": "object", "properties": {"n": {"type": "number", "multipleOf": 5}}}}}})
    assert e["param"] == "response_format" and "multipleOf" in e["message"] and \
        "/properties/n/multipleOf" in e["message"], e
    e = error({"grammar": 'root ::= "a"\nb ::= ( "x" '})
    assert e["param"] == "grammar" and "line 2" in e["message"], e
    e = error({"grammar": 'root ::= "a"', "json_schema": {"type": "string"}})
    assert e["param"] == "json_schema", e
    status, _, _ = daemon.request(port, "GET", "/health")
    assert status == 200


if __name__ == "__main__":
    main()
