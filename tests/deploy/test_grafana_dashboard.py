#!/usr/bin/env python3
"""docker/grafana/dashboards/ggufd.json against what ggufd really exports: every panel query
names only metrics (and labels) found in a running ggufd's /metrics, the dashboard covers
throughput, latency percentiles, queue, slots, KV cache and errors, it is what make_dashboard.py
generates, and it uses the provisioned datasource and the Prometheus job of the compose files.
Every histogram a panel charts must also be filled by the daemon's real token path: streamed
completions make the inter-token latency and batch size counts grow by what they generated.

Usage: test_grafana_dashboard.py BIN_DIR WORK_DIR
"""
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_support import (REPO, Ggufd, exposition_series, exposition_totals,  # noqa: E402
                            promql_names, request)

bin_dir, work_root = sys.argv[1], os.path.abspath(sys.argv[2])
os.makedirs(work_root, exist_ok=True)
tmp = tempfile.mkdtemp(prefix="grafana-", dir=work_root)
grafana = os.path.join(REPO, "docker", "grafana")
with open(os.path.join(grafana, "dashboards", "ggufd.json")) as f:
    dashboard = json.load(f)

# The names come from a real exposition after streamed completions and one chat request of each
# kind; the expositions before and after tell what the traffic observed.
STREAMS, TOKENS = 3, 20
ggufd = Ggufd(bin_dir, os.path.join(tmp, "ggufd.log"))
try:
    status, before, _ = request(ggufd.port, "GET", "/metrics")
    assert status == 200, before
    for _ in range(STREAMS):
        status, payload, _ = request(ggufd.port, "POST", "/v1/completions",
                                     {"prompt": "Once upon a time", "max_tokens": TOKENS,
                                      "ignore_eos": True, "stream": True})
        assert status == 200 and payload.rstrip().endswith("data: [DONE]"), payload
    for stream in (False, True):
        status, payload, _ = request(ggufd.port, "POST", "/v1/chat/completions",
                                     {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8,
                                      "stream": stream})
        assert status == 200, payload
    status, exposition, _ = request(ggufd.port, "GET", "/metrics")
    assert status == 200, exposition
finally:
    assert ggufd.stop() == 0, "ggufd did not exit cleanly:\n" + ggufd.log_text()
series = exposition_series(exposition)
assert any(n.startswith("ggufd_") for n in series), exposition[:500]

problems = []
# Each stream's tokens after its first are one inter-token gap each; every engine step is one
# batch-size observation, and a stream of TOKENS tokens takes at least TOKENS - 1 decode steps.
grew = {name: exposition_totals(exposition).get(name, 0.0) - exposition_totals(before).get(name, 0.0)
        for name in ("ggufd_inter_token_latency_seconds_count", "ggufd_batch_size_tokens_count")}
if grew["ggufd_inter_token_latency_seconds_count"] < STREAMS * (TOKENS - 1):
    problems.append(f"{STREAMS} streams of {TOKENS} tokens added only "
                    f"{grew['ggufd_inter_token_latency_seconds_count']:.0f} inter-token latencies")
if grew["ggufd_batch_size_tokens_count"] < TOKENS - 1:
    problems.append(f"{STREAMS} streams of {TOKENS} tokens added only "
                    f"{grew['ggufd_batch_size_tokens_count']:.0f} batch sizes")
# Added by Prometheus to every scraped series, and the target's own health series.
SCRAPE_LABELS = {"job", "instance"}
with open(os.path.join(REPO, "docker", "prometheus", "prometheus.yml")) as f:
    jobs = set(re.findall(r"job_name:\s*(\S+)", f.read()))
assert "ggufd" in jobs, jobs

queries = []  # (panel title, expression)
for panel in dashboard["panels"]:
    if panel["type"] == "row":
        continue
    targets = panel.get("targets", [])
    if not targets:
        problems.append(f"panel {panel['title']!r} has no query")
    for t in targets:
        queries.append((panel["title"], t["expr"]))
        if t.get("datasource", panel.get("datasource", {})).get("uid") != "prometheus":
            problems.append(f"panel {panel['title']!r} does not use the provisioned datasource (uid prometheus)")

