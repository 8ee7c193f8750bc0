// Agent runs through the official MCP TypeScript SDK 2.x and the Tasks extension's own package
// (@modelcontextprotocol/client and @modelcontextprotocol/ext-tasks, pinned in .ci/mcp-tasks-ts).
//
// Usage: node mcp_tasks_ts_check.mjs NODE_MODULES CONFIG_JSON RESULTS_JSON
//
// Run by .ci/mcp_ts_check.py, which starts the server (with its job workers) and writes
// CONFIG_JSON: {"base_url", "write_key"} (a read,write key of a workspace with credits).
//
// Checks, each named for the driver to count:
// - ts-tasks-run-agent-as-task: a client on the 2026-07-28 lifecycle (`versionNegotiation:
//   auto`), wrapped in ext-tasks' `createTaskSessionFromClient`, calls `service_run_agent` with
//   `task.preference: "require"`; the server answers a task (SEP-2663) whose id is the run id, and
//   `settle()` follows it with `tasks/get` to a completed outcome whose result is the run as
//   `service_get_run` gives it. The package sends V2 task traffic through a host-owned raw request
//   path (`rawDispatch`, because the SDK's codecs do not admit `resultType: "task"`); here that is
//   one JSON-RPC POST per request, which a stateless server answers like any other.
// - ts-tasks-legacy-era-gets-the-run: the same session API over the `initialize` handshake
//   (no Tasks extension there): an immediate execution whose result is the queued run.
// - ts-progress-held-call: a 2.x client without the extension passes `onprogress` (the SDK sends a
//   progress token): it receives the run's progress and the one call returns the run ended.
// - ts-confirmation-declined-then-accepted: a client with an `elicitation/create` handler on the
//   2026-07-28 lifecycle imports 100 rows (100 credits, the threshold): asked with the price,
//   declined (a `declined` tool error, nothing imported), then asked again and accepted (it runs).
//
// Writes RESULTS_JSON: [{"name", "ok", "message"}].

import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { randomBytes } from "node:crypto";
import { check, checks, show } from "./mcp_ts_lib.mjs";

const [nodeModules, configPath, resultsPath] = process.argv.slice(2);
if (!resultsPath) {
  console.error("usage: node mcp_tasks_ts_check.mjs NODE_MODULES CONFIG_JSON RESULTS_JSON");
  process.exit(2);
}
// The very files ext-tasks imports `@modelcontextprotocol/client` as, so both see one `Client`.
const load = (name, path) => import(pathToFileURL(join(nodeModules, name, path)).href);
const version = (name) => JSON.parse(readFileSync(join(nodeModules, name, "package.json"), "utf8")).version;
const { Client, StreamableHTTPClientTransport } = await load("@modelcontextprotocol/client", "dist/index.mjs");
const { createTaskSessionFromClient, resultFromTaskOutcome, DispatchError } = await load(
  "@modelcontextprotocol/ext-tasks",
  "dist/client/index.js",
);
const config = JSON.parse(readFileSync(configPath, "utf8"));
const mcpUrl = new URL(`${config.base_url}/api/mcp?toolsets=all`);
const authorization = `Bearer ${config.write_key}`;
const clientInfo = { name: "outreach-ci-ts-tasks", version: "1.0.0" };
const TASKS = "io.modelcontextprotocol/tasks";
const PROSPECTS = 12;
const ENDED = ["awaiting_approval", "succeeded"];
// Names are unique per workspace: a second run against the same server differs.
const RUN = randomBytes(3).toString("hex");

const { results, named } = checks();

async function connect(mode) {
  const transport = new StreamableHTTPClientTransport(mcpUrl, {
    requestInit: { headers: { Authorization: authorization } },
  });
  const client = new Client(clientInfo, { versionNegotiation: { mode } });
  await client.connect(transport);
  return client;
}

async function call(client, tool, args) {
  const result = await client.callTool({ name: `service_${tool}`, arguments: args });
  check(!result.isError, `service_${tool}(${show(args)}) failed: ${show(result.content)}`);
  return result.structuredContent;
}

