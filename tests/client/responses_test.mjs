// The official OpenAI client's Responses API (what Codex and the Agents SDK speak) against ggufd:
// a response and its stream (every event in order, read by the SDK's own stream helper), a forced
// function call and its follow-up through previous_response_id with a function_call_output,
// reasoning on a thinking template, structured output from text.format, a cut reply, and the
// stored responses read back and deleted.
// Usage: node responses_test.mjs BASE_URL STORY_MODEL TOOL_MODEL THINKING_MODEL
import OpenAI from "openai";
import Ajv from "ajv";
import assert from "node:assert/strict";
import { heroSchema, parameters, validate as validateArgs } from "./tool_support.mjs";

const [baseURL, storyModel, toolModel, thinkingModel] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "test-key", maxRetries: 0, timeout: 60_000 });

// --- a plain response, then the same one streamed ---
const request = {
  model: storyModel, input: "Once upon a time", instructions: "Tell a story.",
  max_output_tokens: 12, temperature: 0, seed: 1,
};
const plain = await client.responses.create(request);
assert.equal(plain.object, "response");
assert.match(plain.id, /^resp_[0-9a-f]{16}$/);
assert.equal(plain.model, storyModel);
assert.ok(plain.output_text.length > 0, JSON.stringify(plain));
assert.equal(plain.output.length, 1);
assert.equal(plain.output[0].type, "message");
assert.equal(plain.output[0].content[0].type, "output_text");
assert.equal(plain.output[0].content[0].text, plain.output_text);
assert.equal(plain.instructions, "Tell a story.");
assert.ok(plain.usage.input_tokens > 0);
assert.equal(plain.usage.output_tokens, 12);
assert.equal(plain.usage.total_tokens, plain.usage.input_tokens + plain.usage.output_tokens);
// Twelve tokens of a story do not end it: the reply was cut.
assert.equal(plain.status, "incomplete");
assert.deepEqual(plain.incomplete_details, { reason: "max_output_tokens" });
assert.equal(plain.output[0].status, "incomplete");

const events = [];
const stream = client.responses.stream(request);
let deltas = "";
stream.on("response.output_text.delta", (e) => { deltas += e.delta; });
for await (const event of stream) events.push(event);
const streamed = await stream.finalResponse();
events.forEach((e, i) => assert.equal(e.sequence_number, i, JSON.stringify(e)));
const types = events.map((e) => e.type);
const textDeltas = types.filter((t) => t === "response.output_text.delta").length;
assert.ok(textDeltas > 0);
assert.deepEqual(types, [
  "response.created", "response.in_progress", "response.output_item.added",
  "response.content_part.added", ...Array(textDeltas).fill("response.output_text.delta"),
  "response.output_text.done", "response.content_part.done", "response.output_item.done",
  "response.incomplete",
]);
assert.equal(events[0].response.status, "in_progress");
assert.equal(deltas, plain.output_text);
const final = events.at(-1).response;
// Ids and times differ, and the second request reuses the first's prompt from the cache.
const comparable = (r) => ({ ...r, id: undefined, created_at: undefined,
  output: r.output.map((o) => ({ ...o, id: undefined })),
  usage: { ...r.usage, input_tokens_details: undefined } });
assert.deepEqual(comparable(final), comparable(plain), "a streamed response differs from the same one not streamed");
// The SDK's own accumulation of the events (4.104 keeps it through response.incomplete).
assert.equal(streamed.output[0].content[0].text, plain.output_text);

// Stored (the default): read back, listed, deleted.
assert.deepEqual(await client.responses.retrieve(plain.id), plain);
const items = [];
for await (const item of client.responses.inputItems.list(plain.id)) items.push(item);
assert.equal(items.length, 1);
assert.equal(items[0].content, "Once upon a time");
await client.responses.del(plain.id);
await assert.rejects(client.responses.retrieve(plain.id), (e) => e.status === 404);

