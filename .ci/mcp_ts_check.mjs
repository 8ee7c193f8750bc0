// Talk to the MCP face with the official MCP TypeScript SDK (@modelcontextprotocol/sdk 1.x).
//
// Usage: node mcp_ts_check.mjs NODE_MODULES CONFIG_JSON RESULTS_JSON
//
// Run by .ci/mcp_ts_check.py, which starts the server and writes CONFIG_JSON:
//   {"base_url", "write_key", "read_key", "send_key", "poor_key"}
// (`read_key` has only `read`; `poor_key` is a read,write key of a second workspace with no credits).
//
// Connects with StreamableHTTPClientTransport and `Authorization: Bearer <key>` to every toolset
// (`?toolsets=all`), lists the tools per scope and per toolset URL,
// walks a user's story through the tools (in an order that makes the ids the next calls need; every
// tool's own success and refusal are replayed from the registry by mcp_ts_replay.mjs), and checks
// five kinds of error: each must reach the client as a tool result with `isError: true`, no
// `structuredContent`, and the `{error, code, ...}` JSON body as its text. Every successful answer is
// validated against its REST operation's response in the OpenAPI document (mcp_ts_lib.mjs); any
// throw is a failure.
//
// Writes RESULTS_JSON: [{"name", "ok", "message"}], one entry per named check, for the driver to count.

import { readFileSync, writeFileSync } from "node:fs";
import { CheckFailed, check, checks, connect as connectWith, fails, largest, loadSdk, ok, show } from "./mcp_ts_lib.mjs";

const [nodeModules, configPath, resultsPath] = process.argv.slice(2);
if (!resultsPath) {
  console.error("usage: node mcp_ts_check.mjs NODE_MODULES CONFIG_JSON RESULTS_JSON");
  process.exit(2);
}
const config = JSON.parse(readFileSync(configPath, "utf8"));
const sdk = await loadSdk(nodeModules, config.base_url);
const { McpError } = sdk;
const sdkVersion = sdk.version;
const mcpUrl = new URL(`${config.base_url}/api/mcp?toolsets=all`);
const { results, named } = checks();
const connect = (key, label, url = mcpUrl, headers = {}) => connectWith(sdk, url, key, label, headers);

console.log(`MCP TypeScript SDK ${sdkVersion} (Node ${process.version}) against ${mcpUrl}`);
const run = Date.now().toString(36);
const state = {};
let client;
let toolNames = [];
const called = new Set();
const okCall = async (name, args) => {
  const out = await ok(client, name, args);
  called.add(name);
  return out.body;
};

await named("ts-connect-and-list-tools", async () => {
  client = await connect(config.write_key, "write");
  const server = client.getServerVersion();
  console.log(`  connected to ${server?.name} ${server?.version}`);
  const { tools } = await client.listTools();
  toolNames = tools.map((tool) => tool.name);
  console.log(`  tools/list: ${tools.length} tools`);
  check(tools.length > 0, "tools/list returned no tools");
  const bad = toolNames.filter((name) => !name.startsWith("service_"));
  check(bad.length === 0, `tool names must start with service_: ${bad}`);
  for (const tool of tools) {
    check(tool.inputSchema?.type === "object", `${tool.name}: input schema is not an object schema`);
    check(tool.outputSchema === undefined, `${tool.name}: an outputSchema (answers are shaped by the OpenAPI document)`);
  }
});