for title, expr in queries:
    metrics, labels = promql_names(expr)
    if not metrics:
        problems.append(f"{title!r}: no metric in {expr!r}")
    for m in metrics:
        if m == "up":
            for job in re.findall(r'job="([^"]*)"', expr):
                if job not in jobs:
                    problems.append(f"{title!r}: job {job!r} is not scraped by prometheus.yml")
        elif m not in series:
            problems.append(f"{title!r}: ggufd exports no {m!r} ({expr!r})")
    known = set(SCRAPE_LABELS)
    for m in metrics:
        known |= series.get(m, set())
    for label in labels - known:
        problems.append(f"{title!r}: label {label!r} is on none of {sorted(metrics)} ({expr!r})")

# A histogram charted but never observed draws an empty panel: after the traffic above, each
# one the dashboard queries has observations.
totals = exposition_totals(exposition)
charted = {}  # histogram -> the first panel charting it
for title, expr in queries:
    for m in promql_names(expr)[0]:
        base = re.sub(r"_(bucket|sum|count)$", "", m)
        if base != m:
            charted.setdefault(base, title)
for base, title in charted.items():
    if totals.get(base + "_count", 0.0) <= 0:
        problems.append(f"{title!r}: {base} has no observations after the traffic")

# The model and replica pickers list values of a real label of a real metric.
for var in dashboard["templating"]["list"]:
    m = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", var["definition"])
    if not m or m.group(2) not in series.get(m.group(1), set()) | SCRAPE_LABELS:
        problems.append(f"variable {var['name']!r}: {var['definition']!r} names no exported label")

# What the issue asks the dashboard to show, each by the query that shows it.
exprs = [e for _, e in queries]


def shown(pattern):
    return any(re.search(pattern, e) for e in exprs)


coverage = {
    "generated token throughput": r"rate\(ggufd_generated_tokens_total\b",
    "prompt token throughput": r"rate\(ggufd_prompt_tokens_total\b",
    "time-to-first-token percentiles": r"histogram_quantile\(0\.9\d?,.*ggufd_time_to_first_token_seconds_bucket",
    "inter-token latency percentiles": r"histogram_quantile\(0\.\d+,.*ggufd_inter_token_latency_seconds_bucket",
    "request duration percentiles": r"histogram_quantile\(0\.\d+,.*ggufd_request_duration_seconds_bucket",
    "queue depth": r"ggufd_queue_depth\b",
    "rejected requests": r"ggufd_requests_rejected_total\b",
    "busy slots": r"ggufd_slots_busy\b",
    "KV cache usage": r"ggufd_kv_cache_cells_used\b.*ggufd_kv_cache_cells_capacity\b",
    "errors (5xx)": r'ggufd_requests_total\{status=~"5\.\."\}',
    "replicas up": r'sum\(up\{job="ggufd"\}\)',
    "generation split by replica": r"sum by \(instance\) \(rate\(ggufd_generated_tokens_total\b",
    "busy slots split by replica": r"sum by \(instance\) \(ggufd_slots_busy\b",
}
for what, pattern in coverage.items():
    if not shown(pattern):
        problems.append(f"the dashboard shows no {what} (no query matching {pattern!r})")

# Panels do not overlap the 24-column grid and have unique ids.
ids = [p["id"] for p in dashboard["panels"]]
if len(ids) != len(set(ids)):
    problems.append(f"panel ids repeat: {ids}")
for p in dashboard["panels"]:
    g = p["gridPos"]
    if g["x"] < 0 or g["x"] + g["w"] > 24:
        problems.append(f"panel {p['title']!r} leaves the grid: {g}")

# The JSON is the generator's output (edits belong in make_dashboard.py).
spec = importlib.util.spec_from_file_location("make_dashboard", os.path.join(grafana, "make_dashboard.py"))
generator = importlib.util.module_from_spec(spec)
spec.loader.exec_module(generator)
if generator.build() != dashboard:
    problems.append("dashboards/ggufd.json differs from make_dashboard.py's output: run "
                    "python3 docker/grafana/make_dashboard.py")

# The provisioned datasource carries the uid the panels use.
with open(os.path.join(grafana, "provisioning", "datasources", "prometheus.yml")) as f:
    if not re.search(r"^\s*uid:\s*prometheus\s*$", f.read(), re.M):
        problems.append("provisioning/datasources/prometheus.yml does not define uid prometheus")

if problems:
    sys.exit("dashboard problems:\n  " + "\n  ".join(problems))
shutil.rmtree(tmp, ignore_errors=True)
print(f"ok: {len(queries)} queries over {len(dashboard['panels'])} panels name exported metrics")
