#!/usr/bin/env python3
"""Writes dashboards/ggufd.json, the Grafana dashboard for ggufd's Prometheus metrics.

The JSON is generated so panels stay consistent (datasource, legend, units) and edits are
reviewable here rather than in 1000 lines of JSON. Run it after changing a panel:
    python3 docker/grafana/make_dashboard.py
`--queries` prints every PromQL expression instead (used to check them against Prometheus).
"""
import json
import sys
from pathlib import Path

DS = {"type": "prometheus", "uid": "prometheus"}
# Every panel follows the model and replica pickers; panels sum over replicas unless they say
# "by replica".
M = 'model=~"$model",instance=~"$instance"'
RI = "$__rate_interval"


def q(expr, legend, ref=None):
    return {"expr": expr, "legendFormat": legend, "refId": ref}


def quantiles(metric, qs, by="model", sel=M):
    braces = "{" + sel + "}" if sel else ""
    return [
        q(f"histogram_quantile({x}, sum by (le, {by}) (rate({metric}_bucket{braces}[{RI}])))",
          f"p{round(x * 100)} {{{{{by}}}}}")
        for x in qs
    ]


class Layout:
    def __init__(self):
        self.panels, self.next_id, self.x, self.y, self.row_h = [], 1, 0, 0, 0

    def add(self, panel, w, h):
        if self.x + w > 24:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        panel["id"] = self.next_id
        panel["gridPos"] = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.next_id += 1
        self.x += w
        self.row_h = max(self.row_h, h)
        self.panels.append(panel)

    def row(self, title):
        if self.x:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        self.panels.append({"type": "row", "title": title, "collapsed": False, "panels": [],
                            "id": self.next_id, "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}})
        self.next_id += 1
        self.y += 1


def targets(queries):
    out = []
    for i, t in enumerate(queries):
        t = dict(t)
        t["refId"] = t["refId"] or chr(ord("A") + i)
        t["datasource"] = DS
        out.append(t)
    return out


def timeseries(title, queries, unit, description="", stack=False, minimum=0):
    defaults = {"unit": unit, "min": minimum,
                "custom": {"fillOpacity": 15 if stack else 5, "lineWidth": 1, "showPoints": "never",
                           "stacking": {"mode": "normal" if stack else "none", "group": "A"}}}
    return {"type": "timeseries", "title": title, "description": description, "datasource": DS,
            "targets": targets(queries),
            "fieldConfig": {"defaults": defaults, "overrides": []},
            "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                        "tooltip": {"mode": "multi", "sort": "desc"}}}


def stat(title, query, unit, description="", thresholds=None, text_mode="value"):
    steps = thresholds or [{"color": "green", "value": None}]
    return {"type": "stat", "title": title, "description": description, "datasource": DS,
            "targets": targets([query]),
            "fieldConfig": {"defaults": {"unit": unit,
                                         "thresholds": {"mode": "absolute", "steps": steps}},
                            "overrides": []},
            "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "colorMode": "value", "graphMode": "area", "textMode": text_mode,
                        "justifyMode": "auto", "orientation": "auto"}}


def picker(name, label, definition, ref):
    """A dashboard variable: every value of a label, several at once, all by default."""
    return {"name": name, "label": label, "type": "query", "datasource": DS,
            "query": {"query": definition, "refId": ref}, "definition": definition,
            "refresh": 2, "includeAll": True, "multi": True, "allValue": ".*",
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]}, "sort": 1}


