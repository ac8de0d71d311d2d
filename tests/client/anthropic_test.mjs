// The official Anthropic client (@anthropic-ai/sdk) driving ggufd's Messages API the way Claude
// Code and Anthropic-SDK agents do: text, stop sequences, streaming, forced tool calls and a
// follow-up turn with their results, thinking, token counting and errors.
// Usage: node anthropic_test.mjs BASE_URL TEXT_MODEL TOOL_MODEL THINKING_MODEL (BASE_URL without /v1)
import Anthropic from "@anthropic-ai/sdk";
import assert from "node:assert/strict";
import { parameters, validate } from "./tool_support.mjs";

const [baseURL, textModel, toolModel, thinkingModel] = process.argv.slice(2);
const client = new Anthropic({ baseURL, apiKey: "test-key", maxRetries: 0, timeout: 60_000 });

// Streamed, with the event types as they arrived (the SDK drops ping itself).
async function streamed(request) {
  const stream = client.messages.stream(request);
  const types = [];
  stream.on("streamEvent", (event) => types.push(event.type));
  const message = await stream.finalMessage();
  return { message, types };
}

// Each block: start, its deltas, stop; the message's events around them.
function checkOrder(types) {
  assert.equal(types[0], "message_start", types.join());
  assert.deepEqual(types.slice(-2), ["message_delta", "message_stop"], types.join());
  let open = false;
  for (const type of types.slice(1, -2)) {
    if (type === "content_block_start") {
      assert.ok(!open, types.join());
      open = true;
    } else if (type === "content_block_stop") {
      assert.ok(open, types.join());
      open = false;
    } else {
      assert.equal(type, "content_block_delta", types.join());
      assert.ok(open, types.join());
    }
  }
  assert.ok(!open, types.join());
}

// Text, greedy so that every form of the request gives the same reply.
const request = {
  model: textModel, max_tokens: 24, temperature: 0,
  system: [{ type: "text", text: "You tell stories." }],
  messages: [{ role: "user", content: "Once upon a time" }],
};
const message = await client.messages.create(request);
assert.match(message.id, /^msg_[0-9a-f]{16}$/);
assert.equal(message.type, "message");
assert.equal(message.role, "assistant");
assert.equal(message.model, textModel);
assert.equal(message.content.length, 1, JSON.stringify(message.content));
assert.equal(message.content[0].type, "text");
const text = message.content[0].text;
assert.ok(text.length > 8, text);
assert.ok(["end_turn", "max_tokens"].includes(message.stop_reason), message.stop_reason);
assert.equal(message.stop_sequence, null);
assert.ok(message.usage.output_tokens > 0 && message.usage.output_tokens <= 24);
assert.equal(message.usage.cache_creation_input_tokens, 0);

// count_tokens: the prompt the message was generated from (cached tokens included).
const counted = await client.messages.countTokens({ model: textModel, system: request.system, messages: request.messages });
assert.equal(counted.input_tokens, message.usage.input_tokens + message.usage.cache_read_input_tokens);
assert.ok(counted.input_tokens > 0);

// Streamed: events in order, and the same message.
const { message: final, types } = await streamed(request);
checkOrder(types);
assert.deepEqual(final.content, message.content);
assert.equal(final.stop_reason, message.stop_reason);
assert.equal(final.usage.output_tokens, message.usage.output_tokens);
assert.equal(final.usage.input_tokens + final.usage.cache_read_input_tokens, counted.input_tokens);

// A stop sequence from the reply itself ends it there, and is named.
const stop = text.slice(Math.floor(text.length / 2)).match(/[a-z]{3}/)?.[0] ?? text.slice(-3);
for (const stream of [false, true]) {
  const stopped = stream ? (await streamed({ ...request, stop_sequences: [stop] })).message
    : await client.messages.create({ ...request, stop_sequences: [stop] });
  assert.equal(stopped.stop_reason, "stop_sequence", JSON.stringify(stopped));
  assert.equal(stopped.stop_sequence, stop);
  assert.equal(stopped.content[0]?.text ?? "", text.slice(0, text.indexOf(stop)));
}

