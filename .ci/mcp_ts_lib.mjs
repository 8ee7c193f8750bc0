// What the Node checks of the MCP face share: the SDK 1.x loaded from a given node_modules, named
// checks with their results, a connection with a bearer key, and the two shapes of a tool result.
//
// A successful call has no `isError`, a `structuredContent` object and a text block with the same
// JSON; a failed one has `isError: true`, no `structuredContent`, and the `{error, code}` body as its
// one text block. The tool list carries no output schemas (they cost a quarter of it), so a
// successful answer is validated here against its REST operation's success response in the
// OpenAPI document, the full shape, with the Ajv the SDK itself depends on.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

export class CheckFailed extends Error {}

export const check = (condition, message) => {
  if (!condition) throw new CheckFailed(message);
};

export const show = (value) => JSON.stringify(value);

// The official TypeScript SDK from `nodeModules`, and its version.
// With `baseUrl`, every later `ok` also validates its answer against the OpenAPI document the
// server there serves (see the header).
export async function loadSdk(nodeModules, baseUrl) {
  const sdk = (path) => import(pathToFileURL(join(nodeModules, "@modelcontextprotocol/sdk/dist/esm", path)).href);
  const { Client } = await sdk("client/index.js");
  const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
  const { McpError } = await sdk("types.js");
  const version = JSON.parse(readFileSync(join(nodeModules, "@modelcontextprotocol/sdk/package.json"), "utf8")).version;
  if (baseUrl) {
    await loadAnswerShapes(nodeModules, baseUrl);
  }
  return { Client, StreamableHTTPClientTransport, McpError, version };
}

// tool name -> a validator of its successful answer, from the OpenAPI document.
const answerShapes = new Map();
// The Ajv (JSON Schema 2020-12, with formats) `loadSdk` made, for `inputChecker`.
let schemaChecker;

// A validator of a tool's arguments against its listed `inputSchema`: what a host that checks
// arguments before calling would accept. Needs `loadSdk` with a base URL first.
export function inputChecker(tool) {
  check(schemaChecker, "inputChecker needs loadSdk(nodeModules, baseUrl) first");
  return schemaChecker.compile(tool.inputSchema);
}

async function loadAnswerShapes(nodeModules, baseUrl) {
  const load = (path) => import(pathToFileURL(join(nodeModules, path)).href);
  const { default: Ajv2020 } = await load("ajv/dist/2020.js");
  const { default: addFormats } = await load("ajv-formats/dist/index.js");
  schemaChecker = new Ajv2020({ strict: false, allErrors: true });
  addFormats(schemaChecker);
  const response = await fetch(`${baseUrl}/api/v1/openapi.json`);
  check(response.ok, `GET /api/v1/openapi.json answered ${response.status}`);
  const document = await response.json();
  // The document's own keywords (`openapi`, `paths`, `x-...`) are not JSON Schema: not strict.
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  ajv.addSchema(document, "openapi");
  const pointer = (...parts) => parts.map((part) => String(part).replaceAll("~", "~0").replaceAll("/", "~1")).join("/");
  for (const [path, methods] of Object.entries(document.paths ?? {})) {
    for (const [method, operation] of Object.entries(methods)) {
      const tool = operation?.["x-mcp-tool"];
      const success = Object.entries(operation?.responses ?? {}).find(([status]) => status.startsWith("2"));
      if (!tool || !success || !success[1].content?.["application/json"]?.schema) continue;
      const ref = `openapi#/${pointer("paths", path, method, "responses", success[0], "content", "application/json", "schema")}`;
      answerShapes.set(tool, ajv.compile({ $ref: ref }));
    }
  }
  check(answerShapes.size > 0, "the OpenAPI document names no tool");
}

// Named checks: each runs once, and its outcome is kept for the driver to count.
export function checks() {
  const results = [];
  async function named(name, fn) {
    const started = Date.now();
    try {
      await fn();
      results.push({ name, ok: true, message: "" });
      console.log(`ok ${name} (${Date.now() - started} ms)`);
    } catch (error) {
      const message = error instanceof CheckFailed ? error.message : `${error?.name}: ${error?.message}\n${error?.stack ?? ""}`;
      results.push({ name, ok: false, message });
      console.log(`FAILED ${name}: ${message}`);
    }
  }
  return { results, named };
}

export async function connect(sdk, url, key, label, headers = {}) {
  const transport = new sdk.StreamableHTTPClientTransport(url, {
    requestInit: { headers: { Authorization: `Bearer ${key}`, ...headers } },
  });
  const client = new sdk.Client({ name: `outreach-ci-ts-${label}`, version: "1.0.0" });
  await client.connect(transport);
  return client;
}

// The largest answer seen by `ok` in this process, in bytes of its JSON text, for the closing
// figures (issue 28 bounds every answer at 100 KB).
export const largest = { bytes: 0, tool: "" };

// A successful call: no isError, a structuredContent object, and a text block with the same JSON.
export async function ok(client, name, args = {}) {
  const result = await client.callTool({ name, arguments: args });
  // The answer's JSON, as its text block carries it (the bound is on that; `structuredContent`
  // repeats it for clients that read structure).
  const bytes = Math.max(0, ...(result.content ?? []).filter((block) => block.type === "text").map((block) => block.text.length));
  if (bytes > largest.bytes) {
    largest.bytes = bytes;
    largest.tool = name;
  }
  check(!result.isError, `${name}(${show(args)}) failed: ${show(result.content)}`);
  const body = result.structuredContent;
  check(body && typeof body === "object", `${name}: no structuredContent in ${show(result)}`);
  const validate = answerShapes.get(name);
  if (answerShapes.size > 0) {
    check(validate, `${name}: no success response in the OpenAPI document`);
    // A replay says so in `replayed`, which the REST answer (a header there) does not carry.
    const { replayed, ...answer } = body;
    check(validate(replayed === true ? answer : body), `${name}: the answer does not match its OpenAPI response: ${show(validate.errors?.slice(0, 5))}`);
  }
  const texts = (result.content ?? []).filter((block) => block.type === "text").map((block) => block.text);
  check(
    texts.some((text) => show(JSON.parse(text)) === show(body)),
    `${name}: no text block carries the structuredContent: ${show(texts)}`,
  );
  return { body, result };
}

// A failed call: isError, no structuredContent, the error body as JSON text with this code.
export async function fails(client, name, args, code) {
  const result = await client.callTool({ name, arguments: args });
  check(result.isError === true, `${name}(${show(args)}) should fail with ${code}, got ${show(result)}`);
  check(result.structuredContent === undefined, `${name}: a failed call carries structuredContent: ${show(result)}`);
  const texts = (result.content ?? []).filter((block) => block.type === "text");
  check(texts.length === 1, `${name}: expected one text block, got ${show(result.content)}`);
  let body;
  try {
    body = JSON.parse(texts[0].text);
  } catch {
    throw new CheckFailed(`${name}: the error text is not JSON: ${show(texts[0].text)}`);
  }
  check(body.code === code, `${name}(${show(args)}): expected code ${code}, got ${show(body)}`);
  check(typeof body.error === "string" && body.error.length > 10, `${name}: no error sentence in ${show(body)}`);
  console.log(`  ${name} -> ${code}: ${body.error}`);
  return body;
}
