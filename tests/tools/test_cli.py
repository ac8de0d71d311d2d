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
import struct
import sys
import tempfile

from daemon import conformance_dir

bin_dir, case = sys.argv[1], sys.argv[3]
conf = conformance_dir(sys.argv[2])

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


def check_generate_sampled_is_english():
    """At temperature 0.8 stories260K still writes English: nearly every word is a dictionary word."""
    with open("/usr/share/dict/words", encoding="utf-8", errors="replace") as f:
        words = {w.strip().lower() for w in f}
    total = known = 0
    for seed in range(1, 6):
        out = subprocess.run([run, "generate", "--model", stories, "--prompt", "Once upon a time", "--n-predict",
                              "100", "--temp", "0.8", "--seed", str(seed)], check=True,
                             capture_output=True).stdout.decode()
        again = subprocess.run([run, "generate", "--model", stories, "--prompt", "Once upon a time", "--n-predict",
                                "100", "--temp", "0.8", "--seed", str(seed)], check=True,
                               capture_output=True).stdout.decode()
        assert out == again, f"seed {seed} is not reproducible"
        for w in "".join(c.lower() if c.isalpha() else " " for c in out).split():
            total += 1
            known += w in words
    assert total > 200, total
    assert known / total >= 0.85, f"only {known}/{total} words are English"


def check_tokenize():
    for c in cases():
        out = subprocess.run([run, "tokenize", "--model", stories, "--text", c["prompt"]], check=True,
                             capture_output=True).stdout.decode()
        ids = [int(x) for x in out.split()]
        assert ids == c["prompt_tokens"], f"{c['prompt']!r}: {ids} != {c['prompt_tokens']}"


def check_logits():
    compare_logits(os.path.join(conf, "models", "tiny-llama-f32.gguf"),
                   os.path.join(conf, "reference", "tiny-llama.prompt_tokens.txt"),
                   os.path.join(conf, "reference", "tiny-llama-f32.logits.f32"))


def check_moe():
    """A mixture of experts end to end: gpt-oss with MXFP4 experts against llama.cpp's logits, and
    a random qwen3moe from ggufd-mkmodel that gguf-inspect describes with its experts."""
    arch = os.path.join(conf, "arch")
    compare_logits(os.path.join(arch, "gpt-oss-mxfp4.gguf"), os.path.join(arch, "prompt_tokens.txt"),
                   os.path.join(arch, "gpt-oss-mxfp4.logits.f32"))
    with tempfile.TemporaryDirectory() as d:
        model = os.path.join(d, "moe.gguf")
        subprocess.run([os.path.join(bin_dir, "ggufd-mkmodel"), "--arch", "qwen3moe", "--out", model,
                        "--n-embd", "64", "--n-layer", "1", "--n-head", "2", "--n-head-kv", "1",
                        "--n-expert", "8", "--n-expert-used", "3", "--n-ff-expert", "32",
                        "--type", "Q8_0"], check=True, capture_output=True)
        out = subprocess.run([os.path.join(bin_dir, "gguf-inspect"), model, "--json"], check=True,
                             capture_output=True).stdout.decode()
        experts = json.loads(out)["ggufd"]["hyperparameters"]["experts"]
        assert experts["count"] == 8 and experts["used"] == 3, experts
        assert experts["feed_forward_length"] == 32 and experts["gating"] == "softmax", experts


