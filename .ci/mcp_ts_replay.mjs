// Replay every action's parity fixture through the official MCP TypeScript SDK.
//
// Usage: node mcp_ts_replay.mjs NODE_MODULES CONFIG_JSON RESULTS_JSON shared|replay FIXTURES_JSON SHARED_JSON
//
// The fixtures are the ones declared beside each action with `parity!` (outreach_runtime::fixtures),
// as `tests/golden/parity_fixtures.json` holds them; the Rust parity test replays the same ones over
// REST and MCP. So adding an action adds its TypeScript check here too, with no edit to this file.
// A fixture's input names objects of a *world* (`$prospect`, `${tag}`, `$missing:prs`); this script
// builds worlds with the names the registry lists, through the tools, as the Rust test does through
// REST, and fails naming any name it does not hold.
//
// Run twice by .ci/mcp_ts_check.py on one fresh database, as the Rust test's worlds are made:
// - `shared`, against a server that runs its job worker on a test clock: the part of a world only
//   the network makes (a contact invited by two senders, one invitation accepted, and a
//   conversation from the contact's reply), written to SHARED_JSON. Check `ts-replay-shared-world`.
// - `replay`, against a server with no job worker (`--no-worker`), so what a world holds stays as
//   it was made (a run stays `queued`, an approved enrollment `scheduled`): a shared world for the
//   reads and the refusals and a fresh world for each write; every tool's success input must
//   succeed (its `structuredContent` validated against the OpenAPI response, mcp_ts_lib.mjs) and its
//   refusal input must fail with the fixture's code. Check `ts-replay-<action>` for each action.
//
// CONFIG_JSON: {"base_url", "send_key"} (a read,write,send key of a workspace with credits whose
// sending terms are accepted). Writes RESULTS_JSON: [{"name", "ok", "message"}].

import { readFileSync, writeFileSync } from "node:fs";
import { check, checks, connect, fails, inputChecker, largest, loadSdk, ok, show } from "./mcp_ts_lib.mjs";

const [nodeModules, configPath, resultsPath, mode, fixturesPath, sharedPath] = process.argv.slice(2);
if (!["shared", "replay"].includes(mode) || !sharedPath) {
  console.error("usage: node mcp_ts_replay.mjs NODE_MODULES CONFIG_JSON RESULTS_JSON shared|replay FIXTURES_JSON SHARED_JSON");
  process.exit(2);
}
const config = JSON.parse(readFileSync(configPath, "utf8"));
const sdk = await loadSdk(nodeModules, config.base_url);
const registry = JSON.parse(readFileSync(fixturesPath, "utf8"));
const { results, named } = checks();
console.log(`MCP TypeScript SDK ${sdk.version} (Node ${process.version}): ${mode}`);
// The send key holds every scope, so one connection can call every tool.
const client = await connect(sdk, new URL(`${config.base_url}/api/mcp?toolsets=all`), config.send_key, `replay-${mode}`);
const call = async (name, args) => (await ok(client, `service_${name}`, args)).body;

const allDay = [{ start: "00:00", end: "24:00" }];
const everyDay = Object.fromEntries(
  ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"].map((day) => [day, allDay]),
);

