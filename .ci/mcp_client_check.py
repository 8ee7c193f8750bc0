"""Talk to the MCP face with the official MCP Python SDK, a client nobody here wrote.

Usage: mcp_client_check.py BASE_URL API_KEY

Connects to `{BASE_URL}/api/mcp` over Streamable HTTP with `Authorization: Bearer <key>`, in the
SDK's default mode (2.x probes `server/discover` first and falls back to `initialize`) and again
in its legacy mode (the `initialize` handshake older clients use), and on each connection:

- lists the tools: every name starts with `service_`, and the first actions are there;
- calls `service_get_workspace`: its structuredContent must equal the body of
  `GET /api/v1/workspace` made with the same key (DESIGN.md section 4: one dispatch, two faces);
- calls `service_get_prospect` with an id that does not exist: a tool result with `isError` whose
  structuredContent is the REST error body `{error, code: not_found}`, again equal to REST's;
- calls a tool that does not exist: a JSON-RPC error, not a tool result;
- lists the prompts, renders one, and sends one without its required argument (-32602).

Then it lists the tools of each toolset URL once (the default set of at most 40 tools, every
toolset, the read-only URL, `?toolsets=prospecting` and the `X-MCP-Toolsets` header), printing the
count and bytes of each. Last, the SDK answers the confirmation a priced call of 120 credits asks
for (elicitation): declined, then accepted; on the legacy handshake nothing is asked. And the MCP
Apps: the two tools' `_meta` pointers, `resources/list`, `resources/read` of each `ui://` view,
and the tools the views call for their data.

Exits non-zero with a message naming the first thing that differs.
"""

from __future__ import annotations

import importlib.metadata
import json
import sys

import anyio
import httpx2
import mcp_types
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

EXPECTED_TOOLS = {
    "service_get_workspace",
    "service_create_prospect",
    "service_get_prospect",
    "service_list_prospects",
    "service_update_prospect",
    "service_delete_prospect",
}


class CheckFailed(Exception):
    pass


