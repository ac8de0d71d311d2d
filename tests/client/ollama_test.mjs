// The official ollama npm client (ollama-js) against ggufd's Ollama API: listing, show, ps,
// chat and generate (streamed and not, raw and templated), reasoning, a tool-call round trip,
// embeddings and an unknown model.
// Usage: node ollama_test.mjs http://127.0.0.1:PORT STORIES AGENT THINKER EMBED
import assert from "node:assert/strict";
import { Ollama } from "ollama";

const [host, stories, agent, thinker, embed] = process.argv.slice(2);
const ollama = new Ollama({ host });

async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    console.error(`FAIL ${name}:`, e);
    process.exitCode = 1;
  }
}

const figures = (r) => {
  assert.equal(r.done, true);
  for (const k of ["total_duration", "load_duration", "prompt_eval_duration", "eval_duration"]) {
    assert.ok(Number.isInteger(r[k]) && r[k] >= 0, `${k}: ${r[k]}`);
  }
  assert.ok(r.prompt_eval_count > 0);
};

await check("version", async () => {
  const v = await ollama.version();
  // Clients compare it as dotted numbers (VS Code Copilot wants 0.6.4 or later).
  const [major, minor] = v.version.split(".").map(Number);
  assert.ok(major > 0 || minor >= 7, v.version);
});

await check("list", async () => {
  const { models } = await ollama.list();
  const names = models.map((m) => m.name);
  for (const m of [stories, agent, thinker, embed]) assert.ok(names.includes(`${m}:latest`), names);
  const s = models.find((m) => m.name === `${stories}:latest`);
  assert.equal(s.model, `${stories}:latest`);
  assert.equal(s.details.format, "gguf");
  assert.equal(s.details.family, "llama");
  assert.match(s.details.parameter_size, /^[0-9.]+[KMB]?$/);
  assert.match(s.digest, /^[0-9a-f]{64}$/);
  assert.ok(s.size > 0);
  assert.ok(!Number.isNaN(Date.parse(s.modified_at)));
});

await check("show capabilities", async () => {
  const a = await ollama.show({ model: agent });
  assert.ok(a.capabilities.includes("completion") && a.capabilities.includes("tools"), a.capabilities);
  assert.match(a.template, /tool/);
  assert.equal(a.model_info["general.architecture"], "llama");
  assert.ok(a.model_info["llama.context_length"] > 0);
  const t = await ollama.show({ model: `${thinker}:latest` });
  assert.ok(t.capabilities.includes("thinking"), t.capabilities);
  assert.ok(!t.capabilities.includes("tools"), t.capabilities);
  const e = await ollama.show({ model: embed });
  assert.deepEqual(e.capabilities, ["embedding"]);
});

await check("chat", async () => {
  const options = { num_predict: 6, seed: 7, temperature: 0.5 };
  const messages = [{ role: "user", content: "Once upon a time" }];
  const r = await ollama.chat({ model: stories, messages, options });
  assert.equal(r.model, stories);
  assert.equal(r.message.role, "assistant");
  assert.ok(r.message.content.length > 0);
  assert.equal(r.done_reason, "length");
  assert.equal(r.eval_count, 6);
  figures(r);
  // Streamed, with the same seed: the same text in pieces.
  let text = "";
  let last;
  for await (const part of await ollama.chat({ model: stories, messages, options, stream: true })) {
    if (!part.done) text += part.message.content;
    last = part;
  }
  assert.equal(text, r.message.content);
  assert.equal(last.done_reason, "length");
  figures(last);
});

await check("chat thinking", async () => {
  const r = await ollama.chat({
    model: thinker,
    messages: [{ role: "user", content: "hi" }],
    think: true,
    options: { num_predict: 4, seed: 3 },
  });
  assert.ok(r.message.thinking.length > 0, JSON.stringify(r.message));
});