// --- a forced function call, then its result through previous_response_id ---
const tools = [{ type: "function", name: "get_weather", description: "The weather in a city.", parameters }];
for (const streamIt of [false, true]) {
  const callRequest = {
    model: toolModel, input: "What is the weather in Paris for the next two days?", tools,
    tool_choice: "required", parallel_tool_calls: false, max_output_tokens: 120, seed: 7,
    enable_thinking: false,
  };
  let called;
  if (streamIt) {
    const s = client.responses.stream(callRequest);
    const seen = [];
    for await (const e of s) seen.push(e.type);
    called = await s.finalResponse();
    assert.ok(seen.includes("response.function_call_arguments.delta"), seen.join());
    assert.ok(seen.includes("response.function_call_arguments.done"), seen.join());
    assert.equal(seen.at(-1), "response.completed");
  } else {
    called = await client.responses.create(callRequest);
  }
  assert.equal(called.status, "completed", JSON.stringify(called));
  const calls = called.output.filter((o) => o.type === "function_call");
  assert.equal(calls.length, 1, JSON.stringify(called.output));
  const [call] = calls;
  assert.equal(call.name, "get_weather");
  assert.match(call.call_id, /^call_[A-Za-z0-9]{24}$/);
  assert.match(call.id, /^fc_/);
  const args = JSON.parse(call.arguments);
  assert.ok(validateArgs(args), `${JSON.stringify(validateArgs.errors)}: ${call.arguments}`);

  const followUp = await client.responses.create({
    model: toolModel, previous_response_id: called.id, tools, max_output_tokens: 8, seed: 7,
    input: [{ type: "function_call_output", call_id: call.call_id, output: JSON.stringify({ sky: "clear" }) }],
  });
  assert.equal(followUp.previous_response_id, called.id);
  // The stored question and call reached the template before the tool's result.
  assert.ok(followUp.usage.input_tokens > called.usage.input_tokens + called.usage.output_tokens,
    `${followUp.usage.input_tokens} after ${JSON.stringify(called.usage)}`);
  assert.ok(followUp.output.some((o) => o.type === "message"), JSON.stringify(followUp.output));
}
await assert.rejects(
  client.responses.create({ model: toolModel, input: "x", previous_response_id: "resp_0000000000000000" }),
  (e) => e.status === 404 && e.param === "previous_response_id",
);
await assert.rejects(
  client.responses.create({ model: toolModel, input: "x", tools: [{ type: "web_search_preview" }] }),
  (e) => e.status === 400 && e.param === "tools" && /web_search_preview/.test(e.message),
);

// --- reasoning: the thinking template opens a block the random model writes into ---
const thinkRequest = { model: thinkingModel, input: "2+2?", max_output_tokens: 20, seed: 3, reasoning_budget_tokens: 6 };
const thought = await client.responses.create(thinkRequest);
assert.equal(thought.output[0].type, "reasoning", JSON.stringify(thought.output));
assert.equal(thought.output[0].content[0].type, "reasoning_text");
assert.ok(thought.output[0].content[0].text.length > 0);
assert.equal(thought.output[1].type, "message", JSON.stringify(thought.output));
assert.ok(thought.output_text.length > 0);
// At most the budget's 6 tokens reasoned (the markup's tokens are not counted).
const { reasoning_tokens } = thought.usage.output_tokens_details;
assert.ok(reasoning_tokens > 0 && reasoning_tokens <= 6, String(reasoning_tokens));
// Streamed: the reasoning item's own events come first, and carry the same text.
const thinkEvents = [];
for await (const e of client.responses.stream(thinkRequest)) thinkEvents.push(e);
assert.equal(thinkEvents[2].type, "response.output_item.added");
assert.equal(thinkEvents[2].item.type, "reasoning");
const reasoningText = thinkEvents.filter((e) => e.type === "response.reasoning_text.delta").map((e) => e.delta).join("");
assert.equal(reasoningText, thought.output[0].content[0].text);
assert.equal(thinkEvents.find((e) => e.type === "response.reasoning_text.done").text, reasoningText);
assert.deepEqual(comparable(thinkEvents.at(-1).response), comparable(thought));

// --- structured output: text.format ---
const validate = new Ajv({ strict: true }).compile(heroSchema);
const structured = await client.responses.create({
  model: storyModel, input: "Describe the hero of a story.", seed: 5, max_output_tokens: 200,
  text: { format: { type: "json_schema", name: "hero", strict: true, schema: heroSchema } },
});
assert.equal(structured.status, "completed", structured.output_text);
const parsed = JSON.parse(structured.output_text);
assert.ok(validate(parsed), `${JSON.stringify(validate.errors)}: ${structured.output_text}`);
assert.equal(structured.text.format.name, "hero");
await assert.rejects(
  client.responses.create({ model: storyModel, input: "x", max_output_tokens: 0 }),
  (e) => e.status === 400 && e.param === "max_output_tokens",
);
console.log("ok");
