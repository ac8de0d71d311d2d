#!/usr/bin/env python3
"""Faults and security settings of the real daemon, end to end.

  start_faults   a model file missing, unreadable, a directory, truncated or not GGUF: a clear
                 error naming the model and the file, exit 1; with --skip-bad-models the others
                 are served and the failed one is reported; a KV cache larger than the machine's
                 memory: an error naming --ctx-size and --parallel, not an OOM kill
  invalid_utf8   a random-weight model emits byte tokens that do not form UTF-8: the stream
                 carries U+FFFD and finishes normally
  cors           no CORS headers unless --cors-origin; with it, preflight answered without a key
                 and every response (errors too) carries the origin
  limits         each request limit answered 400 naming the field; a file path as "model" is 404

Usage: test_faults.py BIN_DIR CONFORMANCE_DIR CASE
"""
import http.client
import json
import os
import shutil
import signal
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon  # noqa: E402
from daemon import request, sse_events  # noqa: E402

bin_dir, case = sys.argv[1], sys.argv[3]
conf = daemon.conformance_dir(sys.argv[2])
model = os.path.join(conf, "models", "stories260K.gguf")


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=30)[0]
    assert proc.returncode == 0, f"ggufd exited {proc.returncode} on SIGTERM"
    return out.decode(errors="replace") if out else ""


def expect_start_failure(args, must_contain, prefix=()):
    code, out = daemon.run_to_exit(bin_dir, *args, prefix=prefix)
    # A clean failure: exit 1, not a signal (a crash or an OOM kill is negative here).
    assert code == 1, f"exit {code} for {args}:\n{out}"
    for text in must_contain:
        assert text in out, f"{text!r} missing from the error for {args}:\n{out}"
    return out


