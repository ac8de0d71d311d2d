"""Starting the real ggufd on loopback and talking to it, shared by the end-to-end tests."""
import http.client
import json
import os
import socket
import subprocess
import sys
import time


def conformance_dir(default):
    """The conformance folder, or exit 77 (skipped) locally / fail under CI when it is missing."""
    conf = os.environ.get("GGUFD_CONFORMANCE_DIR") or default
    if not os.path.isdir(conf):
        if os.environ.get("CI", "") not in ("", "0", "false"):
            sys.exit(f"conformance data missing at {conf} (CI)")
        print("conformance data not found: skipped")
        sys.exit(77)
    return conf


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(bin_dir, *args, log_path=None, prefix=()):
    """Starts ggufd with `args` on a free port; returns (process, port) once it listens. Output goes
    to `log_path` (a file, so a long run never blocks on a full pipe) or to a pipe."""
    port = free_port()
    out = open(log_path, "wb") if log_path else subprocess.PIPE
    proc = subprocess.Popen([*prefix, os.path.join(bin_dir, "ggufd"), "--port", str(port), *args],
                            stdout=out, stderr=subprocess.STDOUT)
    for _ in range(600):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, port
        except OSError:
            if proc.poll() is not None:
                text = open(log_path).read() if log_path else proc.stdout.read().decode()
                sys.exit("ggufd exited at start:\n" + text)
            time.sleep(0.05)
    proc.kill()
    sys.exit("ggufd did not start listening")


def run_to_exit(bin_dir, *args, prefix=(), timeout=120):
    """Runs ggufd expecting it to stop by itself (a start-up failure); returns (exit code, output)."""
    port = free_port()
    p = subprocess.run([*prefix, os.path.join(bin_dir, "ggufd"), "--port", str(port), *args],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace")


def request(port, method, path, body=None, headers=None, raw=None, timeout=60):
    """One request on its own connection: (status, body text, response)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    c.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
    r = c.getresponse()
    payload = r.read().decode()
    c.close()
    return r.status, payload, r


def sse_events(payload):
    """The data of each server-sent event; the last must be [DONE]."""
    events = [line[6:] for line in payload.split("\n") if line.startswith("data: ")]
    assert events and events[-1] == "[DONE]", payload[-200:]
    return [json.loads(e) for e in events[:-1]]


def metric(port, name, headers=None):
    """Sum of every sample of a Prometheus metric (all label sets)."""
    status, text, _ = request(port, "GET", "/metrics", headers=headers)
    assert status == 200, text
    total, found = 0.0, False
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
            found = True
    assert found, f"no {name} in /metrics"
    return total


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")
