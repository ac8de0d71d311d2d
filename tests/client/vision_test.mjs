// The official openai client sending a picture the way chat apps do: an image_url content part
// with a base64 data URL, to a model served with its projector (--mmproj); greedy, so the
// streamed reply is the one the plain request gets. Then the refusals a client sees as
// BadRequestError: an http(s) URL (ggufd does not fetch images) and a model without a projector.
// Usage: node vision_test.mjs BASE_URL VISION_MODEL TEXT_MODEL IMAGE.png
import OpenAI from "openai";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

const [baseURL, visionModel, textModel, imagePath] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "test-key", maxRetries: 0, timeout: 60_000 });
const url = `data:image/png;base64,${readFileSync(imagePath).toString("base64")}`;

const messages = (model, imageUrl) => ({
  model, max_tokens: 4, temperature: 0,
  messages: [{ role: "user", content: [
    { type: "text", text: "What is in this picture?" },
    { type: "image_url", image_url: { url: imageUrl } },
  ] }],
});

const reply = await client.chat.completions.create(messages(visionModel, url));
assert.equal(reply.choices[0].message.role, "assistant");
assert.ok(reply.usage.prompt_tokens > 10, JSON.stringify(reply.usage));
let streamed = "";
for await (const chunk of await client.chat.completions.create({ ...messages(visionModel, url), stream: true })) {
  streamed += chunk.choices[0]?.delta?.content ?? "";
}
assert.equal(streamed, reply.choices[0].message.content);

const models = await client.models.list();
const vision = models.data.find((m) => m.id === visionModel);
assert.deepEqual(vision.capabilities, ["completion", "vision"]);

for (const [model, imageUrl, needle] of [
  [visionModel, "https://example.com/cat.png", "does not fetch images"],
  [textModel, url, "does not take images"],
]) {
  await assert.rejects(client.chat.completions.create(messages(model, imageUrl)), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError, String(e));
    assert.match(e.message, new RegExp(needle));
    return true;
  });
}
console.log("vision_test: ok");
