// The chat page (webui/) in a real browser: headless Chromium driven through its DevTools protocol
// (cdp.mjs) against live daemons.
// Usage: node browser_test.mjs CHROMIUM WORK_DIR DEMO_URL API_KEY MODELS_URL
//   DEMO_URL: a ggufd serving the built-in demo behind API_KEY. The page is loaded through a proxy
//     that puts it under a path prefix (/ggufd/, as nginx's `location /ggufd/ { proxy_pass ...; }`),
//     so every URL the page uses must be relative. There: the key is asked for (a wrong one
//     refused), the demo's facts say it writes gibberish, a reply streams and shows its figures,
//     a long reply is stopped and its slot freed, the conversation survives a reload, and
//     structured output and a forced tool call are shown as data. The screenshot is
//     WORK_DIR/chat.png.
//   MODELS_URL: a ggufd serving a generating model `chat` with a thinking template and an encoder
//     `embed`: the encoder is shown as embeddings only and cannot be chatted with; chat's reasoning
//     is shown folded.
import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { Browser } from "./cdp.mjs";

const [chromium, work, demoUrl, apiKey, modelsUrl] = process.argv.slice(2);
const started = Date.now();
const log = (text) => console.log(`[${((Date.now() - started) / 1000).toFixed(1)} s] ${text}`);

