// ggufd's built-in chat page. Plain JavaScript, no framework: it talks to the server's own OpenAI
// routes with relative URLs (so it works under a proxy's path prefix) and keeps conversations in
// this browser's localStorage only. Model text is always inserted as text, never as HTML.
'use strict';

const STORE_KEY = 'ggufd.chat.v1';
const API_KEY_KEY = 'ggufd.apiKey';
const DEFAULT_SETTINGS = {
  model: '',
  system: '',
  temperature: 0.7,
  max_tokens: 512,
  format: 'text',
  schema: '',
  tools: '',
  extra: '',
};

const $ = (id) => document.getElementById(id);

const state = {
  models: [],          // [{id, facts}] in /v1/models' order
  conversations: [],   // {id, title, settings, messages: [{role, content, reasoning, tool_calls, format, stats, error}]}
  currentId: null,
  controller: null,    // the AbortController of the reply being streamed
};

// ---- storage ----

function loadStore() {
  try {
    const saved = JSON.parse(localStorage.getItem(STORE_KEY) || 'null');
    if (saved && Array.isArray(saved.conversations)) {
      state.conversations = saved.conversations;
      state.currentId = saved.currentId;
    }
  } catch {
    // A store another version wrote, or a broken one: start afresh rather than fail.
  }
  if (!current()) newConversation();
}

function saveStore() {
  try {
    localStorage.setItem(STORE_KEY, JSON.stringify({
      conversations: state.conversations,
      currentId: state.currentId,
    }));
  } catch (e) {
    setStatus('could not save the conversation: ' + e.message);
  }
}

function current() {
  return state.conversations.find((c) => c.id === state.currentId);
}

function newConversation() {
  const from = current();
  const settings = Object.assign({}, DEFAULT_SETTINGS, from ? from.settings : {});
  const conversation = {
    id: Date.now().toString(36) + Math.random().toString(36).slice(2, 6),
    title: '',
    settings,
    messages: [],
  };
  state.conversations.unshift(conversation);
  state.currentId = conversation.id;
  return conversation;
}

// ---- the API key ----

let keyPrompt = null;  // one dialog however many requests got a 401

function askForKey(refused) {
  if (!keyPrompt) {
    keyPrompt = new Promise((resolve, reject) => {
      const dialog = $('key-dialog');
      dialog.querySelector('p').textContent = refused
        ? 'The server refused that key. Enter another API key.'
        : 'This server wants an API key.';
      $('key').value = '';
      const done = (event) => {
        event.preventDefault();
        const key = $('key').value.trim();
        if (!key) return;
        localStorage.setItem(API_KEY_KEY, key);
        $('key-form').removeEventListener('submit', done);
        dialog.removeEventListener('cancel', cancel);
        dialog.close();
        keyPrompt = null;
        $('forget-key').hidden = false;
        resolve();
      };
      const cancel = () => {
        $('key-form').removeEventListener('submit', done);
        keyPrompt = null;
        reject(new Error('this server needs an API key (reload the page to enter one)'));
      };
      $('key-form').addEventListener('submit', done);
      dialog.addEventListener('cancel', cancel, { once: true });
      dialog.showModal();
      $('key').focus();
    });
  }
  return keyPrompt;
}

// fetch() with the stored key as a Bearer token; a 401 asks for a key and tries again.
async function request(path, init = {}) {
  for (;;) {
    const headers = new Headers(init.headers || {});
    const key = localStorage.getItem(API_KEY_KEY);
    if (key) headers.set('Authorization', 'Bearer ' + key);
    const response = await fetch(path, Object.assign({}, init, { headers }));
    if (response.status !== 401) return response;
    if (key && localStorage.getItem(API_KEY_KEY) === key) localStorage.removeItem(API_KEY_KEY);
    await askForKey(Boolean(key));
  }
}

async function errorOf(response) {
  const text = await response.text();
  try {
    const body = JSON.parse(text);
    const error = body.error;
    if (typeof error === 'string') return error;
    if (error && error.message) return error.message;
  } catch {
    // not JSON: the text itself
  }
  return `${response.status} ${response.statusText}${text ? ': ' + text : ''}`;
}

