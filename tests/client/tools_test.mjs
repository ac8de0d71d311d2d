// The official OpenAI client driving ggufd as an agent framework does: a two-turn tool loop with
// tool_choice "required" (the call grammar makes a random-weight model call the tool), and a
// thinking template's reasoning returned apart from the answer. Streamed and not.
// Usage: node tools_test.mjs BASE_URL TOOL_MODEL THINKING_MODEL
import OpenAI from "openai";
import assert from "node:assert/strict";
import { collect as collectWith, tools, validate } from "./tool_support.mjs";

const [baseURL, toolModel, thinkingModel] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "test-key", maxRetries: 0, timeout: 60_000 });
const collect = (request) => collectWith(client, request);

for (const stream of [false, true]) {
  const messages = [{ role: "user", content: "What is the weather in Paris for the next two days?" }];
  const request = {
    model: toolModel, messages, tools, tool_choice: "required", parallel_tool_calls: false,
    max_tokens: 120, seed: 7, enable_thinking: false,
  };
  let message, finish;
  if (stream) {
    ({ message, finish } = await collect(request));
    assert.equal(message.content, "", "a forced call has no content");
  } else {
    const reply = await client.chat.completions.create(request);
    ({ message } = reply.choices[0]);
    finish = reply.choices[0].finish_reason;
    assert.equal(message.content, null, "a reply of calls only has content null");
  }
  assert.equal(finish, "tool_calls", JSON.stringify(message));
  assert.equal(message.tool_calls.length, 1, JSON.stringify(message));
  const call = message.tool_calls[0];
  assert.match(call.id, /^call_[A-Za-z0-9]{24}$/);
  assert.equal(call.type, "function");
  assert.ok(["get_weather", "get_time"].includes(call.function.name), call.function.name);
  const args = JSON.parse(call.function.arguments);
  assert.ok(validate(args), `${JSON.stringify(validate.errors)}: ${call.function.arguments}`);

  // Second turn: the call as the client got it (content null, arguments as JSON text) and the
  // tool's result; the template refuses a null content or string arguments, so this renders only
  // because the server normalises them.
  messages.push({ role: "assistant", content: null, tool_calls: message.tool_calls });
  messages.push({ role: "tool", tool_call_id: call.id, content: JSON.stringify({ sky: "clear" }) });
  const answerRequest = { model: toolModel, messages, tools, max_tokens: 8, seed: 7 };
  const answer = stream ? await collect(answerRequest)
    : await client.chat.completions.create(answerRequest).then((r) => ({ message: r.choices[0].message, finish: r.choices[0].finish_reason }));
  assert.ok(["stop", "length"].includes(answer.finish), String(answer.finish));
  assert.equal(typeof answer.message.content, "string");
  assert.ok(answer.message.content.length > 0, "the answer has content");
}

// tool_choice "auto": the model decides; once it opens a call the call grammar holds the rest.
// A logit bias makes the random model write <tool_call> first: the call that follows is valid
// because of the grammar, as the same bias without tools (tool_choice "none") shows.
const root = baseURL.replace(/\/v1$/, "");
const { tokens: opener } = await fetch(root + "/tokenize", {
  method: "POST", headers: { "content-type": "application/json" },
  body: JSON.stringify({ model: toolModel, content: "<tool_call>", parse_special: true }),
}).then((r) => r.json());
assert.equal(opener.length, 1, "<tool_call> is one token of this vocabulary");
const autoRequest = {
  model: toolModel, messages: [{ role: "user", content: "Weather in Rome for three days?" }], tools,
  tool_choice: "auto", parallel_tool_calls: false, max_tokens: 200, seed: 5,
  logit_bias: { [opener[0]]: 100 }, chat_template_kwargs: { enable_thinking: false },
};
const autoCalls = {};
for (const stream of [false, true]) {
  const { message, finish } = stream ? await collect(autoRequest)
    : await client.chat.completions.create(autoRequest).then((r) => ({ message: r.choices[0].message, finish: r.choices[0].finish_reason }));
  assert.equal(finish, "tool_calls", JSON.stringify(message));
  assert.equal(message.tool_calls.length, 1, JSON.stringify(message));
  assert.ok(!message.content, JSON.stringify(message.content));
  const args = JSON.parse(message.tool_calls[0].function.arguments);
  assert.ok(validate(args), `${JSON.stringify(validate.errors)}: ${message.tool_calls[0].function.arguments}`);
  autoCalls[stream] = message.tool_calls[0].function;
}
assert.deepEqual(autoCalls[true], autoCalls[false]);
const unconstrained = await client.chat.completions.create({ ...autoRequest, tool_choice: "none", max_tokens: 40 });
assert.ok(unconstrained.choices[0].message.content.startsWith("<tool_call>"), unconstrained.choices[0].message.content);
assert.equal(unconstrained.choices[0].message.tool_calls, undefined);

