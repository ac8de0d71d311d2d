#!/usr/bin/env python3
"""Three real ggufd replicas behind the real nginx running docker/nginx/nginx.conf, on loopback.

A load generator sends mixed streamed and non-streamed chat completions from several clients at
once; mid-run one replica is killed (SIGKILL) and another drained (SIGTERM). Checks: every
non-streamed request gets 200 with the right text (greedy, so every replica answers the same);
every stream either completes ([DONE], the right text) or ends in an error the client sees (a cut
chunked response: never a clean end without [DONE]); the drained replica finishes what it runs and
exits 0; nginx retried the requests the dead replica could not take; the surviving replica is left
with no busy slot and an empty queue. Prints the figures (requests, retries, errors) that
docs/reliability.md quotes.

Usage: test_replicas.py BIN_DIR WORK_DIR
"""
import http.client
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_support import (Ggufd, Nginx, exposition_totals, free_port, loopback_nginx_config,  # noqa: E402
                            make_model, request, require_binary)

nginx_bin = require_binary("nginx", "nginx")
bin_dir, work_root = sys.argv[1], os.path.abspath(sys.argv[2])
os.makedirs(work_root, exist_ok=True)
tmp = tempfile.mkdtemp(prefix="replicas-", dir=work_root)
os.chmod(tmp, 0o755)  # nginx's workers run unprivileged when it starts as root

model = make_model(bin_dir, os.path.join(tmp, "model.gguf"), "--n-embd", "512", "--n-layer", "8",
                   "--n-head", "8", "--n-head-kv", "4", "--n-ff", "1536", "--type", "Q8_0")
NO_SPECIALS = {str(i): -100 for i in range(256, 260)}  # run to max_tokens
N_TOKENS = 64
# Enough conversations that each replica owns some on the hash ring (the killed one included).
TOPICS = [f"conversation {i}: tell me about the number {i * 7}" for i in range(24)]
CLIENTS = 6
REQUESTS = 90


def chat_body(topic, stream):
    return {"messages": [{"role": "user", "content": topic}], "max_tokens": N_TOKENS,
            "temperature": 0, "logit_bias": NO_SPECIALS, "stream": stream}


def non_streamed(port, topic):
    """(status, text or error body)."""
    status, payload, _ = request(port, "POST", "/v1/chat/completions", chat_body(topic, False),
                                 timeout=120)
    if status != 200:
        return status, payload
    return status, json.loads(payload)["choices"][0]["message"]["content"]


