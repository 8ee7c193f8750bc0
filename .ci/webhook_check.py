"""Webhooks checked by the official Standard Webhooks Python library, which nobody here wrote.

Usage: webhook_check.py BASE_URL API_KEY

Starts a receiver on a loopback port, points a new endpoint (every event type) at it, and checks
with `standardwebhooks.Webhook.verify` (the signature, and the timestamp within its 5 minutes):

1. `test`: `POST /webhook-endpoints/{id}/test` delivers a signed `webhook.test` message, and the
   answer reports the receiver's 200;
2. `event`: an import's `import.completed` event arrives once, as `GET /events/{id}` shows it,
   with `webhook-id` the event's id, and the endpoint's deliveries list it as `succeeded`;
3. `rotation`: after `rotate-secret` a message carries two signatures, and each secret alone
   verifies it.

Exits non-zero with a message naming the first thing that differs.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook

RECEIVED: list[tuple[dict[str, str], bytes]] = []
LOCK = threading.Lock()


class CheckFailed(Exception):
    pass


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
        length = int(self.headers.get("content-length", "0"))
        body = self.rfile.read(length)
        with LOCK:
            RECEIVED.append(({k.lower(): v for k, v in self.headers.items()}, body))
        self.send_response(200)
        self.send_header("content-type", "text/plain")
        self.end_headers()
        self.wfile.write(b"received")

    def log_message(self, *args: object) -> None:
        pass


def call(base: str, key: str, method: str, path: str, body: object | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{base}/api/v1{path}", data=data, method=method)
    request.add_header("authorization", f"Bearer {key}")
    if data is not None:
        request.add_header("content-type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def wait_for(count: int) -> list[tuple[dict[str, str], bytes]]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with LOCK:
            if len(RECEIVED) >= count:
                return list(RECEIVED)
        time.sleep(0.05)
    raise CheckFailed(f"the receiver took {len(RECEIVED)} messages, not {count}")


def check(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def main(base: str, key: str) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hooks"
    made = call(base, key, "POST", "/webhook-endpoints", {"url": url, "description": "Python receiver"})
    endpoint, secret = made["id"], made["secret"]
    check(secret.startswith("whsec_"), f"the secret is not whsec_: {secret!r}")
    try:
        tested = call(base, key, "POST", f"/webhook-endpoints/{endpoint}/test", {})
        check(tested["succeeded"] and tested["response_status"] == 200, f"the test message: {tested}")
        headers, body = wait_for(1)[0]
        payload = Webhook(secret).verify(body, headers)
        check(payload["type"] == "webhook.test" and headers["webhook-id"] == tested["id"], f"{payload}")
        print("  ok test: webhook.test verified by standardwebhooks")

        imported = call(base, key, "POST", "/imports", {"rows": [{"first_name": "Hooked", "email": f"hooked-{time.time_ns()}@example.com"}]})
        deadline = time.monotonic() + 30
        event = None
        while event is None and time.monotonic() < deadline:
            events = call(base, key, "GET", "/events?type=import.completed&limit=50")["items"]
            event = next((e for e in events if e["data"]["import_id"] == imported["id"]), None)
            time.sleep(0.05)
        check(event is not None, f"no import.completed event of {imported['id']}")
        deadline = time.monotonic() + 30
        arrived = []
        while not arrived and time.monotonic() < deadline:
            with LOCK:
                arrived = [(h, b) for h, b in RECEIVED if h.get("webhook-id") == event["id"]]
            time.sleep(0.05)
        check(len(arrived) == 1, f"import.completed arrived {len(arrived)} times")
        headers, body = arrived[0]
        payload = Webhook(secret).verify(body, headers)
        shown = call(base, key, "GET", f"/events/{event['id']}")
        check(payload == {"id": shown["id"], "type": shown["type"], "timestamp": shown["created_at"], "data": shown["data"]},
              f"the body {payload} is not the event {shown}")
        deliveries = call(base, key, "GET", f"/webhook-endpoints/{endpoint}/deliveries?event_id={event['id']}")["items"]
        deadline = time.monotonic() + 10
        while (not deliveries or deliveries[0]["status"] != "succeeded") and time.monotonic() < deadline:
            time.sleep(0.05)
            deliveries = call(base, key, "GET", f"/webhook-endpoints/{endpoint}/deliveries?event_id={event['id']}")["items"]
        check(deliveries and deliveries[0]["status"] == "succeeded", f"the delivery: {deliveries}")
        print("  ok event: import.completed delivered once, verified, listed as succeeded")

        rotated = call(base, key, "POST", f"/webhook-endpoints/{endpoint}/rotate-secret", {})
        new = rotated["secret"]
        check(new != secret, "the rotated secret is the old one")
        before = len(RECEIVED)
        call(base, key, "POST", f"/webhook-endpoints/{endpoint}/test", {})
        headers, body = wait_for(before + 1)[before]
        check(len(headers["webhook-signature"].split(" ")) == 2, f"signatures: {headers['webhook-signature']}")
        Webhook(secret).verify(body, headers)
        Webhook(new).verify(body, headers)
        print("  ok rotation: two signatures, each secret verifies")
    finally:
        call(base, key, "DELETE", f"/webhook-endpoints/{endpoint}")
        server.shutdown()


if __name__ == "__main__":
    try:
        main(sys.argv[1], sys.argv[2])
    except CheckFailed as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        sys.exit(1)
