#!/usr/bin/env python3
"""Prefix affinity against plain least_conn: several real ggufd replicas behind the real nginx
running docker/nginx/nginx.conf, on loopback, under a multi-turn chat workload.

Each conversation shares one system prompt with the others, then alternates its own user turns
with the model's replies (every request carries the whole history, as chat clients send it);
`--concurrency` conversations run at once, each turn after the previous answer. Reported per
policy: prompt tokens sent (usage.prompt_tokens) and evaluated (the replicas' own
ggufd_prompt_tokens_total, which excludes reused KV prefixes), time to first token (client side,
streamed) of every turn and of the follow-up turns alone, and the wall time.

  python3 scripts/bench-affinity.py build/bin [--replicas 3] [--conversations 18] [--turns 4]
          [--concurrency 6] [--policy both|affinity|least_conn] [--model FILE.gguf]

Needs nginx (Debian package nginx-light or nginx). "affinity" is docker/nginx/nginx.conf as it
is (with max_conns set to --parallel); "least_conn" sends generation to its least_conn group
instead of the hashed one; "hash_unbounded" is the hash without max_conns.
"""
import argparse
import http.client
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "deploy"))
from deploy_support import (Ggufd, Nginx, exposition_totals, free_port, loopback_nginx_config,  # noqa: E402
                            make_model, request, require_binary)

SYSTEM = ("You are a patient assistant for a hardware shop. Answer in short sentences, mention the "
          "aisle of every product you name, and never promise delivery dates. ") * 2
# With the random model's byte vocabulary: printable ASCII only, so a reply's text tokenizes back
# to the tokens that produced it and the next turn can reuse its KV cells (random bytes would come
# back as U+FFFD and end the shared prefix at the first reply). Real models ignore this bias
# unless --model is a byte-vocabulary file too.
PRINTABLE_ONLY = {str(i): -100 for i in [*range(0, 32), *range(127, 260)]}


BYTE_VOCAB = True  # set by main: False with --model


def user_turn(conversation, turn):
    return (f"Customer {conversation} asks, turn {turn}: I am building a bookshelf number "
            f"{conversation * 31 + turn} out of oak and need screws, wall plugs and a drill bit "
            f"that fit; which sizes do you suggest and where do I find them?")


