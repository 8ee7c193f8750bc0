"""Agent runs through the official MCP Python SDK: polled, as a task, and with progress.

Usage: mcp_agent_runs.py BASE_URL API_KEY

`service_run_agent` answers at once with a `queued` run that the server's job worker executes.
A client can follow it three ways, and each is a check here, against a server that runs its
workers (a plain `outreach serve`), with a read+write key of a workspace that has credits:

1. `poll`: a client without the Tasks extension gets the run itself and calls
   `service_get_run` until the run leaves `queued` and `running`.
2. `task`: a client with a small `ClientExtension` for `io.modelcontextprotocol/tasks`
   (SEP-2663; the SDK 2.x has no tasks client of its own, but has this official extension
   interface) gets a task (`resultType: "task"`) from the same call, whose id is the run's, and
   the SDK hands it to the extension's resolver, which polls `tasks/get` until the task is
   terminal and returns its result: the run, as `service_get_run` gives it.
3. `progress`: a client without the extension that passes a progress callback (the SDK sends a
   `progressToken`) has the call held open: the callback receives the run's progress, and the
   one call returns the run once it has ended. Once on the per-request lifecycle of 2026-07-28
   (the SDK's default mode, after `server/discover`), and once (`progress-legacy`) after the
   `initialize` handshake older clients make.

Each run gets an agent of its own sequence and twelve new prospects (a prospect proposed once
is not a candidate again). Exits non-zero with a message naming the first thing that differs.
"""

from __future__ import annotations

import importlib.metadata
import json
import secrets
import sys
import time
from collections.abc import Sequence
from typing import Any, Literal

import anyio
import httpx2
from mcp import Client, MCPError
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, Request, RequestParams, Result
from pydantic import ConfigDict

TASKS = "io.modelcontextprotocol/tasks"
LIVE = ("queued", "running")
ENDED = ("awaiting_approval", "succeeded")
PROSPECTS = 12
# Names are unique per workspace: a second run of the script against the same server differs.
RUN = secrets.token_hex(3)


class CheckFailed(Exception):
    pass