// What each credential is offered on each toolset URL: its scopes decide, the default set has at
// most 40 tools, the read-only URL only tools that change nothing, and an unknown toolset is refused
// with a sentence naming the valid ones.
await named("ts-tools-per-scope-and-toolset", async () => {
  const at = (path) => new URL(`${config.base_url}${path}`);
  const listed = async (key, label, path, headers = {}) => {
    const connection = await connect(key, label, at(path), headers);
    const { tools } = await connection.listTools();
    await connection.close();
    console.log(`  ${label} ${path}${headers["X-MCP-Toolsets"] ? ` (X-MCP-Toolsets: ${headers["X-MCP-Toolsets"]})` : ""}: ${tools.length} tools, ${show(tools).length} bytes`);
    return tools;
  };
  const names = (tools) => tools.map((tool) => tool.name);
  const byScope = {};
  for (const [label, key] of [["read", config.read_key], ["write", config.write_key], ["send", config.send_key]]) {
    byScope[label] = { all: await listed(key, label, "/api/mcp?toolsets=all"), default: await listed(key, label, "/api/mcp") };
    check(byScope[label].default.length <= 40, `${label}: ${byScope[label].default.length} tools in the default set`);
  }
  const within = (small, big) => names(small).every((name) => names(big).includes(name));
  check(within(byScope.read.all, byScope.write.all) && within(byScope.write.all, byScope.send.all), "a wider scope is offered fewer tools");
  check(byScope.read.all.length < byScope.send.all.length, "a read key is offered every tool");
  for (const tool of byScope.read.all) {
    check(
      tool.annotations?.readOnlyHint === true || /allow only `(estimate_only|dry_run): true` here/.test(tool.description),
      `a read key is offered ${tool.name}, which it cannot call`,
    );
  }
  const readonly = await listed(config.send_key, "send", "/api/mcp/readonly");
  check(readonly.length > 0 && readonly.every((tool) => tool.annotations?.readOnlyHint === true), `the read-only URL offers ${names(readonly)}`);
  const agents = await listed(config.send_key, "send", "/api/mcp", { "X-MCP-Toolsets": "agents" });
  check(names(agents).includes("service_run_agent") && !names(agents).includes("service_list_prospects"), `X-MCP-Toolsets: agents offers ${names(agents)}`);
  let refused;
  try {
    await connect(config.send_key, "send", at("/api/mcp?toolsets=leads"));
  } catch (error) {
    refused = error;
  }
  check(refused, "an unknown toolset was accepted");
  check(String(refused?.message).includes("Unknown toolset `leads`"), `the refusal does not name the toolset: ${refused?.message}`);
  console.log(`  ?toolsets=leads -> ${refused.message}`);
});