await check("chat tool round trip", async () => {
  const tools = [
    {
      type: "function",
      function: {
        name: "get_weather",
        description: "Weather of a city",
        parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
      },
    },
  ];
  const messages = [
    { role: "user", content: "Weather in Oslo?" },
    {
      role: "assistant",
      content: "",
      tool_calls: [{ function: { name: "get_weather", arguments: { city: "Oslo" } } }],
    },
    { role: "tool", tool_name: "get_weather", content: "rain" },
  ];
  const r = await ollama.chat({ model: agent, messages, tools, options: { num_predict: 4, seed: 1 } });
  figures(r);
  // The history, rendered by the Hermes-style template with the call and its result, is longer
  // than the question alone.
  const q = await ollama.chat({ model: agent, messages: messages.slice(0, 1), tools, options: { num_predict: 1 } });
  assert.ok(r.prompt_eval_count > q.prompt_eval_count + 10, `${r.prompt_eval_count} ${q.prompt_eval_count}`);
});

await check("generate", async () => {
  const options = { num_predict: 5, seed: 11 };
  const raw = await ollama.generate({ model: stories, prompt: "Once upon a time", raw: true, options });
  assert.ok(raw.response.length > 0);
  assert.equal(raw.done_reason, "length");
  figures(raw);
  let text = "";
  for await (const part of await ollama.generate({
    model: stories, prompt: "Once upon a time", raw: true, options, stream: true,
  })) {
    text += part.response;
  }
  assert.equal(text, raw.response);
  // Templated: the prompt as a user turn, with the system text, is longer than the raw prompt.
  const t = await ollama.generate({ model: agent, prompt: "Once upon a time", system: "Be brief.", options });
  assert.ok(t.prompt_eval_count > raw.prompt_eval_count, `${t.prompt_eval_count}`);
  // An empty prompt loads the model.
  const load = await ollama.generate({ model: stories, prompt: "" });
  assert.equal(load.done_reason, "load");
});

// Fill-in-the-middle: Ollama's suffix gives the prompt and answer of OpenAI's completions with the
// same suffix; a model without FIM tokens refuses it.
await check("generate with suffix", async () => {
  const prefix = "def add(a, b):\n", suffix = "\n    return c\n";
  const r = await ollama.generate({ model: agent, prompt: prefix, suffix, options: { num_predict: 6, temperature: 0 } });
  const openai = await (await fetch(`${host}/v1/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ model: agent, prompt: prefix, suffix, max_tokens: 6, temperature: 0 }),
  })).json();
  assert.equal(r.response, openai.choices[0].text);
  assert.equal(r.prompt_eval_count, openai.usage.prompt_tokens);
  await assert.rejects(ollama.generate({ model: stories, prompt: prefix, suffix }), (e) => e.status_code === 400);
});

await check("embed", async () => {
  const r = await ollama.embed({ model: embed, input: ["a cat", "a dog"] });
  assert.equal(r.embeddings.length, 2);
  const norm = Math.hypot(...r.embeddings[0]);
  assert.ok(Math.abs(norm - 1) < 1e-3, `${norm}`);
  assert.notDeepEqual(r.embeddings[0], r.embeddings[1]);
  const one = await ollama.embeddings({ model: embed, prompt: "a cat" });
  assert.equal(one.embedding.length, r.embeddings[0].length);
});

await check("ps", async () => {
  const { models } = await ollama.ps();
  const s = models.find((m) => m.name === `${stories}:latest`);
  assert.ok(s, JSON.stringify(models.map((m) => m.name)));
  assert.equal(s.size_vram, 0);
  assert.ok(!Number.isNaN(Date.parse(s.expires_at)));
});

await check("unknown model", async () => {
  await assert.rejects(
    ollama.chat({ model: "no-such-model", messages: [{ role: "user", content: "x" }] }),
    (e) => e.name === "ResponseError" && e.status_code === 404 && /no-such-model/.test(e.error),
  );
  await assert.rejects(ollama.pull({ model: "llama3" }), (e) => e.status_code === 501);
});