def build():
    L = Layout()
    L.row("Overview")
    L.add(stat("Replicas up", q('sum(up{job="ggufd"})', "up"), "none",
               "Replicas Prometheus reached at the last scrape",
               [{"color": "red", "value": None}, {"color": "green", "value": 1}]), 3, 4)
    L.add(stat("Version", q("ggufd_build_info", "{{version}} ({{compiler}})"), "none",
               "ggufd_build_info: version and compiler; CPU features in the legend tooltip",
               text_mode="name"), 5, 4)
    L.add(stat("Requests / s", q(f"sum(rate(ggufd_requests_total[{RI}]))", "requests/s"),
               "reqps"), 4, 4)
    L.add(stat("5xx ratio", q(f'sum(rate(ggufd_requests_total{{status=~"5.."}}[{RI}])) '
                              f"/ sum(rate(ggufd_requests_total[{RI}]))", "5xx"), "percentunit",
               "Share of requests answered with a server error (queue full, loading, engine)",
               [{"color": "green", "value": None}, {"color": "orange", "value": 0.01},
                {"color": "red", "value": 0.05}]), 4, 4)
    L.add(stat("Model load time", q(f"ggufd_model_load_seconds{{{M}}}", "{{model}}"), "s"), 4, 4)
    L.add(stat("Resident memory", q('process_resident_memory_bytes{job="ggufd"}', "RSS"),
               "bytes"), 4, 4)

    L.row("Throughput")
    L.add(timeseries("Generated tokens / s",
                     [q(f"sum by (model) (rate(ggufd_generated_tokens_total{{{M}}}[{RI}]))",
                        "{{model}}")], "none",
                     "Tokens generated per second over all requests"), 12, 8)
    L.add(timeseries("Prompt tokens / s",
                     [q(f"sum by (model) (rate(ggufd_prompt_tokens_total{{{M}}}[{RI}]))",
                        "{{model}}")], "none",
                     "Prompt tokens evaluated per second (reused KV-cache prefixes excluded)"),
          12, 8)

    L.row("Latency")
    L.add(timeseries("Time to first token",
                     quantiles("ggufd_time_to_first_token_seconds", [0.5, 0.95, 0.99]), "s",
                     "From a generation request's arrival to its first token"), 12, 8)
    L.add(timeseries("Inter-token latency",
                     quantiles("ggufd_inter_token_latency_seconds", [0.5, 0.95]), "s",
                     "Time between consecutive tokens of one stream"), 12, 8)
    L.add(timeseries("Request duration by route",
                     quantiles("ggufd_request_duration_seconds", [0.5, 0.95], by="endpoint",
                               sel=""), "s", "Whole HTTP exchange, per route"), 24, 8)

    L.row("Requests and errors")
    L.add(timeseries("Requests / s by status",
                     [q(f"sum by (status) (rate(ggufd_requests_total[{RI}]))", "{{status}}")],
                     "reqps", stack=True), 12, 8)
    L.add(timeseries("Error ratio",
                     [q(f'sum(rate(ggufd_requests_total{{status=~"5.."}}[{RI}])) '
                        f"/ sum(rate(ggufd_requests_total[{RI}]))", "5xx"),
                      q(f'sum(rate(ggufd_requests_total{{status=~"4.."}}[{RI}])) '
                        f"/ sum(rate(ggufd_requests_total[{RI}]))", "4xx")],
                     "percentunit", "Share of requests answered with 4xx / 5xx"), 12, 8)

    L.row("Scheduler")
    L.add(timeseries("Queue depth and rejections",
                     [q(f"sum by (model) (ggufd_queue_depth{{{M}}})", "waiting {{model}}"),
                      q(f"sum by (model) (rate(ggufd_requests_rejected_total{{{M}}}[{RI}]))",
                        "rejected/s {{model}}")], "none",
                     "Requests waiting for a slot; rejected = turned away with 503 (queue full)"),
          12, 8)
    L.add(timeseries("Busy slots",
                     [q(f"sum by (model) (ggufd_slots_busy{{{M}}})", "busy {{model}}"),
                      q(f"sum by (model) (ggufd_slots_capacity{{{M}}})", "capacity {{model}}")],
                     "none",
                     "Sequences being served vs --parallel"), 12, 8)
    L.add(timeseries("Batch size per engine step",
                     quantiles("ggufd_batch_size_tokens", [0.5, 0.95]) +
                     [q(f"sum by (model) (rate(ggufd_batch_size_tokens_sum{{{M}}}[{RI}])) / "
                        f"sum by (model) (rate(ggufd_batch_size_tokens_count{{{M}}}[{RI}]))",
                        "mean {{model}}")], "none",
                     "Tokens evaluated together in one forward pass (decode + prefill chunks)"),
          12, 8)
    L.add(timeseries("KV cache usage",
                     [q(f"sum by (model) (ggufd_kv_cache_cells_used{{{M}}}) / "
                        f"sum by (model) (ggufd_kv_cache_cells_capacity{{{M}}})", "{{model}}")],
                     "percentunit",
                     "Cells held by slots serving a request / cells allocated (slots x "
                     "context): what gateways read as vllm:kv_cache_usage_perc"), 12, 8)

    L.row("Replicas")
    L.add(timeseries("Generated tokens / s by replica",
                     [q(f"sum by (instance) (rate(ggufd_generated_tokens_total{{{M}}}[{RI}]))",
                        "{{instance}}")], "none",
                     "How the load balancer spreads generation over the replicas"), 12, 8)
    L.add(timeseries("Prompt tokens / s by replica",
                     [q(f"sum by (instance) (rate(ggufd_prompt_tokens_total{{{M}}}[{RI}]))",
                        "{{instance}}")], "none",
                     "Prompt evaluation per replica: prefix affinity keeps it low by reusing "
                     "each conversation's cached prefix"), 12, 8)
    L.add(timeseries("Busy slots and queue by replica",
                     [q(f"sum by (instance) (ggufd_slots_busy{{{M}}})", "busy {{instance}}"),
                      q(f"sum by (instance) (ggufd_queue_depth{{{M}}})", "waiting {{instance}}")],
                     "none", "A replica with a queue while others have free slots is a hot spot"),
          12, 8)
    L.add(timeseries("Time to first token p95 by replica",
                     quantiles("ggufd_time_to_first_token_seconds", [0.95], by="instance"), "s",
                     "From a generation request's arrival to its first token, per replica"),
          12, 8)

    L.row("Process")
    L.add(timeseries("Resident memory",
                     [q('process_resident_memory_bytes{job="ggufd"}', "RSS {{instance}}")],
                     "bytes", "Includes the pages of mapped model files that are resident"),
          12, 8)
    L.add(timeseries("Engine steps / s",
                     [q(f"sum by (model) (rate(ggufd_engine_steps_total{{{M}}}[{RI}]))",
                        "{{model}}")], "none", "Batched forward passes per second"), 12, 8)

    return {
        "uid": "ggufd",
        "title": "ggufd",
        "description": "ggufd: throughput, latency, queue, slots, KV cache, errors",
        "tags": ["ggufd", "llm"],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "refresh": "10s",
        "time": {"from": "now-1h", "to": "now"},
        "schemaVersion": 39,
        "version": 1,
        "templating": {"list": [
            picker("model", "Model", "label_values(ggufd_generated_tokens_total, model)", "models"),
            picker("instance", "Replica", "label_values(ggufd_build_info, instance)", "replicas")]},
        "annotations": {"list": []},
        "panels": L.panels,
    }


def main():
    dashboard = build()
    if "--queries" in sys.argv:
        for p in dashboard["panels"]:
            for t in p.get("targets", []):
                print(t["expr"])
        return
    out = Path(__file__).resolve().parent / "dashboards" / "ggufd.json"
    out.write_text(json.dumps(dashboard, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
