#!/usr/bin/env python3
"""End-to-end checks of the command-line tools against the conformance data.

Usage: test_cli.py BIN_DIR CONFORMANCE_DIR CASE
Each CASE is one ctest test; a missing conformance folder fails under CI and skips otherwise.
"""
import array
import json
import math
import os
import subprocess
import sys
import tempfile

bin_dir, case = sys.argv[1], sys.argv[3]
conf = os.environ.get("GGUFD_CONFORMANCE_DIR") or sys.argv[2]
if not os.path.isdir(conf):
    if os.environ.get("CI", "") not in ("", "0", "false"):
        sys.exit(f"conformance data missing at {conf} (CI)")
    print("conformance data not found: skipped")
    sys.exit(77)

run = os.path.join(bin_dir, "ggufd-run")
stories = os.path.join(conf, "models", "stories260K.gguf")


def cases():
    with open(os.path.join(conf, "reference", "stories260K.greedy.jsonl")) as f:
        return [json.loads(line) for line in f]


def check_generate_greedy():
    for c in cases():
        out = subprocess.run([run, "generate", "--model", stories, "--prompt", c["prompt"], "--n-predict", "128",
                              "--temp", "0"], check=True, capture_output=True).stdout.decode()
        # The reference text was printed without a final newline.
        got = out.rstrip("\n")
        want = c["completion_text"].rstrip("\n")
        assert got == want, f"{c['prompt']!r}:\n got {got!r}\nwant {want!r}"


def check_tokenize():
    for c in cases():
        out = subprocess.run([run, "tokenize", "--model", stories, "--text", c["prompt"]], check=True,
                             capture_output=True).stdout.decode()
        ids = [int(x) for x in out.split()]
        assert ids == c["prompt_tokens"], f"{c['prompt']!r}: {ids} != {c['prompt_tokens']}"


def check_logits():
    model = os.path.join(conf, "models", "tiny-llama-f32.gguf")
    tokens = os.path.join(conf, "reference", "tiny-llama.prompt_tokens.txt")
    ref = array.array("f")
    with open(os.path.join(conf, "reference", "tiny-llama-f32.logits.f32"), "rb") as f:
        ref.frombytes(f.read())
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "logits.f32")
        subprocess.run([run, "logits", "--model", model, "--tokens-file", tokens, "--out", out], check=True,
                       capture_output=True)
        ours = array.array("f")
        with open(out, "rb") as f:
            ours.frombytes(f.read())
    assert len(ours) == len(ref), f"{len(ours)} values, expected {len(ref)}"
    n_vocab = 512
    for p in range(len(ref) // n_vocab):
        a = ours[p * n_vocab:(p + 1) * n_vocab]
        b = ref[p * n_vocab:(p + 1) * n_vocab]
        mean = sum(b) / n_vocab
        s = math.sqrt(sum((x - mean) ** 2 for x in b) / n_vocab)
        d = max(abs(x - y) for x, y in zip(a, b))
        assert d <= 0.10 * s, f"position {p}: d={d} s={s}"


{"generate_greedy": check_generate_greedy, "tokenize": check_tokenize, "logits": check_logits}[case]()
print("ok")
