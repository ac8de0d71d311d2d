"""Shared by the deployment tests: free loopback ports, a real ggufd, a required binary (skip with
77 locally when it is absent, fail under CI, which installs it), and small HTTP helpers."""
import atexit
import http.client
import json
import re
import os
import shutil
import socket
import subprocess
import sys
import time

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "tools"))
from daemon import free_port  # noqa: E402,F401  (one place picks free loopback ports)


class RepoConfig:
    """A configuration file from the repo, rewritten for a loopback run. Each rewrite must match
    exactly once, so a changed file fails the test instead of being tested half-way."""

    def __init__(self, *path):
        self.path = os.path.join(*path)
        with open(os.path.join(REPO, self.path)) as f:
            self.text = f.read()

    def rewrite(self, old, new, count=1):
        assert self.text.count(old) == count, (
            f"{self.path} no longer has exactly {count} {old!r}: update this test")
        self.text = self.text.replace(old, new)


def under_ci():
    return os.environ.get("CI", "") not in ("", "0", "false")


def require_binary(name, package):
    """The path of an installed program; exits 77 (skipped) without it, or fails under CI."""
    path = shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.access(p, os.X_OK)), None)
    if path:
        return path
    if under_ci():
        sys.exit(f"{name} is not installed (Debian package {package}); CI installs it in .ci/run")
    print(f"{name} not installed (apt-get install {package}): skipped")
    sys.exit(77)


def wait_listening(port, proc, name, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            if proc.poll() is not None:
                out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
                sys.exit(f"{name} exited at start (code {proc.returncode}):\n{out}")
            time.sleep(0.05)
    sys.exit(f"{name} did not listen on port {port} within {seconds} s")


def request(port, method, path, body=None, headers=None, raw=None, timeout=60):
    """(status, body text, headers as a dict with lower-case names)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    c.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
    r = c.getresponse()
    payload = r.read().decode(errors="replace")
    c.close()
    return r.status, payload, {k.lower(): v for k, v in r.getheaders()}


class Ggufd:
    """A real ggufd on a free loopback port; its log (stderr and stdout) goes to log_path. It is
    stopped at exit at the latest."""

    def __init__(self, bin_dir, log_path, *args):
        self.port = free_port()
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen([os.path.join(bin_dir, "ggufd"), "--port", str(self.port), *args],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        atexit.register(self.stop)  # never left running, however the test ends
        deadline = time.monotonic() + 60
        while True:
            try:
                if request(self.port, "GET", "/health", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None:
                sys.exit(f"ggufd exited at start (code {self.proc.returncode}):\n{self.log_text()}")
            if time.monotonic() > deadline:
                sys.exit("ggufd was not healthy within 60 s:\n" + self.log_text())
            time.sleep(0.05)

    def log_text(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def stop_process(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def exposition_series(text):
    """{sample name: set of label names} from a Prometheus text exposition (histograms appear
    as their _bucket/_sum/_count samples, as Prometheus stores them)."""
    series = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s", line)
        assert m, f"not an exposition line: {line!r}"
        labels = set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(3) or ""))
        series.setdefault(m.group(1), set()).update(labels)
    return series


def exposition_totals(text):
    """{sample name: sum of its values over every label set} from a Prometheus text exposition,
    e.g. totals["ggufd_batch_size_tokens_count"] is the number of observations of all models."""
    totals = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)", line)
        assert m, f"not an exposition line: {line!r}"
        totals[m.group(1)] = totals.get(m.group(1), 0.0) + float(m.group(3))
    return totals


PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
                   "and", "or", "unless", "inf", "nan"}


def promql_names(expr):
    """(metric names, label names) an expression refers to. Enough PromQL for dashboards and
    alert rules: selectors, functions, aggregations with by/without, binary operators."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals hold values, not names
    labels = set()
    for body in re.findall(r"\{([^}]*)\}", text):
        labels.update(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", body))
    for body in re.findall(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", text):
        labels.update(x.strip() for x in body.split(",") if x.strip())
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    metrics = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        name = m.group(0)
        if m.start() > 0 and (text[m.start() - 1].isdigit() or text[m.start() - 1] == "."):
            continue  # part of a number such as 1e3
        following = text[m.end():].lstrip()
        if following.startswith("(") or name.lower() in PROMQL_KEYWORDS:
            continue  # a function, an aggregation or a keyword
        metrics.add(name)
    return metrics, labels


# The replica line of each upstream group in docker/nginx/nginx.conf (one per group).
NGINX_REPLICA_LINE = re.compile(r"server ggufd:8080( [^;]*)?;")
NGINX_UPSTREAM_GROUPS = 2


def loopback_nginx_config(tmp, ggufd_ports, nginx_port):
    """docker/nginx/nginx.conf for a loopback run: one server line per ggufd port in each
    upstream group, listening on nginx_port, logs and temporary files under tmp."""
    conf = RepoConfig("docker", "nginx", "nginx.conf")
    lines = NGINX_REPLICA_LINE.findall(conf.text)
    assert len(lines) == NGINX_UPSTREAM_GROUPS, f"{conf.path}: replica lines {lines}: update this test"
    conf.text = NGINX_REPLICA_LINE.sub(
        lambda m: "\n        ".join(f"server 127.0.0.1:{p}{m.group(1) or ''};" for p in ggufd_ports),
        conf.text)
    conf.rewrite("listen 80;", f"listen 127.0.0.1:{nginx_port};")
    conf.rewrite("listen [::]:80;", "")
    conf.rewrite("access_log /dev/stdout ggufd;", f"access_log {tmp}/access.log ggufd;")
    conf.rewrite("error_log /dev/stderr warn;", f"error_log {tmp}/error.log warn;")
    kinds = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    temp_paths = "".join(f"\n    {kind}_temp_path {tmp}/{kind};" for kind in kinds)
    for kind in kinds:
        os.makedirs(os.path.join(tmp, kind), exist_ok=True)
        os.chmod(os.path.join(tmp, kind), 0o777)
    conf.rewrite("http {", "http {" + temp_paths)
    return conf


class Nginx:
    """The real nginx running `conf_text` (checked with nginx -t first) in the foreground."""

    def __init__(self, nginx, tmp, conf_text, port):
        self.nginx, self.tmp, self.port = nginx, tmp, port
        self.conf_path = os.path.join(tmp, "nginx.conf")
        with open(self.conf_path, "w") as f:
            f.write(conf_text)
        subprocess.run([nginx, "-t", "-q", "-e", f"{tmp}/error.log", "-c", self.conf_path,
                        "-g", f"pid {tmp}/nginx.pid;"], check=True)
        self.proc = None
        atexit.register(self.stop)

    def start(self):
        self.proc = subprocess.Popen([self.nginx, "-e", f"{self.tmp}/error.log", "-c", self.conf_path,
                                      "-g", f"daemon off; pid {self.tmp}/nginx.pid;"],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        wait_listening(self.port, self.proc, "nginx")
        return self

    def stop(self):
        if self.proc:
            stop_process(self.proc)

    def access_log(self):
        """The access log's records (stop nginx first so that every line is written)."""
        path = os.path.join(self.tmp, "access.log")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]


def make_model(bin_dir, path, *args):
    """A random-weight model from ggufd-mkmodel (arguments such as --n-layer 8)."""
    subprocess.run([os.path.join(bin_dir, "ggufd-mkmodel"), "--out", path, *args], check=True,
                   stdout=subprocess.DEVNULL)
    return path
