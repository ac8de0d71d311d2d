// The official OpenAI client against ggufd: a completion, a chat completion and a streamed chat
// completion. Usage: node client_test.mjs BASE_URL MODEL
import OpenAI from "openai";
import assert from "node:assert/strict";

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

const models = await client.models.list();
assert.ok(models.data.some((m) => m.id === model));
console.log("ok");