def stream_turn(port, messages, max_tokens):
    """(ttft seconds, reply text, usage prompt_tokens)."""
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "logit_bias": PRINTABLE_ONLY if BYTE_VOCAB else {}, "stream_options": {"include_usage": True}}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    start = time.monotonic()
    c.request("POST", "/v1/chat/completions", body=json.dumps(body),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200, (r.status, r.read()[:300])
    ttft, text, prompt_tokens, pending = None, "", None, b""
    while True:
        data = r.read1(65536)
        if not data:
            break
        pending += data
        while b"\n\n" in pending:
            event, pending = pending.split(b"\n\n", 1)
            line = event.decode()
            if not line.startswith("data: ") or line[6:] == "[DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                prompt_tokens = chunk["usage"]["prompt_tokens"]
            for choice in chunk.get("choices", []):
                piece = choice["delta"].get("content") or ""
                if piece and ttft is None:
                    ttft = time.monotonic() - start
                text += piece
    c.close()
    return ttft, text, prompt_tokens


def run_policy(args, policy, model, nginx_bin, work):
    tmp = tempfile.mkdtemp(prefix=policy + "-", dir=work)
    os.chmod(tmp, 0o755)
    replicas = [Ggufd(args.bin, os.path.join(tmp, f"{policy}-ggufd{i}.log"), "--model", f"m={model}",
                      "--threads", str(args.threads), "--parallel", str(args.parallel),
                      "--ctx-size", str(args.ctx_size), "--metrics-public", "true")
                for i in range(args.replicas)]
    port = free_port()
    conf = loopback_nginx_config(tmp, [r.port for r in replicas], port)
    bound = " max_conns=4;"
    assert bound in conf.text, "docker/nginx/nginx.conf no longer bounds the hash with max_conns=4"
    # The bound follows the replicas' slots, as the configuration's comment asks.
    conf.text = conf.text.replace(bound, ";" if policy == "hash_unbounded" else f" max_conns={args.parallel};")
    if policy == "least_conn":
        conf.rewrite("~^/v1/(chat/)?completions$ ggufd_affinity;", "~^/v1/(chat/)?completions$ ggufd;")
    proxy = Nginx(nginx_bin, tmp, conf.text, port).start()

    def evaluated():
        return sum(exposition_totals(request(r.port, "GET", "/metrics")[1]).get("ggufd_prompt_tokens_total", 0)
                   for r in replicas)

    before = evaluated()
    todo = list(range(args.conversations))
    lock = threading.Lock()
    ttfts, follow_ttfts, sent = [], [], [0]

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                conv = todo.pop(0)
            messages = [{"role": "system", "content": SYSTEM}]
            for turn in range(args.turns):
                messages.append({"role": "user", "content": user_turn(conv, turn)})
                ttft, reply, prompt_tokens = stream_turn(port, messages, args.max_tokens)
                messages.append({"role": "assistant", "content": reply})
                with lock:
                    ttfts.append(ttft)
                    if turn:
                        follow_ttfts.append(ttft)
                    sent[0] += prompt_tokens

    start = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(args.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - start
    evaluated_tokens = evaluated() - before
    proxy.stop()
    per_replica = {}
    for record in proxy.access_log():
        per_replica[record["upstream"]] = per_replica.get(record["upstream"], 0) + 1
    for r in replicas:
        r.stop()
    return {"policy": policy, "requests": len(ttfts), "prompt_tokens_sent": sent[0],
            "prompt_tokens_evaluated": int(evaluated_tokens),
            "ttft_median_s": statistics.median(ttfts),
            "ttft_p90_s": statistics.quantiles(ttfts, n=10)[-1],
            "followup_ttft_median_s": statistics.median(follow_ttfts),
            "wall_s": wall, "requests_per_replica": sorted(per_replica.values(), reverse=True)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bin", help="the build's bin folder (ggufd, ggufd-mkmodel)")
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--conversations", type=int, default=18)
    p.add_argument("--turns", type=int, default=4)
    p.add_argument("--concurrency", type=int, default=6)
    p.add_argument("--max-tokens", type=int, default=24)
    p.add_argument("--threads", type=int, default=1, help="--threads of each replica")
    p.add_argument("--parallel", type=int, default=2, help="--parallel (slots) of each replica")
    p.add_argument("--ctx-size", type=int, default=2048)
    p.add_argument("--policy", choices=["both", "all", "affinity", "least_conn", "hash_unbounded"],
                   default="both", help="both: least_conn and affinity; all: also hash_unbounded")
    p.add_argument("--model", help="a GGUF file (default: a random-weight model, byte vocabulary)")
    p.add_argument("--rounds", type=int, default=1, help="alternate the policies this many times")
    args = p.parse_args()
    global BYTE_VOCAB
    BYTE_VOCAB = not args.model
    nginx_bin = require_binary("nginx", "nginx-light")
    tmp = tempfile.mkdtemp(prefix="bench-affinity-")
    os.chmod(tmp, 0o755)
    try:
        model = args.model or make_model(args.bin, os.path.join(tmp, "model.gguf"), "--n-embd", "512",
                                         "--n-layer", "8", "--n-head", "8", "--n-head-kv", "4",
                                         "--n-ff", "1536", "--type", "Q8_0")
        policies = {"both": ["least_conn", "affinity"],
                    "all": ["least_conn", "affinity", "hash_unbounded"]}.get(args.policy, [args.policy])
        for _ in range(args.rounds):
            for policy in policies:
                print(json.dumps(run_policy(args, policy, model, nginx_bin, tmp)), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
