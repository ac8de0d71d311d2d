// The official OpenAI client's embeddings.create against ggufd serving the conformance folder's
// bert-mean encoder: its default (base64, decoded by the client) and float answers are the same
// vectors, those are llama.cpp's L2-normalised, `dimensions` truncates and renormalises; a
// reranker answers /v1/rerank with its documents ordered by the scores.
// Usage: node embeddings_test.mjs BASE_URL EMBED_MODEL RANK_MODEL EMBEDDINGS_DIR
import OpenAI from "openai";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

const [baseURL, embedModel, rankModel, dir] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "test-key", maxRetries: 0, timeout: 60_000 });

const inputs = readFileSync(`${dir}/inputs.txt`, "utf8").split("\n").filter((l) => l.length > 0);
assert.equal(inputs.length, 8);

// A little-endian float32 file (its own copy: a small Buffer may share a larger pool).
function readF32(path) {
  const b = readFileSync(path);
  return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.length));
}
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

const raw = readF32(`${dir}/bert-mean.embeddings.f32`);
assert.equal(raw.length, 8 * 128);

// The client asks for base64 unless told otherwise and decodes it to numbers.
const decoded = await client.embeddings.create({ model: embedModel, input: inputs });
const floats = await client.embeddings.create({ model: embedModel, input: inputs, encoding_format: "float" });
assert.equal(decoded.object, "list");
assert.equal(decoded.model, embedModel);
assert.equal(decoded.data.length, 8);
assert.ok(decoded.usage.prompt_tokens > 8 && decoded.usage.total_tokens === decoded.usage.prompt_tokens);
for (let i = 0; i < 8; i++) {
  const a = decoded.data[i].embedding, b = floats.data[i].embedding;
  assert.equal(decoded.data[i].index, i);
  assert.deepEqual(Array.from(a), b, `input ${i}: base64 and float answers differ`);
  const ref = Array.from(raw.subarray(i * 128, (i + 1) * 128));
  const refNorm = norm(ref);
  const cosine = b.reduce((s, x, k) => s + x * ref[k], 0) / refNorm;
  assert.ok(Math.abs(norm(b) - 1) < 1e-5, `input ${i} is not unit length`);
  assert.ok(cosine >= 0.999, `input ${i}: cosine ${cosine} with llama.cpp's`);
}

const short = await client.embeddings.create({ model: embedModel, input: inputs[0], dimensions: 32, encoding_format: "float" });
const v = short.data[0].embedding;
assert.equal(v.length, 32);
assert.ok(Math.abs(norm(v) - 1) < 1e-5);
const full = floats.data[0].embedding.slice(0, 32);
const fullNorm = norm(full);
v.forEach((x, k) => assert.ok(Math.abs(x - full[k] / fullNorm) < 1e-5));

// A reranker refuses embeddings with a 400 the client raises.
await assert.rejects(client.embeddings.create({ model: rankModel, input: "x" }),
  (e) => e instanceof OpenAI.BadRequestError);

// Rerank (no method in the openai client: plain fetch, as Jina's and Cohere's clients post it).
const pairs = readFileSync(`${dir}/rerank.txt`, "utf8").split("\n").filter((l) => l.length > 0)
  .map((l) => l.split("\t"));
const scores = readF32(`${dir}/bert-rank.scores.f32`);
assert.equal(scores.length, pairs.length);
const query = pairs[0][0];
const documents = pairs.filter((p) => p[0] === query).map((p) => p[1]);
const response = await fetch(`${baseURL}/rerank`, {
  method: "POST", headers: { "Content-Type": "application/json", Authorization: "Bearer test-key" },
  body: JSON.stringify({ model: rankModel, query, documents, top_n: 2, return_documents: true }),
});
assert.equal(response.status, 200);
const ranked = await response.json();
assert.equal(ranked.results.length, 2);
const expected = documents.map((_, i) => i).sort((a, b) => scores[b] - scores[a]).slice(0, 2);
assert.deepEqual(ranked.results.map((r) => r.index), expected);
for (const r of ranked.results) {
  assert.equal(r.document.text, documents[r.index]);
  assert.ok(Math.abs(r.relevance_score - scores[r.index]) <= 0.01 * (1 + Math.abs(scores[r.index])));
}
console.log("embeddings and rerank: ok");
