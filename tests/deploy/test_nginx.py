#!/usr/bin/env python3
"""The real nginx with the repo's docker/nginx/nginx.conf in front of a real ggufd, on loopback.

The configuration is rewritten only where a container and a loopback run must differ (ports, the
upstream address, log and temporary file paths); every rewrite must apply, so a changed file
fails here rather than being tested half-way. Checks: a streamed chat completion arrives through
the proxy event by event (not collected by proxy buffering) and with the same text as straight
from ggufd; ggufd's X-Request-Id comes through and lands in nginx's access log; oversized bodies
stop at nginx; /metrics is not published; requests beyond the hashed replica's max_conns are
handed to the least busy replica instead of being refused.

Usage: test_nginx.py BIN_DIR WORK_DIR
"""
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_support import (Ggufd, free_port, loopback_nginx_config, request, require_binary,  # noqa: E402
                            stop_process, wait_listening)

nginx = require_binary("nginx", "nginx")
bin_dir, work_root = sys.argv[1], os.path.abspath(sys.argv[2])
os.makedirs(work_root, exist_ok=True)
tmp = tempfile.mkdtemp(prefix="nginx-", dir=work_root)
# Worker processes run as an unprivileged user when nginx starts as root: let them in.
os.chmod(tmp, 0o755)


def loopback_config(ggufd_port, nginx_port):
    conf = loopback_nginx_config(tmp, [ggufd_port], nginx_port)
    # nginx 1.22 passes small SSE chunks on promptly even with proxy_buffering on (it buffers
    # against slow clients, which a test cannot provoke reliably), so the setting itself is
    # checked: the generation routes must not be buffered.
    start = conf.text.index("location /v1/ {")
    block = conf.text[start:conf.text.index("}", start)]
    assert "proxy_buffering off;" in block, "location /v1/ must keep proxy_buffering off"
    # One request at a time on the hashed group, so that concurrent requests find the replica
    # full and must take the spill-over route (checked below).
    conf.rewrite(" max_conns=4;", " max_conns=1;")
    return conf.text


# A model slow enough (several ms a token on any machine) that a stream lasts a noticeable time.
model = os.path.join(tmp, "model.gguf")
subprocess.run([os.path.join(bin_dir, "ggufd-mkmodel"), "--out", model, "--n-embd", "512", "--n-layer", "8",
                "--n-head", "8", "--n-head-kv", "4", "--n-ff", "1536", "--type", "Q8_0"],
               check=True, stdout=subprocess.DEVNULL)
# Byte-level vocabulary: ids 256.. are the special tokens; forbid them so the stream runs to max_tokens.
NO_SPECIALS = {str(i): -100 for i in range(256, 260)}
N_TOKENS = 300


def chat_body(stream):
    return {"messages": [{"role": "user", "content": "Tell me a long story"}], "max_tokens": N_TOKENS,
            "temperature": 0.8, "seed": 7, "logit_bias": NO_SPECIALS, "stream": stream,
            "stream_options": {"include_usage": True}}