def check_mkmodel_every_arch():
    """ggufd-mkmodel --arch NAME writes a small random model of every architecture ggufd runs
    (the list gguf-inspect gives when it refuses a file), and gguf-inspect says ggufd runs it."""
    with tempfile.TemporaryDirectory() as d:
        unknown = os.path.join(d, "unknown.gguf")
        with open(unknown, "wb") as f:  # GGUF v3 with one key: an architecture no one runs
            key, value = b"general.architecture", b"t5"
            f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key
                    + struct.pack("<IQ", 8, len(value)) + value)
        p = subprocess.run([os.path.join(bin_dir, "gguf-inspect"), unknown], capture_output=True)
    refusal = (p.stdout + p.stderr).decode()
    supported = refusal.split("supported: ", 1)[1].split(")", 1)[0].strip().split(", ")
    assert len(supported) > 20 and "llama" in supported and "gemma3" in supported, refusal
    with tempfile.TemporaryDirectory() as d:
        for name in supported:
            model = os.path.join(d, name + ".gguf")
            subprocess.run([os.path.join(bin_dir, "ggufd-mkmodel"), "--arch", name, "--out", model,
                            "--n-embd", "64", "--n-layer", "2", "--n-head", "4", "--n-head-kv", "2",
                            "--n-ff", "96", "--type", "Q8_0"], check=True, capture_output=True)
            out = subprocess.run([os.path.join(bin_dir, "gguf-inspect"), model, "--json"],
                                 check=True, capture_output=True).stdout.decode()
            described = json.loads(out)["ggufd"]
            assert described["supported"], (name, described)
            assert described["hyperparameters"]["architecture"] == name, (name, described)


def check_mamba():
    """A recurrent model end to end: mamba against llama.cpp's logits, and a random mamba of another
    shape from ggufd-mkmodel that gguf-inspect describes with its ssm sizes and state."""
    arch = os.path.join(conf, "arch")
    compare_logits(os.path.join(arch, "mamba.gguf"), os.path.join(arch, "prompt_tokens.txt"),
                   os.path.join(arch, "mamba.logits.f32"))
    with tempfile.TemporaryDirectory() as d:
        model = os.path.join(d, "mamba.gguf")
        subprocess.run([os.path.join(bin_dir, "ggufd-mkmodel"), "--arch", "mamba", "--out", model,
                        "--n-embd", "64", "--n-layer", "2", "--ssm-state", "8", "--ssm-inner", "96",
                        "--type", "Q8_0"], check=True, capture_output=True)
        out = subprocess.run([os.path.join(bin_dir, "gguf-inspect"), model, "--json"], check=True,
                             capture_output=True).stdout.decode()
        hp = json.loads(out)["ggufd"]["hyperparameters"]
        assert hp["ssm"] == {"conv_kernel": 4, "inner_size": 96, "state_size": 8,
                             "time_step_rank": 4, "dt_b_c_rms": False}, hp
        assert hp["recurrent_state"]["per_layer"] == {"conv": [3, 96], "ssm": [8, 96]}, hp
        out = subprocess.run([run, "generate", "--model", model, "--prompt", "hello", "--n-predict", "8",
                              "--temp", "0"],
                             check=True, capture_output=True).stdout.decode()
        assert out.startswith("hello"), out


def compare_logits(model, tokens, reference):
    """ggufd-run logits of the prompt within the conformance tolerance of llama.cpp's."""
    ref = array.array("f")
    with open(reference, "rb") as f:
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


def read_f32(path):
    a = array.array("f")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    return a


def rows_within(ours, ref, width, bound, what):
    """Every row's max |ours - ref| within bound x the reference row's standard deviation."""
    assert len(ours) == len(ref), f"{what}: {len(ours)} values, expected {len(ref)}"
    for r in range(len(ref) // width):
        a = ours[r * width:(r + 1) * width]
        b = ref[r * width:(r + 1) * width]
        mean = sum(b) / width
        s = math.sqrt(sum((x - mean) ** 2 for x in b) / width)
        d = max(abs(x - y) for x, y in zip(a, b))
        assert d <= bound * s, f"{what} row {r}: d={d} s={s}"


def check_vision():
    """Prompts holding two pictures (ggufd-run logits --mmproj --image): every position's logits
    and each picture's embeddings against llama.cpp's, for the four projector families."""
    vdir = os.path.join(conf, "vision")
    for fam in ("gemma3", "smolvlm", "qwen25vl", "qwen3vl"):
        with open(os.path.join(vdir, fam + ".json")) as f:
            ref = json.load(f)
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "logits.f32")
            cmd = [run, "logits", "--model", os.path.join(vdir, fam + "-text.gguf"),
                   "--mmproj", os.path.join(vdir, fam + "-mmproj.gguf"),
                   "--prompt-file", os.path.join(vdir, fam + ".prompt.txt"), "--out", out, "--embd-out", d,
                   "--threads", "2"]
            for stem in ref["images"]:
                cmd += ["--image", os.path.join(vdir, stem + ".png")]
            subprocess.run(cmd, check=True, capture_output=True)
            rows_within(read_f32(out), read_f32(os.path.join(vdir, fam + ".logits.f32")), ref["n_vocab"], 0.10,
                        fam + " logits")
            for stem in ref["images"]:
                rows_within(read_f32(os.path.join(d, stem + ".embd.f32")),
                            read_f32(os.path.join(vdir, f"{fam}.{stem}.embd.f32")), ref["n_embd_inp"], 0.02,
                            f"{fam} {stem} embeddings")


