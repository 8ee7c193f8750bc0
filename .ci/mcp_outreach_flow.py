"""The outreach engine driven the way an assistant drives it: through the official MCP Python SDK.

Usage: mcp_outreach_flow.py BASE_URL SEND_KEY

Needs a server started with `--test-clock` (the sandbox network, a clock the flow moves) and a key
with `send` in a workspace whose sending terms are accepted. Every step is a tool call:

1. create a sender account (all hours, so the moved clock decides), three prospects and a list;
2. create a sequence (a connection request, a message a day later, a follow-up three days after
   that) and add the list: three
   enrollments wait in the approval queue;
3. a dry run of `service_approve_outreach` shows what would happen and changes nothing;
4. approve, activate, move the clock: the sandbox's log shows exactly three invitations;
5. the first person accepts (`service_sandbox_accept_invitation`), the clock moves a day: the
   log shows the message, with the template filled in;
6. the person replies (`service_sandbox_reply`): the conversation is unread, the enrollment
   finished as `replied`; the assistant reads it, replies (`service_reply_to_conversation`), and
   the reply reaches the network once; then marks the conversation read.

Exits non-zero with a message naming the first thing that differs.
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
import time

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ALL_DAY = [{"start": "00:00", "end": "24:00"}]
WEEK = {day: ALL_DAY for day in ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")}


class CheckFailed(Exception):
    pass


def check(condition: object, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


class Assistant:
    def __init__(self, client: Client) -> None:
        self.client = client

    async def call(self, tool: str, arguments: dict) -> dict:
        result = await self.client.call_tool(f"service_{tool}", arguments)
        if result.is_error:
            texts = [block.text for block in result.content if getattr(block, "type", None) == "text"]
            raise CheckFailed(f"service_{tool}({json.dumps(arguments)}) failed: {texts}")
        return result.structured_content

    async def log(self) -> list[dict]:
        return (await self.call("list_sandbox_log", {"limit": 200}))["items"]

    async def wait_for(self, what: str, condition, timeout: float = 90.0):
        """Polls until `condition()` returns something truthy: the worker runs in the server,
        beside the calls. Each turn moves the clock two minutes, as time would pass: a sender
        waits 30 to 90 seconds between two actions, so its work is spread, never a burst."""
        deadline = time.monotonic() + timeout
        while True:
            value = await condition()
            if value:
                return value
            if time.monotonic() > deadline:
                raise CheckFailed(f"timed out waiting for {what}")
            await self.call("advance_clock", {"seconds": 120})
            await anyio.sleep(0.2)


async def flow(base: str, key: str) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0)) as http:
        transport = streamable_http_client(f"{base}/api/mcp?toolsets=all", http_client=http)
        async with Client(transport, read_timeout_seconds=30.0) as client:
            me = Assistant(client)
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            for name in ("service_approve_outreach", "service_activate_sequence", "service_reply_to_conversation"):
                annotations = tools[name].annotations
                check(
                    annotations is not None and annotations.open_world_hint is True and annotations.destructive_hint is True,
                    f"{name} reaches real people: it must carry openWorldHint and destructiveHint, got {annotations}",
                )

            sender = await me.call("create_sender", {"name": "CI account", "timezone": "UTC", "working_hours": WEEK})
            people = []
            for name in ("ada", "grace", "edsger"):
                made = await me.call("create_prospect", {
                    "first_name": name.title(), "company_name": "Engines",
                    "profile_url": f"https://www.linkedin.com/in/ci-flow-{name}/",
                })
                people.append(made["id"])
            listed = await me.call("create_list", {"name": "CI flow"})
            await me.call("add_prospects_to_list", {"id": listed["id"], "prospect_ids": people})
            sequence = await me.call("create_sequence", {
                "name": "CI flow",
                "sender_ids": [sender["id"]],
                "steps": [
                    {"type": "connection_request", "delay_hours": 0, "note": "Hi {{first_name}}, glad to connect."},
                    {"type": "message", "delay_hours": 24, "text": "Thanks {{first_name|there}}! How is {{company_name}}?"},
                    {"type": "message", "delay_hours": 72, "text": "Following up, {{first_name}}."},
                ],
            })
            added = await me.call("add_to_sequence", {"sequence_id": sequence["id"], "list_id": listed["id"]})
            check(len(added["enrollments"]) == 3, f"three enrollments expected: {added}")
            queue = await me.call("list_approvals", {"sequence_id": sequence["id"]})
            check(queue["total"] == 3, f"three items wait for approval: {queue}")
            print("  sender, prospects, list, sequence; three enrollments wait in the approval queue")

            preview = await me.call("approve_outreach", {"sequence_id": sequence["id"], "dry_run": True})
            check("first_send_at" in json.dumps(preview), f"the dry run names the first send time: {preview}")
            queue = await me.call("list_approvals", {"sequence_id": sequence["id"]})
            check(queue["total"] == 3, f"a dry run changes nothing: {queue}")
            check(await me.log() == [], "nothing reached the network before approval")
            print("  dry run: shows the first send time, changes nothing")

            await me.call("approve_outreach", {"sequence_id": sequence["id"]})
            await me.call("activate_sequence", {"id": sequence["id"]})
            await me.call("advance_clock", {"seconds": 3600})

            async def invitations():
                entries = [e for e in await me.log() if e["kind"] == "invitation"]
                return entries if len(entries) >= 3 else None

            sent = await me.wait_for("three invitations", invitations)
            check(len(sent) == 3, f"exactly three invitations: {sent}")
            check({e["prospect_id"] for e in sent} == set(people), f"one invitation per person: {sent}")
            print("  approved and activated: three invitations in the sandbox's log")

            first = people[0]
            state = await me.call("sandbox_accept_invitation", {"prospect_id": first, "sender_id": sender["id"]})
            check(state["connection_state"] == "connected", f"accepted: {state}")
            await me.call("advance_clock", {"seconds": 25 * 3600})

            async def message():
                entries = [e for e in await me.log() if e["kind"] == "message" and e["prospect_id"] == first]
                return entries or None

            sent = await me.wait_for("the message after the acceptance", message)
            check(sent[0]["text"] == "Thanks Ada! How is Engines?", f"the template filled in: {sent}")
            print("  accepted, a day later: the message went, the template filled in")

            await me.call("sandbox_reply", {"prospect_id": first, "sender_id": sender["id"], "text": "Interested, tell me more"})

            async def unread():
                found = await me.call("list_conversations", {"unread": True, "sender_id": sender["id"]})
                return found["items"] or None

            conversation = (await me.wait_for("the unread conversation", unread))[0]
            check(conversation["prospect_id"] == first, f"the conversation is with the person who replied: {conversation}")
            enrollments = await me.call("list_enrollments", {"sequence_id": sequence["id"], "status": "finished"})
            check(
                [e["exit_reason"] for e in enrollments["items"]] == ["replied"],
                f"the reply finished that enrollment: {enrollments}",
            )
            await me.call("advance_clock", {"seconds": 80 * 3600})
            await anyio.sleep(1.0)
            # The others' steps play out too (one advance_clock plays its whole interval): only
            # the person who replied must get no follow-up.
            follow_ups = [
                e for e in await me.log() if e["text"].startswith("Following up") and e["prospect_id"] == first
            ]
            check(follow_ups == [], f"no follow-up after the reply: {follow_ups}")
            messages = await me.call("list_messages", {"id": conversation["id"]})
            check([m["direction"] for m in messages["items"]] == ["outbound", "inbound"], f"the chat so far: {messages}")

            reply = await me.call("reply_to_conversation", {"id": conversation["id"], "text": "Great! Does Tuesday work?"})
            check(reply["status"] == "queued", f"a reply is queued for the scheduler: {reply}")

            async def reply_sent():
                found = await me.call("list_messages", {"id": conversation["id"]})
                last = found["items"][-1]
                return last if last["status"] == "sent" else None

            await me.wait_for("the reply to go out", reply_sent)
            replies = [e for e in await me.log() if e["kind"] == "message" and e["text"] == "Great! Does Tuesday work?"]
            check(len(replies) == 1, f"the reply reached the network once: {replies}")
            read = await me.call("mark_conversation_read", {"id": conversation["id"]})
            check(read["conversations"][0]["unread_count"] == 0, f"marked read: {read}")
            print("  replied: the enrollment finished as `replied`; our reply went once; conversation read")


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    base, key = sys.argv[1].rstrip("/"), sys.argv[2]
    print(f"MCP Python SDK (mcp {importlib.metadata.version('mcp')}): the outreach flow against {base}/api/mcp")
    try:
        anyio.run(flow, base, key)
    except CheckFailed as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        return 1
    print("  MCP outreach flow passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