await named("ts-a-users-story", async () => {
  check(client, "not connected");
  // The workspace and the people in it.
  const workspace = await okCall("service_get_workspace", {});
  console.log(`  workspace ${workspace.id ?? show(workspace).slice(0, 60)}`);
  const prospect = await okCall("service_create_prospect", {
    first_name: "Ada",
    last_name: "Lovelace",
    email: `ada-${run}@example.com`,
    profile_url: `https://www.linkedin.com/in/ada-ts-${run}/`,
    title: "VP Sales",
    company_name: "Analytical Engines",
  });
  state.prospect = prospect.id;
  await okCall("service_get_prospect", { id: state.prospect });
  await okCall("service_update_prospect", { id: state.prospect, title: "VP Sales and Marketing" });
  await okCall("service_list_prospects", { limit: 5 });

  // An import with a key, and its replay.
  const importArgs = {
    rows: [{ first_name: "Grace", last_name: "Hopper", profile_url: `https://www.linkedin.com/in/grace-ts-${run}/` }],
    list_name: `TS import ${run}`,
    idempotency_key: `ts-import-${run}`,
  };
  const imported = await ok(client, "service_import_prospects", importArgs);
  called.add("service_import_prospects");
  state.import = imported.body.id;
  check(!imported.result._meta?.idempotent_replayed, `a first import is marked replayed: ${show(imported.result._meta)}`);
  const replay = await ok(client, "service_import_prospects", importArgs);
  check(replay.result._meta?.idempotent_replayed === true, `the replay has no _meta.idempotent_replayed: ${show(replay.result)}`);
  check(replay.body.id === state.import, `the replay answers another import: ${replay.body.id} != ${state.import}`);
  console.log(`  import ${state.import} replayed with _meta.idempotent_replayed`);
  await okCall("service_get_import", { id: state.import });
  await okCall("service_list_imports", { limit: 5 });

  // Lists.
  const list = await okCall("service_create_list", { name: `TS list ${run}`, description: "made by the TS SDK check" });
  state.list = list.id;
  await okCall("service_get_list", { id: state.list });
  await okCall("service_update_list", { id: state.list, description: "updated by the TS SDK check" });
  await okCall("service_list_lists", { limit: 5 });
  await okCall("service_add_prospects_to_list", { id: state.list, prospect_ids: [state.prospect] });
  await okCall("service_list_list_prospects", { id: state.list, limit: 5 });

  // Targetings, scoring, processing.
  const targeting = await okCall("service_create_targeting", {
    name: `TS targeting ${run}`,
    criteria: { keywords: [{ value: "sales", points: 40 }] },
  });
  state.targeting = targeting.id;
  await okCall("service_get_targeting", { id: state.targeting });
  await okCall("service_update_targeting", { id: state.targeting, description: "updated by the TS SDK check" });
  await okCall("service_list_targetings", { limit: 5 });
  const scoring = await okCall("service_start_scoring_run", {
    targeting_id: state.targeting,
    prospect_ids: [state.prospect],
    idempotency_key: `ts-score-${run}`,
  });
  state.run = scoring.id;
  await okCall("service_get_scoring_run", { id: state.run });
  await okCall("service_list_scoring_results", { id: state.run, limit: 5 });
  await okCall("service_list_scoring_runs", { limit: 5 });
  await okCall("service_process_list", { id: state.list, targeting_id: state.targeting, idempotency_key: `ts-process-${run}` });
  await okCall("service_get_dashboard", {});
  await okCall("service_list_credit_transactions", { limit: 5 });

  // Outreach: a sender, sequences, the approval queue, the sandbox network, a conversation. The
  // send-scoped tools go through a `send` key; the server's clock is a test clock moved here.
  const sender_ = await connect(config.send_key, "send");
  const sendCall = async (name, args) => {
    const out = await ok(sender_, name, args);
    called.add(name);
    return out.body;
  };
  const allDay = [{ start: "00:00", end: "24:00" }];
  const week = Object.fromEntries(
    ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"].map((day) => [day, allDay]),
  );
  const account = await okCall("service_create_sender", { name: `TS sender ${run}`, timezone: "UTC", working_hours: week });
  await okCall("service_get_sender", { id: account.id });
  await okCall("service_update_sender", { id: account.id, name: `TS sender ${run} (renamed)` });
  await okCall("service_list_senders", { limit: 5 });
  const spare = await okCall("service_create_sender", { name: `TS spare ${run}`, timezone: "Europe/Berlin" });
  await okCall("service_delete_sender", { id: spare.id });
  const people = [];
  // Fixed profiles, not the run's: the sandbox decides each person's fate from the seed (the
  // default, 42, which .ci/mcp_ts_check.py passes) and the profile URL, and about 2% are unreachable. Under the default seed these
  // are reachable and neither accept nor reply by themselves (what tests/api/outreach.rs's
  // `quiet_profile` looks for), so the check decides what the person does, every run.
  for (const [name, n] of [["edsger", 2], ["barbara", 8], ["donald", 2]]) {
    const made = await okCall("service_create_prospect", {
      first_name: name, profile_url: `https://www.linkedin.com/in/${name}-ts-${n}/`,
    });
    people.push(made.id);
  }
  const steps = [
    { type: "connection_request", delay_hours: 0, note: "Hi {{first_name}}, glad to connect." },
    { type: "message", delay_hours: 24, text: "Thanks {{first_name|there}}!" },
  ];
  const draft = await okCall("service_create_sequence", { name: `TS draft ${run}`, steps });
  await okCall("service_delete_sequence", { id: draft.id });
  const sequence = await okCall("service_create_sequence", { name: `TS sequence ${run}`, steps, sender_ids: [account.id] });
  await okCall("service_get_sequence", { id: sequence.id });
  await okCall("service_update_sequence", { id: sequence.id, name: `TS sequence ${run} (renamed)` });
  await okCall("service_list_sequences", { limit: 5 });
  const added = await okCall("service_add_to_sequence", { sequence_id: sequence.id, prospect_ids: people });
  check(added.enrollments.length === 3, `three enrollments: ${show(added)}`);
  const byProspect = Object.fromEntries(added.enrollments.map((e) => [e.prospect_id, e]));
  await okCall("service_list_approvals", { sequence_id: sequence.id });
  await okCall("service_reject_outreach", { ids: [byProspect[people[1]].approval_id] });
  await sendCall("service_approve_outreach", { ids: [byProspect[people[0]].approval_id, byProspect[people[2]].approval_id] });
  // The third person is paused, resumed and stopped before the sequence starts, so whatever the
  // sandbox decides for them (about 2% of profiles are unreachable) cannot end their enrollment
  // first. Resuming races the step job the approval enqueued, which ends itself while the
  // sequence is a draft: the lock order that keeps the two from deadlocking on PostgreSQL.
  await sendCall("service_pause_enrollment", { id: byProspect[people[2]].enrollment_id });
  await sendCall("service_resume_enrollment", { id: byProspect[people[2]].enrollment_id });
  await sendCall("service_stop_enrollment", { id: byProspect[people[2]].enrollment_id });
  await sendCall("service_activate_sequence", { id: sequence.id });
  const first = byProspect[people[0]].enrollment_id;
  await okCall("service_list_enrollments", { sequence_id: sequence.id, limit: 5 });
  await okCall("service_get_enrollment", { id: first });
  await sendCall("service_pause_sequence", { id: sequence.id });
  await sendCall("service_resume_sequence", { id: sequence.id });
  // The scheduler runs in the server: move the clock until the first person's invitation is in
  // the sandbox's log.
  let invited = false;
  for (let turn = 0; turn < 120 && !invited; turn += 1) {
    await okCall("service_advance_clock", { seconds: 120 });
    const log = await okCall("service_list_sandbox_log", { prospect_id: people[0], kind: "invitation" });
    invited = log.items.length === 1;
    if (!invited) await new Promise((resolve) => setTimeout(resolve, 250));
  }
  check(invited, "the approved person's invitation never reached the sandbox network");
  await okCall("service_sandbox_accept_invitation", { prospect_id: people[0], sender_id: account.id });
  await okCall("service_sandbox_reply", { prospect_id: people[0], sender_id: account.id, text: "Hello from the TS check" });
  await okCall("service_sandbox_set_sender_status", { sender_id: account.id, status: "connected" });
  await okCall("service_sandbox_set_latency", { sender_id: account.id, latency_ms: 0 });
  const conversations = await okCall("service_list_conversations", { sender_id: account.id });
  check(conversations.items.length === 1, `one conversation: ${show(conversations)}`);
  const conversation = conversations.items[0].id;
  await okCall("service_get_conversation", { id: conversation });
  await okCall("service_list_messages", { id: conversation });
  await sendCall("service_reply_to_conversation", { id: conversation, text: "Thanks! Talk soon." });
  await okCall("service_mark_conversation_read", { id: conversation });
  // Everyone in the first sequence is done, so it completed; a second one is started and stopped.
  const second = await okCall("service_create_sequence", { name: `TS second ${run}`, steps, sender_ids: [account.id] });
  await sendCall("service_activate_sequence", { id: second.id });
  await sendCall("service_stop_sequence", { id: second.id });
  await sender_.close();

  // Agents: a saved configuration, changed, listed and deleted.
  const agent = await okCall("service_create_agent", { name: `TS triage ${run}`, kind: "inbox_triage" });
  await okCall("service_get_agent", { id: agent.id });
  await okCall("service_update_agent", { id: agent.id, enabled: false });
  const agents = await okCall("service_list_agents", { kind: "inbox_triage" });
  check(agents.items.some((item) => item.id === agent.id), `the agent is listed: ${show(agents)}`);
  await okCall("service_delete_agent", { id: agent.id });

  // Agent runs: a writer drafts the sequence's texts for a list and proposes them (nothing is
  // sent); its run is followed to the end, and a second run is canceled while it works. A draft
  // is read and edited before a decision.
  const runsSequence = await okCall("service_create_sequence", { name: `TS runs ${run}`, steps });
  const runsList = await okCall("service_create_list", { name: `TS runs list ${run}` });
  const rows = Array.from({ length: 300 }, (_, n) => ({
    first_name: `Writer${n}`, profile_url: `https://www.linkedin.com/in/ts-writer-${run}-${n}/`,
  }));
  await okCall("service_import_prospects", { rows, list_id: runsList.id });
  const writer = await okCall("service_create_agent", {
    name: `TS writer ${run}`, kind: "writer", list_id: runsList.id, sequence_id: runsSequence.id, max_prospects_per_run: 300,
  });
  const small = await okCall("service_run_agent", { id: writer.id, max_prospects: 2, idempotency_key: `ts-run-${run}` });
  check(small.status === "queued", `a run starts queued: ${show(small)}`);
  let followed = small;
  for (let turn = 0; turn < 200 && ["queued", "running"].includes(followed.status); turn += 1) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    followed = await okCall("service_get_run", { id: small.id });
  }
  check(followed.status === "awaiting_approval" && followed.processed === 2, `the run did its work: ${show(followed)}`);
  const runs = await okCall("service_list_runs", { agent_id: writer.id, status: "awaiting_approval" });
  check(runs.items.length === 1, `the run is listed: ${show(runs)}`);
  const proposals = await okCall("service_list_approvals", { run_id: small.id });
  const draftId = proposals.items[0].id;
  await okCall("service_get_approval", { id: draftId });
  const edited = await okCall("service_update_approval", {
    id: draftId, texts: [{ step_index: 0, text: "Hi {{first_name}}, edited by the TS check." }],
  });
  check(edited.texts[0].text.endsWith("edited by the TS check."), `the draft was edited: ${show(edited)}`);
  const big = await okCall("service_run_agent", { id: writer.id });
  await okCall("service_cancel_run", { id: big.id });

  // Undo.
  await okCall("service_remove_prospects_from_list", { id: state.list, prospect_ids: [state.prospect] });
  await okCall("service_delete_list", { id: state.list });
  await okCall("service_delete_targeting", { id: state.targeting });
  await okCall("service_delete_prospect", { id: state.prospect });

  console.log(`  ${called.size} tools called successfully in the story`);
});

