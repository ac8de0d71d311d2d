#!/usr/bin/env python3
"""ggufd-bench end to end: server mode against a real ggufd serving stories260K (CSV shape, every
requested token counted, no errors, API key, --plot), engine mode and roofline CSV. Asserts no
timing, only that figures exist and are consistent.

Usage: test_bench.py BIN_DIR CONFORMANCE_DIR
"""
import csv
import io
import os
import shutil
import subprocess
import sys
import tempfile

from daemon import conformance_dir, start

bin_dir = sys.argv[1]
conf = conformance_dir(sys.argv[2])
model = os.path.join(conf, "models", "stories260K.gguf")
bench = os.path.join(bin_dir, "ggufd-bench")


def start_daemon(*extra):
    return start(bin_dir, "--parallel", "2", "--model", f"stories={model}", *extra,
                 log_path=os.devnull)


def run(*args, env=None):
    return subprocess.run([bench, *args], capture_output=True, text=True, timeout=240, env=env)


def table(stdout):
    return list(csv.DictReader(io.StringIO(stdout)))


def check_server_mode():
    proc, port = start_daemon("--api-key", "sekret")
    try:
        url = f"http://127.0.0.1:{port}"
        r = run("--server", url, "--concurrency", "1,2", "--max-tokens", "8", "--requests-per-client", "2",
                "--model", "stories", "--api-key", "sekret", "--csv")
        assert r.returncode == 0, r.stderr
        rows = table(r.stdout)
        assert list(rows[0].keys()) == [
            "concurrency", "requests", "errors", "short_requests", "generated_tokens", "wall_s",
            "tokens_per_s", "ttft_p50_ms", "ttft_p95_ms", "itl_p50_ms", "itl_p95_ms"], rows[0].keys()
        assert [int(x["concurrency"]) for x in rows] == [1, 2], rows
        for row in rows:
            c = int(row["concurrency"])
            assert int(row["requests"]) == 2 * c, row
            assert int(row["errors"]) == 0, row
            assert int(row["short_requests"]) == 0, row
            assert int(row["generated_tokens"]) == 2 * c * 8, row  # ignore_eos: exactly max_tokens
            assert float(row["tokens_per_s"]) > 0, row
            assert 0 < float(row["ttft_p50_ms"]) <= float(row["ttft_p95_ms"]), row
            assert 0 <= float(row["itl_p50_ms"]) <= float(row["itl_p95_ms"]), row

        # Human-readable output has one line per level.
        r = run("--server", url, "--concurrency", "1", "--max-tokens", "4", "--api-key", "sekret")
        assert r.returncode == 0, r.stderr
        assert "tok/s" in r.stdout and len(r.stdout.strip().splitlines()) == 2, r.stdout

        # Without the key the warm-up request fails and the tool says why.
        r = run("--server", url, "--concurrency", "1", "--max-tokens", "4")
        assert r.returncode == 1 and "401" in r.stderr, (r.returncode, r.stderr)

        # --plot: a PNG with gnuplot, a clear error (before any request) without it.
        with tempfile.TemporaryDirectory() as tmp:
            png = os.path.join(tmp, "sweep.png")
            args = ("--server", url, "--concurrency", "1,2", "--max-tokens", "4", "--api-key", "sekret",
                    "--plot", png)
            no_gnuplot = dict(os.environ, PATH=tmp)
            r = run(*args, env=no_gnuplot)
            assert r.returncode == 1 and "gnuplot" in r.stderr, (r.returncode, r.stderr)
            if shutil.which("gnuplot"):
                r = run(*args)
                assert r.returncode == 0, r.stderr
                with open(png, "rb") as f:
                    assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    r = run("--server", "https://127.0.0.1:1")
    assert r.returncode == 1 and "http://" in r.stderr, r.stderr
    r = run("--server", "http://127.0.0.1:1", "--concurrency", "1,x")
    assert r.returncode == 1 and "'x'" in r.stderr, r.stderr