// An agent of its own sequence, and new prospects it will find (a prospect proposed once is not
// a candidate again); returns the agent id.
async function prepare(client, tag) {
  const targeting = await call(client, "create_targeting", {
    name: `CI TS agent runs ${tag} ${RUN}`,
    criteria: { titles: { include: [{ value: "engineer", points: 60 }] } },
  });
  const list = await call(client, "create_list", { name: `CI TS agent runs ${tag} ${RUN}` });
  const sequence = await call(client, "create_sequence", {
    name: `CI TS agent runs ${tag} ${RUN}`,
    sender_ids: [],
    steps: [{ type: "connection_request", delay_hours: 0, note: "Hi {{first_name|there}}, glad to connect." }],
  });
  for (let index = 0; index < PROSPECTS; index += 1) {
    await call(client, "create_prospect", {
      first_name: `Ada${index}`,
      company_name: "Engines",
      title: "Engineer",
      profile_url: `https://www.linkedin.com/in/ci-ts-run-${RUN}-${tag}-${index}/`,
    });
  }
  const agent = await call(client, "create_agent", {
    name: `CI TS prospector ${tag} ${RUN}`,
    kind: "prospector",
    targeting_id: targeting.id,
    list_id: list.id,
    sequence_id: sequence.id,
  });
  return agent.id;
}

// The host's raw request path for V2 task traffic (ext-tasks' `rawDispatch`): one JSON-RPC request
// per POST, with the SEP-2243 routing headers; the answer is JSON, or an event stream whose last
// message answers it.
function rawDispatchFor(protocolVersion) {
  let nextId = 1;
  return async (request, options = {}) => {
    const id = `ts-tasks-${nextId++}`;
    const headers = {
      Authorization: authorization,
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
      "MCP-Protocol-Version": protocolVersion,
      "Mcp-Method": request.method,
      ...(request.method === "tools/call" ? { "Mcp-Name": request.params.name } : {}),
      ...(options.context?.headers ?? {}),
    };
    const response = await fetch(mcpUrl, {
      method: "POST",
      headers,
      body: JSON.stringify({ jsonrpc: "2.0", id, ...request }),
      signal: options.signal,
    });
    const text = await response.text();
    const messages = (response.headers.get("content-type") ?? "").startsWith("text/event-stream")
      ? text.split("\n").filter((line) => line.startsWith("data:")).map((line) => JSON.parse(line.slice(5)))
      : [JSON.parse(text)];
    const reply = messages.find((message) => message.id === id);
    if (!reply) throw new DispatchError(`no answer to ${request.method} (HTTP ${response.status}): ${text.slice(0, 500)}`);
    return reply.error ? { kind: "error", error: reply.error } : { kind: "result", result: reply.result };
  };
}

console.log(
  `MCP TypeScript SDK ${version("@modelcontextprotocol/client")} with @modelcontextprotocol/ext-tasks ` +
    `${version("@modelcontextprotocol/ext-tasks")} (Node ${process.version}) against ${mcpUrl}`,
);

await named("ts-tasks-run-agent-as-task", async () => {
  const client = await connect("auto");
  try {
    check(client.getProtocolEra() === "modern", `the 2026-07-28 lifecycle, got ${client.getProtocolEra()}`);
    const protocolVersion = client.getNegotiatedProtocolVersion();
    const extensions = client.getServerCapabilities()?.extensions ?? {};
    check(show(extensions[TASKS]) === "{}", `the server advertises ${TASKS}: ${show(client.getServerCapabilities())}`);
    const agent = await prepare(client, "task");
    const session = createTaskSessionFromClient(client, {
      endpointId: `outreach-ci-${mcpUrl.host}`,
      rawDispatch: rawDispatchFor(protocolVersion),
      v2RequestFraming: { protocolVersion, clientInfo, clientCapabilities: {} },
    });
    try {
      const execution = await session.callTool(
        "service_run_agent",
        { id: agent },
        { task: { preference: "require" } },
      );
      check(execution.kind === "task", `the server answered a task: ${execution.kind}`);
      const taskId = execution.handle.taskId;
      check(taskId.startsWith("run_"), `the task id is a run id: ${taskId}`);
      const seen = [];
      const { outcome } = await execution.settle({
        onEvent: (event) => {
          if (event.type === "task") seen.push(event.task.status);
        },
      });
      check(outcome.status === "completed", `the task completed: ${show(outcome)}`);
      const result = resultFromTaskOutcome(outcome);
      check(!result.isError, `its result is not an error: ${show(result)}`);
      const run = result.structuredContent;
      check(run.id === taskId, `the result is the task's run: ${run.id} vs ${taskId}`);
      check(ENDED.includes(run.status), `the run ended well: ${run.status}`);
      const polled = await call(client, "get_run", { id: taskId });
      check(show(polled) === show(run), "the result is the run as service_get_run gives it");
      console.log(`  ${taskId}: ${[...new Set(seen)].join(" -> ")}; result: the run, ${run.status}, ${run.processed} processed`);
    } finally {
      await session.close();
    }
  } finally {
    await client.close();
  }
});

