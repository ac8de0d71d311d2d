// A forced tool call always arrives, on every chat template, and no markup reaches the text:
// a random-weight model served with each real chat template (and the built-in demo) is asked
// for a call with tool_choice "required" or a named function, at several seeds and temperatures,
// streamed and not, through the official OpenAI client. Then the same requests cut short by
// max_tokens: finish_reason "length", the call so far (never its markup as text).
// Usage: node forced_test.mjs BASE_URL MODEL...
import OpenAI from "openai";
import assert from "node:assert/strict";
import { collect, tools, validate } from "./tool_support.mjs";

const [baseURL, ...models] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "test-key", maxRetries: 0, timeout: 120_000 });

// Each family's call and reasoning syntax: none of it may appear in content or reasoning.
const think = ["<think>", "</think>"];
const markers = {
  generic: ['{"tool_call', ...think],
  hermes: ["<tool_call>", "</tool_call>", ...think],
  "qwen3-coder": ["<tool_call>", "<function=", "<parameter=", ...think],
  glm: ["<tool_call>", "<arg_key>", "<arg_value>", ...think],
  llama3: ["<|python_tag|>", '{"name"'],
  "functionary-v3.1": ["<function=", "<|python_tag|>"],
  firefunction: ["functools["],
  mistral: ["[TOOL_CALLS]", "[ARGS]", "[THINK]", "[/THINK]"],
  harmony: ["<|channel|>", "<|message|>", "<|start|>", "<|end|>", "<|call|>", "<|constrain|>"],
  "deepseek-r1": ["｜tool▁", ...think],
  "deepseek-v3.1": ["｜tool▁", ...think],
  "deepseek-v3.2": ["｜DSML｜", ...think],
  granite: ["<|tool_call|>", ...think],
  "command-r7b": ["<|START_ACTION|>", "<|START_THINKING|>", "<|END_THINKING|>"],
  "kimi-k2": ["<|tool_call", ...think],
  apriel: ["<tool_calls>", "[BEGIN FINAL RESPONSE]", "Here are my reasoning steps:"],
  "command-r-plus": ["Action:"],
};

const listing = await fetch(baseURL.replace(/\/v1$/, "") + "/models").then((r) => r.json());
const family = Object.fromEntries(listing.data.map((m) => [m.id, m.tool_parser]));

function noMarkup(what, message, fam) {
  const reasoning = message.reasoning_content ?? "";
  assert.equal(message.reasoning ?? "", reasoning, `${what}: reasoning and reasoning_content agree`);
  for (const m of markers[fam]) {
    assert.ok(!(message.content ?? "").includes(m), `${what}: ${m} in content: ${JSON.stringify(message)}`);
    assert.ok(!reasoning.includes(m), `${what}: ${m} in reasoning: ${JSON.stringify(message)}`);
  }
}

async function once(request) {
  const reply = await client.chat.completions.create(request);
  const message = reply.choices[0].message;
  return { message, finish: reply.choices[0].finish_reason, usage: reply.usage };
}

// The same request streamed and not: the message as the client accumulates it.
async function both(request) {
  const plain = await once(request);
  const streamed = await collect(client, request);
  // The streamed message's reasoning as the client reads it (both names of the field).
  return [plain, streamed];
}

function sameCalls(what, a, b) {
  const strip = (m) => (m.tool_calls ?? []).map((c) => [c.function.name, c.function.arguments]);
  assert.deepEqual(strip(a), strip(b), `${what}: streamed and not give the same calls`);
}

const messages = [{ role: "user", content: "What is the weather in Paris for the next two days?" }];
// The first run leaves the reasoning to the server's default bound (half of max_tokens here); the
// others bound it themselves. Markup that is not a special token of this vocabulary (DeepSeek's,
// Kimi's) takes dozens of tokens, hence the room.
const allRuns = [
  { seed: 1, temperature: 0, tool_choice: "required", max_tokens: 400 },
  { seed: 2, temperature: 0.8, tool_choice: { type: "function", function: { name: "get_time" } }, reasoning_budget_tokens: 16 },
  { seed: 3, temperature: 1.5, tool_choice: "required", parallel_tool_calls: true, reasoning_budget_tokens: 16 },
];

// Under the sanitizers (GGUFD_FORCED_QUICK) one run and one cut per template: the parser's and
// the grammar's paths are the same, at a fraction of the time.
const quick = process.env.GGUFD_FORCED_QUICK === "1";
const runs = quick ? allRuns.slice(0, 1) : allRuns;