// A reverse proxy serving `upstream` under /ggufd/ (the prefix stripped), streaming both ways;
// a client that leaves closes the upstream request too, as nginx does.
function prefixProxy(upstream) {
  const target = new URL(upstream);
  const server = http.createServer((req, res) => {
    if (!req.url.startsWith("/ggufd/")) {
      res.writeHead(404, { "Content-Type": "text/plain" }).end(`not under the prefix: ${req.url}`);
      return;
    }
    const forward = http.request({
      host: target.hostname, port: target.port, method: req.method,
      path: req.url.slice("/ggufd".length), headers: req.headers,
    }, (answer) => {
      res.writeHead(answer.statusCode, answer.headers);
      answer.pipe(res);
    });
    forward.on("error", () => res.destroy());
    res.on("close", () => forward.destroy());
    req.pipe(forward);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

async function busySlots() {
  const text = await (await fetch(`${demoUrl}/metrics`, { headers: { Authorization: `Bearer ${apiKey}` } })).text();
  const line = text.split("\n").find((l) => l.startsWith('ggufd_slots_busy{model="demo-random"}'));
  assert.ok(line, `no busy-slots gauge in /metrics:\n${text.slice(0, 400)}`);
  return Number(line.split(" ").pop());
}

// Expressions run in the page.
const $ = (id) => `document.getElementById(${JSON.stringify(id)})`;
const assistantTexts = `[...document.querySelectorAll('.message.assistant .body .content')].map((e) => e.textContent)`;
const lastStats = `(document.querySelector('.message.assistant:last-child .stats') || {}).textContent || ''`;
const busy = `(document.body.dataset.busy === 'true')`;

async function sendMessage(page, text) {
  await page.eval(`${$("input")}.value = ${JSON.stringify(text)}; ${$("composer")}.requestSubmit(); true`);
}

async function setSetting(page, id, value) {
  await page.eval(`(() => { const el = ${$(id)}; el.value = ${JSON.stringify(String(value))};
    el.dispatchEvent(new Event('input')); return true; })()`);
}

const browser = new Browser(chromium, path.join(work, "profile"));
const proxy = await prefixProxy(demoUrl);
const pageUrl = `http://127.0.0.1:${proxy.address().port}/ggufd/`;
let page = null;
try {
  page = await browser.newPage();
  await page.send("Emulation.setDeviceMetricsOverride", { width: 1280, height: 860, deviceScaleFactor: 1, mobile: false });

  // The page's own files need no key; its first API call gets a 401 and asks for one.
  await page.goto(pageUrl);
  log("page loaded through the prefix proxy");
  await page.waitFor(`${$("key-dialog")}.open`, "the API key dialog");
  await page.eval(`${$("key")}.value = 'not-the-key'; ${$("key-form")}.requestSubmit(); true`);
  await page.waitFor(`${$("key-dialog")}.open && ${$("key-dialog")}.textContent.includes('refused')`,
    "the dialog to say the key was refused");
  await page.eval(`${$("key")}.value = ${JSON.stringify(apiKey)}; ${$("key-form")}.requestSubmit(); true`);
  await page.waitFor(`[...${$("model")}.options].some((o) => o.value === 'demo-random')`, "the model list");
  const facts = await page.waitFor(`${$("facts")}.textContent.includes('gibberish') && ${$("facts")}.textContent`,
    "the demo's facts to say it writes gibberish");
  for (const fact of ["llama", "Q8_0", "2048", "chat"]) assert.ok(facts.includes(fact), `facts lack ${fact}: ${facts}`);
  assert.equal(await page.eval(`localStorage.getItem('ggufd.apiKey')`), apiKey);
  log("key accepted, model facts shown");

  // A short reply, streamed, with its figures.
  await setSetting(page, "system", "You are terse.");
  await setSetting(page, "temperature", 0);
  await setSetting(page, "max-tokens", 24);
  await sendMessage(page, "Hello there");
  await page.waitFor(`!${busy} && document.querySelectorAll('.message.assistant').length === 1 && ${lastStats}`,
    "the first reply to end");
  let stats = await page.eval(lastStats);
  assert.match(stats, /\d+ tokens · [\d.]+ tokens\/s · first token \d+ ms · prompt \d+ tokens \(\d+ cached\)/, stats);
  const first = await page.eval(assistantTexts);
  assert.equal(first.length, 1);
  assert.ok(first[0].length > 0, "the first reply is empty");
  log(`first reply: ${stats}`);

  // A long reply: text appears while it streams; Stop aborts the fetch and the server frees the slot.
  await setSetting(page, "max-tokens", 1500);
  await setSetting(page, "extra", '{"ignore_eos": true}');
  await sendMessage(page, "Write a very long story");
  await page.waitFor(`${busy} && (document.querySelector('.message.assistant:last-child .content') || {}).textContent?.length >= 40`,
    "streamed text while the reply is being written");
  assert.equal(await busySlots(), 1, "no slot busy while the reply streams");
  await page.eval(`${$("stop")}.click(); true`);
  await page.waitFor(`!${busy}`, "the page to stop");
  stats = await page.eval(lastStats);
  assert.match(stats, /stopped/, stats);
  const deadline = Date.now() + 5000;
  while (await busySlots() !== 0) {
    assert.ok(Date.now() < deadline, "the slot was not freed within 5 s of Stop");
    await new Promise((r) => setTimeout(r, 50));
  }
  log(`long reply stopped (${stats}), slot freed`);

  // A third turn: its prompt starts with the earlier turns, which the server had cached.
  await setSetting(page, "extra", "");
  await setSetting(page, "max-tokens", 16);
  await sendMessage(page, "Thanks. Now show me `code`:\n```js\nconsole.log(1)\n```");
  await page.waitFor(`!${busy} && document.querySelectorAll('.message.assistant').length === 3 && ${lastStats}`,
    "the third reply to end");
  stats = await page.eval(lastStats);
  const cached = Number(/\((\d+) cached\)/.exec(stats)[1]);
  assert.ok(cached > 0, `no cached prompt tokens shown for the third turn: ${stats}`);
  // The user's code block is monospaced.
  const font = await page.eval(`getComputedStyle(document.querySelector('.message.user pre code')).fontFamily`);
  assert.match(font, /mono/i, font);
  fs.writeFileSync(path.join(work, "chat.png"), await page.screenshot());
  log(`third reply: ${stats}; screenshot written to ${path.join(work, "chat.png")}`);

  // Reload: the conversation comes back from localStorage, key included.
  const before = await page.eval(assistantTexts);
  await page.reload();
  await page.waitFor(`document.querySelectorAll('.message.assistant').length === 3`, "the conversation after the reload");
  assert.deepEqual(await page.eval(assistantTexts), before);
  assert.equal(await page.eval(`document.querySelector('#conversations li.current span').textContent`), "Hello there");
  assert.equal(await page.eval(`JSON.parse(localStorage.getItem('ggufd.chat.v1')).conversations[0].messages.length`), 6);
  assert.equal(await page.eval(`${$("system")}.value`), "You are terse.");
  await page.waitFor(`!${$("key-dialog")}.open && !${$("send")}.disabled`, "the page to be ready with the stored key");
  log("conversation restored after the reload");

  // Structured output and tool calls are shown as data, in a new conversation.
  await page.eval(`${$("new-chat")}.click(); true`);
  await page.waitFor(`document.querySelectorAll('.message').length === 0`, "an empty new conversation");
  await setSetting(page, "max-tokens", 200);
  await setSetting(page, "format", "json_schema");
  await setSetting(page, "schema", JSON.stringify({
    type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"], additionalProperties: false,
  }));
  await sendMessage(page, "Is it fine?");
  await page.waitFor(`!${busy} && document.querySelectorAll('.message.assistant .stats').length === 1`, "the JSON reply");
  const json = await page.eval(`[...document.querySelectorAll('.message.assistant .data-label, .message.assistant pre.data')].map((e) => e.textContent)`);
  assert.equal(json[0], "JSON", JSON.stringify(json));
  assert.equal(typeof JSON.parse(json[1]).ok, "boolean", json[1]);
  await setSetting(page, "format", "text");
  await setSetting(page, "tools", JSON.stringify([{ type: "function", function: {
    name: "get_weather", parameters: { type: "object", properties: { city: { enum: ["Paris", "Oslo"] } }, required: ["city"] },
  } }]));
  await setSetting(page, "extra", '{"tool_choice": "required"}');
  await sendMessage(page, "Weather?");
  await page.waitFor(`!${busy} && document.querySelectorAll('.message.assistant .stats').length === 2`, "the tool call");
  const call = await page.eval(`[...document.querySelectorAll('.message.assistant:last-child .data-label, .message.assistant:last-child pre.data')].map((e) => e.textContent)`);
  assert.match(call[0], /^Tool call: get_weather/, JSON.stringify(call));
  assert.ok(["Paris", "Oslo"].includes(JSON.parse(call[1]).city), call[1]);
  assert.equal(await page.eval(`document.querySelectorAll('#conversations li').length`), 2);
  log("structured output and a tool call shown as data");
  assert.deepEqual(page.errors, [], "uncaught errors in the page");

  // An encoder is listed as embeddings only and cannot be chatted with.
  const second = await browser.newPage();
  await second.goto(`${modelsUrl}/`);
  await second.waitFor(`${$("model")}.options.length === 2`, "both models");
  const labels = await second.eval(`[...${$("model")}.options].map((o) => o.textContent)`);
  assert.deepEqual(labels, ["chat", "embed (embeddings only)"]);
  assert.equal(await second.eval(`${$("model")}.value`), "chat", "the chat model is not chosen first");
  assert.equal(await second.eval(`${$("send")}.disabled`), false);
  await second.eval(`${$("model")}.value = 'embed'; ${$("model")}.dispatchEvent(new Event('change')); true`);
  const notice = await second.waitFor(`(document.querySelector('#facts .notice') || {}).textContent`, "the encoder's notice");
  assert.match(notice, /only makes embeddings/, notice);
  assert.equal(await second.eval(`${$("send")}.disabled`), true, "Send is enabled for an encoder");
  log("encoder shown as embeddings only");

  // `chat` has a thinking template: its reasoning is shown folded, before the answer.
  await second.eval(`${$("model")}.value = 'chat'; ${$("model")}.dispatchEvent(new Event('change')); true`);
  await second.waitFor(`(document.querySelector('#facts') || {}).textContent.includes('reasoning')`, "the reasoning badge");
  await setSetting(second, "max-tokens", 24);
  await setSetting(second, "extra", '{"reasoning_budget_tokens": 6}');
  await sendMessage(second, "Think first");
  await second.waitFor(`!${busy} && document.querySelector('.message.assistant .stats')`, "the thinking reply");
  const reasoning = await second.eval(`(() => { const d = document.querySelector('.message.assistant details.reasoning');
    return d && { open: d.open, summary: d.querySelector('summary').textContent, text: d.querySelector('.text').textContent }; })()`);
  assert.ok(reasoning && reasoning.text.length > 0, `no reasoning shown: ${JSON.stringify(reasoning)}`);
  assert.equal(reasoning.open, false, "the reasoning is not folded");
  assert.match(reasoning.summary, /^Reasoning/);
  assert.deepEqual(second.errors, [], "uncaught errors in the page");
  log("reasoning shown folded");
} catch (e) {
  // What the page showed, for the log, and its picture.
  if (page) {
    try {
      console.error(`the page's text:\n${await page.eval("document.body.innerText")}`);
      console.error(`uncaught errors in the page: ${JSON.stringify(page.errors)}`);
      fs.writeFileSync(path.join(work, "failure.png"), await page.screenshot());
    } catch (inner) {
      console.error(`(the page could not be read: ${inner.message})`);
    }
  }
  throw e;
} finally {
  proxy.close();
  await browser.close();
}
log("passed");
