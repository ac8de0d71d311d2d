#!/usr/bin/env python3
"""LoRA adapters through the real daemon: a random base model and two random adapters written by
ggufd-mkmodel, served with --lora; requests choose adapters with llama-server's per-request
`lora` field (by index or by name), get the base model without it (default scale 0) or the
--lora-scale defaults, share one batch when they choose different adapters (each answer equals
the one it gets alone), and bad choices or adapters that do not fit the base are refused by name.

Usage: test_lora.py BIN_DIR
"""
import json
import os
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon  # noqa: E402
from daemon import request  # noqa: E402

bin_dir = sys.argv[1]
mkmodel = os.path.join(bin_dir, "ggufd-mkmodel")


def make(*args):
    subprocess.run([mkmodel, *args], check=True, capture_output=True)


def complete(port, lora=None, prompt="Once upon a time", max_tokens=24):
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
    if lora is not None:
        body["lora"] = lora
    status, payload, _ = request(port, "POST", "/v1/completions", body)
    assert status == 200, (status, payload)
    choice = json.loads(payload)["choices"][0]
    return choice["text"]


def refusal(port, lora):
    body = {"prompt": "x", "max_tokens": 2, "lora": lora}
    status, payload, _ = request(port, "POST", "/v1/completions", body)
    assert status == 400, (status, payload, lora)
    return json.loads(payload)["error"]


with tempfile.TemporaryDirectory() as tmp:
    base = os.path.join(tmp, "base.gguf")
    other = os.path.join(tmp, "other.gguf")
    a = os.path.join(tmp, "a.gguf")
    b = os.path.join(tmp, "b.gguf")
    wrong = os.path.join(tmp, "wrong.gguf")
    make("--out", base, "--n-embd", "128", "--n-layer", "2", "--n-head", "4", "--n-head-kv", "2",
         "--n-ff", "256", "--type", "Q8_0", "--seed", "1")
    make("--out", other, "--n-embd", "64", "--n-layer", "2", "--seed", "2")
    make("--lora-for", base, "--out", a, "--lora-rank", "8", "--lora-alpha", "16", "--seed", "3")
    make("--lora-for", base, "--out", b, "--lora-rank", "4", "--lora-alpha", "4",
         "--lora-targets", "attn_v,ffn_down,output", "--seed", "4")
    make("--lora-for", other, "--out", wrong, "--seed", "5")

    proc, port = daemon.start(bin_dir, "--parallel", "4", "--model", f"base={base}",
                              "--lora", f"a={a}", "--lora", f"b={b}")
    try:
        status, payload, _ = request(port, "GET", "/models")
        assert status == 200, payload
        listed = json.loads(payload)["data"][0]["lora_adapters"]
        assert [(x["id"], x["name"], x["scale"]) for x in listed] == [(0, "a", 0), (1, "b", 0)], listed
        assert listed[0]["rank"] == 8 and listed[0]["alpha"] == 16 and listed[1]["rank"] == 4

        plain = complete(port)
        assert complete(port, lora=[]) == plain
        assert complete(port, lora=[{"id": 0, "scale": 0}]) == plain
        with_a = complete(port, lora=[{"id": 0, "scale": 1.0}])
        assert with_a != plain
        assert complete(port, lora=[{"id": "a"}]) == with_a  # by name; scale 1 when absent
        with_b = complete(port, lora=[{"id": 1, "scale": 1.5}])
        assert with_b not in (plain, with_a)
        both = complete(port, lora=[{"id": "a", "scale": 0.5}, {"id": "b", "scale": 0.5}])
        assert both not in (plain, with_a, with_b)

        # Different adapters in one batch: each request's answer is the one it gets alone.
        choices = [None, [{"id": 0}], [{"id": "b", "scale": 1.5}]]
        want = [plain, with_a, with_b]
        got = {}
        threads = [threading.Thread(target=lambda i=i: got.__setitem__(i, complete(port, lora=choices[i % 3])))
                   for i in range(9)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i in range(9):
            assert got[i] == want[i % 3], (i, got[i], want[i % 3])

        # Chat takes the field too.
        status, payload, _ = request(port, "POST", "/v1/chat/completions",
                                     {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4,
                                      "lora": [{"id": "b"}]})
        assert status == 200, payload

        e = refusal(port, [{"id": 2}])
        assert e["param"] == "lora" and "adapter id 2" in e["message"] and "ids 0..1" in e["message"], e
        e = refusal(port, [{"id": "c"}])
        assert "'c'" in e["message"] and "a, b" in e["message"], e
        e = refusal(port, [{"id": 0}, {"id": "a"}])
        assert "second time" in e["message"], e
        assert "lora" == refusal(port, {"id": 0})["param"]
        assert "scale" in refusal(port, [{"id": 0, "scale": "big"}])["message"]
        assert "scale" in refusal(port, [{"id": 0, "scale": 1000}])["message"]
        assert "unknown field" in refusal(port, [{"id": 0, "weight": 1}])["message"]
        assert "index" in refusal(port, [{"id": -1}])["message"]
    finally:
        proc.terminate()
        proc.wait(timeout=60)

    # --lora-scale: requests without `lora` get the adapter; `lora: []` still asks for none.
    proc, port = daemon.start(bin_dir, "--model", f"base={base}", "--lora", f"a={a}",
                              "--lora-scale", "a=1")
    try:
        assert complete(port) == with_a
        assert complete(port, lora=[]) == plain
    finally:
        proc.terminate()
        proc.wait(timeout=60)

    # An adapter made for another model stops the start with a message naming it.
    code, out = daemon.run_to_exit(bin_dir, "--model", f"base={base}", "--lora", f"w={wrong}")
    assert code != 0 and wrong in out and "expected [128, rank]" in out, out
    # Settings that name no model or an unknown adapter.
    code, out = daemon.run_to_exit(bin_dir, "--model", f"base={base}", "--lora", f"a={a}",
                                   "--lora-scale", "z=1")
    assert code != 0 and "no adapter 'z'" in out, out
    code, out = daemon.run_to_exit(bin_dir, "--model", f"base={base}", "--lora", f"x/a={a}")
    assert code != 0 and "no model is named 'x'" in out, out
print("ok")
