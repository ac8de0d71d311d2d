// The official OpenAI client against ggufd: a completion, a chat completion, a streamed chat
// completion and structured output (response_format json_schema, checked with Ajv, a real JSON
// Schema validator). Usage: node client_test.mjs BASE_URL MODEL
import OpenAI from "openai";
import Ajv from "ajv";
import assert from "node:assert/strict";
import { heroSchema as schema } from "./tool_support.mjs";

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "test-key", maxRetries: 0, timeout: 60_000 });

const completion = await client.completions.create({
  model, prompt: "Once upon a time", max_tokens: 16, temperature: 0,
});
assert.equal(completion.object, "text_completion");
assert.equal(completion.choices.length, 1);
assert.ok(completion.choices[0].text.startsWith(", there was a little girl"), completion.choices[0].text);
assert.equal(completion.choices[0].finish_reason, "length");
assert.equal(completion.usage.completion_tokens, 16);

const chat = await client.chat.completions.create({
  model, messages: [{ role: "user", content: "Tell me a story." }], max_tokens: 12, seed: 1,
});
assert.equal(chat.object, "chat.completion");
assert.equal(chat.choices[0].message.role, "assistant");
assert.equal(typeof chat.choices[0].message.content, "string");
assert.ok(chat.usage.prompt_tokens > 0);

const stream = await client.chat.completions.create({
  model, messages: [{ role: "user", content: "Tell me a story." }], max_tokens: 12, seed: 1, stream: true,
  stream_options: { include_usage: true },
});
let streamed = "";
let finish = null;
let usage = null;
for await (const chunk of stream) {
  assert.equal(chunk.object, "chat.completion.chunk");
  if (chunk.usage) usage = chunk.usage;
  for (const choice of chunk.choices) {
    streamed += choice.delta?.content ?? "";
    if (choice.finish_reason) finish = choice.finish_reason;
  }
}
assert.equal(streamed, chat.choices[0].message.content, "streamed and non-streamed chats differ");
assert.ok(finish === "length" || finish === "stop", String(finish));
assert.ok(usage && usage.completion_tokens > 0, "stream_options.include_usage gave no usage");

const validate = new Ajv({ strict: true }).compile(schema);
for (const [temperature, stream] of [[0, false], [1, false], [1, true]]) {
  const request = {
    model, messages: [{ role: "user", content: "Describe the hero of a story." }], temperature, seed: 5,
    max_tokens: 200, response_format: { type: "json_schema", json_schema: { name: "hero", strict: true, schema } },
  };
  let content = "";
  let finish = null;
  if (stream) {
    for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
      for (const choice of chunk.choices) {
        content += choice.delta?.content ?? "";
        if (choice.finish_reason) finish = choice.finish_reason;
      }
    }
  } else {
    const structured = await client.chat.completions.create(request);
    content = structured.choices[0].message.content;
    finish = structured.choices[0].finish_reason;
  }
  assert.equal(finish, "stop", `temperature ${temperature}: ${content}`);
  const parsed = JSON.parse(content);
  assert.ok(validate(parsed), `${JSON.stringify(validate.errors)}: ${content}`);
}
// A schema the server cannot follow is a 400 naming the keyword, which the client raises.
await assert.rejects(
  client.chat.completions.create({
    model, messages: [{ role: "user", content: "x" }],
    response_format: { type: "json_schema", json_schema: { name: "n", schema: { type: "number", multipleOf: 3 } } },
  }),
  (e) => e.status === 400 && /multipleOf/.test(e.message),
);

const models = await client.models.list();
assert.ok(models.data.some((m) => m.id === model));
console.log("ok");
