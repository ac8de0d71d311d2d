// Validates Kubernetes manifests against the API's OpenAPI schemas (kubernetes-models, and the
// Prometheus Operator's CRDs for ServiceMonitor), since no cluster runs where the tests do.
// Usage: node validate.mjs FILE.yaml...  Prints every document as JSON (one array) on success;
// exits 1 naming each invalid document and why. `node validate.mjs --parse FILE.yaml` prints the
// documents of a YAML file that is not a Kubernetes object (kustomization, Helm values) unchecked.
import { readFileSync } from "node:fs";
import yaml from "js-yaml";

const groups = {
  "monitoring.coreos.com/v1": "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1",
};

async function modelFor(apiVersion, kind) {
  const base = groups[apiVersion] ??
    `kubernetes-models/${apiVersion.includes("/") ? apiVersion : `v1`}`;
  try {
    const module = await import(`${base}/${kind}`);
    return module[kind];
  } catch {
    return null;
  }
}

if (process.argv[2] === "--parse") {
  console.log(JSON.stringify(yaml.loadAll(readFileSync(process.argv[3], "utf8"))));
  process.exit(0);
}

const problems = [];
const documents = [];
for (const file of process.argv.slice(2)) {
  let docs;
  try {
    docs = yaml.loadAll(readFileSync(file, "utf8")).filter((d) => d !== null);
  } catch (e) {
    problems.push(`${file}: not YAML: ${e.message}`);
    continue;
  }
  for (const doc of docs) {
    const where = `${file}: ${doc?.kind ?? "?"} ${doc?.metadata?.name ?? "?"}`;
    if (typeof doc?.apiVersion !== "string" || typeof doc?.kind !== "string") {
      problems.push(`${where}: no apiVersion/kind`);
      continue;
    }
    const Model = await modelFor(doc.apiVersion, doc.kind);
    if (!Model) {
      problems.push(`${where}: no schema for ${doc.apiVersion} ${doc.kind}`);
      continue;
    }
    try {
      new Model(doc).validate();
    } catch (e) {
      problems.push(`${where}: ${e.message}`);
      continue;
    }
    documents.push({ file, ...doc });
  }
}
if (problems.length) {
  console.error(problems.join("\n"));
  process.exit(1);
}
console.log(JSON.stringify(documents));