// Tools: a forced call (any tool, then a named one) is a tool_use block whose input fits the
// schema; its result goes back as a tool_result block in a user turn.
const tools = [
  { name: "get_weather", description: "The weather in a city.", input_schema: parameters },
  { name: "get_time", description: "The time in a city.", input_schema: parameters },
];
const calls = {};
for (const stream of [false, true]) {
  const messages = [{ role: "user", content: "What is the weather in Paris for the next two days?" }];
  const forced = {
    model: toolModel, max_tokens: 120, temperature: 0, messages, tools,
    tool_choice: { type: "any", disable_parallel_tool_use: true }, thinking: { type: "disabled" },
  };
  const reply = stream ? (await streamed(forced)).message : await client.messages.create(forced);
  assert.equal(reply.stop_reason, "tool_use", JSON.stringify(reply));
  const uses = reply.content.filter((b) => b.type === "tool_use");
  assert.equal(uses.length, 1, JSON.stringify(reply.content));
  assert.equal(reply.content.at(-1), uses[0], "the call is the last block");
  const use = uses[0];
  assert.ok(["get_weather", "get_time"].includes(use.name), use.name);
  assert.ok(use.id.length > 0);
  assert.ok(validate(use.input), `${JSON.stringify(validate.errors)}: ${JSON.stringify(use.input)}`);
  calls[stream] = { name: use.name, input: use.input };

  messages.push({ role: "assistant", content: reply.content });
  const result = { type: "tool_result", tool_use_id: use.id, content: [{ type: "text", text: JSON.stringify({ sky: "clear" }) }] };
  messages.push({ role: "user", content: [result, { type: "text", text: "Thanks." }] });
  const answerRequest = { model: toolModel, max_tokens: 8, temperature: 0, messages, tools };
  const answer = stream ? (await streamed(answerRequest)).message : await client.messages.create(answerRequest);
  assert.ok(["end_turn", "max_tokens"].includes(answer.stop_reason), JSON.stringify(answer));
  assert.equal(answer.content[0].type, "text", JSON.stringify(answer.content));
  assert.ok(answer.content[0].text.length > 0);
  // The result reached the prompt: it counts, and an error result says so.
  const withResult = await client.messages.countTokens({ model: toolModel, messages, tools });
  const failed = structuredClone(messages);
  failed.at(-1).content[0].is_error = true;
  const withError = await client.messages.countTokens({ model: toolModel, messages: failed, tools });
  assert.ok(withError.input_tokens > withResult.input_tokens);
}
assert.deepEqual(calls[true], calls[false]);
const named = await client.messages.create({
  model: toolModel, max_tokens: 120, temperature: 0, tools, thinking: { type: "disabled" },
  messages: [{ role: "user", content: "Time in Oslo?" }], tool_choice: { type: "tool", name: "get_time" },
});
assert.equal(named.stop_reason, "tool_use");
assert.equal(named.content.at(-1).name, "get_time");
assert.ok(validate(named.content.at(-1).input));

// Thinking: the template opens a reasoning block; after the budget the block is closed for the
// model, which answers. The thinking block comes first, then the text.
const thinkRequest = {
  model: thinkingModel, max_tokens: 40, temperature: 0, thinking: { type: "enabled", budget_tokens: 16 },
  messages: [{ role: "user", content: "2+2?" }],
};
const thought = await client.messages.create(thinkRequest);
assert.deepEqual(thought.content.map((b) => b.type), ["thinking", "text"], JSON.stringify(thought.content));
assert.ok(thought.content[0].thinking.length > 0);
assert.equal(thought.content[0].signature, "");
assert.ok(thought.content[1].text.length > 0);
const { message: thoughtStreamed, types: thinkTypes } = await streamed(thinkRequest);
checkOrder(thinkTypes);
assert.deepEqual(thoughtStreamed.content, thought.content);

// Errors: the SDK's classes, Anthropic's error types.
await assert.rejects(
  client.messages.create({ model: textModel, messages: request.messages }),
  (e) => e instanceof Anthropic.BadRequestError && e.error?.error?.type === "invalid_request_error" &&
    e.message.includes("'max_tokens' is required"),
);
await assert.rejects(
  client.messages.create({
    model: textModel, max_tokens: 4,
    messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "AAAA" } }] }],
  }),
  // A picture for a model loaded without a projector.
  (e) => e instanceof Anthropic.BadRequestError && e.message.includes("does not take images"),
);
await assert.rejects(
  client.messages.create({ ...request, tools: [{ type: "web_search_20250305", name: "web_search" }] }),
  (e) => e instanceof Anthropic.BadRequestError && e.message.includes("server tool"),
);
await assert.rejects(
  client.messages.create({ ...request, model: "no-such-model" }),
  (e) => e instanceof Anthropic.NotFoundError && e.error?.error?.type === "not_found_error",
);
console.log("ok");
