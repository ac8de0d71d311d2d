#!/usr/bin/env python3
"""The real daemon over HTTP on loopback, serving stories260K: greedy output equal to llama.cpp's
text alone and under concurrency, streaming equal to non-streaming, error statuses, API keys,
and a clean exit on SIGTERM.

Usage: test_server.py BIN_DIR CONFORMANCE_DIR
"""
import json
import os
import signal
import sys
import threading
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemon import conformance_dir, request, sse_events  # noqa: E402
import daemon  # noqa: E402

bin_dir = sys.argv[1]
conf = conformance_dir(sys.argv[2])
model = os.path.join(conf, "models", "stories260K.gguf")
with open(os.path.join(conf, "reference", "stories260K.greedy.jsonl")) as f:
    cases = [json.loads(line) for line in f]


def start(*extra):
    return daemon.start(bin_dir, "--parallel", "4", "--model", f"stories={model}", *extra)


def expected_completion(case):
    # completion_text is the prompt as its tokens spell it (with SentencePiece's space) and the
    # continuation, printed without a final newline.
    prefix = " " + case["prompt"]
    assert case["completion_text"].startswith(prefix)
    return case["completion_text"][len(prefix):]


def complete(port, case, stream=False):
    body = {"model": "stories", "prompt": case["prompt"], "max_tokens": 128, "temperature": 0, "stream": stream}
    status, payload, _ = request(port, "POST", "/v1/completions", body)
    assert status == 200, (status, payload)
    if not stream:
        return json.loads(payload)["choices"][0]["text"]
    return "".join(e["choices"][0]["text"] for e in sse_events(payload))


proc, port = start()
try:
    # Greedy, one at a time, then all at once (continuous batching must not change results).
    for c in cases:
        assert complete(port, c).rstrip("\n") == expected_completion(c), c["prompt"]
    results = {}
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, complete(port, cases[i % 3])))
               for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(6):
        assert results[i].rstrip("\n") == expected_completion(cases[i % 3]), f"concurrent request {i}"
    # Streaming gives the same text.
    assert complete(port, cases[1], stream=True).rstrip("\n") == expected_completion(cases[1])

    # Chat goes through the (ChatML fallback) template and answers in OpenAI's shape.
    status, payload, _ = request(port, "POST", "/v1/chat/completions",
                                 {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5})
    assert status == 200, payload
    body = json.loads(payload)
    assert body["choices"][0]["message"]["role"] == "assistant" and body["usage"]["completion_tokens"] <= 5

    # Errors.
    assert request(port, "POST", "/v1/completions", raw="{not json")[0] == 400
    assert request(port, "POST", "/v1/completions", {"prompt": "x", "max_tokens": "many"})[0] == 400
    assert request(port, "POST", "/v1/completions", {"prompt": "x", "temperature": -1})[0] == 400
    assert request(port, "POST", "/v1/completions", {"model": "nope", "prompt": "x"})[0] == 404
    assert request(port, "GET", "/no/such/route")[0] == 404
    assert request(port, "GET", "/v1/completions")[0] == 405
    assert request(port, "POST", "/v1/completions", raw="x" * (33 << 20))[0] == 413
    too_long = {"prompt": "Once upon a time " * 2000, "max_tokens": 1}
    status, payload, _ = request(port, "POST", "/v1/completions", too_long)
    assert status == 400, (status, payload)
    assert json.loads(payload)["error"]["message"]
    status, payload, _ = request(port, "GET", "/health")
    assert status == 200

    # Tokenize / detokenize agree with llama.cpp's ids.
    status, payload, _ = request(port, "POST", "/tokenize", {"content": cases[0]["prompt"], "add_special": True})
    assert status == 200, payload
    assert json.loads(payload)["tokens"] == cases[0]["prompt_tokens"], payload
finally:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0, "ggufd did not exit 0 on SIGTERM"

# API keys: every endpoint but /health needs the bearer token.
proc, port = start("--api-key", "s3cret")
try:
    assert request(port, "GET", "/health")[0] == 200
    assert request(port, "GET", "/v1/models")[0] == 401
    assert request(port, "GET", "/v1/models", headers={"Authorization": "Bearer wrong"})[0] == 401
    assert request(port, "GET", "/v1/models", headers={"Authorization": "Bearer s3cret"})[0] == 200
finally:
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=30)[0].decode()
    assert proc.returncode == 0
    assert "s3cret" not in out, "the API key reached the log"
# A configured chat template replaces the model's (here the ChatML fallback).
with tempfile.NamedTemporaryFile("w", suffix=".jinja") as t:
    t.write("{{ raise_exception('override in use: ' ~ messages[0]['content']) }}")
    t.flush()
    proc, port = start("--chat-template-file", f"stories={t.name}")
    try:
        status, payload, _ = request(port, "POST", "/v1/chat/completions",
                                     {"messages": [{"role": "user", "content": "Hi"}]})
        assert status == 400, (status, payload)
        assert "override in use: Hi" in json.loads(payload)["error"]["message"], payload
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
print("ok")