def check(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def pretty(value: object) -> str:
    return json.dumps(value, indent=2, sort_keys=True)


def error_body(result: object) -> object:
    """The `{error, code}` body of a failed tool call: the JSON of its text block. A failed call
    carries no `structuredContent` (it would not match the tool's output schema)."""
    check(result.structured_content is None, f"a failed call must carry no structuredContent: {result}")
    texts = [block.text for block in result.content if getattr(block, "type", None) == "text"]
    check(len(texts) == 1, f"a failed call carries one text block with its error body: {result}")
    return json.loads(texts[0])


async def rest_get(http: httpx2.AsyncClient, base: str, path: str) -> tuple[int, object]:
    response = await http.get(f"{base}/api/v1{path}")
    return response.status_code, response.json()


async def run(base: str, key: str, mode: str) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    timeout = httpx2.Timeout(30.0)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http:
        transport = streamable_http_client(f"{base}/api/mcp?toolsets=all", http_client=http)
        async with Client(transport, mode=mode, read_timeout_seconds=30.0) as client:
            info = client.server_info
            server = f"{info.name} {info.version}" if info else "unnamed"
            print(f"  [{mode}] connected: protocol {client.protocol_version}, server {server}")

            listed = await client.list_tools()
            names = [tool.name for tool in listed.tools]
            print(f"  [{mode}] tools/list: {len(names)} tools")
            check(bool(names), "tools/list returned no tools")
            bad = [name for name in names if not name.startswith("service_")]
            check(not bad, f"tool names must start with `service_`: {bad}")
            missing = EXPECTED_TOOLS - set(names)
            check(not missing, f"tools missing from tools/list: {sorted(missing)}")
            for tool in listed.tools:
                check(tool.input_schema.get("type") == "object", f"{tool.name}: input schema is not an object schema")
                check(tool.annotations is not None, f"{tool.name}: no annotations")
            workspace_tool = next(tool for tool in listed.tools if tool.name == "service_get_workspace")
            check(
                workspace_tool.annotations is not None and workspace_tool.annotations.read_only_hint is True,
                "service_get_workspace should carry readOnlyHint: true",
            )

            result = await client.call_tool("service_get_workspace", {})
            check(not result.is_error, f"service_get_workspace failed: {result}")
            status, rest_body = await rest_get(http, base, "/workspace")
            check(status == 200, f"GET /api/v1/workspace answered {status}: {rest_body}")
            check(
                result.structured_content == rest_body,
                "service_get_workspace structuredContent differs from GET /api/v1/workspace:\n"
                f"MCP:  {pretty(result.structured_content)}\nREST: {pretty(rest_body)}",
            )
            # Older clients read the text block: it must carry the same JSON.
            texts = [block.text for block in result.content if getattr(block, "type", None) == "text"]
            check(
                any(json.loads(text) == rest_body for text in texts),
                f"no text block of service_get_workspace carries the REST body: {texts}",
            )
            print(f"  [{mode}] service_get_workspace: structuredContent == GET /api/v1/workspace")

            # A write through MCP is visible, identically, through REST.
            arguments = {"first_name": "Ada", "last_name": "Lovelace", "profile_url": f"https://www.example.com/in/ada-{mode}/"}
            result = await client.call_tool("service_create_prospect", arguments)
            check(not result.is_error, f"service_create_prospect failed: {result.structured_content}")
            created = result.structured_content
            status, rest_body = await rest_get(http, base, f"/prospects/{created['id']}")
            check(status == 200 and rest_body == created, f"GET /prospects/{created['id']} gave {status} {rest_body}, expected {created}")
            result = await client.call_tool("service_create_prospect", arguments)
            check(
                result.is_error and error_body(result).get("code") == "conflict",
                f"a second service_create_prospect with the same profile_url should be a `conflict` tool error, got {result}",
            )
            print(f"  [{mode}] service_create_prospect: REST reads the same prospect; a duplicate is a `conflict` tool error")

            bogus = "prs_doesnotexist0000000"
            result = await client.call_tool("service_get_prospect", {"id": bogus})
            check(result.is_error, f"service_get_prospect({bogus}) should be a tool error, got {result}")
            error = error_body(result)
            check(
                isinstance(error, dict) and isinstance(error.get("error"), str) and error.get("code") == "not_found",
                f"service_get_prospect({bogus}) should give {{error, code: not_found}}, got {error}",
            )
            status, rest_error = await rest_get(http, base, f"/prospects/{bogus}")
            check(status == 404, f"GET /api/v1/prospects/{bogus} answered {status}, expected 404")
            check(error == rest_error, f"MCP error body {error} differs from REST error body {rest_error}")
            print(f"  [{mode}] service_get_prospect(bogus id): isError with {{code: {error['code']}}}, same body as REST 404")

            try:
                result = await client.call_tool("service_no_such_tool", {})
            except MCPError as rpc_error:
                print(f"  [{mode}] unknown tool: JSON-RPC error {rpc_error.code}")
            else:
                raise CheckFailed(f"calling an unknown tool should be a JSON-RPC error, got a result: {result}")

            # The workflows as prompts: listed for this (write) key in a fixed order, rendered with
            # an argument and a default, and a missing argument refused by name.
            prompts = [prompt.name for prompt in (await client.list_prompts()).prompts]
            check(
                prompts == ["prospect_to_sequence", "triage_inbox", "weekly_report"],
                f"prompts/list for a write key: {prompts}",
            )
            got = await client.get_prompt("prospect_to_sequence", {"audience": "founders in Lyon"})
            text = got.messages[0].content.text
            check(
                "founders in Lyon" in text and "the workspace's connected sender" in text,
                f"prompts/get prospect_to_sequence: {text[:200]}",
            )
            try:
                await client.get_prompt("prospect_to_sequence", {})
            except MCPError as rpc_error:
                check(
                    rpc_error.code == -32602 and "`audience`" in str(rpc_error),
                    f"a missing prompt argument: {rpc_error.code} {rpc_error}",
                )
            else:
                raise CheckFailed("prompts/get without its required argument should be a JSON-RPC error")
            print(f"  [{mode}] prompts: {len(prompts)} listed, one rendered, a missing argument refused (-32602)")


async def toolsets(base: str, key: str) -> None:
    """What the SDK is offered on each URL: the default toolsets (at most 40 tools), every toolset,
    the read-only URL, one toolset on the URL and one in the `X-MCP-Toolsets` header."""
    views: dict[str, list] = {}
    for label, path, extra in (
        ("default", "/api/mcp", {}),
        ("all", "/api/mcp?toolsets=all", {}),
        ("readonly", "/api/mcp/readonly", {}),
        ("prospecting", "/api/mcp?toolsets=prospecting", {}),
        ("agents (header)", "/api/mcp", {"X-MCP-Toolsets": "agents"}),
    ):
        headers = {"Authorization": f"Bearer {key}", **extra}
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0)) as http:
            async with Client(streamable_http_client(f"{base}{path}", http_client=http), read_timeout_seconds=30.0) as client:
                tools = (await client.list_tools()).tools
        size = sum(len(tool.model_dump_json(by_alias=True, exclude_none=True)) for tool in tools)
        print(f"  toolsets, {label}: {len(tools)} tools, {size} bytes")
        views[label] = tools
    names = {label: [tool.name for tool in tools] for label, tools in views.items()}
    check(0 < len(names["default"]) <= 40, f"the default set has {len(names['default'])} tools")
    check(set(names["default"]) < set(names["all"]), "the default set is not a part of every toolset")
    check(
        all(tool.annotations is not None and tool.annotations.read_only_hint for tool in views["readonly"]),
        f"the read-only URL lists a tool that changes things: {names['readonly']}",
    )
    check(
        names["prospecting"] and "service_list_prospects" in names["prospecting"]
        and not set(names["prospecting"]) & set(names["default"]),
        f"?toolsets=prospecting: {names['prospecting']}",
    )
    check("service_run_agent" in names["agents (header)"], f"X-MCP-Toolsets: agents: {names['agents (header)']}")