if (mode === "shared") {
  await named("ts-replay-shared-world", async () => {
    // A profile that, under the sandbox seed the driver passes (42), is reachable and neither
    // accepts nor replies by itself (see mcp_ts_check.mjs): what happens to it is what we do.
    const contact = await call("create_prospect", {
      first_name: "Charles", last_name: "Babbage", profile_url: "https://www.linkedin.com/in/edsger-ts-2/",
    });
    const shared = { contact: contact.id };
    // Every enrollment first: once one invitation went out, the contact would be skipped as
    // contacted recently.
    const started = [];
    for (const role of ["pending_sender", "withdrawing_sender", "connected_sender"]) {
      const sender = await call("create_sender", { name: role, timezone: "UTC", working_hours: everyDay });
      shared[role] = sender.id;
      const sequence = await call("create_sequence", {
        name: `Invite as ${role}`,
        steps: [{ type: "connection_request", delay_hours: 0, note: "Hi {{first_name}}, glad to connect." }],
        sender_ids: [sender.id],
        settings: { skip_if_in_other_live_sequence: false },
      });
      const added = await call("add_to_sequence", { sequence_id: sequence.id, prospect_ids: [contact.id] });
      check(added.enrollments.length === 1, `the contact was not enrolled as ${role}: ${show(added)}`);
      started.push([sequence.id, added.enrollments[0].approval_id]);
    }
    for (const [sequence, approval] of started) {
      await call("approve_outreach", { ids: [approval] });
      await call("activate_sequence", { id: sequence });
    }
    // The worker sends on the server's test clock: move it until every invitation went out.
    let invitations = [];
    for (let turn = 0; turn < 120 && invitations.length < 3; turn += 1) {
      await call("advance_clock", { seconds: 120 });
      invitations = (await call("list_sandbox_log", { prospect_id: contact.id, kind: "invitation" })).items;
      if (invitations.length < 3) await new Promise((resolve) => setTimeout(resolve, 250));
    }
    check(invitations.length === 3, `the contact's three invitations never went out: ${show(invitations)}`);
    await call("sandbox_accept_invitation", { prospect_id: contact.id, sender_id: shared.connected_sender });
    await call("sandbox_reply", { prospect_id: contact.id, sender_id: shared.connected_sender, text: "Happy to talk next week." });
    let conversations = [];
    for (let turn = 0; turn < 120 && conversations.length < 1; turn += 1) {
      conversations = (await call("list_conversations", { sender_id: shared.connected_sender })).items;
      if (conversations.length < 1) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    check(conversations.length === 1, `the contact's reply made no conversation: ${show(conversations)}`);
    shared.conversation = conversations[0].id;
    writeFileSync(sharedPath, JSON.stringify(shared, null, 2));
    console.log(`  shared: ${show(shared)}`);
  });
} else {
  const shared = JSON.parse(readFileSync(sharedPath, "utf8"));
  const sequenceSteps = [
    { type: "view_profile" },
    { type: "connection_request", delay_hours: 24, note: "Hi {{first_name|there}}, I work with teams like {{company_name}}." },
    { type: "message", delay_hours: 48, text: "Thanks for connecting, {{first_name}}!" },
  ];

  // A world as the Rust parity test makes one (tests/api/parity.rs, `World::make`), with the part
  // only the network makes shared.
  async function makeWorld(number) {
    const tag = `(world ${number})`;
    const world = { ...shared, tag, number: String(number) };
    world.prospect = (await call("create_prospect", {
      first_name: "Ada", last_name: "Lovelace", headline: "Poet of numbers", title: "Engineer", seniority: "senior",
      company_name: "Analytical Engines", company_domain: "engines.test", tags: ["vip"],
      custom_fields: { met_at: "conference", rank: 3 },
    })).id;
    world.targeting = (await call("create_targeting", {
      name: `ICP ${tag}`,
      criteria: {
        titles: { include: [{ value: "engineer", points: 60 }], exclude: ["intern"] },
        seniorities: [{ value: "senior", points: 40 }],
      },
    })).id;
    world.list = (await call("create_list", { name: `List ${tag}` })).id;
    await call("add_prospects_to_list", { id: world.list, prospect_ids: [world.prospect] });
    world.import = (await call("import_prospects", {
      rows: [{ first_name: "Imported", email: `imported-${number}@engines.test` }],
    })).id;
    world.run = (await call("start_scoring_run", { targeting_id: world.targeting, prospect_ids: [world.prospect] })).id;
    world.sender = (await call("create_sender", { name: `Sender ${tag}`, timezone: "Europe/Berlin" })).id;
    for (const [name, label] of [["spare_sender", "Spare sender"], ["status_sender", "Status sender"]]) {
      world[name] = (await call("create_sender", { name: `${label} ${tag}`, timezone: "UTC" })).id;
    }
    for (const [name, label] of [["draft", "Draft"], ["active", "Active"], ["paused", "Paused"]]) {
      world[name] = (await call("create_sequence", {
        name: `${label} ${tag}`, steps: sequenceSteps, sender_ids: [world.sender],
        settings: { skip_if_in_other_live_sequence: false },
      })).id;
    }
    world.reachable = [];
    for (let i = 0; i < 3; i += 1) {
      world.reachable.push((await call("create_prospect", {
        first_name: `Reachable${i}`, company_name: "Engines", profile_url: `https://linkedin.com/in/ts-world-${number}-${i}`,
      })).id);
    }
    world.reachable_0 = world.reachable[0];
    const added = (await call("add_to_sequence", { sequence_id: world.active, prospect_ids: world.reachable })).enrollments;
    world.scheduled = added[0].enrollment_id;
    world.pending_approval = added[1].approval_id;
    world.paused_enrollment = added[2].enrollment_id;
    await call("approve_outreach", { ids: [added[0].approval_id, added[2].approval_id] });
    await call("pause_enrollment", { id: world.paused_enrollment });
    await call("activate_sequence", { id: world.active });
    await call("activate_sequence", { id: world.paused });
    await call("pause_sequence", { id: world.paused });
    // A workspace holds at most 16 webhook endpoints: those of worlds no longer used go first
    // (all but the shared world 0's and the previous world's), as tests/api/parity.rs does.
    for (const endpoint of (await call("list_webhook_endpoints", { limit: 200 })).items) {
      const owner = /^Endpoint \(world (\d+)\)$/.exec(endpoint.description ?? "");
      if (owner && Number(owner[1]) !== 0 && Number(owner[1]) + 1 !== number) {
        await call("delete_webhook_endpoint", { id: endpoint.id });
      }
    }
    world.webhook_endpoint = (await call("create_webhook_endpoint", {
      url: "http://127.0.0.1:9/hooks", event_types: ["sequence.paused"], description: `Endpoint ${tag}`,
    })).id;
    world.dnc_entry = (await call("add_do_not_contact", {
      entries: [{ kind: "domain", value: `world-${number}.example` }],
    })).entries[0].id;
    world.variants = (await call("create_sequence", {
      name: `Variants ${tag}`, steps: [
        { type: "connection_request" },
        { type: "message", delay_hours: 24, variants: [
          { text: "Hi {{first_name|there}}, A." }, { text: "Hi {{first_name|there}}, B." }] },
      ],
    })).id;
    const paused = (await call("list_events", { type: ["sequence.paused"], limit: 200 })).items;
    world.event = paused.find((event) => event.data.sequence_id === world.paused)?.id;
    check(world.event, `no sequence.paused event of ${world.paused}`);
    world.agent = (await call("create_agent", {
      name: `Finder ${tag}`, kind: "prospector", targeting_id: world.targeting, list_id: world.list, sequence_id: world.draft,
    })).id;
    world.runner = (await call("create_agent", {
      name: `Writer ${tag}`, kind: "writer", list_id: world.list, sequence_id: world.draft,
    })).id;
    world.agent_run = (await call("run_agent", { id: world.runner })).id;
    const missing = Object.keys(registry.world).filter((name) => !(name in world));
    check(missing.length === 0, `this script's world lacks names the registry lists: ${missing}`);
    return world;
  }

  // A template with the world's values put in, as outreach_runtime::fixtures::instantiate does.
  function instantiate(template, world) {
    if (typeof template === "string") {
      if (template.startsWith("$missing:")) return `${template.slice("$missing:".length)}_00000000000NoSuchOne`;
      if (template.startsWith("$") && !template.startsWith("${")) {
        const name = template.slice(1);
        check(name in world, `the world holds no \`${name}\``);
        return world[name];
      }
      return template.replace(/\$\{([^}]*)\}/g, (_, name) => {
        check(name in world, `the world holds no \`${name}\``);
        return String(world[name]);
      });
    }
    if (Array.isArray(template)) return template.map((item) => instantiate(item, world));
    if (template && typeof template === "object") {
      return Object.fromEntries(Object.entries(template).map(([key, value]) => [key, instantiate(value, world)]));
    }
    return template;
  }

  const { tools } = await client.listTools();
  const listed = new Set(tools.map((tool) => tool.name));
  // Each fixture's success input must also pass the tool's listed `inputSchema`, as a host that
  // checks arguments would require: the list's trimmed schemas must never refuse a valid call.
  const inputs = new Map(tools.map((tool) => [tool.name, inputChecker(tool)]));
  let worlds = 0;
  let world0;
  await named("ts-replay-world", async () => {
    world0 = await makeWorld(worlds);
  });
  // `advance_clock` plays out what is due (the shared world's queued run, its scheduled steps),
  // which other fixtures rely on finding as they are: it goes last, as in tests/api/parity.rs.
  const ordered = Object.entries(registry.actions).sort(
    ([a], [b]) => Number(a === "advance_clock") - Number(b === "advance_clock"),
  );
  for (const [action, fixture] of ordered) {
    await named(`ts-replay-${action}`, async () => {
      check(world0, "the shared world was not made");
      const tool = `service_${action}`;
      check(listed.has(tool), `${tool} is not listed`);
      const world = fixture.kind === "write" ? await makeWorld((worlds += 1)) : world0;
      const input = instantiate(fixture.success, world);
      const valid = inputs.get(tool);
      check(valid(input), `${tool}: the success input fails the listed inputSchema: ${show(valid.errors?.slice(0, 5))}`);
      await ok(client, tool, input);
      await fails(client, tool, instantiate(fixture.failure, world0), fixture.failure_code);
    });
  }
  const unknown = [...listed].filter((tool) => !(tool.replace(/^service_/, "") in registry.actions));
  await named("ts-replay-every-tool-has-a-fixture", async () => {
    check(unknown.length === 0, `tools the registry has no fixture for: ${unknown}`);
  });
}

await client.close();
console.log(`largest answer (JSON text): ${largest.bytes} bytes (${largest.tool})`);
writeFileSync(resultsPath, JSON.stringify(results, null, 2));
const failed = results.filter((result) => !result.ok).length;
console.log(`TypeScript SDK replay (${mode}): ${results.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