def streamed(port, topic):
    """("done", text) for a complete stream, ("cut", why) for one the client saw fail,
    ("silent", text) for one that ended cleanly without [DONE], ("status", code) when refused."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        c.request("POST", "/v1/chat/completions", body=json.dumps(chat_body(topic, True)),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            return "status", r.status
        raw = b""
        try:
            while True:
                data = r.read1(65536)
                if not data:
                    break
                raw += data
        except (http.client.HTTPException, OSError) as e:
            return "cut", type(e).__name__
        events = [line[6:] for line in raw.decode().split("\n") if line.startswith("data: ")]
        if not events or events[-1] != "[DONE]":
            # An error event is a clean end too: the server said why.
            if events and "error" in json.loads(events[-1]):
                return "cut", "error event"
            return "silent", raw.decode()[-200:]
        chunks = [json.loads(e) for e in events[:-1]]
        return "done", "".join(ch["choices"][0]["delta"].get("content") or ""
                               for ch in chunks if ch["choices"])
    finally:
        c.close()


replicas = [Ggufd(bin_dir, os.path.join(tmp, f"ggufd{i}.log"), "--model", f"random={model}",
                  "--threads", "1", "--parallel", "2", "--metrics-public", "true")
            for i in range(3)]
nginx_port = free_port()
proxy = Nginx(nginx_bin, tmp, loopback_nginx_config(tmp, [r.port for r in replicas], nginx_port).text,
              nginx_port).start()

results = []  # (kind, topic, outcome, detail)
lock = threading.Lock()
issued = 0


def client(index):
    global issued
    while True:
        with lock:
            if issued >= REQUESTS:
                return
            n = issued
            issued += 1
        topic = TOPICS[(n * 5 + index) % len(TOPICS)]
        if n % 2:
            outcome, detail = streamed(nginx_port, topic)
            kind = "stream"
        else:
            status, detail = non_streamed(nginx_port, topic)
            outcome, kind = status, "json"
        with lock:
            results.append((kind, topic, outcome, detail))


def done_count():
    with lock:
        return len(results)


ok = False
try:
    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    killed, drained = replicas[1], replicas[2]
    while done_count() < REQUESTS // 3:
        time.sleep(0.01)
    killed.proc.send_signal(signal.SIGKILL)
    while done_count() < 2 * REQUESTS // 3:
        time.sleep(0.01)
    drained.proc.send_signal(signal.SIGTERM)
    drained_code = drained.proc.wait(timeout=30)
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a client never got its answer"
    proxy.stop()
    log = proxy.access_log()

    assert len(results) == REQUESTS, len(results)
    # The right answers, from the survivor straight (greedy: every replica answers the same).
    expected = {}
    for topic in {r[1] for r in results}:
        status, text = non_streamed(replicas[0].port, topic)
        assert status == 200 and text, (status, text)
        expected[topic] = text
    json_results = [r for r in results if r[0] == "json"]
    stream_results = [r for r in results if r[0] == "stream"]
    for _, topic, status, text in json_results:
        assert status == 200, f"a non-streamed request failed: {status} {text}"
        assert text == expected[topic], f"wrong answer for {topic!r}: {text!r}"
    completed = cut = 0
    for _, topic, outcome, detail in stream_results:
        assert outcome in ("done", "cut"), f"a stream ended {outcome}: {detail!r}"
        if outcome == "done":
            assert detail == expected[topic], f"wrong streamed answer for {topic!r}: {detail!r}"
            completed += 1
        else:
            cut += 1
    # Every stream cut is one the killed replica was running (never the drained one's).
    assert drained_code == 0, f"the drained replica exited {drained_code}"
    drained_log = drained.log_text()
    assert "aborted by shutdown" not in drained_log, "the drain cut a request"
    after_term = drained_log[drained_log.index("SIGTERM received"):]
    finished_while_draining = sum(1 for line in after_term.splitlines()
                                  if "route=/v1/chat/completions" in line and "status=200" in line)

    # nginx's view: how many requests went to a second replica, and what clients were answered.
    gen = [x for x in log if x["path"] == "/v1/chat/completions"]
    assert len(gen) == REQUESTS, (len(gen), REQUESTS)
    retried = [x for x in gen if "," in x["upstream"]]
    refused_503 = sum(x["upstream_status"].count("503") for x in gen)
    client_errors = [x for x in gen if x["status"] >= 500]
    assert retried, "nginx retried nothing although a replica was killed"
    # Only a stream already started can fail towards the client, and then its status was 200.
    assert not client_errors, f"clients got errors: {client_errors}"

    # Nothing is left busy on the survivor.
    survivor = replicas[0]
    deadline = time.monotonic() + 10
    while True:
        totals = exposition_totals(request(survivor.port, "GET", "/metrics")[1])
        busy, queued = totals.get("ggufd_slots_busy", -1), totals.get("ggufd_queue_depth", -1)
        if (busy, queued) == (0, 0) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert (busy, queued) == (0, 0), f"survivor left with {busy} busy slots, {queued} queued"
    assert survivor.stop() == 0
    ok = True
    print(f"ok: {REQUESTS} requests from {CLIENTS} clients over 3 replicas (one killed, one drained): "
          f"{len(json_results)} non-streamed all 200 and correct; {len(stream_results)} streams: "
          f"{completed} complete, {cut} cut by the kill (client saw the error); "
          f"{len(retried)} retried by nginx ({refused_503} answers 503 from the draining replica, "
          f"which finished {finished_while_draining} requests while draining), "
          f"0 errors to clients")
finally:
    proxy.stop()
    for r in replicas:
        if r.proc.poll() is None:
            r.stop()
    if not ok:
        err = os.path.join(tmp, "error.log")
        if os.path.exists(err):
            print("--- nginx error.log:\n" + open(err).read()[-3000:])
        for i, r in enumerate(replicas):
            print(f"--- ggufd{i} log (tail):\n" + r.log_text()[-2000:])
    else:
        shutil.rmtree(tmp, ignore_errors=True)
