"""Generate clients from the served OpenAPI document and use them against the `outreach` binary.

Usage:
    openapi_clients.py --binary target/debug/outreach --database sqlite \
        --node-modules target/ci-openapi-node/node_modules [--counts FILE] [--keep]

Generators nobody here wrote (DESIGN.md section 12), pinned in `.ci/requirements.txt` and
`.ci/openapi/package.json`:

1. `redocly-lint`: `redocly lint` with `.ci/openapi/redocly.yaml` (recommended-strict: any warning
   fails);
2. `openapi-typescript`: TypeScript types from the document, type-checked (`tsc --strict`) with a
   snippet that uses the `Idempotency-Key` header, the shared `Prospect` schema and a page;
3. `python-client-generate`: openapi-python-client generates a package without a warning;
4. `python-client-calls`: the generated client creates a prospect, reads it back as the same
   `Prospect` class, and makes an idempotent import with a key twice: the second answer says
   `Idempotent-Replayed: true`, has the same body, and spent nothing again.

The document is the same on both backends; the calls run on the one `--database` names.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import tempfile
from pathlib import Path

from ci_server import (
    Checks, Server, admin, argument_parser, check, executable, fresh_database, guarded, http_get,
    run, section,
)

HERE = Path(__file__).resolve().parent
VENV_BIN = Path(sys.executable).parent
CHECKS = ["redocly-lint", "openapi-typescript", "python-client-generate", "python-client-calls"]

TYPESCRIPT_USE = """\
import type { components, operations, paths } from "./schema";

type Prospect = components["schemas"]["Prospect"];
type ImportHeaders = NonNullable<operations["import_prospects"]["parameters"]["header"]>;
type ProspectPage = paths["/prospects"]["get"]["responses"][200]["content"]["application/json"];