async function getJson(path) {
  const response = await request(path);
  if (!response.ok) throw new Error(await errorOf(response));
  return response.json();
}

// ---- models ----

async function loadModels() {
  setStatus('loading models…');
  try {
    const list = await getJson('v1/models');
    let facts = [];
    try {
      facts = (await getJson('models')).data || [];
    } catch {
      // Facts are a courtesy: chatting needs only the ids.
    }
    const byId = new Map(facts.map((f) => [f.id, f]));
    state.models = list.data.map((m) => ({ id: m.id, facts: byId.get(m.id) || {} }));
    setStatus(state.models.length ? '' : 'this server lists no models');
  } catch (e) {
    setStatus('could not list the models: ' + e.message);
  }
  renderModels();
}

// A model's facts refreshed (its state changes once a request loads it).
async function refreshFacts(id) {
  try {
    const facts = await getJson('models/' + encodeURIComponent(id));
    const model = state.models.find((m) => m.id === id);
    if (model) model.facts = facts;
    renderModels();
  } catch {
    // keep what we had
  }
}

// What a model cannot do from this page, or '' when it can chat.
function whyNotChattable(facts) {
  if (facts.state === 'failed') return 'This model failed to load: ' + (facts.error || 'unknown error');
  if (facts.generation === false) {
    return 'This model only makes ' + (facts.rerank ? 'reranking scores' : 'embeddings') +
      ' (use /v1/' + (facts.rerank ? 'rerank' : 'embeddings') + '); it cannot chat.';
  }
  return '';
}

function modelLabel(m) {
  const f = m.facts;
  if (f.generation === false) return `${m.id} (${f.rerank ? 'reranker' : 'embeddings only'})`;
  if (f.state === 'failed') return `${m.id} (failed)`;
  return m.id;
}

function chosenModel() {
  const settings = current().settings;
  let model = state.models.find((m) => m.id === settings.model);
  if (!model) {
    model = state.models.find((m) => !whyNotChattable(m.facts)) || state.models[0];
    if (model) settings.model = model.id;
  }
  return model;
}

function renderModels() {
  const select = $('model');
  select.replaceChildren(...state.models.map((m) => {
    const option = document.createElement('option');
    option.value = m.id;
    option.textContent = modelLabel(m);
    return option;
  }));
  const model = chosenModel();
  if (model) select.value = model.id;
  renderFacts();
}

function humanCount(n) {
  if (n >= 1e9) return (n / 1e9).toFixed(n >= 1e10 ? 0 : 1) + 'B';
  if (n >= 1e6) return (n / 1e6).toFixed(n >= 1e7 ? 0 : 1) + 'M';
  if (n >= 1e3) return (n / 1e3).toFixed(n >= 1e4 ? 0 : 1) + 'K';
  return String(n);
}

function humanBytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return (i ? n.toFixed(n >= 100 ? 0 : 1) : n) + ' ' + units[i];
}