// A named function: only that tool is called.
const named = await client.chat.completions.create({
  model: toolModel, messages: [{ role: "user", content: "Time in Oslo?" }], tools,
  tool_choice: { type: "function", function: { name: "get_time" } }, max_tokens: 120, seed: 3, enable_thinking: false,
});
assert.equal(named.choices[0].message.tool_calls[0].function.name, "get_time");
// A tool_choice naming a function that is not offered is a 400 naming the field.
await assert.rejects(
  client.chat.completions.create({
    model: toolModel, messages: [{ role: "user", content: "x" }], tools,
    tool_choice: { type: "function", function: { name: "nope" } },
  }),
  (e) => e.status === 400 && e.param === "tool_choice",
);

// Reasoning: the thinking template opens <think> in its generation prompt; a grammar makes the
// random model write the reasoning, the closer and the answer.
const grammar = 'root ::= "Two and two make four." "</think>" "\\n\\n" "Four."';
const thinkRequest = { model: thinkingModel, messages: [{ role: "user", content: "2+2?" }], grammar };
for (const stream of [false, true]) {
  const { message, finish } = stream ? await collect(thinkRequest)
    : await client.chat.completions.create(thinkRequest).then((r) => ({ message: r.choices[0].message, finish: r.choices[0].finish_reason }));
  assert.equal(finish, "stop");
  assert.equal(message.reasoning_content, "Two and two make four.");
  assert.equal(message.content, "Four.");
}
const kept = await client.chat.completions.create({ ...thinkRequest, reasoning_format: "none" });
assert.equal(kept.choices[0].message.content, "Two and two make four.</think>\n\nFour.");
assert.equal(kept.choices[0].message.reasoning_content, undefined);

// A reasoning budget: after that many tokens of reasoning the closer is written for the model and
// its answer follows (the random model alone would reason until max_tokens).
for (const stream of [false, true]) {
  const request = {
    model: thinkingModel, messages: [{ role: "user", content: "2+2?" }], max_tokens: 40, seed: 3,
    reasoning_budget_tokens: 6,
  };
  const { message } = stream ? await collect(request)
    : await client.chat.completions.create(request).then((r) => ({ message: r.choices[0].message }));
  assert.ok(message.reasoning_content.length > 0, JSON.stringify(message));
  assert.ok(message.content.length > 0, JSON.stringify(message));
  assert.ok(!message.content.includes("</think>"), JSON.stringify(message));
}
const unbudgeted = await client.chat.completions.create({
  model: thinkingModel, messages: [{ role: "user", content: "2+2?" }], max_tokens: 40, seed: 3,
});
assert.equal(unbudgeted.choices[0].finish_reason, "length");
assert.equal(unbudgeted.choices[0].message.content, "", "without a budget the random model reasons to the end");
const noThinking = await client.chat.completions.create({
  model: thinkingModel, messages: [{ role: "user", content: "2+2?" }], max_tokens: 10, seed: 3,
  thinking_token_budget: 0,
});
assert.equal(noThinking.choices[0].message.reasoning_content, undefined, JSON.stringify(noThinking.choices[0].message));
assert.ok(noThinking.choices[0].message.content.length > 0);
await assert.rejects(
  client.chat.completions.create({
    model: thinkingModel, messages: [{ role: "user", content: "x" }],
    reasoning_budget_tokens: 3, thinking_token_budget: 4,
  }),
  (e) => e.status === 400 && e.param === "thinking_token_budget",
);

const models = await fetch(baseURL.replace(/\/v1$/, "") + "/models").then((r) => r.json());
const parsers = Object.fromEntries(models.data.map((m) => [m.id, m.tool_parser]));
assert.equal(parsers[toolModel], "hermes");
console.log("ok");