def check_engine_mode():
    r = run("--model", model, "-p", "16", "-n", "8", "-t", "1", "-r", "2", "--csv")
    assert r.returncode == 0, r.stderr
    rows = table(r.stdout)
    assert [x["test"] for x in rows] == ["pp16", "tg8"], rows
    for row in rows:
        assert int(row["threads"]) == 1
        assert 0 < float(row["min"]) <= float(row["tokens_per_s_median"]) <= float(row["max"]), row
        assert float(row["peak_rss_mib"]) > 0, row
        assert float(row["cpu_wait"]) == -1 or 0 <= float(row["cpu_wait"]) <= 1.01, row
    # llama-bench's lists: comma lists and repeated flags, every depth with every length, and its
    # table ("pp8 @ d8", mean ± sd) in the text output.
    r = run("--model", model, "-p", "8", "-n", "4", "-d", "0", "-d", "8", "-t", "1", "-r", "2", "--csv")
    assert r.returncode == 0, r.stderr
    rows = table(r.stdout)
    assert [(x["test"], x["depth"]) for x in rows] == [
        ("pp8", "0"), ("tg4", "0"), ("pp8 @ d8", "8"), ("tg4 @ d8", "8")], rows
    for row in rows:
        assert float(row["mean"]) > 0 and float(row["sd"]) >= 0, row
    r = run("--model", model, "-p", "8,0", "-n", "0", "-d", "4", "-t", "1", "-r", "1")
    assert r.returncode == 0, r.stderr
    cells = [[c.strip() for c in line.strip("|").split("|")]
             for line in r.stdout.splitlines() if line.startswith("|")]
    assert cells[0] == ["model", "size", "params", "threads", "test", "t/s"], r.stdout
    assert [row[3:5] for row in cells[2:]] == [["1", "pp8 @ d4"]], r.stdout  # -n 0: no tg line
    mean, sd = cells[2][5].split(" ± ")
    assert float(mean) > 0 and float(sd) == 0, r.stdout  # one repetition
    r = run("--model", model, "-d", "0,-8")
    assert r.returncode == 1 and "-d" in r.stderr, r.stderr
    r = run("--roofline", "-t", "1,2")
    assert r.returncode == 1 and "one -t" in r.stderr, r.stderr
    r = run("--model", os.path.join(conf, "no-such.gguf"))
    assert r.returncode == 1 and "no-such.gguf" in r.stderr, r.stderr
    # --no-repack keeps a repackable model (where this CPU repacks it) in the file's layout.
    q4k = os.path.join(conf, "models", "tiny-llama-q4_k.gguf")
    r = run("--model", q4k, "-p", "4", "-n", "2", "-t", "1", "-r", "1", "--no-repack")
    assert r.returncode == 0, r.stderr
    assert "(0.0 MiB repacked)" in r.stdout, r.stdout
    r = run("--model", q4k, "-p", "4", "-n", "2", "-t", "1", "-r", "1")
    assert r.returncode == 0 and "MiB repacked)" in r.stdout, r.stdout


def check_roofline():
    r = run("--roofline", "--buffer-mib", "64", "-t", "1", "-r", "1", "--csv")
    assert r.returncode == 0, r.stderr
    rows = table(r.stdout)
    assert [x["ceiling"] for x in rows] == ["read_bandwidth", "int8_madd", "fp32_fma"], rows
    for row in rows:
        assert float(row["best"]) >= float(row["median"]) > 0, row
    r = run("--roofline", "--model", model, "-p", "16", "-n", "8", "-t", "1", "-r", "1",
            "--buffer-mib", "64", "--csv")
    assert r.returncode == 0, r.stderr
    rows = table(r.stdout)
    assert [(x["test"], x["bound"]) for x in rows] == [("pp16", "int8"), ("pp16", "fp32"), ("tg8", "bw")]
    for row in rows:
        t, ceiling = float(row["tokens_per_s"]), float(row["ceiling_tokens_per_s"])
        assert t > 0 and ceiling > 0, row
        assert abs(float(row["fraction"]) - t / ceiling) < 1e-3 + 1e-3 * t / ceiling, row


check_server_mode()
check_engine_mode()
check_roofline()
print("ok")