function renderFacts() {
  const section = $('facts');
  const model = chosenModel();
  if (!model) {
    section.replaceChildren();
    updateComposer();
    return;
  }
  const f = model.facts;
  const list = document.createElement('dl');
  const fact = (name, value) => {
    if (value === undefined || value === null || value === '') return;
    const row = document.createElement('div');
    const dt = document.createElement('dt');
    dt.textContent = name;
    const dd = document.createElement('dd');
    dd.textContent = value;
    row.append(dt, dd);
    list.append(row);
  };
  fact('architecture', f.architecture);
  if (f.parameters) fact('parameters', humanCount(f.parameters));
  if (f.file_type) {
    fact('quantisation', f.file_type + (f.bits_per_weight ? ` (${f.bits_per_weight.toFixed(2)} bits/weight)` : ''));
  }
  if (f.size_bytes) fact('size', humanBytes(f.size_bytes));
  if (f.context_length) {
    fact('context', f.context_length + (f.context_length_trained && f.context_length_trained !== f.context_length
      ? ` of ${f.context_length_trained} trained` : '') + ' tokens');
  } else if (f.context_length_trained) {
    fact('context', f.context_length_trained + ' tokens trained');
  }
  if (f.slots) fact('slots', f.slots);
  fact('state', f.state === 'unloaded' ? 'not loaded yet (the first message loads it)' : f.state);

  const badges = document.createElement('div');
  badges.className = 'badges';
  const badge = (text) => {
    const b = document.createElement('span');
    b.className = 'badge';
    b.textContent = text;
    badges.append(b);
  };
  if (f.generation) badge(f.chat_template ? 'chat' : 'chat (fallback template)');
  if (f.embeddings) badge('embeddings');
  if (f.rerank) badge('rerank');
  if (f.reasoning) badge('reasoning');
  if (f.tool_parser && f.generation) badge('tool calls: ' + f.tool_parser);
  if (Array.isArray(f.lora_adapters) && f.lora_adapters.length) badge(`LoRA adapters: ${f.lora_adapters.length}`);

  const parts = [list];
  if (badges.childElementCount) parts.push(badges);
  const description = f.general && f.general.description;
  if (description) {
    const p = document.createElement('p');
    p.className = 'description';
    p.textContent = description;
    parts.push(p);
  }
  const why = whyNotChattable(f);
  if (why) {
    const p = document.createElement('p');
    p.className = 'notice';
    p.textContent = why;
    parts.push(p);
  }
  section.replaceChildren(...parts);
  updateComposer();
}

// ---- rendering messages ----

// Text with ``` fenced blocks as <pre><code> and `inline code` as <code>; the rest stays text.
// An unclosed fence (a reply still streaming) runs to the end.
function renderText(text, into) {
  const fence = /```([^\n`]*)\n?([\s\S]*?)(?:```|$)/g;
  let at = 0;
  for (const m of text.matchAll(fence)) {
    renderInline(text.slice(at, m.index), into);
    const pre = document.createElement('pre');
    const code = document.createElement('code');
    if (m[1].trim()) code.dataset.lang = m[1].trim();
    code.textContent = m[2];
    pre.append(code);
    into.append(pre);
    at = m.index + m[0].length;
    if (m[0].length === 0) break;
  }
  renderInline(text.slice(at), into);
}

function renderInline(text, into) {
  if (!text) return;
  const span = document.createElement('div');
  span.className = 'text';
  const parts = text.split(/(`[^`\n]+`)/);
  for (const part of parts) {
    if (part.length > 2 && part.startsWith('`') && part.endsWith('`')) {
      const code = document.createElement('code');
      code.textContent = part.slice(1, -1);
      span.append(code);
    } else if (part) {
      span.append(document.createTextNode(part));
    }
  }
  into.append(span);
}

function prettyJson(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return null;
  }
}

function dataBlock(label, text, into) {
  const l = document.createElement('div');
  l.className = 'data-label';
  l.textContent = label;
  const pre = document.createElement('pre');
  pre.className = 'data';
  pre.textContent = text;
  into.append(l, pre);
}

function statsLine(stats) {
  const parts = [];
  if (stats.completion_tokens !== undefined) parts.push(`${stats.completion_tokens} tokens`);
  if (stats.tokens_per_second) parts.push(`${stats.tokens_per_second.toFixed(1)} tokens/s`);
  if (stats.ttft_ms !== undefined) parts.push(`first token ${Math.round(stats.ttft_ms)} ms`);
  if (stats.prompt_tokens !== undefined) {
    parts.push(`prompt ${stats.prompt_tokens} tokens (${stats.cached_tokens || 0} cached)`);
  }
  if (stats.finish_reason === 'length') parts.push('cut at max tokens');
  if (stats.stopped) parts.push('stopped');
  return parts.join(' · ');
}