await named("ts-error-not-found", async () => {
  check(client, "not connected");
  await fails(client, "service_get_prospect", { id: "prs_doesnotexist0000000" }, "not_found");
});

await named("ts-error-invalid-argument", async () => {
  check(client, "not connected");
  const body = await fails(client, "service_list_prospects", { limit: "many" }, "invalid_request");
  check(body.error.includes("limit"), `the sentence does not name the field \`limit\`: ${show(body)}`);
});

await named("ts-error-insufficient-scope", async () => {
  const reader = await connect(config.read_key, "read");
  try {
    await fails(reader, "service_create_prospect", { first_name: "Read", last_name: "Only" }, "insufficient_scope");
  } finally {
    await reader.close();
  }
});

await named("ts-error-idempotency-key-reused", async () => {
  check(client, "not connected");
  const key = `ts-reuse-${run}`;
  const first = { rows: [{ first_name: "Alan", last_name: "Turing" }], idempotency_key: key };
  await ok(client, "service_import_prospects", first);
  const other = { rows: [{ first_name: "Alonzo", last_name: "Church" }], idempotency_key: key };
  await fails(client, "service_import_prospects", other, "idempotency_key_reused");
});

await named("ts-error-insufficient-credits", async () => {
  const poor = await connect(config.poor_key, "poor");
  try {
    const args = { rows: [{ first_name: "Poor", last_name: "Richard" }] };
    const estimate = await ok(poor, "service_import_prospects", { ...args, estimate_only: true });
    check(estimate.body.sufficient === false, `the estimate with no credits says sufficient: ${show(estimate.body)}`);
    await fails(poor, "service_import_prospects", args, "insufficient_credits");
  } finally {
    await poor.close();
  }
});

