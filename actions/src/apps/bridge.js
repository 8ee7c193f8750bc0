  // ----- The MCP Apps bridge (2026-01-26): JSON-RPC 2.0 with the host over postMessage -----
  const PROTOCOL_VERSION = "2026-01-26";
  const host = window.parent;
  const pending = new Map();
  const handlers = new Map();
  let nextId = 1;
  let hostContext = {};
  let hostCapabilities = null;

  window.addEventListener("message", (event) => {
    if (event.source !== host) return;
    const message = event.data;
    if (!message || typeof message !== "object" || message.jsonrpc !== "2.0") return;
    if (message.method === undefined) {
      const waiting = pending.get(message.id);
      if (!waiting) return;
      pending.delete(message.id);
      if (message.error) {
        waiting.reject(new Error(message.error.message || "The host refused the request."));
      } else {
        waiting.resolve(message.result);
      }
    } else if (message.id !== undefined) {
      if (message.method === "ui/resource-teardown" || message.method === "ping") {
        host.postMessage({ jsonrpc: "2.0", id: message.id, result: {} }, "*");
      } else {
        host.postMessage({ jsonrpc: "2.0", id: message.id,
          error: { code: -32601, message: "Method not found: " + message.method } }, "*");
      }
    } else {
      const handler = handlers.get(message.method);
      if (handler) handler(message.params || {});
    }
  });

  function request(method, params) {
    const id = nextId++;
    return new Promise((resolve, reject) => {
      pending.set(id, { resolve, reject });
      host.postMessage({ jsonrpc: "2.0", id, method, params }, "*");
    });
  }

  function notify(method, params) {
    host.postMessage({ jsonrpc: "2.0", method, params }, "*");
  }

  function applyContext(context) {
    hostContext = Object.assign({}, hostContext, context);
    const dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
    document.documentElement.dataset.theme = hostContext.theme || (dark ? "dark" : "light");
    const variables = hostContext.styles && hostContext.styles.variables;
    if (variables && typeof variables === "object") {
      for (const [name, value] of Object.entries(variables)) {
        if (name.startsWith("--") && typeof value === "string") {
          document.documentElement.style.setProperty(name, value);
        }
      }
    }
  }

  function watchSize() {
    let last = "";
    new ResizeObserver(() => {
      const root = document.documentElement;
      const before = root.style.height;
      root.style.height = "max-content";
      const height = Math.ceil(root.getBoundingClientRect().height);
      root.style.height = before;
      const width = Math.ceil(window.innerWidth);
      if (last !== width + "x" + height) {
        last = width + "x" + height;
        notify("ui/notifications/size-changed", { width, height });
      }
    }).observe(document.body);
  }

  // A fresh key per action, so a call the host sends again is still done once.
  function freshKey() {
    if (window.crypto && typeof crypto.randomUUID === "function") return crypto.randomUUID();
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    const hex = Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
    return hex.slice(0, 8) + "-" + hex.slice(8, 12) + "-" + hex.slice(12, 16) + "-" +
      hex.slice(16, 20) + "-" + hex.slice(20);
  }

  // A failed tool's sentence: its text is the `{error, code}` body as JSON.
  function sentenceOf(result) {
    const text = ((result && result.content) || [])
      .filter((block) => block && block.type === "text")
      .map((block) => block.text)
      .join("\n");
    try {
      const body = JSON.parse(text);
      if (body && typeof body.error === "string") return body.error;
    } catch (_) { /* not JSON: the text is the sentence */ }
    return text || "The tool failed without saying why.";
  }

  function dataOf(result) {
    if (result && result.structuredContent) return result.structuredContent;
    const text = ((result && result.content) || []).find((block) => block && block.type === "text");
    try { return text ? JSON.parse(text.text) : null; } catch (_) { return null; }
  }

  async function callTool(name, args) {
    const result = await request("tools/call", { name, arguments: args });
    if (!result || result.isError) throw new Error(sentenceOf(result));
    return dataOf(result);
  }

  // ----- Elements, made with text nodes only: nothing the data holds is parsed as HTML -----
  function el(tag, attributes, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "text") node.textContent = value;
      else if (name === "class") node.className = value;
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.append(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }

  function when(iso) {
    if (!iso) return "";
    const date = new Date(iso);
    if (Number.isNaN(date.getTime())) return String(iso);
    try {
      return date.toLocaleString(hostContext.locale || undefined,
        { dateStyle: "medium", timeStyle: "short", timeZone: hostContext.timeZone || undefined });
    } catch (_) {
      return date.toLocaleString();
    }
  }