function renderMessageBody(message, body) {
  const into = document.createDocumentFragment();
  if (message.reasoning) {
    // Drawn again at each delta: a fold the reader opened stays open.
    const shown = body.querySelector('details.reasoning');
    const details = document.createElement('details');
    details.className = 'reasoning';
    details.open = Boolean(shown && shown.open);
    const summary = document.createElement('summary');
    summary.textContent = (message.content || (message.tool_calls || []).length) ? 'Reasoning' : 'Reasoning…';
    const text = document.createElement('div');
    text.className = 'text';
    text.textContent = message.reasoning;
    details.append(summary, text);
    into.append(details);
  }
  const pretty = message.format && message.format !== 'text' ? prettyJson(message.content || '') : null;
  if (pretty !== null) {
    dataBlock('JSON', pretty, into);
  } else if (message.content) {
    const content = document.createElement('div');
    content.className = 'content';
    renderText(message.content, content);
    into.append(content);
  }
  for (const call of message.tool_calls || []) {
    const fn = call.function || {};
    dataBlock(`Tool call: ${fn.name || '?'}${call.id ? ' (' + call.id + ')' : ''}`,
      prettyJson(fn.arguments || '') || fn.arguments || '', into);
  }
  if (message.error) {
    const p = document.createElement('p');
    p.className = 'error';
    p.textContent = message.error;
    into.append(p);
  }
  if (message.stats) {
    const p = document.createElement('div');
    p.className = 'stats';
    p.textContent = statsLine(message.stats);
    into.append(p);
  }
  body.replaceChildren(into);
}

function renderMessage(message) {
  const el = document.createElement('div');
  el.className = 'message ' + message.role;
  const role = document.createElement('div');
  role.className = 'role';
  role.textContent = message.role === 'assistant' ? (message.model || 'assistant') : message.role;
  const body = document.createElement('div');
  body.className = 'body';
  renderMessageBody(message, body);
  el.append(role, body);
  return el;
}

function renderMessages() {
  const conversation = current();
  const box = $('messages');
  const els = [];
  if (conversation.settings.system && conversation.messages.length) {
    els.push(renderMessage({ role: 'system', content: conversation.settings.system }));
  }
  for (const m of conversation.messages) els.push(renderMessage(m));
  box.replaceChildren(...els);
  box.scrollTop = box.scrollHeight;
}

function renderConversations() {
  const ul = $('conversations');
  ul.replaceChildren(...state.conversations.map((c) => {
    const li = document.createElement('li');
    li.dataset.id = c.id;
    if (c.id === state.currentId) li.className = 'current';
    const title = document.createElement('span');
    title.textContent = c.title || 'New chat';
    title.title = title.textContent;
    const remove = document.createElement('button');
    remove.type = 'button';
    remove.textContent = '×';
    remove.title = 'Delete this conversation';
    remove.setAttribute('aria-label', 'Delete ' + title.textContent);
    remove.addEventListener('click', (event) => {
      event.stopPropagation();
      deleteConversation(c.id);
    });
    li.append(title, remove);
    li.addEventListener('click', () => selectConversation(c.id));
    return li;
  }));
}

function renderSettings() {
  const s = current().settings;
  $('system').value = s.system;
  $('temperature').value = s.temperature;
  $('temperature-value').textContent = Number(s.temperature).toFixed(2);
  $('max-tokens').value = s.max_tokens;
  $('format').value = s.format;
  $('schema').value = s.schema;
  $('schema').hidden = s.format !== 'json_schema';
  $('tools').value = s.tools;
  $('extra').value = s.extra;
  $('settings-error').hidden = true;
}

function renderAll() {
  renderConversations();
  renderSettings();
  renderModels();
  renderMessages();
}

function setStatus(text) {
  $('status').textContent = text;
}

function updateComposer() {
  const busy = Boolean(state.controller);
  const model = state.models.length ? chosenModel() : null;
  const why = model ? whyNotChattable(model.facts) : 'no model';
  $('send').disabled = busy || Boolean(why);
  $('send').hidden = busy;
  $('stop').hidden = !busy;
  $('model').disabled = busy;
  document.body.dataset.busy = busy ? 'true' : 'false';
}

// ---- conversations ----

function selectConversation(id) {
  if (state.controller) return;
  state.currentId = id;
  saveStore();
  renderAll();
}

function deleteConversation(id) {
  if (state.controller) return;
  state.conversations = state.conversations.filter((c) => c.id !== id);
  if (!current()) {
    state.currentId = state.conversations.length ? state.conversations[0].id : null;
    if (!current()) newConversation();
  }
  saveStore();
  renderAll();
}