await named("ts-unknown-tool-is-jsonrpc-error", async () => {
  check(client, "not connected");
  try {
    const result = await client.callTool({ name: "service_no_such_tool", arguments: {} });
    throw new CheckFailed(`an unknown tool should be a JSON-RPC error, got ${show(result)}`);
  } catch (error) {
    if (error instanceof CheckFailed) throw error;
    check(error instanceof McpError, `an unknown tool threw something other than an McpError: ${error}`);
    console.log(`  unknown tool -> JSON-RPC error ${error.code}`);
  }
});

await named("ts-prompts-per-scope-listed-and-rendered", async () => {
  check(client, "not connected");
  const expected = {
    read: ["weekly_report"],
    write: ["prospect_to_sequence", "triage_inbox", "weekly_report"],
    send: ["prospect_to_sequence", "review_approvals", "triage_inbox", "weekly_report"],
  };
  for (const [scope, names] of Object.entries(expected)) {
    const connection = scope === "write" ? client : await connect(config[`${scope}_key`], scope);
    try {
      const { prompts } = await connection.listPrompts();
      const listed = prompts.map((prompt) => prompt.name);
      check(JSON.stringify(listed) === JSON.stringify(names), `prompts/list for ${scope}: ${show(listed)}`);
      console.log(`  prompts/list (${scope}): ${listed.length} prompts`);
    } finally {
      if (connection !== client) await connection.close();
    }
  }
  const got = await client.getPrompt({ name: "weekly_report", arguments: { period: "30d" } });
  const text = got.messages[0].content.text;
  check(text.includes("`period: 30d`"), `prompts/get weekly_report: ${text.slice(0, 200)}`);
  try {
    const result = await client.getPrompt({ name: "no_such_prompt", arguments: {} });
    throw new CheckFailed(`an unknown prompt should be a JSON-RPC error, got ${show(result)}`);
  } catch (error) {
    if (error instanceof CheckFailed) throw error;
    check(error instanceof McpError && error.code === -32602, `an unknown prompt: ${error}`);
    check(String(error.message).includes("weekly_report"), `the error names no prompt: ${error.message}`);
  }
  console.log("  prompts/get: rendered with its argument; an unknown name is -32602 naming the prompts");
});

if (client) await client.close();
console.log(`largest answer (JSON text): ${largest.bytes} bytes (${largest.tool})`);
writeFileSync(resultsPath, JSON.stringify(results, null, 2));
const failed = results.filter((result) => !result.ok).length;
console.log(`TypeScript SDK: ${results.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
