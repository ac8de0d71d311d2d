// Every template family end to end through the official OpenAI client: a random-weight model
// served with a real chat template of the family makes a call the grammar forces
// (tool_choice "required"), the client sends the call and the tool's result back, and the model
// answers. Streamed and not, with the same seed: the streamed call (id and name first, then the
// arguments in fragments) accumulates to exactly the non-streamed one.
// Usage: node families_test.mjs BASE_URL MODEL=FAMILY...
import OpenAI from "openai";
import assert from "node:assert/strict";
import { collect, tools, validate } from "./tool_support.mjs";

const [baseURL, ...pairs] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "test-key", maxRetries: 0, timeout: 120_000 });

// Formats whose calls are written as XML parameters, or as a reply that is only JSON: a call
// arrives whole once complete. The others stream their arguments.
const whole = new Set(["qwen3-coder", "glm", "deepseek-v3.2", "generic", "llama3"]);

async function once(request) {
  const reply = await client.chat.completions.create(request);
  return { message: reply.choices[0].message, finish: reply.choices[0].finish_reason };
}

const models = await fetch(baseURL.replace(/\/v1$/, "") + "/models").then((r) => r.json());
const parsers = Object.fromEntries(models.data.map((m) => [m.id, m.tool_parser]));

// Variables a template reads beyond the chat context: FireFunction's tool list as text and date,
// which its clients pass through chat_template_kwargs.
function kwargsFor(family, thinking) {
  const kwargs = { enable_thinking: thinking };
  if (family === "firefunction") Object.assign(kwargs, { functions: JSON.stringify(tools), datetime: "2026-11-25" });
  return kwargs;
}

for (const pair of pairs) {
  const [model, family] = pair.split("=");
  assert.equal(parsers[model], family, `${model}: the family detected from its template`);
  const calls = {};
  for (const stream of [false, true]) {
    const what = `${model} (${family}, ${stream ? "streamed" : "not streamed"})`;
    const messages = [{ role: "user", content: "What is the weather in Paris for the next two days?" }];
    const request = {
      model, messages, tools, tool_choice: "required", parallel_tool_calls: false,
      max_tokens: 400, seed: 11, chat_template_kwargs: kwargsFor(family, false),
      // Templates that open reasoning whatever the kwargs (DeepSeek-R1's) leave a random model
      // reasoning until max_tokens: the budget closes the block and the call follows.
      reasoning_budget_tokens: 12,
    };
    const { message, finish, fragments } = stream ? await collect(client, request) : await once(request);
    assert.equal(finish, "tool_calls", `${what}: ${JSON.stringify(message)}`);
    assert.equal(message.tool_calls.length, 1, `${what}: ${JSON.stringify(message)}`);
    assert.ok(!message.content, `${what}: a forced call has no content: ${JSON.stringify(message.content)}`);
    const call = message.tool_calls[0];
    assert.match(call.id, /^[A-Za-z0-9_]{9,}$/, what);
    assert.ok(["get_weather", "get_time"].includes(call.function.name), `${what}: ${call.function.name}`);
    const args = JSON.parse(call.function.arguments);
    assert.ok(validate(args), `${what}: ${JSON.stringify(validate.errors)}: ${call.function.arguments}`);
    calls[stream] = call;
    if (stream && !whole.has(family)) {
      assert.ok(fragments[0] > 1, `${what}: the arguments stream (${fragments[0]} deltas)`);
    }

    // Second turn: the call as the client got it and the tool's result; the model answers.
    messages.push({ role: "assistant", content: null, tool_calls: message.tool_calls });
    messages.push({ role: "tool", tool_call_id: call.id, content: JSON.stringify({ sky: "clear" }) });
    const answerRequest = {
      model, messages, tools, tool_choice: "none", max_tokens: 8, seed: 7,
      chat_template_kwargs: kwargsFor(family, false),
    };
    const answer = stream ? await collect(client, answerRequest) : await once(answerRequest);
    assert.ok(["stop", "length"].includes(answer.finish), `${what}: ${answer.finish}`);
    assert.equal(typeof answer.message.content, "string", what);
    // Templates that always open a reasoning block (QwQ, DeepSeek-R1) spend 8 tokens thinking.
    const said = answer.message.content + (answer.message.reasoning_content ?? "");
    assert.ok(said.length > 0, `${what}: the answer has content: ${JSON.stringify(answer.message)}`);
    assert.equal(answer.message.tool_calls?.length ?? 0, 0, what);
  }
  assert.equal(calls[true].function.name, calls[false].function.name, model);
  assert.equal(calls[true].function.arguments, calls[false].function.arguments, model);
  console.log(`${model}: ${family} ok (${calls[false].function.name} ${calls[false].function.arguments})`);
}
console.log("ok");