async def confirmations(base: str, key: str) -> None:
    """A priced call of 100 credits or more asks the person first (elicitation, over 2026-07-28's
    multi round-trip requests, which the SDK drives itself): declined, it imports nothing and is a
    `declined` tool error; accepted, it runs. On the legacy handshake nothing is asked."""
    asked: list[str] = []

    def answering(action: str, confirm: bool):
        async def callback(context, params):
            asked.append(params.message)
            content = {"confirm": confirm} if action == "accept" else None
            return mcp_types.ElicitResult(action=action, content=content)

        return callback

    rows = [{"first_name": f"Confirm{index}", "email": f"confirm{index}@example.com"} for index in range(120)]
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0)) as http:
        _, before = await rest_get(http, base, "/prospects?limit=1")
        for action, confirm in (("decline", False), ("accept", False)):
            transport = streamable_http_client(f"{base}/api/mcp?toolsets=all", http_client=http)
            async with Client(transport, read_timeout_seconds=30.0, elicitation_callback=answering(action, confirm)) as client:
                check(client.protocol_version == "2026-07-28", f"negotiated {client.protocol_version}")
                result = await client.call_tool("service_import_prospects", {"rows": rows})
            body = error_body(result)
            check(result.is_error and body.get("code") == "declined", f"a {action} without confirm: {result}")
        _, after = await rest_get(http, base, "/prospects?limit=1")
        check(after["total"] == before["total"], f"a declined import changed the prospects: {before['total']} -> {after['total']}")
        check(len(asked) == 2 and asked[0].startswith("This costs 120 credits of your "), f"the questions: {asked}")
        print(f"  confirmations: asked \"{asked[0]}\"; declined twice, nothing imported")

        transport = streamable_http_client(f"{base}/api/mcp?toolsets=all", http_client=http)
        async with Client(transport, read_timeout_seconds=30.0, elicitation_callback=answering("accept", True)) as client:
            result = await client.call_tool("service_import_prospects", {"rows": rows, "idempotency_key": "confirm-1"})
        check(not result.is_error and result.structured_content.get("created") == 120, f"an accepted import: {result}")
        check(len(asked) == 3, f"the accepted call was asked once: {asked}")

        transport = streamable_http_client(f"{base}/api/mcp?toolsets=all", http_client=http)
        more = [{"first_name": f"Legacy{index}", "email": f"legacy{index}@example.com"} for index in range(120)]
        async with Client(transport, mode="legacy", read_timeout_seconds=30.0, elicitation_callback=answering("decline", False)) as client:
            result = await client.call_tool("service_import_prospects", {"rows": more})
        check(not result.is_error and result.structured_content.get("created") == 120, f"a legacy-handshake import: {result}")
        check(len(asked) == 3, f"the legacy handshake was asked: {asked[3:]}")
        print("  confirmations: an accept imports 120; the legacy handshake is not asked")