def start_faults(tmp):
    missing = os.path.join(tmp, "missing.gguf")
    expect_start_failure(["--model", f"gone={missing}"], ["'gone'", missing])

    truncated = os.path.join(tmp, "truncated.gguf")
    with open(model, "rb") as f:
        data = f.read()
    with open(truncated, "wb") as f:
        f.write(data[: len(data) // 2])
    expect_start_failure(["--model", f"cut={truncated}"], ["'cut'", truncated])

    text_file = os.path.join(tmp, "notes.gguf")
    with open(text_file, "w") as f:
        f.write("this is not a model\n" * 10)
    out = expect_start_failure(["--model", f"text={text_file}"], ["'text'", text_file])
    assert "GGUF" in out or "magic" in out, out

    empty = os.path.join(tmp, "empty.gguf")
    open(empty, "wb").close()
    expect_start_failure(["--model", f"empty={empty}"], ["'empty'", empty])

    directory = os.path.join(tmp, "dir.gguf")
    os.mkdir(directory)
    expect_start_failure(["--model", f"dir={directory}"], ["'dir'", directory])

    # Unreadable: permission bits do not stop root, so as root the daemon runs as nobody (the
    # file stays readable by root alone, and the rest of the path is world-readable).
    unreadable = os.path.join(tmp, "secret.gguf")
    shutil.copy(model, unreadable)
    os.chmod(unreadable, 0o000)
    prefix = ()
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        assert setpriv, "setpriv (util-linux) is needed to drop root for the unreadable-file case"
        prefix = (setpriv, "--reuid=65534", "--regid=65534", "--clear-groups")
    out = expect_start_failure(["--model", f"locked={unreadable}"], ["'locked'", unreadable],
                               prefix=prefix)
    assert "ermission" in out, out

    # Several models: by default one bad model stops the start ...
    good = ["--model", f"good={model}"]
    expect_start_failure([*good, "--model", f"cut={truncated}"], ["'cut'", truncated])
    # ... and with --skip-bad-models the others are served, the bad one reported.
    log = os.path.join(tmp, "skip.log")
    proc, port = daemon.start(bin_dir, *good, "--model", f"cut={truncated}", "--model",
                              f"gone={missing}", "--skip-bad-models", "true", log_path=log)
    try:
        status, body, _ = request(port, "GET", "/health")
        assert status == 200, body
        assert json.loads(body)["failed_models"] == ["cut", "gone"], body
        ids = [m["id"] for m in json.loads(request(port, "GET", "/v1/models")[1])["data"]]
        assert ids == ["good"], ids
        status, body, _ = request(port, "POST", "/v1/completions",
                                  {"model": "good", "prompt": "Once", "max_tokens": 4})
        assert status == 200, body
        status, body, _ = request(port, "POST", "/v1/completions",
                                  {"model": "cut", "prompt": "Once", "max_tokens": 4})
        assert status == 404 and "failed to load" in body, (status, body)
        # Several were configured, so a request must still name its model.
        assert request(port, "POST", "/v1/completions", {"prompt": "Once"})[0] == 400
    finally:
        stop(proc)
    logged = open(log).read()
    assert "'cut'" in logged and truncated in logged and "'gone'" in logged, logged
    # When none loads there is nothing to serve.
    expect_start_failure(["--model", f"cut={truncated}", "--skip-bad-models", "true"],
                         ["no model could be loaded"])

    # A KV cache beyond the machine's memory (1024 slots of 16M tokens: about 20 TiB for this
    # model) is refused before allocating, naming the settings to lower.
    expect_start_failure([*good, "--ctx-size", "16777216", "--parallel", "1024"],
                         ["'good'", "KV cache", "--ctx-size", "--parallel"])


def invalid_utf8(tmp):
    # Random weights over stories260K's SentencePiece vocabulary, which has the 256 byte tokens:
    # sampling at temperature 1 picks lone continuation bytes and cut sequences all the time.
    random_model = os.path.join(tmp, "random.gguf")
    code = os.spawnv(os.P_WAIT, os.path.join(bin_dir, "ggufd-mkmodel"),
                     ["ggufd-mkmodel", "--out", random_model, "--vocab", model, "--n-embd", "64",
                      "--n-layer", "1", "--n-head", "2", "--n-head-kv", "1", "--n-ff", "128"])
    assert code == 0, "ggufd-mkmodel failed"
    proc, port = daemon.start(bin_dir, "--model", f"random={random_model}")
    try:
        replaced = 0
        for seed in range(4):
            for path, body in (("/v1/completions", {"prompt": "Once"}),
                               ("/v1/chat/completions",
                                {"messages": [{"role": "user", "content": "Hi"}]})):
                body.update({"max_tokens": 200, "temperature": 1.0, "seed": seed, "stream": True})
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                c.request("POST", path, body=json.dumps(body),
                          headers={"Content-Type": "application/json"})
                r = c.getresponse()
                raw = r.read()
                c.close()
                assert r.status == 200, (r.status, raw[:200])
                payload = raw.decode("utf-8")  # strict: the stream itself is valid UTF-8
                for e in sse_events(payload):
                    assert "error" not in e, e
                    choice = e["choices"][0]
                    text = choice.get("text") or choice.get("delta", {}).get("content") or ""
                    replaced += text.count("\ufffd")
        # Without any U+FFFD the case above was never exercised and this test proves nothing.
        assert replaced > 0, "the random model never produced invalid UTF-8"
        print(f"U+FFFD characters streamed: {replaced}")
    finally:
        stop(proc)


def cors(tmp):
    args = ["--model", f"stories={model}", "--api-key", "k3y"]
    auth = {"Authorization": "Bearer k3y"}
    proc, port = daemon.start(bin_dir, *args)
    try:
        status, _, r = request(port, "GET", "/v1/models", headers={**auth, "Origin": "https://x.test"})
        assert status == 200
        assert not [h for h in r.getheaders() if h[0].lower().startswith("access-control-")], \
            r.getheaders()
        status, _, r = request(port, "OPTIONS", "/v1/chat/completions",
                               headers={"Origin": "https://x.test"})
        assert status in (401, 405), status
        assert r.getheader("Access-Control-Allow-Origin") is None
    finally:
        stop(proc)

    proc, port = daemon.start(bin_dir, *args, "--cors-origin", "https://app.test")
    try:
        preflight = {"Origin": "https://app.test", "Access-Control-Request-Method": "POST",
                     "Access-Control-Request-Headers": "authorization, content-type"}
        status, _, r = request(port, "OPTIONS", "/v1/chat/completions", headers=preflight)
        assert status == 204, status
        assert r.getheader("Access-Control-Allow-Origin") == "https://app.test"
        assert "POST" in r.getheader("Access-Control-Allow-Methods")
        assert "authorization" in r.getheader("Access-Control-Allow-Headers").lower()
        # Unknown routes get no preflight answer.
        assert request(port, "OPTIONS", "/nope", headers=preflight)[0] in (401, 404)
        status, _, r = request(port, "GET", "/v1/models", headers={**auth, "Origin": "https://app.test"})
        assert status == 200 and r.getheader("Access-Control-Allow-Origin") == "https://app.test"
        status, _, r = request(port, "GET", "/v1/models", headers={"Origin": "https://app.test"})
        assert status == 401 and r.getheader("Access-Control-Allow-Origin") == "https://app.test"
        status, payload, r = request(port, "POST", "/v1/completions",
                                     {"prompt": "Once", "max_tokens": 3, "stream": True},
                                     headers=auth)
        assert status == 200 and r.getheader("Access-Control-Allow-Origin") == "https://app.test"
        sse_events(payload)
    finally:
        out = stop(proc)
    assert "k3y" not in out, "the API key reached the log"
    code, out = daemon.run_to_exit(bin_dir, "--cors-origin", "https://a.test, https://b.test")
    assert code == 2 and "cors-origin" in out, (code, out)


def limits(tmp):
    proc, port = daemon.start(bin_dir, "--model", f"stories={model}", "--ctx-size", "256")
    try:
        def rejected(body, field, path="/v1/completions"):
            status, payload, _ = request(port, "POST", path, body)
            assert status == 400, (field, status, payload)
            error = json.loads(payload)["error"]
            assert error["param"] == field or field in error["message"], (field, error)

        base = {"prompt": "Once upon a time"}
        rejected({**base, "n": 9}, "n")
        rejected({**base, "max_tokens": 32769}, "max_tokens")
        rejected({**base, "stop": ["a", "b", "c", "d", "e"]}, "stop")
        rejected({**base, "stop": ["x" * 257]}, "stop")
        rejected({**base, "logit_bias": {str(i): 1 for i in range(1025)}}, "logit_bias")
        rejected({**base, "logit_bias": {"100000": 1}}, "logit_bias")
        rejected({"prompt": "Once upon a time " * 100}, "prompt")  # > 256 tokens of context
        rejected({"messages": [{"role": "user", "content": "hi"}] * 4097}, "messages",
                 "/v1/chat/completions")
        status, _, _ = request(port, "POST", "/v1/completions", raw="x" * (32 * 1024 * 1024 + 1))
        assert status == 413, status
        status, _, _ = request(port, "GET", "/v1/models", headers={"X-Big": "y" * 20000})
        assert status == 431, status
        # Model ids are the configured names; a path never opens a file.
        for name in (model, "../models/stories260K.gguf", "stories260K"):
            status, payload, _ = request(port, "POST", "/v1/completions", {**base, "model": name})
            assert status == 404, (name, status, payload)
        status, _, _ = request(port, "GET", "/models/" + model.replace("/", "%2F"))
        assert status == 404
        # Within the limits the same request works.
        assert request(port, "POST", "/v1/completions", {**base, "max_tokens": 2, "n": 8,
                                                          "stop": ["a"] * 4})[0] == 200
    finally:
        stop(proc)


cases = {"start_faults": start_faults, "invalid_utf8": invalid_utf8, "cors": cors, "limits": limits}
with tempfile.TemporaryDirectory() as tmp:
    os.chmod(tmp, 0o755)  # the unprivileged run must reach its files
    cases[case](tmp)
print("ok")
