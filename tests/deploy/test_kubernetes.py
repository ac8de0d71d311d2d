#!/usr/bin/env python3
"""deploy/kubernetes against the Kubernetes API schemas and against a real ggufd, since no cluster
runs here.

Schemas: every resource kustomization.yaml lists is validated by tests/deploy/kubernetes/
validate.mjs (npm kubernetes-models and the Prometheus Operator's models: the API's OpenAPI
schemas compiled by ajv), and a broken copy is refused, so the validator is known to bite.
Consistency: what the objects say of each other (selectors and labels, port names, the claim, the
HPA's metric and the adapter rule serving it, the probes' path, threads following the CPU limit,
a drain that fits the grace period). Reality: ggufd started with the Deployment's environment
answers the probe path, and exports the metric the autoscaler scales on without a key.

Usage: test_kubernetes.py BIN_DIR WORK_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_support import REPO, free_port, make_model, request, require_binary, under_ci  # noqa: E402

node = require_binary("node", "nodejs")
npm = require_binary("npm", "npm")
bin_dir, work_root = sys.argv[1], os.path.abspath(sys.argv[2])
os.makedirs(work_root, exist_ok=True)
work = os.path.join(work_root, "kubernetes-validator")  # kept: npm install is then quick
os.makedirs(work, exist_ok=True)
here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kubernetes")
for name in ("package.json", "validate.mjs"):
    shutil.copy(os.path.join(here, name), work)
install = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--loglevel=error"], cwd=work,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
if install.returncode != 0:
    if under_ci():
        sys.exit("npm install failed:\n" + install.stdout)
    print("npm install failed (no registry?): skipped\n" + install.stdout[-1000:])
    sys.exit(77)
manifests = os.path.join(REPO, "deploy", "kubernetes")


def validate(*files):
    """(exit code, stdout, stderr) of the schema validator."""
    r = subprocess.run([node, os.path.join(work, "validate.mjs"), *files], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    return r.returncode, r.stdout, r.stderr


def parse(path):
    code, out, err = validate("--parse", path)
    assert code == 0, err
    return json.loads(out)


problems = []


def check(condition, message):
    if not condition:
        problems.append(message)


# Kustomize: every manifest is listed, every listed file exists.
kustomization = parse(os.path.join(manifests, "kustomization.yaml"))[0]
listed = kustomization["resources"]
present = sorted(f for f in os.listdir(manifests) if f.endswith(".yaml"))
not_objects = {"kustomization.yaml", "prometheus-adapter-values.yaml"}
check(sorted(listed) == sorted(set(present) - not_objects),
      f"kustomization.yaml lists {sorted(listed)}; the folder holds {present}")

# Schemas.
code, out, err = validate(*(os.path.join(manifests, f) for f in listed))
assert code == 0, "schema validation failed:\n" + err
docs = json.loads(out)
by_kind = {}
for d in docs:
    by_kind.setdefault(d["kind"], []).append(d)
for kind in ("Deployment", "Service", "PersistentVolumeClaim", "ServiceMonitor",
             "HorizontalPodAutoscaler", "PodDisruptionBudget"):
    check(kind in by_kind, f"no {kind} in the manifests")

# The validator refuses what the API server would: a wrong type, a missing required field.
tmp = tempfile.mkdtemp(prefix="kubernetes-", dir=work_root)
with open(os.path.join(manifests, "deployment.yaml")) as f:
    deployment_text = f.read()
broken = {
    "replicas as text": deployment_text.replace("replicas: 2", "replicas: two", 1),
    "a container without a name": deployment_text.replace("- name: ggufd\n          image:", "- image:", 1),
}
for what, text in broken.items():
    assert text != deployment_text, f"could not break the Deployment ({what}): update this test"
    path = os.path.join(tmp, "broken.yaml")
    with open(path, "w") as f:
        f.write(text)
    code, _, err = validate(path)
    check(code != 0 and "Deployment ggufd" in err, f"the validator accepted a Deployment with {what}")

# Consistency between the objects.
deployment = by_kind["Deployment"][0]
pod = deployment["spec"]["template"]
container = pod["spec"]["containers"][0]
env = {e["name"]: e for e in container.get("env", [])}
pod_labels = pod["metadata"]["labels"]


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


check(selects(deployment["spec"]["selector"]["matchLabels"], pod_labels), "the Deployment selects no pod of its own")
port = next((p for p in container["ports"] if p.get("name") == "http"), None)
check(port is not None, "the container has no port named http")
for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
    get = container.get(probe, {}).get("httpGet", {})
    check(get.get("path") == "/health" and get.get("port") == "http", f"{probe} is not GET /health on port http")
resources = container["resources"]
for r in ("cpu", "memory"):
    check(resources["requests"].get(r) == resources["limits"].get(r), f"{r}: request and limit differ")
threads = env.get("GGUFD_THREADS", {}).get("valueFrom", {}).get("resourceFieldRef", {})
check(threads.get("resource") == "limits.cpu", "GGUFD_THREADS does not follow the CPU limit")
mount = next((m for m in container.get("volumeMounts", []) if m["name"] == "models"), {})
volume = next((v for v in pod["spec"].get("volumes", []) if v["name"] == "models"), {})
check(mount.get("readOnly") is True, "the models volume is not mounted read-only")
claim = volume.get("persistentVolumeClaim", {})
check(claim.get("readOnly") is True, "the models claim is not read-only")
check(claim.get("claimName") in [c["metadata"]["name"] for c in by_kind["PersistentVolumeClaim"]],
      f"the claim {claim.get('claimName')} is not among the manifests")
model_path = env["GGUFD_MODEL"]["value"].split("=", 1)[1]
check(model_path.startswith(mount.get("mountPath", "?") + "/"), f"GGUFD_MODEL {model_path} is not on the models volume")
annotations = pod["metadata"].get("annotations", {})
check(annotations.get("prometheus.io/port") == str(port["containerPort"]), "the scrape annotation names another port")
# SIGTERM's drain takes at most 10 s (tools/ggufd/main.cpp): preStop's wait plus that fits the grace
# period, and a liveness probe failing through a drain does not restart the container first.
prestop = container.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
wait = int(prestop[1]) if prestop[:1] == ["sleep"] else 0
check(wait > 0, "no preStop wait for the endpoint removal to spread")
check(pod["spec"].get("terminationGracePeriodSeconds", 30) > wait + 10, "the grace period is shorter than preStop + drain")
liveness = container["livenessProbe"]
check(liveness.get("periodSeconds", 10) * liveness.get("failureThreshold", 3) > 10, "liveness would restart a draining replica")

services = {s["metadata"]["name"]: s for s in by_kind["Service"]}
for s in services.values():
    check(selects(s["spec"]["selector"], pod_labels), f"Service {s['metadata']['name']} selects no ggufd pod")
    for p in s["spec"]["ports"]:
        check(p["targetPort"] in ("http", port["containerPort"]), f"Service {s['metadata']['name']} targets another port")
monitor = by_kind["ServiceMonitor"][0]
monitored = [s for s in services.values() if selects(monitor["spec"]["selector"]["matchLabels"], s["metadata"]["labels"])]
check(len(monitored) == 1, f"the ServiceMonitor selects {len(monitored)} Services")
for e in monitor["spec"]["endpoints"]:
    check(monitored and e["port"] in [p["name"] for p in monitored[0]["spec"]["ports"]],
          f"the ServiceMonitor scrapes port {e['port']}, which the Service lacks")
pdb = by_kind["PodDisruptionBudget"][0]
check(selects(pdb["spec"]["selector"]["matchLabels"], pod_labels), "the PodDisruptionBudget covers no ggufd pod")

hpa = by_kind["HorizontalPodAutoscaler"][0]
target = hpa["spec"]["scaleTargetRef"]
check((target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"]), "the HPA scales something else")
hpa_metrics = [m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"] if m["type"] == "Pods"]
check(hpa_metrics, "the HPA uses no pods metric")
adapter = parse(os.path.join(manifests, "prometheus-adapter-values.yaml"))[0]
served = {}
for rule in adapter["rules"]["custom"]:
    series = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", rule["seriesQuery"]).group(0)
    served[rule["name"]["as"]] = series
    check({"namespace", "pod"} <= set(rule["resources"]["overrides"]), f"rule {series} is not mapped to pods")
for m in hpa_metrics:
    check(m in served, f"the HPA scales on {m}, which no adapter rule serves ({sorted(served)})")

# ggufd with the Deployment's settings: the probe path answers, the scaled metric is exported and
# public. The model is a small random one at the path GGUFD_MODEL names, re-rooted here.
model = make_model(bin_dir, os.path.join(tmp, os.path.basename(model_path)), "--n-embd", "64",
                   "--n-layer", "1", "--n-head", "2", "--n-ff", "128")
daemon_env = {k: v["value"] for k, v in env.items() if "value" in v}
daemon_env["GGUFD_MODEL"] = env["GGUFD_MODEL"]["value"].split("=", 1)[0] + "=" + model
# resourceFieldRef rounds the limit up to whole cores: a fractional limit would start more
# threads than the replica may run at once.
check(re.fullmatch(r"[1-9][0-9]*", str(resources["limits"]["cpu"])), "the CPU limit is not a whole number of cores")
daemon_env["GGUFD_THREADS"] = "1"  # what this shared machine can spare
daemon_env["GGUFD_HOST"], daemon_env["GGUFD_PORT"] = "127.0.0.1", str(free_port())
log_path = os.path.join(tmp, "ggufd.log")
proc = subprocess.Popen([os.path.join(bin_dir, "ggufd")], env={**os.environ, **daemon_env},
                        stdout=open(log_path, "wb"), stderr=subprocess.STDOUT)
try:
    port_no = int(daemon_env["GGUFD_PORT"])
    deadline = time.monotonic() + 60
    status = None
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            status = request(port_no, "GET", container["readinessProbe"]["httpGet"]["path"], timeout=2)[0]
            if status == 200:
                break
        except OSError:
            pass
        time.sleep(0.1)
    check(status == 200, f"ggufd with the Deployment's environment did not become ready:\n{open(log_path).read()[-2000:]}")
    if status == 200:
        code, text, _ = request(port_no, "GET", monitor["spec"]["endpoints"][0]["path"])
        check(code == 200, f"/metrics answered {code} without a key")
        exported = set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", text, re.M))
        for m in hpa_metrics:
            check(served.get(m) in exported, f"the adapter reads {served.get(m)}, which ggufd does not export")
finally:
    proc.terminate()
    check(proc.wait(timeout=30) == 0, "ggufd did not exit cleanly")

if problems:
    sys.exit("deploy/kubernetes problems:\n  " + "\n  ".join(problems))
shutil.rmtree(tmp, ignore_errors=True)
print(f"ok: {len(docs)} objects valid against the API schemas ({', '.join(sorted(by_kind))}); "
      f"{len(broken)} broken copies refused; consistent; ggufd ready and exporting {', '.join(hpa_metrics)}")