// Variables a template reads beyond the chat context: FireFunction's tool list as text and date,
// which its clients pass through chat_template_kwargs.
function kwargsFor(fam) {
  return fam === "firefunction" ? { chat_template_kwargs: { functions: JSON.stringify(tools), datetime: "2026-11-28" } } : {};
}

// Templates that cannot render a request with tools: real Jinja2 raises on them as ggufd does
// (llama.cpp's DeepSeek-R1 template pipes a generator into tojson). Their answer is a 400.
const refuses = new Set(["t-llama-cpp-deepseek-r1"]);

async function check(model) {
  const fam = family[model];
  assert.ok(markers[fam], `${model}: family ${fam} has markers listed`);
  if (refuses.has(model)) {
    await assert.rejects(once({ model, messages, tools, tool_choice: "required" }),
      (e) => e.status === 400 && /chat template refused/.test(e.message), model);
    return;
  }
  for (const run of runs) {
    const what = `${model} (${fam}, seed ${run.seed}, temperature ${run.temperature})`;
    const request = { model, messages, tools, parallel_tool_calls: false, max_tokens: 200, ...kwargsFor(fam), ...run };
    for (const { message, finish } of await both(request)) {
      // With parallel calls a random model may go on writing different calls until max_tokens:
      // then the last one may be cut short.
      const cut = run.parallel_tool_calls && finish === "length";
      assert.ok(finish === "tool_calls" || cut, `${what}: ${finish}: ${JSON.stringify(message)}`);
      assert.ok(message.tool_calls.length >= 1, `${what}: ${JSON.stringify(message)}`);
      assert.ok(!message.content, `${what}: content ${JSON.stringify(message.content)}`);
      message.tool_calls.forEach((call, i) => {
        const named = run.tool_choice.function?.name;
        assert.ok(named ? call.function.name === named : ["get_weather", "get_time"].includes(call.function.name), what);
        if (cut && i === message.tool_calls.length - 1) return;
        const args = JSON.parse(call.function.arguments);
        assert.ok(validate(args), `${what}: ${call.function.arguments}`);
      });
      if (!run.parallel_tool_calls) assert.equal(message.tool_calls.length, 1, what);
      noMarkup(what, message, fam);
    }
  }

  // Cut off: greedy, with a fixed budget, so the shorter reply is the longer one's beginning.
  const base = { model, messages, tools, tool_choice: "required", parallel_tool_calls: false, temperature: 0, seed: 5, reasoning_budget_tokens: 6, max_tokens: 300, ...kwargsFor(fam) };
  const full = await once(base);
  assert.equal(full.finish, "tool_calls", `${model}: ${JSON.stringify(full.message)}`);
  const whole = full.message.tool_calls[0].function;
  for (const max_tokens of quick ? [full.usage.completion_tokens - 1] : [1, 2, 3, full.usage.completion_tokens - 1]) {
    if (max_tokens < 1) continue;
    const what = `${model} (${fam}) cut at ${max_tokens} tokens`;
    const [plain, streamed] = await both({ ...base, max_tokens });
    for (const { message, finish } of [plain, streamed]) {
      assert.equal(finish, "length", `${what}: ${JSON.stringify(message)}`);
      assert.ok(!message.content, `${what}: content ${JSON.stringify(message.content)}`);
      noMarkup(what, message, fam);
      for (const call of message.tool_calls ?? []) {
        assert.equal(call.function.name, whole.name, what);
        assert.ok(whole.arguments.startsWith(call.function.arguments), `${what}: ${call.function.arguments} / ${whole.arguments}`);
      }
    }
    sameCalls(what, plain.message, streamed.message);
    if (max_tokens === full.usage.completion_tokens - 1) {
      assert.equal(plain.message.tool_calls?.length, 1, `${what}: the call cut short: ${JSON.stringify(plain.message)}`);
    }
  }
}

// A few models at a time: the server batches their requests.
const queue = [...models];
const failures = [];
await Promise.all(Array.from({ length: 4 }, async () => {
  while (queue.length) {
    const model = queue.shift();
    try {
      await check(model);
    } catch (e) {
      failures.push(`${model}: ${e.message}`);
    }
  }
}));
if (failures.length) {
  console.error(failures.join("\n"));
  process.exit(1);
}
console.log(`forced calls: ${models.length} templates, every run a call`);
