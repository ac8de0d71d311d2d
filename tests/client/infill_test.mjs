// Fill-in-the-middle as editors ask for it: the official openai client's completions with
// `suffix` (what Continue sends), and POST /infill as llama.vscode sends it (plain fetch), against
// a model with FIM tokens (Qwen 2's vocabulary) and one without. Greedy, so both routes' answers
// to the same code must agree. Usage: node infill_test.mjs BASE_URL FIM_MODEL PLAIN_MODEL
import OpenAI from "openai";
import assert from "node:assert/strict";

const [baseURL, model, plain] = process.argv.slice(2);
const root = baseURL.replace(/\/v1\/?$/, "");
const client = new OpenAI({ baseURL, apiKey: "test-key", maxRetries: 0, timeout: 60_000 });

const post = async (path, body) => {
  const r = await fetch(root + path, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  return { status: r.status, text: await r.text() };
};
const tokens = async (content, parse_special = false) => {
  const r = await post("/tokenize", { model, content, add_special: false, parse_special });
  assert.equal(r.status, 200, r.text);
  return JSON.parse(r.text).tokens;
};

const prefix = "def add(a, b):\n    return ";
const suffix = "\n\nprint(add(1, 2))  # <|fim_middle|> stays text\n";

// Continue's request: the prompt is the code before the cursor, `suffix` the code after it.
const completion = await client.completions.create({
  model, prompt: prefix, suffix, max_tokens: 8, temperature: 0,
});
assert.equal(completion.object, "text_completion");
assert.equal(typeof completion.choices[0].text, "string");
// <fim_pre> prefix <fim_suf> suffix <fim_mid>: Qwen 2 adds no BOS, the code is plain text.
const promptTokens = 3 + (await tokens(prefix)).length + (await tokens(suffix)).length;
assert.equal(completion.usage.prompt_tokens, promptTokens);

let streamed = "";
for await (const chunk of await client.completions.create({
  model, prompt: prefix, suffix, max_tokens: 8, temperature: 0, stream: true,
})) {
  streamed += chunk.choices[0]?.text ?? "";
}
assert.equal(streamed, completion.choices[0].text, "streamed and non-streamed infills differ");

await assert.rejects(
  client.completions.create({ model: plain, prompt: prefix, suffix, max_tokens: 4 }),
  (e) => e.status === 400 && e.param === "suffix",
);

// llama.vscode's request (its sampler settings; greedy here so the answer is comparable).
const vscode = {
  model, input_prefix: prefix, input_suffix: suffix, input_extra: [], prompt: "",
  n_predict: 8, top_k: 40, top_p: 0.99, stream: false, samplers: ["top_k", "top_p", "infill"],
  cache_prompt: true, t_max_prompt_ms: 500, t_max_predict_ms: 1000, temperature: 0,
};
let r = await post("/infill", vscode);
assert.equal(r.status, 200, r.text);
const infill = JSON.parse(r.text);
assert.equal(infill.content, completion.choices[0].text, "/infill and suffix differ");
assert.equal(infill.stop, true);
assert.equal(infill.tokens_evaluated, promptTokens);
assert.equal(infill.tokens_predicted, completion.usage.completion_tokens);
assert.equal(infill.timings.predicted_n, infill.tokens_predicted);
assert.equal(infill.truncated, false);
assert.ok(["eos", "limit"].includes(infill.stop_type), infill.stop_type);

// Other files of the project, in the repository format: <|repo_name|>project\n, each file after
// <|file_sep|>, then <|file_sep|>current\n before the prefix.
const extra = [{ filename: "util.py", text: "def sub(a, b):\n    return a - b\n" }];
r = await post("/infill", { ...vscode, input_extra: extra, prompt: "a" });
assert.equal(r.status, 200, r.text);
const withExtra = JSON.parse(r.text);
const extraTokens = 3 + (await tokens("project\n")).length + (await tokens("current\n")).length +
  (await tokens(`util.py\n${extra[0].text}`)).length;
assert.equal(withExtra.tokens_evaluated, promptTokens + extraTokens + (await tokens("a")).length);

// Streamed as llama-server streams it: data lines with the content, the last with stop: true.
r = await post("/infill", { ...vscode, stream: true });
assert.equal(r.status, 200, r.text);
const events = r.text.split("\n\n").filter((e) => e.startsWith("data: "))
  .map((e) => JSON.parse(e.slice(6)));
assert.equal(events.at(-1).stop, true);
assert.ok(events.slice(0, -1).every((e) => e.stop === false));
assert.equal(events.map((e) => e.content).join(""), infill.content);

// The model ends its middle with <|fim_pad|> (or <|endoftext|>): end of generation, no text.
const [pad] = await tokens("<|fim_pad|>", true);
r = await post("/infill", { ...vscode, logit_bias: { [pad]: 100 } });
const ended = JSON.parse(r.text);
assert.equal(ended.content, "");
assert.equal(ended.stop_type, "eos");

// llama.vscode's cache warm-up (n_predict 0): the prompt is evaluated, nothing predicted.
r = await post("/infill", { ...vscode, n_predict: 0 });
assert.equal(r.status, 200, r.text);
assert.equal(JSON.parse(r.text).content, "");
assert.equal(JSON.parse(r.text).tokens_predicted, 0);

r = await post("/infill", { ...vscode, model: plain });
assert.equal(r.status, 400);
assert.equal(JSON.parse(r.text).error.param, "input_suffix");
r = await post("/infill", { ...vscode, input_extra: "util.py" });
assert.equal(r.status, 400);
assert.equal(JSON.parse(r.text).error.param, "input_extra");

console.log("infill_test: ok");
