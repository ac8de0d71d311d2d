#!/usr/bin/env python3
"""The real Prometheus with the repo's docker/prometheus/prometheus.yml scraping a real ggufd.

The scrape configuration is rewritten only where a loopback run must differ (target addresses,
the rule file's path, a 1 s scrape interval so the test is quick); every rewrite must apply.
Checks through Prometheus's HTTP API: the ggufd target is up, ggufd series have samples, the
alert rules loaded, and every Grafana dashboard query is valid PromQL.

Usage: test_prometheus.py BIN_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_support import (REPO, Ggufd, RepoConfig, exposition_series, free_port, promql_names, request,  # noqa: E402
                            require_binary, stop_process, wait_listening)

prometheus = require_binary("prometheus", "prometheus")
bin_dir, work_root = sys.argv[1], os.path.abspath(sys.argv[2])
os.makedirs(work_root, exist_ok=True)
tmp = tempfile.mkdtemp(prefix="prometheus-", dir=work_root)


def loopback_config(ggufd_ports, prometheus_port):
    conf = RepoConfig("docker", "prometheus", "prometheus.yml")
    # The compose network's DNS lists the replicas; here they are listed by hand.
    targets = ", ".join(f'"127.0.0.1:{p}"' for p in ggufd_ports)
    conf.rewrite("""    dns_sd_configs:
      - names: ["ggufd"]
        type: A
        port: 8080
        refresh_interval: 30s
""", f"""    static_configs:
      - targets: [{targets}]
""")
    conf.rewrite('["localhost:9090"]', f'["127.0.0.1:{prometheus_port}"]')
    conf.rewrite("scrape_interval: 5s", "scrape_interval: 1s")
    conf.rewrite("scrape_timeout: 4s", "scrape_timeout: 1s")
    conf.rewrite("- /etc/prometheus/alerts.yml",
                 "- " + os.path.join(REPO, "docker", "prometheus", "alerts.yml"))
    return conf.text


def api(port, path, **params):
    url = f"http://127.0.0.1:{port}/api/v1/{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:  # 400/422 for a bad query: the body says why
        body = e.read().decode(errors="replace")
        try:
            return json.loads(body)
        except ValueError:  # e.g. 503 before Prometheus is ready
            return {"status": "error", "error": f"HTTP {e.code}: {body[:200]}"}


def wait_for(what, check, seconds=60):
    """Polls check() until it returns something true; fails naming what and the last answer."""
    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last and last[0]:
                return last
        except OSError as e:
            last = (False, repr(e))
        if prom.poll() is not None:
            sys.exit(f"Prometheus exited (code {prom.returncode}) while waiting for {what}:\n" + prom_log())
        time.sleep(0.5)
    sys.exit(f"timed out after {seconds} s waiting for {what}; last answer: {last}")


def prom_log():
    with open(os.path.join(tmp, "prometheus.log"), errors="replace") as f:
        return f.read()[-4000:]


# Two replicas of the built-in demo model, each its own instance.
replicas = [Ggufd(bin_dir, os.path.join(tmp, f"ggufd{i}.log")) for i in range(2)]
ggufd = replicas[0]
prom_port = free_port()
conf_path = os.path.join(tmp, "prometheus.yml")
with open(conf_path, "w") as f:
    f.write(loopback_config([r.port for r in replicas], prom_port))
promtool = shutil.which("promtool")
if promtool:
    subprocess.run([promtool, "check", "config", conf_path], check=True, stdout=subprocess.DEVNULL)

prom = subprocess.Popen([prometheus, f"--config.file={conf_path}", f"--storage.tsdb.path={tmp}/data",
                         f"--web.listen-address=127.0.0.1:{prom_port}"],
                        stdout=open(os.path.join(tmp, "prometheus.log"), "wb"), stderr=subprocess.STDOUT)
ok = False
try:
    # Traffic first, so per-model counters have moved by the first scrape.
    status, payload, _ = request(ggufd.port, "POST", "/v1/chat/completions",
                                 {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8})
    assert status == 200, payload
    wait_listening(prom_port, prom, "Prometheus")

    def ready():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{prom_port}/-/ready", timeout=5) as r:
                return (r.status == 200, r.status)
        except urllib.error.HTTPError as e:
            return (False, e.code)

    wait_for("Prometheus to be ready", ready)

    def ggufd_target():
        answer = api(prom_port, "targets", state="active")
        if answer.get("status") != "success":
            return (False, answer)
        targets = answer["data"]["activeTargets"]
        mine = [t for t in targets if t["labels"].get("job") == "ggufd"]
        return (len(mine) == len(replicas) and all(t["health"] == "up" for t in mine), mine)

    wait_for("every ggufd replica's target to be up", ggufd_target)

    def has_samples(query):
        def check():
            answer = api(prom_port, "query", query=query)
            return (answer.get("status") == "success" and len(answer["data"]["result"]) > 0, answer)
        return check

    build = wait_for("ggufd_build_info to have a sample", has_samples("count(ggufd_build_info) == 2"))[1]
    instances = api(prom_port, "query", query="ggufd_build_info")["data"]["result"]
    assert sorted(x["metric"]["instance"] for x in instances) == sorted(
        f"127.0.0.1:{r.port}" for r in replicas), instances
    answer = wait_for("the chat request to be counted",
                      has_samples('ggufd_requests_total{endpoint="/v1/chat/completions",status="200"} >= 1'))[1]
    assert answer["data"]["result"][0]["metric"]["model"], answer
    wait_for("generated tokens", has_samples("ggufd_generated_tokens_total > 0"))
    # What a Kubernetes inference gateway reads, in vLLM's names: one series per replica and
    # model, the KV-cache usage a fraction.
    for name in ("vllm:num_requests_waiting", "vllm:num_requests_running",
                 "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc",
                 "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total"):
        wait_for(f"{name} from every replica", has_samples(f'count({name}{{model_name!=""}}) == 2'))
    wait_for("KV-cache usage within 0..1",
             has_samples("count(vllm:kv_cache_usage_perc >= 0 <= 1) == 2"))

    # The alert rules loaded (a broken rule file stops Prometheus at start-up, seen above) and
    # watch metrics ggufd exports.
    groups = api(prom_port, "rules")["data"]["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert rules, f"no alert rules loaded: {groups}"
    exported = exposition_series(request(ggufd.port, "GET", "/metrics")[1])
    for rule in rules:
        for name in promql_names(rule["query"])[0]:
            assert name == "up" or name in exported, f"alert {rule['name']} watches {name}, which ggufd does not export"

    # Every dashboard query parses and evaluates (with Grafana's variables filled in).
    with open(os.path.join(REPO, "docker", "grafana", "dashboards", "ggufd.json")) as f:
        dashboard = json.load(f)
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert exprs, "the dashboard has no queries"
    for expr in exprs:
        concrete = expr.replace("$__rate_interval", "1m").replace("$model", ".*").replace("$instance", ".*")
        answer = api(prom_port, "query", query=concrete)
        assert answer.get("status") == "success", f"Prometheus rejects the dashboard query {expr!r}: {answer}"
    ok = True
    print(f"ok: target up, series scraped, {len(rules)} alert rules, {len(exprs)} dashboard queries valid")
finally:
    stop_process(prom)
    codes = [r.stop() for r in replicas]
    code = max(codes, key=abs)
    if not ok:
        print("--- Prometheus log (tail):\n" + prom_log())
        print("--- ggufd log (tail):\n" + ggufd.log_text()[-3000:])
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    assert code == 0, f"ggufd exited {code}"