def check_template():
    """ggufd-run template renders real cases exactly, and fails (exit 1) where Jinja2 raised."""
    tdir = os.path.join(conf, "chat_templates")
    with open(os.path.join(tdir, "cases.jsonl")) as f:
        all_cases = [json.loads(line) for line in f]
    rendered = failed = 0
    with tempfile.TemporaryDirectory() as d:
        ctx_path = os.path.join(d, "context.json")
        for c in all_cases[::7]:  # a spread of templates and cases; the unit suite runs them all
            with open(ctx_path, "w") as f:
                json.dump(c["context"], f, ensure_ascii=False)
            p = subprocess.run([run, "template", "--template-file", os.path.join(tdir, "templates", c["template"]),
                                "--context-json", ctx_path, "--now", "2024-07-26 12:00:00"],
                               capture_output=True)
            if "expected" in c:
                assert p.returncode == 0, f"{c['template']} {c['case']}: {p.stderr.decode()}"
                assert p.stdout.decode() == c["expected"], f"{c['template']} {c['case']}"
                rendered += 1
            else:
                assert p.returncode == 1 and p.stderr, f"{c['template']} {c['case']}: expected an error"
                failed += 1
    assert rendered > 10, rendered

    # --cases-jsonl: every case of each of a few templates from one process, a JSON line each
    # holding the text or the error, in order; a line that is not an object stops the run.
    by_template = {}
    for c in all_cases:
        by_template.setdefault(c["template"], []).append(c)
    errors = 0
    for name in sorted(by_template)[::6] + ["google-gemma-2-2b-it.jinja"]:  # gemma raises
        group = by_template[name]
        stdin = "".join(json.dumps(c["context"], ensure_ascii=False) + "\n" for c in group)
        p = subprocess.run([run, "template", "--template-file", os.path.join(tdir, "templates", name),
                            "--cases-jsonl", "-", "--now", "2024-07-26 12:00:00"],
                           input=stdin.encode(), capture_output=True)
        assert p.returncode == 0, f"{name}: {p.stderr.decode()}"
        lines = [json.loads(line) for line in p.stdout.decode().split("\n") if line]
        assert len(lines) == len(group), f"{name}: {len(lines)} lines for {len(group)} cases"
        for c, got in zip(group, lines):
            if "expected" in c:
                assert got == {"text": c["expected"]}, f"{name} {c['case']}: {got}"
            else:
                assert list(got) == ["error"] and got["error"], f"{name} {c['case']}: {got}"
                errors += 1
    assert errors > 0, "no case raised"
    p = subprocess.run([run, "template", "--template-file", os.path.join(tdir, "templates", name),
                        "--cases-jsonl", "-"], input=b'{"messages": []}\n[1]\n', capture_output=True)
    assert p.returncode == 1 and b"line 2 is not a JSON object" in p.stderr, p.stderr
    assert p.stdout.count(b"\n") == 1, p.stdout


{"generate_greedy": check_generate_greedy, "generate_sampled_is_english": check_generate_sampled_is_english, "template": check_template, "tokenize": check_tokenize, "logits": check_logits, "moe": check_moe,
 "mkmodel_every_arch": check_mkmodel_every_arch, "mamba": check_mamba, "vision": check_vision}[case]()
print("ok")