APPS = {
    "ui://outreach/approvals.html": "service_list_approvals",
    "ui://outreach/dashboard.html": "service_get_dashboard",
}
APP_MIME_TYPE = "text/html;profile=mcp-app"


async def apps(base: str, key: str) -> None:
    """The MCP Apps (the approval queue and the dashboard in the chat), as the SDK sees them: each
    tool points at its `ui://` resource in `_meta`, `resources/list` offers both, `resources/read`
    answers one HTML document, and the tools each view calls for its data answer."""
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0)) as http:
        transport = streamable_http_client(f"{base}/api/mcp", http_client=http)
        async with Client(transport, read_timeout_seconds=30.0) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            for uri, tool in APPS.items():
                check(tool in tools, f"{tool} is not in the default set")
                meta = tools[tool].meta or {}
                check((meta.get("ui") or {}).get("resourceUri") == uri, f"{tool}: _meta {meta}")
            listed = {str(resource.uri): resource for resource in (await client.list_resources()).resources}
            check(set(APPS) <= set(listed), f"resources/list: {sorted(listed)}")
            for uri, tool in APPS.items():
                check(listed[uri].mime_type == APP_MIME_TYPE, f"{uri}: {listed[uri].mime_type}")
                contents = (await client.read_resource(uri)).contents
                check(len(contents) == 1, f"{uri}: {len(contents)} contents")
                html = getattr(contents[0], "text", "")
                check(html.startswith("<!DOCTYPE html>") and "ui/initialize" in html, f"{uri}: not the app's document")
                result = await client.call_tool(tool, {})
                check(not result.is_error and isinstance(result.structured_content, dict),
                      f"{tool}, as the view calls it: {result}")
                print(f"  apps: {uri} ({len(html)} bytes) for {tool}")


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    base, key = sys.argv[1].rstrip("/"), sys.argv[2]
    print(f"MCP Python SDK (mcp {importlib.metadata.version('mcp')}) against {base}/api/mcp")
    for mode in ("auto", "legacy"):
        try:
            anyio.run(run, base, key, mode)
        except CheckFailed as failure:
            print(f"FAILED [{mode}]: {failure}", file=sys.stderr)
            return 1
    try:
        anyio.run(toolsets, base, key)
    except CheckFailed as failure:
        print(f"FAILED [toolsets]: {failure}", file=sys.stderr)
        return 1
    try:
        anyio.run(confirmations, base, key)
    except CheckFailed as failure:
        print(f"FAILED [confirmations]: {failure}", file=sys.stderr)
        return 1
    try:
        anyio.run(apps, base, key)
    except CheckFailed as failure:
        print(f"FAILED [apps]: {failure}", file=sys.stderr)
        return 1
    print("  MCP client checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
