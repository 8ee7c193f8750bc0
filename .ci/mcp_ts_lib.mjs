// What the Node checks of the MCP face share: the SDK 1.x loaded from a given node_modules, named
// checks with their results, a connection with a bearer key, and the two shapes of a tool result.
//
// A successful call has no `isError`, a `structuredContent` object (which the SDK has validated
// against the tool's `outputSchema`) and a text block with the same JSON; a failed one has
// `isError: true`, no `structuredContent`, and the `{error, code}` body as its one text block.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

export class CheckFailed extends Error {}

export const check = (condition, message) => {
  if (!condition) throw new CheckFailed(message);
};

export const show = (value) => JSON.stringify(value);

// The official TypeScript SDK from `nodeModules`, and its version.
export async function loadSdk(nodeModules) {
  const sdk = (path) => import(pathToFileURL(join(nodeModules, "@modelcontextprotocol/sdk/dist/esm", path)).href);
  const { Client } = await sdk("client/index.js");
  const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
  const { McpError } = await sdk("types.js");
  const version = JSON.parse(readFileSync(join(nodeModules, "@modelcontextprotocol/sdk/package.json"), "utf8")).version;
  return { Client, StreamableHTTPClientTransport, McpError, version };
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

// A successful call: no isError, a structuredContent object, and a text block with the same JSON.
export async function ok(client, name, args = {}) {
  const result = await client.callTool({ name, arguments: args });
  check(!result.isError, `${name}(${show(args)}) failed: ${show(result.content)}`);
  const body = result.structuredContent;
  check(body && typeof body === "object", `${name}: no structuredContent in ${show(result)}`);
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