const headers: ImportHeaders = { "Idempotency-Key": "ci-typescript-1" };
const page: ProspectPage = { total: 0, count: 0, offset: 0, has_more: false, next_offset: null, items: [] };
const first: Prospect | undefined = page.items[0];
export const used = [headers, first];
"""


def node_tool(node_modules: Path, name: str) -> str:
    tool = node_modules / ".bin" / name
    check(tool.exists(), f"{tool} is missing: run `bash .ci/run setup`")
    return str(tool)


def redocly_lint(node_modules: Path, document: Path) -> None:
    done = run([node_tool(node_modules, "redocly"), "lint", "--config", str(HERE / "openapi" / "redocly.yaml"),
                "--format", "stylish", str(document)], capture_output=True, timeout=300)
    print(done.stdout[-6000:], done.stderr[-3000:])
    check(done.returncode == 0, f"redocly lint failed (exit {done.returncode})")


def typescript(node_modules: Path, document: Path, work: Path) -> None:
    out = work / "ts"
    out.mkdir(exist_ok=True)
    done = run([node_tool(node_modules, "openapi-typescript"), str(document), "-o", str(out / "schema.d.ts")],
               capture_output=True, timeout=300)
    print(done.stdout[-3000:], done.stderr[-3000:])
    check(done.returncode == 0, f"openapi-typescript failed (exit {done.returncode})")
    check("unknown format" not in (done.stdout + done.stderr).lower(), "openapi-typescript met an unknown format")
    (out / "use.ts").write_text(TYPESCRIPT_USE)
    done = run([node_tool(node_modules, "tsc"), "--strict", "--noEmit", "--skipLibCheck", "--module", "esnext",
                "--moduleResolution", "bundler", "--target", "es2022", str(out / "use.ts")],
               capture_output=True, timeout=300)
    print(done.stdout[-3000:], done.stderr[-3000:])
    check(done.returncode == 0, "the generated TypeScript types do not type-check the snippet")


def python_generate(document: Path, work: Path) -> Path:
    package = work / "outreach_client"
    env = dict(os.environ, PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    done = run([str(VENV_BIN / "openapi-python-client"), "generate", "--path", str(document),
                "--output-path", str(package), "--meta", "none", "--overwrite",
                "--config", str(HERE / "openapi" / "python-client.yaml")],
               capture_output=True, timeout=300, env=env)
    output = done.stdout + done.stderr
    print(output[-6000:])
    check(done.returncode == 0, f"openapi-python-client failed (exit {done.returncode})")
    check("Warning" not in output, "openapi-python-client warned while generating (see above)")
    return package


def python_calls(package: Path, base_url: str, key: str) -> None:
    sys.path.insert(0, str(package.parent))
    client_module = importlib.import_module("outreach_client")
    client = client_module.AuthenticatedClient(base_url=f"{base_url}/api/v1", token=key, raise_on_unexpected_status=True)
    prospects = importlib.import_module("outreach_client.api.prospects")
    imports = importlib.import_module("outreach_client.api.imports")
    workspace = importlib.import_module("outreach_client.api.workspace")
    models = importlib.import_module("outreach_client.models")

    created = importlib.import_module(f"{prospects.__name__}.create_prospect").sync(
        client=client,
        body=models.CreateProspectCreateProspectInput(first_name="Ada", last_name="Lovelace",
                                                      email="ada@analytical-engines.example"))
    check(isinstance(created, models.Prospect), f"create_prospect answered {created!r}, not a Prospect")
    read = importlib.import_module(f"{prospects.__name__}.get_prospect").sync(client=client, id=created.id)
    check(isinstance(read, models.Prospect) and read.id == created.id, f"get_prospect answered {read!r}")
    page = importlib.import_module(f"{prospects.__name__}.list_prospects").sync(client=client, limit=10)
    check(isinstance(page, models.ProspectPage) and all(isinstance(item, models.Prospect) for item in page.items),
          f"list_prospects answered {page!r}")
    print(f"  created, read and listed {created.id} as one Prospect class")

    get_workspace = importlib.import_module(f"{workspace.__name__}.get_workspace")
    balance_before = get_workspace.sync(client=client).workspace.credits_balance
    import_prospects = importlib.import_module(f"{imports.__name__}.import_prospects")
    # POST /imports has three bodies (JSON, a multipart upload, the raw CSV); this is the JSON one.
    body = models.ImportProspectsJsonImportInput(
        csv="First Name,Last Name,Email\nGrace,Hopper,grace@compilers.example\nAlan,Turing,alan@bletchley.example\n")
    first = import_prospects.sync_detailed(client=client, body=body, idempotency_key="ci-python-client-import-1")
    second = import_prospects.sync_detailed(client=client, body=body, idempotency_key="ci-python-client-import-1")
    check(first.status_code == 200, f"the import answered {first.status_code}: {first.content[:300]!r}")
    check(isinstance(first.parsed, models.Import), f"the import parsed as {type(first.parsed).__name__}, not Import")
    check(first.headers.get("idempotent-replayed") is None, "the first import says it was replayed")
    check(second.status_code == first.status_code, f"the replay answered {second.status_code}")
    check(second.headers.get("idempotent-replayed") == "true",
          f"the replay has no `Idempotent-Replayed: true` (headers {dict(second.headers)})")
    check(json.loads(second.content) == json.loads(first.content), "the replay's body differs from the first answer")
    balance_after = get_workspace.sync(client=client).workspace.credits_balance
    spent = balance_before - balance_after
    check(spent == first.parsed.credits_spent, f"the two calls spent {spent} credits, one import costs "
          f"{first.parsed.credits_spent}")
    print(f"  import {first.parsed.id} replayed with Idempotent-Replayed: true; {spent} credits spent once")


def main() -> int:
    parser = argument_parser(__doc__, "server log, openapi.json, generated clients")
    parser.add_argument("--node-modules", type=Path, required=True, help="where `npm ci` installed .ci/openapi")
    parser.add_argument("--counts", type=Path, help="write `passed failed` here for .ci/run")
    args = parser.parse_args()
    binary = executable(args.binary)
    if binary is None:
        return 2

    checks = Checks(f"OpenAPI clients on {args.database}", args.counts)
    work = Path(tempfile.mkdtemp(prefix=f"outreach-openapi-{args.database}-"))
    with guarded(checks, CHECKS, work, args.keep) as guard:
        section(f"OpenAPI clients on {args.database}: fresh database, workspace, key, server")
        with fresh_database(args.database, work, args.postgres_url) as database_url:
            created = admin(binary, database_url, "workspace", "create", "--name", "CI OpenAPI clients",
                            "--owner-email", "ci-openapi@example.com")
            key = admin(binary, database_url, "key", "create", "--workspace", created["workspace_id"],
                        "--email", "ci-openapi@example.com", "--name", "ci openapi clients", "--scopes", "read,write")
            admin(binary, database_url, "credits", "grant", "--workspace", created["workspace_id"], "--amount", "1000",
                  "--reason", "openapi client checks")
            server = Server(binary, database_url, work / "server.log")
            guard.server = server
            with server:
                status, _, body = http_get(f"{server.base_url}/api/v1/openapi.json")
                check(status == 200, f"GET /api/v1/openapi.json answered {status}")
                document = work / "openapi.json"
                document.write_bytes(body)
                checks.run("redocly-lint", lambda: redocly_lint(args.node_modules, document))
                checks.run("openapi-typescript", lambda: typescript(args.node_modules, document, work))
                generated: list[Path] = []
                checks.run("python-client-generate", lambda: generated.append(python_generate(document, work)))
                checks.run("python-client-calls", lambda: python_calls(generated[0], server.base_url, key["key"]),
                           needs=("python-client-generate",))
                checks.no_internal_errors(server)
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