await named("ts-tasks-legacy-era-gets-the-run", async () => {
  const modern = await connect("auto");
  let agent;
  try {
    agent = await prepare(modern, "legacy");
  } finally {
    await modern.close();
  }
  const client = await connect("legacy");
  try {
    check(client.getProtocolEra() === "legacy", `the initialize handshake, got ${client.getProtocolEra()}`);
    const session = createTaskSessionFromClient(client, { endpointId: `outreach-ci-legacy-${mcpUrl.host}` });
    try {
      const execution = await session.callTool("service_run_agent", { id: agent });
      check(execution.kind === "immediate", `no task without the extension: ${execution.kind}`);
      const { outcome } = await execution.settle();
      const run = resultFromTaskOutcome(outcome).structuredContent;
      check(run.id.startsWith("run_") && run.status === "queued", `the run itself, queued: ${show(run).slice(0, 300)}`);
      console.log(`  ${run.id}: ${run.status} at once`);
    } finally {
      await session.close();
    }
  } finally {
    await client.close();
  }
});

await named("ts-progress-held-call", async () => {
  const client = await connect("auto");
  try {
    const agent = await prepare(client, "progress");
    const updates = [];
    const result = await client.callTool(
      { name: "service_run_agent", arguments: { id: agent } },
      { onprogress: (progress) => updates.push(progress), timeout: 120_000 },
    );
    check(!result.isError, `the held call succeeded: ${show(result.content)}`);
    const run = result.structuredContent;
    check(ENDED.includes(run.status), `one call returned the run once it had ended: ${run.status}`);
    check(updates.length > 0, "onprogress was called");
    const values = updates.map((update) => update.progress);
    check(values.every((value, index) => index === 0 || value > values[index - 1]), `progress only increases: ${show(values)}`);
    const last = updates.at(-1);
    check(last.progress === PROSPECTS && last.total === PROSPECTS, `the last update says ${PROSPECTS} of ${PROSPECTS}: ${show(last)}`);
    console.log(`  ${updates.length} updates (${updates.map((update) => update.message).join("; ")}); ${run.id} ${run.status}`);
  } finally {
    await client.close();
  }
});

// A priced call of 100 credits or more asks its person first, over 2026-07-28's multi round-trip
// requests, which the SDK drives itself through its `elicitation/create` handler: declined, the
// import does nothing and is a `declined` tool error; accepted, it runs.
await named("ts-confirmation-declined-then-accepted", async () => {
  const asked = [];
  const answering = async (answer) => {
    const transport = new StreamableHTTPClientTransport(mcpUrl, {
      requestInit: { headers: { Authorization: authorization } },
    });
    const client = new Client(clientInfo, {
      versionNegotiation: { mode: "auto" },
      capabilities: { elicitation: { form: {} } },
    });
    client.setRequestHandler("elicitation/create", async (request) => {
      asked.push(request.params.message);
      return answer;
    });
    await client.connect(transport);
    return client;
  };
  const rows = Array.from({ length: 100 }, (_, index) => ({
    first_name: `Confirm${index}`,
    email: `ts-confirm-${RUN}-${index}@example.com`,
  }));
  const total = async (client) => (await call(client, "list_prospects", { limit: 1 })).total;

  const declining = await answering({ action: "decline" });
  try {
    const before = await total(declining);
    const result = await declining.callTool({ name: "service_import_prospects", arguments: { rows } });
    check(result.isError === true, `a declined import is a tool error: ${show(result)}`);
    const body = JSON.parse(result.content[0].text);
    check(body.code === "declined", `code \`declined\`: ${show(body)}`);
    check((await total(declining)) === before, "a declined import imported nothing");
    check(asked.length === 1 && /costs 100 credits/.test(asked[0]), `asked once, with the price: ${show(asked)}`);
    console.log(`  asked "${asked[0]}"; declined: ${body.error}`);
  } finally {
    await declining.close();
  }

  const accepting = await answering({ action: "accept", content: { confirm: true } });
  try {
    const result = await accepting.callTool({
      name: "service_import_prospects",
      arguments: { rows, idempotency_key: `ts-confirm-${RUN}` },
    });
    check(!result.isError, `an accepted import runs: ${show(result.content)}`);
    check(asked.length === 2, `asked again for the new call: ${show(asked)}`);
    const imported = result.structuredContent;
    console.log(`  accepted: import ${imported.id} ${imported.status}`);
  } finally {
    await accepting.close();
  }
});

writeFileSync(resultsPath, JSON.stringify(results, null, 2));
const failed = results.filter((result) => !result.ok).length;
console.log(`${results.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