// ---- sending ----

// The request's optional parts from the settings; throws with a message naming the setting.
function requestOptions(settings) {
  const out = {};
  const parse = (text, what) => {
    try {
      return JSON.parse(text);
    } catch (e) {
      throw new Error(`${what} is not valid JSON: ${e.message}`);
    }
  };
  if (settings.format === 'json_object') out.response_format = { type: 'json_object' };
  if (settings.format === 'json_schema') {
    out.response_format = {
      type: 'json_schema',
      json_schema: { name: 'reply', schema: parse(settings.schema || '{}', 'The JSON Schema'), strict: true },
    };
  }
  if (settings.tools.trim()) {
    const tools = parse(settings.tools, 'Tools');
    if (!Array.isArray(tools)) throw new Error('Tools must be a JSON array');
    out.tools = tools;
  }
  if (settings.extra.trim()) {
    const extra = parse(settings.extra, 'Extra request fields');
    if (typeof extra !== 'object' || extra === null || Array.isArray(extra)) {
      throw new Error('Extra request fields must be a JSON object');
    }
    Object.assign(out, extra);
  }
  return out;
}

// The conversation as OpenAI's messages: reasoning is not sent back, tool calls are.
function outgoingMessages(conversation) {
  const messages = [];
  if (conversation.settings.system.trim()) {
    messages.push({ role: 'system', content: conversation.settings.system });
  }
  for (const m of conversation.messages) {
    if (m.role === 'assistant' && !m.content && !(m.tool_calls || []).length) continue;
    const out = { role: m.role, content: m.content || '' };
    if (m.tool_calls && m.tool_calls.length) out.tool_calls = m.tool_calls;
    messages.push(out);
  }
  return messages;
}

// The data of each server-sent event of a response body.
async function* sseData(body, signal) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  signal.addEventListener('abort', () => reader.cancel().catch(() => {}));
  let buffer = '';
  const boundary = /\r?\n\r?\n/;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let m;
    while ((m = boundary.exec(buffer))) {
      const block = buffer.slice(0, m.index);
      buffer = buffer.slice(m.index + m[0].length);
      const data = block.split(/\r?\n/).filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).replace(/^ /, '')).join('\n');
      if (data) yield data;
    }
  }
}

function applyDelta(reply, delta) {
  if (delta.reasoning_content) reply.reasoning += delta.reasoning_content;
  if (delta.content) reply.content += delta.content;
  for (const call of delta.tool_calls || []) {
    const i = call.index || 0;
    reply.tool_calls[i] = reply.tool_calls[i] || { id: '', type: 'function', function: { name: '', arguments: '' } };
    const into = reply.tool_calls[i];
    if (call.id) into.id = call.id;
    if (call.function && call.function.name) into.function.name += call.function.name;
    if (call.function && call.function.arguments) into.function.arguments += call.function.arguments;
  }
}

