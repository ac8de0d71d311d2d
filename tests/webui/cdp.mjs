// A small client of Chromium's DevTools protocol over --remote-debugging-pipe: the browser reads
// JSON commands on its fd 3 and writes replies and events on its fd 4, each message ended by a
// NUL byte. The pipe needs no port and no WebSocket client (Node 20 has none built in).
import { spawn } from "node:child_process";

export class Browser {
  // Starts headless Chromium with a fresh profile in `profileDir`.
  constructor(executable, profileDir) {
    this.proc = spawn(executable, [
      "--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
      "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
      "--disable-extensions", "--disable-background-networking", "--mute-audio",
      "--window-size=1280,860", `--user-data-dir=${profileDir}`, "about:blank",
    ], { stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"] });
    this.nextId = 1;
    this.pending = new Map();   // id -> {resolve, reject, method}
    this.listeners = [];        // {method, sessionId, handler}
    this.stderr = "";
    this.proc.stdio[2].on("data", (d) => { this.stderr = (this.stderr + d).slice(-4000); });
    this.exited = new Promise((resolve) => this.proc.on("exit", resolve));
    this.proc.on("exit", (code) => {
      for (const { reject, method } of this.pending.values()) {
        reject(new Error(`chromium exited (${code}) during ${method}:\n${this.stderr}`));
      }
      this.pending.clear();
    });
    let buffer = Buffer.alloc(0);
    this.proc.stdio[4].on("data", (chunk) => {
      buffer = Buffer.concat([buffer, chunk]);
      let end;
      while ((end = buffer.indexOf(0)) >= 0) {
        const message = JSON.parse(buffer.subarray(0, end).toString("utf8"));
        buffer = buffer.subarray(end + 1);
        this.dispatch(message);
      }
    });
  }

  dispatch(message) {
    if (message.id !== undefined) {
      const waiting = this.pending.get(message.id);
      if (!waiting) return;
      this.pending.delete(message.id);
      if (message.error) {
        waiting.reject(new Error(`${waiting.method}: ${message.error.message}`));
      } else {
        waiting.resolve(message.result);
      }
      return;
    }
    for (const l of this.listeners) {
      if (l.method === message.method && l.sessionId === message.sessionId) l.handler(message.params);
    }
  }

  // A command's result; a browser that does not answer within 30 s fails the test.
  send(method, params = {}, sessionId = undefined) {
    const id = this.nextId++;
    const message = { id, method, params };
    if (sessionId) message.sessionId = sessionId;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`chromium did not answer ${method} within 30 s:\n${this.stderr}`));
      }, 30000);
      const settle = (f) => (value) => {
        clearTimeout(timer);
        f(value);
      };
      this.pending.set(id, { resolve: settle(resolve), reject: settle(reject), method });
      this.proc.stdio[3].write(JSON.stringify(message) + "\0");
    });
  }

  on(method, sessionId, handler) {
    this.listeners.push({ method, sessionId, handler });
  }

  // The next event of that method, within `ms`.
  once(method, sessionId, ms, what = method) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
      const l = {
        method, sessionId, handler: (params) => {
          clearTimeout(timer);
          this.listeners = this.listeners.filter((x) => x !== l);
          resolve(params);
        },
      };
      this.listeners.push(l);
    });
  }

  // A new tab, attached: its session's commands go through the returned Page.
  async newPage() {
    const { targetId } = await this.send("Target.createTarget", { url: "about:blank" });
    const { sessionId } = await this.send("Target.attachToTarget", { targetId, flatten: true });
    const page = new Page(this, sessionId);
    await page.send("Page.enable");
    await page.send("Runtime.enable");
    return page;
  }

  async close() {
    try {
      await Promise.race([this.send("Browser.close"), new Promise((r) => setTimeout(r, 2000))]);
    } catch {
      // already gone
    }
    const killed = setTimeout(() => this.proc.kill("SIGKILL"), 3000);
    await this.exited;
    clearTimeout(killed);
  }
}

export class Page {
  constructor(browser, sessionId) {
    this.browser = browser;
    this.sessionId = sessionId;
    this.errors = [];  // uncaught exceptions in the page
    browser.on("Runtime.exceptionThrown", sessionId, (p) => {
      const d = p.exceptionDetails;
      this.errors.push((d.exception && d.exception.description) || d.text);
    });
  }

  send(method, params = {}) {
    return this.browser.send(method, params, this.sessionId);
  }

  async goto(url) {
    const loaded = this.browser.once("Page.loadEventFired", this.sessionId, 15000, `${url} to load`);
    const r = await this.send("Page.navigate", { url });
    if (r.errorText) throw new Error(`navigating to ${url}: ${r.errorText}`);
    await loaded;
  }

  async reload() {
    const loaded = this.browser.once("Page.loadEventFired", this.sessionId, 15000, "the reload");
    await this.send("Page.reload");
    await loaded;
  }

  // The value of a JavaScript expression in the page (promises awaited).
  async eval(expression) {
    const r = await this.send("Runtime.evaluate", { expression, awaitPromise: true, returnByValue: true });
    if (r.exceptionDetails) {
      const e = r.exceptionDetails;
      throw new Error(`in the page: ${(e.exception && e.exception.description) || e.text}\n  ${expression}`);
    }
    return r.result.value;
  }

  // Polls `expression` until it is truthy; returns its value.
  async waitFor(expression, what, ms = 10000) {
    const deadline = Date.now() + ms;
    for (;;) {
      const value = await this.eval(expression);
      if (value) return value;
      if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async screenshot() {
    const { data } = await this.send("Page.captureScreenshot", { format: "png" });
    return Buffer.from(data, "base64");
  }
}