def check(condition: object, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


# ----- the Tasks extension (SEP-2663), as a client of the SDK's extension interface -----


class TaskHandle(Result):
    """`CreateTaskResult`: the seed state of a task, answered in lieu of a `CallToolResult`."""

    result_type: Literal["task"]
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class DetailedTask(Result):
    """`GetTaskResult`: a task with its status-specific payload (`result`, `error`)."""

    model_config = ConfigDict(extra="allow")

    task_id: str
    status: str
    status_message: str | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class TaskIdParams(RequestParams):
    task_id: str


class GetTask(Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    # SEP-2663: the task id travels in the `Mcp-Name` header too.
    name_param = "taskId"


class TasksExtension(ClientExtension):
    """Claims `resultType: "task"` on `tools/call` and resolves it by polling `tasks/get`."""

    identifier = TASKS

    def __init__(self) -> None:
        # What the resolver saw, for the check to look at: handles and every polled status.
        self.handles: list[TaskHandle] = []
        self.statuses: list[str] = []

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return (ResultClaim(result_type="task", model=TaskHandle, resolve=self.resolve),)

    async def resolve(self, handle: TaskHandle, ctx: ClaimContext) -> CallToolResult:
        self.handles.append(handle)
        interval = (handle.poll_interval_ms or 1000) / 1000
        deadline = time.monotonic() + 90
        while True:
            task = await ctx.session.send_request(
                GetTask(params=TaskIdParams(task_id=handle.task_id)),
                DetailedTask,
                request_read_timeout_seconds=ctx.read_timeout_seconds,
            )
            self.statuses.append(task.status)
            if task.status == "completed":
                return CallToolResult.model_validate(task.result, by_name=False)
            if task.status == "failed":
                raise MCPError(task.error.get("code", -32603), task.error.get("message", "the task failed"))
            if task.status == "cancelled":
                raise CheckFailed(f"task {handle.task_id} was cancelled")
            if time.monotonic() > deadline:
                raise CheckFailed(f"task {handle.task_id} still {task.status} after 90 s")
            await anyio.sleep(min(interval, (task.poll_interval_ms or 1000) / 1000))


# ----- the workspace: what an agent needs -----


async def call(client: Client, tool: str, arguments: dict) -> dict:
    result = await client.call_tool(f"service_{tool}", arguments)
    if result.is_error:
        texts = [block.text for block in result.content if getattr(block, "type", None) == "text"]
        raise CheckFailed(f"service_{tool}({json.dumps(arguments)}) failed: {texts}")
    return result.structured_content


async def prepare(client: Client, tag: str, shared: dict) -> str:
    """An agent of its own sequence, and new prospects it will find; returns the agent id."""
    sequence = await call(client, "create_sequence", {
        "name": f"CI agent runs {tag} {RUN}",
        "sender_ids": [],
        "steps": [{"type": "connection_request", "delay_hours": 0, "note": "Hi {{first_name|there}}, glad to connect."}],
    })
    for index in range(PROSPECTS):
        await call(client, "create_prospect", {
            "first_name": f"Ada{index}", "company_name": "Engines", "title": "Engineer",
            "profile_url": f"https://www.linkedin.com/in/ci-agent-run-{RUN}-{tag}-{index}/",
        })
    agent = await call(client, "create_agent", {
        "name": f"CI prospector {tag} {RUN}", "kind": "prospector", "targeting_id": shared["targeting"],
        "list_id": shared["list"], "sequence_id": sequence["id"],
    })
    return agent["id"]


def connect(
    base: str, http: httpx2.AsyncClient, extensions: list[ClientExtension] | None = None, mode: str = "auto"
) -> Client:
    transport = streamable_http_client(f"{base}/api/mcp?toolsets=all", http_client=http)
    return Client(transport, mode=mode, read_timeout_seconds=60.0, extensions=extensions)


# ----- the checks -----


async def check_poll(base: str, http: httpx2.AsyncClient, shared: dict) -> None:
    async with connect(base, http) as client:
        agent = await prepare(client, "poll", shared)
        run = await call(client, "run_agent", {"id": agent})
        check(run.get("status") == "queued" and run["id"].startswith("run_"), f"run_agent answers the queued run: {run}")
        deadline = time.monotonic() + 90
        seen = [run["status"]]
        while run["status"] in LIVE:
            check(time.monotonic() < deadline, f"run {run['id']} still {run['status']} after 90 s")
            await anyio.sleep(0.5)
            run = await call(client, "get_run", {"id": run["id"]})
            seen.append(run["status"])
        check(run["status"] in ENDED, f"the run ended well: {run['status']} {run.get('error')}")
        check(run["processed"] == PROSPECTS, f"it processed the {PROSPECTS} new prospects: {run['processed']}")
        print(f"  poll: {run['id']} went {' -> '.join(dict.fromkeys(seen))} ({run['processed']} processed)")


async def check_task(base: str, http: httpx2.AsyncClient, shared: dict) -> None:
    tasks = TasksExtension()
    async with connect(base, http, [tasks]) as client:
        check(client.protocol_version == "2026-07-28", f"claims need the 2026-07-28 lifecycle, got {client.protocol_version}")
        capabilities = client.server_capabilities
        extensions = (capabilities.extensions or {}) if capabilities else {}
        check(TASKS in extensions, f"the server advertises {TASKS}: {capabilities}")
        agent = await prepare(client, "task", shared)
        result = await client.call_tool("service_run_agent", {"id": agent})
        check(len(tasks.handles) == 1, f"the call was answered with a task, resolved through tasks/get: {tasks.handles}")
        handle = tasks.handles[0]
        check(not result.is_error, f"the task's result is not an error: {result}")
        run = result.structured_content
        check(run["id"] == handle.task_id, f"the task id is the run id: {handle.task_id} vs {run['id']}")
        check(run["status"] in ENDED, f"the task completed with the run ended: {run['status']}")
        polled = await call(client, "get_run", {"id": run["id"]})
        check(polled == run, "the task's result is the run as service_get_run gives it")
        print(f"  task: {handle.task_id} ({handle.status}, every {handle.poll_interval_ms} ms), "
              f"tasks/get: {' -> '.join(dict.fromkeys(tasks.statuses))}; result: the run, {run['status']}")


async def check_progress(base: str, http: httpx2.AsyncClient, shared: dict, mode: str = "auto") -> None:
    async with connect(base, http, mode=mode) as client:
        name = "progress" if mode == "auto" else f"progress-{mode}"
        agent = await prepare(client, name, shared)
        updates: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            updates.append((progress, total, message))

        result = await client.call_tool("service_run_agent", {"id": agent}, progress_callback=on_progress)
        check(not result.is_error, f"the held call succeeded: {result}")
        run = result.structured_content
        check(run["status"] in ENDED, f"one call returned the run once it had ended: {run['status']}")
        check(updates, "the progress callback was called")
        values = [progress for progress, _, _ in updates]
        check(values == sorted(set(values)), f"progress only increases: {values}")
        check(values[-1] == PROSPECTS and updates[-1][1] == PROSPECTS,
              f"the last update says {PROSPECTS} of {PROSPECTS}: {updates}")
        print(f"  {name} (protocol {client.protocol_version}): {len(updates)} updates "
              f"({'; '.join(message or '' for _, _, message in updates)}); the call returned {run['id']} {run['status']}")


async def check_progress_legacy(base: str, http: httpx2.AsyncClient, shared: dict) -> None:
    await check_progress(base, http, shared, mode="legacy")


async def run(base: str, key: str, only: str | None) -> list[tuple[str, str | None]]:
    headers = {"Authorization": f"Bearer {key}"}
    outcomes: list[tuple[str, str | None]] = []
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60.0)) as http:
        async with connect(base, http) as client:
            shared = {
                "targeting": (await call(client, "create_targeting", {
                    "name": f"CI agent runs {RUN}",
                    "criteria": {"titles": {"include": [{"value": "engineer", "points": 60}]}},
                }))["id"],
                "list": (await call(client, "create_list", {"name": f"CI agent runs {RUN}"}))["id"],
            }
        checks = (
            ("poll", check_poll),
            ("task", check_task),
            ("progress", check_progress),
            ("progress-legacy", check_progress_legacy),
        )
        for name, check_fn in checks:
            if only and name != only:
                continue
            try:
                await check_fn(base, http, shared)
                outcomes.append((name, None))
            except (CheckFailed, MCPError) as failure:
                outcomes.append((name, str(failure)))
    return outcomes


def main() -> int:
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    base, key = sys.argv[1].rstrip("/"), sys.argv[2]
    only = sys.argv[3] if len(sys.argv) == 4 else None
    print(f"MCP Python SDK (mcp {importlib.metadata.version('mcp')}): agent runs against {base}/api/mcp")
    outcomes = anyio.run(run, base, key, only)
    for name, failure in outcomes:
        if failure:
            print(f"FAILED [{name}]: {failure}", file=sys.stderr)
    failed = sum(1 for _, failure in outcomes if failure)
    print(f"  agent runs: {len(outcomes) - failed} checks passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