async function send() {
  const text = $('input').value;
  const conversation = current();
  const model = chosenModel();
  if (!text.trim() || state.controller || !model || whyNotChattable(model.facts)) return;
  let options;
  try {
    options = requestOptions(conversation.settings);
  } catch (e) {
    $('settings-error').textContent = e.message;
    $('settings-error').hidden = false;
    return;
  }
  $('settings-error').hidden = true;
  $('input').value = '';
  conversation.messages.push({ role: 'user', content: text });
  if (!conversation.title) conversation.title = text.trim().slice(0, 48);
  const reply = {
    role: 'assistant',
    model: model.id,
    content: '',
    reasoning: '',
    tool_calls: [],
    format: conversation.settings.format,
  };
  const body = Object.assign({
    model: model.id,
    messages: outgoingMessages(conversation),
    temperature: Number(conversation.settings.temperature),
    max_tokens: Number(conversation.settings.max_tokens),
  }, options, { stream: true, stream_options: { include_usage: true } });
  conversation.messages.push(reply);
  saveStore();
  renderConversations();
  renderMessages();

  const controller = new AbortController();
  state.controller = controller;
  updateComposer();
  setStatus('writing…');
  // Looked up each time: the messages may have been drawn again meanwhile (a system prompt edit).
  const replyBody = () => (current() === conversation
    ? $('messages').querySelector('.message.assistant:last-child .body') : null);
  let pending = false;
  const redraw = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      const body = replyBody();
      if (!body) return;
      renderMessageBody(reply, body);
      const box = $('messages');
      box.scrollTop = box.scrollHeight;
    });
  };

  const started = performance.now();
  let first = null;
  let usage = null;
  let finish = null;
  try {
    const response = await request('v1/chat/completions', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    if (!response.ok) throw new Error(await errorOf(response));
    for await (const data of sseData(response.body, controller.signal)) {
      if (data === '[DONE]') break;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message || JSON.stringify(chunk.error));
      if (chunk.usage) usage = chunk.usage;
      for (const choice of chunk.choices || []) {
        const d = choice.delta || {};
        if (first === null && (d.content || d.reasoning_content || d.tool_calls)) first = performance.now();
        applyDelta(reply, d);
        if (choice.finish_reason) finish = choice.finish_reason;
      }
      redraw();
    }
  } catch (e) {
    if (!controller.signal.aborted) reply.error = e.message;
  }
  // Stopped: the read was cancelled (the loop ended) or the fetch rejected.
  if (controller.signal.aborted) reply.stopped = true;
  const ended = performance.now();
  reply.tool_calls = reply.tool_calls.filter(Boolean);
  const stats = { finish_reason: finish, stopped: Boolean(reply.stopped) };
  if (first !== null) stats.ttft_ms = first - started;
  if (usage) {
    stats.completion_tokens = usage.completion_tokens;
    stats.prompt_tokens = usage.prompt_tokens;
    stats.cached_tokens = (usage.prompt_tokens_details || {}).cached_tokens || 0;
    // The first token's time is the prompt's; the rest are the reply's decoding.
    if (first !== null && usage.completion_tokens > 1 && ended > first) {
      stats.tokens_per_second = (usage.completion_tokens - 1) / ((ended - first) / 1000);
    }
  }
  reply.stats = stats;
  state.controller = null;
  saveStore();
  if (replyBody()) renderMessageBody(reply, replyBody());
  updateComposer();
  setStatus(reply.stopped ? 'stopped' : '');
  refreshFacts(model.id);
}

// ---- wiring ----

function onSetting(id, key, read) {
  $(id).addEventListener('input', () => {
    current().settings[key] = read($(id));
    if (id === 'temperature') $('temperature-value').textContent = Number($(id).value).toFixed(2);
    if (id === 'format') $('schema').hidden = $(id).value !== 'json_schema';
    saveStore();
  });
}

function start() {
  loadStore();
  onSetting('system', 'system', (el) => el.value);
  onSetting('temperature', 'temperature', (el) => Number(el.value));
  onSetting('max-tokens', 'max_tokens', (el) => Number(el.value));
  onSetting('format', 'format', (el) => el.value);
  onSetting('schema', 'schema', (el) => el.value);
  onSetting('tools', 'tools', (el) => el.value);
  onSetting('extra', 'extra', (el) => el.value);
  $('system').addEventListener('change', renderMessages);
  $('model').addEventListener('change', () => {
    current().settings.model = $('model').value;
    saveStore();
    renderFacts();
  });
  $('new-chat').addEventListener('click', () => {
    if (state.controller) return;
    if (current().messages.length) newConversation();
    saveStore();
    renderAll();
    $('input').focus();
  });
  $('composer').addEventListener('submit', (event) => {
    event.preventDefault();
    send();
  });
  $('input').addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });
  $('stop').addEventListener('click', () => {
    if (state.controller) state.controller.abort();
  });
  $('forget-key').hidden = !localStorage.getItem(API_KEY_KEY);
  $('forget-key').addEventListener('click', () => {
    localStorage.removeItem(API_KEY_KEY);
    $('forget-key').hidden = true;
  });
  renderAll();
  loadModels();
}

start();