def stream_chat(port):
    """(status, headers, [(arrival seconds, event data)], seconds until the end of the response)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    start = time.monotonic()
    c.request("POST", "/v1/chat/completions", body=json.dumps(chat_body(True)),
              headers={"Content-Type": "application/json", "Accept-Encoding": "gzip"})
    r = c.getresponse()
    headers = {k.lower(): v for k, v in r.getheaders()}
    events, pending = [], b""
    while True:
        data = r.read1(65536)
        if not data:
            break
        now = time.monotonic() - start
        pending += data
        while b"\n\n" in pending:
            event, pending = pending.split(b"\n\n", 1)
            for line in event.decode().split("\n"):
                if line.startswith("data: "):
                    events.append((now, line[6:]))
    end = time.monotonic() - start
    c.close()
    return r.status, headers, events, end


def streamed_text(events):
    """The content of a chat stream, checking it is complete: [DONE] after the usage chunk."""
    assert events and events[-1][1] == "[DONE]", "the stream does not end with [DONE]"
    chunks = [json.loads(e) for _, e in events[:-1]]
    assert chunks[-1]["usage"]["completion_tokens"] == N_TOKENS, chunks[-1]
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


ggufd = Ggufd(bin_dir, os.path.join(tmp, "ggufd.log"), "--model", f"random={model}", "--threads", "1",
              "--metrics-public", "true")
nginx_port = free_port()
conf_path = os.path.join(tmp, "nginx.conf")
with open(conf_path, "w") as f:
    f.write(loopback_config(ggufd.port, nginx_port))
subprocess.run([nginx, "-t", "-q", "-e", f"{tmp}/error.log", "-c", conf_path, "-g", f"pid {tmp}/nginx.pid;"],
               check=True)


def start_nginx():
    proc = subprocess.Popen([nginx, "-e", f"{tmp}/error.log", "-c", conf_path,
                             "-g", f"daemon off; pid {tmp}/nginx.pid;"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    wait_listening(nginx_port, proc, "nginx")
    return proc


proxy = None
ok = False
try:
    proxy = start_nginx()

    # Streaming through the proxy: each event is passed on as ggufd writes it. Buffering would
    # hold events back until a buffer (4-8 KiB, dozens of events here) fills, so most events
    # would then arrive together with many others.
    status, headers, events, end = stream_chat(nginx_port)
    assert status == 200, status
    assert headers.get("content-type", "").startswith("text/event-stream"), headers
    # gzip would hold events back until its buffer fills; the client asked for it, so it must
    # be switched off for the stream.
    assert "content-encoding" not in headers, headers
    rid = headers.get("x-request-id", "")
    assert len(rid) == 16 and all(ch in "0123456789abcdef" for ch in rid), f"X-Request-Id {rid!r}"
    text = streamed_text(events)
    n = len(events)
    assert n >= 40, f"only {n} events: the generation is too short to judge streaming"
    first, last = events[0][0], events[-1][0]
    span = last - first
    assert span > 0.1, f"the stream lasted only {span:.3f} s"
    # The first event comes early: before a tenth of the stream has been generated...
    arrived_with_first = sum(1 for t, _ in events if t <= first)
    assert arrived_with_first <= n // 10, (
        f"{arrived_with_first} of {n} events arrived together with the first: proxy buffering?")
    assert first < last - span / 2 and first < 0.5 * end, (first, last, end)
    # ...and the others keep coming in small groups (a loaded machine may merge a few reads).
    arrivals = sorted({t for t, _ in events})
    largest_group = max(sum(1 for t, _ in events if t == a) for a in arrivals)
    assert len(arrivals) >= n // 4 and largest_group <= n // 4, (
        f"{n} events arrived in {len(arrivals)} reads (largest {largest_group}): proxy buffering?")

    assert text, "the stream carried no text"

    # nginx logs ggufd's request id next to its own, as JSON, without the request body.
    stop_process(proxy)  # flushes and closes the access log
    with open(os.path.join(tmp, "access.log")) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    line = next((x for x in lines if x["ggufd_request_id"] == rid), None)
    assert line, f"no nginx access-log line with ggufd_request_id {rid}: {lines}"
    assert line["path"] == "/v1/chat/completions" and line["status"] == 200, line
    assert line["proxy_request_id"] and line["proxy_request_id"] != rid, line
    assert "story" not in json.dumps(lines), "the prompt reached nginx's log"

    proxy = start_nginx()
    # Bodies over 32 MiB stop at nginx (its HTML 413, not ggufd's JSON); smaller ones reach ggufd.
    status, payload, _ = request(nginx_port, "POST", "/v1/completions", raw="x" * (33 << 20))
    assert status == 413 and payload.lstrip().startswith("<html>"), (status, payload[:200])
    status, payload, _ = request(nginx_port, "POST", "/v1/completions", raw="x" * (3 << 20))
    assert status == 400 and json.loads(payload)["error"]["message"], (status, payload[:200])
    # Other routes pass through; /metrics is not published (Prometheus scrapes ggufd directly).
    status, payload, headers = request(nginx_port, "GET", "/health")
    assert status == 200 and json.loads(payload)["status"] == "ok" and "x-request-id" in headers, payload
    assert request(nginx_port, "GET", "/metrics")[0] == 404
    assert request(ggufd.port, "GET", "/metrics")[0] == 200

    # Bounded affinity: more requests at once than the hashed replica's max_conns are not
    # refused (nginx's own 502) but handed to the least busy replica, here the same one.
    answers = []
    body = {k: v for k, v in chat_body(False).items() if k != "stream_options"}
    body["max_tokens"] = 60
    workers = [threading.Thread(target=lambda: answers.append(
        request(nginx_port, "POST", "/v1/chat/completions", body)[0])) for _ in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert answers == [200, 200, 200], f"concurrent requests over max_conns were answered {answers}"
    ok = True
    print(f"ok: {n} events in {len(arrivals)} reads over {span:.2f} s, first after {first:.3f} s")
finally:
    if proxy:
        stop_process(proxy)
    code = ggufd.stop()
    if not ok:
        for name in ("error.log",):
            path = os.path.join(tmp, name)
            if os.path.exists(path):
                print(f"--- nginx {name}:\n" + open(path).read())
        print("--- ggufd log (tail):\n" + ggufd.log_text()[-3000:])
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    assert code == 0, f"ggufd exited {code}"
