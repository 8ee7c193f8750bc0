"""Run the real-client checks against the `outreach` binary on a fresh database.

Usage:
    real_clients.py --binary target/debug/outreach --database sqlite
    real_clients.py --binary target/debug/outreach --database postgres \
        [--postgres-url postgres://postgres@127.0.0.1:5432/postgres]

The clients are ones nobody here wrote (DESIGN.md section 12), pinned in `.ci/requirements.txt`:

1. openapi-spec-validator validates the served `/api/v1/openapi.json` as OpenAPI 3.1;
2. the official MCP Python SDK talks to `/api/mcp` (see `mcp_client_check.py`);
3. the MCP Python SDK follows agent runs (see `mcp_agent_runs.py`): polled with
   `service_get_run`, as a task of the Tasks extension through the SDK's extension interface,
   and held open with progress notifications, on both lifecycles;
4. the Standard Webhooks Python library verifies the webhooks the server signs (see
   `webhook_check.py`): a test message, an event, and a rotated secret's two signatures;
5. schemathesis fuzzes the served OpenAPI document with a key;
6. the MCP Python SDK drives the outreach engine as an assistant would (see
   `mcp_outreach_flow.py`), against a second server started with `--test-clock` on a database of
   its own, with a `send` key in a workspace whose sending terms are accepted.

The script makes its own fresh database (a SQLite file in a temporary folder, or a PostgreSQL
database `outreach_ci_<random>` that it drops afterwards), creates a workspace and a key with
`outreach admin --json` (and grants it credits, so the fuzzing reaches the priced actions), starts
`outreach serve` on a free loopback port, waits for `/healthz`,
runs the checks and stops the server, whatever happens.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ci_server import CheckFailed, Server, admin, argument_parser, executable, fresh_database, http_get, run, section

HERE = Path(__file__).resolve().parent
VENV_BIN = Path(sys.executable).parent

# A fixed seed makes a failure reproducible (`--seed` is printed with it); set
# CI_SCHEMATHESIS_SEED to explore other inputs.
DEFAULT_SEED = 20261121

# Every schemathesis check, `positive_data_acceptance` (ST202, "schema-valid request rejected")
# included: the schema states every rule of one field (lengths, patterns such as `HH:MM` and email
# and profile URL shapes, ranges, list and map sizes, no NUL) and the cross-field rules JSON
# Schema can say (`not`/`if`/`then` with `required`). The rules it cannot say, because they compare
# two values (`min_score` <= `max_score`, tiers descending, a window's end after its start, an
# events range), read
# a list's order or normalised items (a sequence's steps, repeated targeting keywords), read a CSV
# file's content, or depend on stored state (senders that exist, a list's default targeting, an
# agent's own cap), are each described in the schema and listed, with the test that recognises
# them, in `schemathesis_hooks.py`; only those ST202s are dropped (schemathesis prints how many).
SCHEMATHESIS_HOOKS = HERE / "schemathesis_hooks.py"


def check_openapi(base_url: str, work: Path) -> None:
    section("openapi-spec-validator: the served /api/v1/openapi.json")
    from openapi_spec_validator import OpenAPIV31SpecValidator

    status, headers, body = http_get(f"{base_url}/api/v1/openapi.json")
    if status != 200:
        raise CheckFailed(f"GET /api/v1/openapi.json answered {status}")
    content_type = {k.lower(): v for k, v in headers.items()}.get("content-type", "")
    if not content_type.startswith("application/json"):
        raise CheckFailed(f"/api/v1/openapi.json is served as `{content_type}`, expected application/json")
    document = json.loads(body)
    (work / "openapi.json").write_bytes(body)
    if document.get("openapi", "").split(".")[:2] != ["3", "1"]:
        raise CheckFailed(f"expected an OpenAPI 3.1 document, got openapi: {document.get('openapi')!r}")
    errors = list(OpenAPIV31SpecValidator(document).iter_errors())
    if errors:
        for error in errors:
            print(f"  {'/'.join(map(str, error.absolute_path)) or '<root>'}: {error.message}")
        raise CheckFailed(f"openapi-spec-validator found {len(errors)} error(s) in the served document")
    operations = sum(len(methods) for methods in document.get("paths", {}).values())
    print(f"  valid OpenAPI {document['openapi']}: {len(document['paths'])} paths, {operations} operations")


def check_mcp(base_url: str, key: str) -> None:
    section("MCP Python SDK: /api/mcp")
    done = run([sys.executable, str(HERE / "mcp_client_check.py"), base_url, key], timeout=300)
    if done.returncode != 0:
        raise CheckFailed("the MCP Python SDK checks failed (see above)")


def check_agent_runs(base_url: str, key: str) -> None:
    section("MCP Python SDK: agent runs (polled, as a task, with progress)")
    done = run([sys.executable, str(HERE / "mcp_agent_runs.py"), base_url, key], timeout=600)
    if done.returncode != 0:
        raise CheckFailed("the MCP agent-run checks failed (see above)")


def check_webhooks(base_url: str, key: str) -> None:
    section("standardwebhooks (Python): signed deliveries to a loopback receiver")
    done = run([sys.executable, str(HERE / "webhook_check.py"), base_url, key], timeout=300)
    if done.returncode != 0:
        raise CheckFailed("the webhook checks failed (see above)")


def check_schemathesis(base_url: str, key: str, work: Path, max_examples: int) -> None:
    section("schemathesis: fuzz the served OpenAPI document")
    seed = os.environ.get("CI_SCHEMATHESIS_SEED", str(DEFAULT_SEED))
    cmd = [
        str(VENV_BIN / "schemathesis"),
        "run",
        f"{base_url}/api/v1/openapi.json",
        "--header",
        f"Authorization: Bearer {key}",
        "--checks",
        "all",
        "--max-examples",
        str(max_examples),
        "--seed",
        seed,
        "--request-timeout",
        "20",
        "--generation-database",
        "none",
        "--report",
        "junit",
        "--report-dir",
        str(work / "schemathesis-report"),
        "--no-color",
    ]
    shown = [part if not part.startswith("Authorization:") else "Authorization: Bearer <key>" for part in cmd]
    print("  " + " ".join(shown), flush=True)
    # Run inside the work folder: schemathesis and hypothesis write caches into the current directory.
    done = run(cmd, cwd=work, timeout=900, env={**os.environ, "SCHEMATHESIS_HOOKS": str(SCHEMATHESIS_HOOKS)})
    if done.returncode != 0:
        raise CheckFailed(f"schemathesis found failures (exit {done.returncode}); replay with the seed above")


def check_outreach_flow(binary: str, args, work: Path) -> None:
    section("MCP Python SDK: the outreach flow (sandbox network, --test-clock)")
    flow_work = work / "outreach-flow"
    flow_work.mkdir(exist_ok=True)
    with fresh_database(args.database, flow_work, args.postgres_url) as database_url:
        owner = "ci-flow-owner@example.com"
        created = admin(binary, database_url, "workspace", "create", "--name", "CI outreach flow", "--owner-email", owner)
        admin(binary, database_url, "terms", "accept", "--workspace", created["workspace_id"], "--email", owner)
        key = admin(binary, database_url, "key", "create", "--workspace", created["workspace_id"],
                    "--email", owner, "--name", "ci outreach flow", "--scopes", "read,write,send")
        server = Server(binary, database_url, flow_work / "server.log", ["--test-clock"])
        with server:
            done = run([sys.executable, str(HERE / "mcp_outreach_flow.py"), server.base_url, key["key"]], timeout=300)
            internal = server.internal_errors()
            if done.returncode != 0 or internal:
                print("\n".join(internal[:20]))
                server.print_log()
                raise CheckFailed("the MCP outreach flow failed (see above)")


def main() -> int:
    parser = argument_parser(__doc__, "logs, openapi.json, reports")
    parser.add_argument("--max-examples", type=int, default=int(os.environ.get("CI_SCHEMATHESIS_MAX_EXAMPLES", "100")))
    args = parser.parse_args()

    binary = executable(args.binary)
    if binary is None:
        return 2


    work = Path(tempfile.mkdtemp(prefix=f"outreach-ci-{args.database}-"))
    failed = False
    server: Server | None = None
    try:
        section(f"real clients on {args.database}: fresh database, workspace, key, server")
        with fresh_database(args.database, work, args.postgres_url) as database_url:
            created = admin(binary, database_url, "workspace", "create", "--name", "CI real clients",
                            "--owner-email", "ci-owner@example.com")
            key = admin(binary, database_url, "key", "create", "--workspace", created["workspace_id"],
                        "--email", "ci-owner@example.com", "--name", "ci real clients", "--scopes", "read,write")
            # Credits let the fuzzing reach past `insufficient_credits` into the priced actions.
            admin(binary, database_url, "credits", "grant", "--workspace", created["workspace_id"], "--amount", "100000",
                  "--reason", "real-client checks")
            print(f"workspace {created['workspace_id']}, key {key['id']} ({key['prefix']}..., scopes {key['scopes']})")
            server = Server(binary, database_url, work / "server.log")
            with server:
                check_openapi(server.base_url, work)
                check_mcp(server.base_url, key["key"])
                check_agent_runs(server.base_url, key["key"])
                check_webhooks(server.base_url, key["key"])
                check_schemathesis(server.base_url, key["key"], work, args.max_examples)
                internal = server.internal_errors()
                if internal:
                    print("\n".join(internal[:20]))
                    raise CheckFailed(f"the server logged {len(internal)} internal error(s) during the checks")
            check_outreach_flow(binary, args, work)
    except (CheckFailed, subprocess.TimeoutExpired) as failure:
        failed = True
        print(f"\nFAILED: {failure}", file=sys.stderr, flush=True)
        if server is not None and server.log_path.exists():
            server.print_log()
    except BaseException:
        failed = True
        if server is not None and server.log_path.exists():
            server.print_log()
        raise
    finally:
        if args.keep or failed:
            print(f"work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    if failed:
        return 1
    print(f"\nreal-client checks passed on {args.database}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
