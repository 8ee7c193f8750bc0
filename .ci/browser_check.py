"""Drive the web pages in a real browser: Debian's headless Chromium, through its chromedriver, with Selenium.

Usage:
    browser_check.py --binary target/debug/outreach --database sqlite|postgres \
        [--postgres-url URL] [--screenshots DIR] [--counts FILE] [--keep]

On a fresh database (see `ci_server.py`) with one workspace and its owner made by `outreach admin`,
against `outreach serve` on a free port, one browser signs in and goes through what a person does in
the settings pages. Each flow is a named check, counted on its own:

1. sign-in: `/settings/api` sends a stranger to `/login?next=...`; a wrong password shows "Wrong email
   or password."; the right one lands on `/settings/api` with an HttpOnly, SameSite=Lax session cookie.
2. create-key: the form makes a key whose value is shown once (the copy button puts it on the
   clipboard), a reload no longer shows it, and the key works on `GET /api/v1/workspace`.
3. send-terms: `send` is disabled with its reason until the sending terms are accepted on
   `/settings/sending-terms`, then enabled; a key made with it holds `send`.
4. revoke-key: Revoke, its confirmation page, and the key's next API call is 401 `credential_revoked`.
5. connected-app: a client registered with `POST /oauth/register` (a loopback redirect URI served by a
   small HTTP server here) sends the browser, signed out, to `/oauth/authorize` with PKCE S256; the
   browser signs in, consents with #allow and lands on the redirect URI with `code`, `state` and
   `iss`; the code is exchanged at `/oauth/token` and the access token calls `tools/call
   service_get_workspace` on `/api/mcp`. The app is then listed under Connected apps, disconnected
   there, and its access token is refused (401 `credential_revoked`, on MCP and REST) and its
   refresh token too (`invalid_grant`).
6. member-removed: a person added on `/settings/members` (a plain member, who signs in and finds
   `write` and `send` disabled with the reason), given a key with the CLI, removed in the browser:
   their key's next call is 401 `not_a_member`.
7. landing-docs: `/` links to the docs and to sign-in; `/api/v1/docs` on a phone-sized window (390
   wide) starts with the getting-started section, its operation index does not take the width (the
   content starts at the left edge and nothing scrolls sideways), and each operation has a curl
   example with the bearer key.
8. credits: credits granted with `outreach admin credits grant` show as the balance on
   `/settings/credits`, reached from the navigation, with the grant in the ledger.
9. webhooks: on `/settings/webhooks`, reached from the navigation, the owner adds an endpoint for
   two event types pointing at a loopback receiver here; its secret is shown once (gone on reload);
   Send a test delivers a `webhook.test` that the official `standardwebhooks` library verifies with
   that secret, and the page says it was delivered; Rotate secret shows a new secret, and the next
   test carries two signatures, each verified alone; Disable shows the endpoint disabled, as the
   API then reports it.
10. password: a wrong current password is refused on `/settings/password` with the navigation still
   there; the right one changes it; after signing out, the old password is refused and the new one
   signs in.
11. mcp-app: the approval queue as an MCP App. Three prospects wait in the queue (made with
   `tools/call`). A tiny host page, served here on loopback, does what an MCP Apps host does: it
   reads `ui://outreach/approvals.html` with `resources/read` from the real server (JSON-RPC POST to
   `/api/mcp` with the key, across origins as any web host would), puts it in an iframe (`srcdoc`,
   `sandbox="allow-scripts"`), answers `ui/initialize`, sends the `service_list_approvals` result
   as `ui/notifications/tool-result`, and passes the app's `tools/call` requests to the server.
   Inside the iframe the browser edits one item's text (Save), approves another and rejects the
   third by clicking; the REST API then shows each item approved, rejected, or pending with the new
   text, and the app told its size. Approve through a `read` key first shows the refusal's sentence.
12. mcp-app-dashboard: the same host with `ui://outreach/dashboard.html` and `service_get_dashboard`
   for 7 days: the app shows the figures and tables; its 30 days button calls the tool through the
   host, and the figures shown are the REST API's.

Every page visited is saved as a PNG, `<check>-<n>-<page>.png` under `--screenshots`, so a person can
look at what the browser saw; a failing check also saves the page's HTML there.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import secrets
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from ci_server import (
    BackgroundHTTPServer, CheckFailed, Checks, Server, admin, argument_parser, check, executable,
    fresh_database, guarded, section,
)

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--window-size=1280,900",
]
MCP_PROTOCOL_VERSION = "2025-06-18"
WAIT = 20.0

OWNER_EMAIL = "owner@example.com"
OWNER_PASSWORD = "correct horse battery staple"
MEMBER_PASSWORD = "member-password-2026"

CHECKS = ["sign-in", "create-key", "send-terms", "revoke-key", "connected-app", "member-removed",
          "landing-docs", "credits", "webhooks", "password", "mcp-app", "mcp-app-dashboard"]
NEW_OWNER_PASSWORD = "a brand new owner password"


# --- HTTP, as the API's clients call it -------------------------------------------------------


class Reply:
    def __init__(self, status: int, headers: dict[str, str], raw: bytes) -> None:
        self.status = status
        self.headers = {k.lower(): v for k, v in headers.items()}
        self.raw = raw
        self.body: object = None
        text = raw.decode("utf-8", "replace")
        if self.headers.get("content-type", "").startswith("text/event-stream"):
            # One JSON-RPC message in a `data:` line of an SSE event.
            data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
            text = data[-1] if data else ""
        try:
            self.body = json.loads(text) if text else None
        except ValueError:
            self.body = text

    def code(self) -> object:
        return self.body.get("code") if isinstance(self.body, dict) else None

    def __str__(self) -> str:
        return f"HTTP {self.status} {self.raw[:600].decode('utf-8', 'replace')}"


def request(method: str, url: str, *, token: str | None = None, json_body: object = None,
            form: dict[str, str] | None = None, headers: dict[str, str] | None = None) -> Reply:
    data = None
    all_headers = dict(headers or {})
    if json_body is not None:
        data = json.dumps(json_body).encode()
        all_headers["Content-Type"] = "application/json"
    elif form is not None:
        data = urllib.parse.urlencode(form).encode()
        all_headers["Content-Type"] = "application/x-www-form-urlencoded"
    if token:
        all_headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=data, method=method, headers=all_headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            return Reply(response.status, dict(response.headers), response.read())
    except urllib.error.HTTPError as error:
        return Reply(error.code, dict(error.headers), error.read())


def mcp_call(base: str, token: str, tool: str, arguments: dict | None = None) -> Reply:
    """One `tools/call` over Streamable HTTP, with the headers such a client sends."""
    return mcp_request(base, token, "tools/call", {"name": tool, "arguments": arguments or {}})


def mcp_request(base: str, token: str, method: str, params: dict) -> Reply:
    """One JSON-RPC request to `/api/mcp`, with the headers a Streamable HTTP client sends."""
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return request(
        "POST",
        f"{base}/api/mcp",
        token=token,
        json_body=message,
        headers={"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": MCP_PROTOCOL_VERSION},
    )


def tool_output(base: str, token: str, tool: str, arguments: dict) -> dict:
    """A successful `tools/call`'s `structuredContent`; a failure fails the check with its text."""
    reply = mcp_call(base, token, tool, arguments)
    check(reply.status == 200 and isinstance(reply.body, dict) and "result" in reply.body, f"{tool}: {reply}")
    result = reply.body["result"]
    check(not result.get("isError"), f"{tool}({json.dumps(arguments)}) failed: {result}")
    return result["structuredContent"]


def expect_refused(reply: Reply, status: int, code: str, what: str) -> None:
    check(reply.status == status and reply.code() == code, f"{what}: expected {status} `{code}`, got {reply}")


def pkce_pair() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


class WebhookReceiver(BackgroundHTTPServer):
    """A loopback webhook receiver: answers 200 and keeps each POST's headers and body."""

    def __init__(self) -> None:
        received: list[tuple[dict[str, str], bytes]] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                received.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args) -> None:
                pass

        self.received = received
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hooks"
        super().__init__()

    def wait_for(self, count: int, timeout: float = WAIT) -> list[tuple[dict[str, str], bytes]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.received) >= count:
                return list(self.received)
            time.sleep(0.05)
        raise CheckFailed(f"the webhook receiver took {len(self.received)} messages, not {count}")


# The MCP Apps host of the mcp-app check: what Claude, ChatGPT or VS Code do for an app, in a page.
# It reads the app with `resources/read`, runs it in a sandboxed iframe, speaks the app's side of
# the protocol (2026-01-26) and passes the app's `tools/call` requests to the server. CONFIG is
# filled in by the check: the server, the key, the app's address and title, the tool and its
# arguments.
APP_HOST_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>CI MCP Apps host</title>
<style>body { font: 14px system-ui, sans-serif; margin: 16px; background: #eef0f3; }
iframe { box-sizing: border-box; width: 100%; height: 400px; border: 1px solid #c5c9d2; border-radius: 12px; background: #fff; }</style>
</head><body>
<h1>CI host</h1>
<p id="host-status">starting</p>
<iframe id="app" sandbox="allow-scripts"></iframe>
<script>
"use strict";
const CONFIG = __CONFIG__;
window.hostLog = [];
let nextMcpId = 1;
async function mcp(method, params) {
  const response = await fetch(CONFIG.base + "/api/mcp", {
    method: "POST",
    headers: { "Authorization": "Bearer " + CONFIG.key, "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": CONFIG.version },
    body: JSON.stringify({ jsonrpc: "2.0", id: nextMcpId++, method, params }),
  });
  const body = await response.json();
  if (body.error) throw body.error;
  return body.result;
}
(async () => {
  const status = document.getElementById("host-status");
  const frame = document.getElementById("app");
  frame.title = CONFIG.title;
  const read = await mcp("resources/read", { uri: CONFIG.uri });
  const app = read.contents[0];
  window.appMimeType = app.mimeType;
  const toolResult = await mcp("tools/call", { name: CONFIG.tool, arguments: CONFIG.arguments });
  const post = (message) => frame.contentWindow.postMessage(Object.assign({ jsonrpc: "2.0" }, message), "*");
  window.addEventListener("message", async (event) => {
    if (event.source !== frame.contentWindow) return;
    const message = event.data;
    window.hostLog.push(message);
    if (message.method === "ui/initialize") {
      post({ id: message.id, result: { protocolVersion: "2026-01-26",
        hostInfo: { name: "ci-host", version: "1.0.0" },
        hostCapabilities: { serverTools: {} },
        hostContext: { theme: "light", displayMode: "inline", locale: "en-GB", timeZone: "UTC" } } });
    } else if (message.method === "ui/notifications/initialized") {
      post({ method: "ui/notifications/tool-input", params: { arguments: CONFIG.arguments } });
      post({ method: "ui/notifications/tool-result", params: toolResult });
      status.textContent = "ready";
    } else if (message.method === "ui/notifications/size-changed") {
      frame.style.height = message.params.height + "px";
    } else if (message.method === "tools/call") {
      try {
        post({ id: message.id, result: await mcp("tools/call", message.params) });
      } catch (error) {
        post({ id: message.id, error: { code: error.code || -32603, message: error.message || String(error) } });
      }
    } else if (message.id !== undefined && message.method !== undefined) {
      post({ id: message.id, error: { code: -32601, message: "Method not found: " + message.method } });
    }
  });
  frame.srcdoc = app.text;
})().catch((error) => {
  document.getElementById("host-status").textContent = "failed: " + (error.message || JSON.stringify(error));
});
</script>
</body></html>
"""


class AppHost(BackgroundHTTPServer):
    """Serves the host page on a loopback port of its own, so the app's calls cross origins as from
    any web host."""

    def __init__(self, config: dict) -> None:
        page = APP_HOST_PAGE.replace("__CONFIG__", json.dumps(config)).encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/host.html"
        super().__init__()


class Callback(BackgroundHTTPServer):
    """A loopback redirect URI: a tiny HTTP server that records the query of the first request."""

    def __init__(self) -> None:
        received: list[dict[str, str]] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
                received.append(query)
                page = "<!doctype html><title>Signed in</title><h1 id='callback'>Authorization received</h1>"
                page += "<pre>" + html.escape(json.dumps({k: v for k, v in query.items() if k != "code"})) + "</pre>"
                body = page.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.received = received
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.redirect_uri = f"http://127.0.0.1:{self.httpd.server_address[1]}/callback"
        super().__init__()

    def wait(self, timeout: float = WAIT) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.received:
                return self.received[0]
            time.sleep(0.1)
        raise CheckFailed(f"the browser never reached the redirect URI {self.redirect_uri}")


# --- the browser ------------------------------------------------------------------------------


class Browser:
    """Headless Chromium through chromedriver, with a screenshot of every page it is shown."""

    def __init__(self, base_url: str, shots: Path, work: Path) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service

        self.base_url = base_url
        self.shots = shots
        self.counters: dict[str, int] = {}
        self.profile = tempfile.mkdtemp(prefix="chromium-profile-", dir=work)
        options = Options()
        options.binary_location = CHROMIUM
        for flag in CHROMIUM_FLAGS:
            options.add_argument(flag)
        options.add_argument(f"--user-data-dir={self.profile}")
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        service = Service(executable_path=CHROMEDRIVER, log_output=str(work / "chromedriver.log"))
        self.driver = webdriver.Chrome(options=options, service=service)
        self.driver.set_page_load_timeout(WAIT * 2)
        # The copy button writes to the clipboard; the check reads it back.
        self.driver.execute_cdp_cmd(
            "Browser.grantPermissions",
            {"origin": base_url, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]},
        )
        print(f"Chromium {self.driver.capabilities.get('browserVersion')} via {CHROMEDRIVER}")

    def close(self) -> None:
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self.profile, ignore_errors=True)

    # Navigation and reading.

    def goto(self, path: str) -> None:
        self.driver.get(path if path.startswith("http") else self.base_url + path)

    @property
    def path(self) -> str:
        return urllib.parse.urlsplit(self.driver.current_url).path

    @property
    def query(self) -> dict[str, str]:
        return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.driver.current_url).query))

    def find(self, css: str):
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, css)

    def find_all(self, css: str) -> list:
        from selenium.webdriver.common.by import By

        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def has(self, css: str) -> bool:
        return bool(self.find_all(css))

    def expect(self, css: str, what: str):
        found = self.find_all(css)
        check(found, f"{what}: no `{css}` on {self.driver.current_url} (title {self.driver.title!r})")
        return found[0]

    def text(self, css: str) -> str:
        return self.expect(css, "text").text.strip()

    def wait_until(self, condition, what: str, timeout: float = WAIT):
        deadline = time.monotonic() + timeout
        while True:
            value = condition()
            if value:
                return value
            if time.monotonic() > deadline:
                raise CheckFailed(f"timed out waiting for {what} (at {self.driver.current_url})")
            time.sleep(0.1)

    def fill(self, css: str, value: str) -> None:
        field = self.expect(css, "a form field")
        field.clear()
        field.send_keys(value)

    def click_and_load(self, element) -> None:
        """Clicks something that loads a new page and waits until that page is there.

        The old page is marked with a random value: the new one is there when the mark is gone and
        the document is complete. (Waiting for an old element to go stale is not enough: while
        Chromium swaps documents it may answer with other errors than "stale".)"""
        from selenium.common.exceptions import WebDriverException

        mark = secrets.token_hex(8)
        self.driver.execute_script("window.__ciPage = arguments[0];", mark)
        element.click()

        def loaded() -> bool:
            try:
                return self.driver.execute_script(
                    "return window.__ciPage !== arguments[0] && document.readyState === 'complete';", mark
                )
            except WebDriverException:
                return False

        self.wait_until(loaded, "the next page to load")

    def submit(self, form_css: str, button_css: str | None = None) -> None:
        form = self.expect(form_css, "a form")
        if button_css:
            button = self.expect(button_css, "the form's button")
        else:
            buttons = form.find_elements("css selector", "button[type=submit], input[type=submit], button:not([type])")
            check(buttons, f"the form `{form_css}` has no submit button")
            button = buttons[0]
        self.click_and_load(button)

    # Evidence.

    def shot(self, check_name: str, page: str) -> Path:
        """A PNG of the whole page (not only the window), `<check>-<n>-<page>.png`."""
        n = self.counters[check_name] = self.counters.get(check_name, 0) + 1
        path = self.shots / f"{check_name}-{n}-{page}.png"
        metrics = self.driver.execute_cdp_cmd("Page.getLayoutMetrics", {})
        size = metrics.get("cssContentSize") or metrics.get("contentSize")
        clip = {"x": 0, "y": 0, "width": max(size["width"], 1), "height": max(size["height"], 1), "scale": 1}
        shot = self.driver.execute_cdp_cmd(
            "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
        )
        path.write_bytes(base64.b64decode(shot["data"]))
        self.check_console(page)
        return path

    def check_console(self, page: str) -> None:
        """A script error or a Content-Security-Policy violation on a page is a bug; a failed load
        (the 401 of a wrong password, a missing favicon) is not."""
        errors = []
        for entry in self.driver.get_log("browser"):
            message = entry.get("message", "")
            if entry.get("level") != "SEVERE" or "Failed to load resource" in message:
                continue
            errors.append(message)
        check(not errors, f"the browser console reported errors on the {page} page: {errors}")

    def save_failure(self, check_name: str) -> None:
        try:
            self.shot(check_name, "FAILED")
        except CheckFailed:
            pass
        (self.shots / f"{check_name}-FAILED.html").write_text(self.driver.page_source)
        print(f"  the browser was at {self.driver.current_url}; screenshot and HTML saved in {self.shots}")


# --- the flows --------------------------------------------------------------------------------


class Flows:
    def __init__(self, browser: Browser, server: Server, binary: str, database_url: str, workspace_id: str) -> None:
        self.b = browser
        self.base = server.base_url
        self.binary = binary
        self.database_url = database_url
        self.workspace_id = workspace_id
        self.key_id = ""
        self.key_value = ""

    def sign_in(self, email: str, password: str) -> None:
        """Fills and submits the sign-in form the browser is on."""
        b = self.b
        check(b.path == "/login", f"expected the sign-in page, the browser is at {b.driver.current_url}")
        b.fill("#login-form #email", email)
        b.fill("#login-form #password", password)
        b.submit("#login-form", "#sign-in")

    def workspace(self, token: str) -> dict:
        reply = request("GET", f"{self.base}/api/v1/workspace", token=token)
        check(reply.status == 200 and isinstance(reply.body, dict), f"GET /api/v1/workspace: {reply}")
        return reply.body

    def key_row(self, key_id: str):
        return self.b.expect(f"#keys tr[data-key-id='{key_id}']", f"the row of key {key_id}")

    def create_key_in_form(self, check_name: str, name: str, scopes: list[str]) -> tuple[str, str]:
        """Creates a key through the form on /settings/api; returns (id, value)."""
        b = self.b
        b.goto("/settings/api")
        b.fill("#key-name", name)
        for scope in ("read", "write", "send"):
            box = b.expect(f"#scope-{scope}", f"the {scope} checkbox")
            if box.is_selected() != (scope in scopes):
                check(box.is_enabled(), f"the {scope} checkbox is disabled")
                box.click()
        b.shot(check_name, "create-form")
        b.submit("#create-key", "#create-key-submit")
        check(b.path == "/settings/api", f"creating a key should come back to /settings/api, at {b.driver.current_url}")
        b.check_console("key-created")
        value = b.text("#new-key-value")
        check(value.startswith("pk_test_"), f"the new key's value should start with pk_test_, got {value!r}")
        rows = [row for row in b.find_all("#keys tr[data-key-id]") if row.find_elements("css selector", "td")[0].text.strip() == name]
        check(len(rows) == 1, f"expected one row named {name!r} in #keys, found {len(rows)}")
        return rows[0].get_attribute("data-key-id"), value

    # 1.
    def sign_in_check(self) -> None:
        b, name = self.b, "sign-in"
        b.goto("/settings/api")
        check(b.path == "/login", f"/settings/api without a session should lead to /login, got {b.driver.current_url}")
        check(b.query.get("next") == "/settings/api", f"the sign-in page should carry next=/settings/api, got {b.query}")
        check(b.has("#login-form input[name=csrf_token]"), "the sign-in form has no csrf_token")
        b.shot(name, "login")
        before = {cookie["name"] for cookie in b.driver.get_cookies()}

        self.sign_in(OWNER_EMAIL, "not the password")
        check(b.path == "/login", f"a wrong password should stay on /login, got {b.driver.current_url}")
        error = b.text(".flash-error")
        check("Wrong email or password." in error, f"a wrong password should say 'Wrong email or password.', said {error!r}")
        b.shot(name, "wrong-password")

        self.sign_in(OWNER_EMAIL, OWNER_PASSWORD)
        check(b.path == "/settings/api", f"signing in should land on next=/settings/api, got {b.driver.current_url}")
        b.expect("#keys", "the keys table")
        b.expect("#create-key", "the create form")
        shown = b.text("#signed-in-email")
        check(shown == OWNER_EMAIL, f"the page says {shown!r} is signed in, expected {OWNER_EMAIL}")
        b.shot(name, "settings-api")
        session = [cookie for cookie in b.driver.get_cookies() if cookie["name"] not in before]
        check(session, "signing in set no new cookie")
        for cookie in session:
            check(cookie.get("httpOnly"), f"the cookie {cookie['name']} is not HttpOnly")
            check(cookie.get("sameSite") == "Lax", f"the cookie {cookie['name']} is SameSite={cookie.get('sameSite')}, expected Lax")
        print(f"  signed in as {OWNER_EMAIL}; session cookie(s) {[c['name'] for c in session]}: HttpOnly, SameSite=Lax")

    # 2.
    def create_key_check(self) -> None:
        b, name = self.b, "create-key"
        self.key_id, self.key_value = self.create_key_in_form(name, "Browser key", ["read", "write"])
        b.shot(name, "new-key-shown")
        copy = b.expect("#copy-key", "the copy button")
        copy.click()
        b.wait_until(lambda: copy.text.strip() == "Copied", "the copy button to say Copied")
        copied = b.driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "navigator.clipboard.readText().then(done, e => done('error: ' + e));"
        )
        check(copied == self.key_value, f"the copy button put {copied!r} on the clipboard, not the key")
        b.shot(name, "copied")

        row = self.key_row(self.key_id)
        status = row.find_element("css selector", "td.status").text.strip()
        check(status == "active", f"the new key's status is {status!r}, expected active")
        prefix = row.find_elements("css selector", "td")[1].text.strip().rstrip("…").rstrip(".")
        check(prefix and self.key_value.startswith(prefix), f"the displayed prefix {prefix!r} is not the key's beginning")

        b.driver.refresh()
        check(b.path == "/settings/api", f"the reload went to {b.driver.current_url}")
        check(not b.has("#new-key-value"), "a reload still shows #new-key-value")
        check(self.key_value not in b.driver.page_source, "a reload still has the key's value in the page")
        self.key_row(self.key_id)
        b.shot(name, "after-reload")

        body = self.workspace(self.key_value)
        caller = body["caller"]
        check(body["workspace"]["id"] == self.workspace_id, f"the key acts in {body['workspace']['id']}, not {self.workspace_id}")
        check(caller["credential_id"] == self.key_id, f"the key is {caller['credential_id']}, the page says {self.key_id}")
        check(set(caller["scopes"]) == {"read", "write"}, f"the key's scopes are {caller['scopes']}, expected read and write")
        print(f"  key {self.key_id} shown once, copied, works on GET /api/v1/workspace with scopes {caller['scopes']}")

    # 3.
    def send_terms_check(self) -> None:
        b, name = self.b, "send-terms"
        b.goto("/settings/api")
        send = b.expect("#scope-send", "the send checkbox")
        check(not send.is_enabled(), "the send checkbox is enabled before the sending terms are accepted")
        reason = b.text("#send-disabled-reason")
        check("terms" in reason.lower(), f"#send-disabled-reason does not explain the terms: {reason!r}")
        b.shot(name, "send-disabled")

        b.goto("/settings/sending-terms")
        before = b.text("#terms-status")
        b.shot(name, "terms")
        b.submit("#accept-terms")
        if b.path != "/settings/sending-terms":
            b.goto("/settings/sending-terms")
        after = b.text("#terms-status")
        check(after != before, f"#terms-status did not change after accepting: {after!r}")
        check(not b.has("#accept-terms"), "the accept form is still offered after accepting")
        check(OWNER_EMAIL in after or "accepted" in after.lower(), f"#terms-status does not say who accepted: {after!r}")
        b.shot(name, "terms-accepted")

        b.goto("/settings/api")
        send = b.expect("#scope-send", "the send checkbox")
        check(send.is_enabled(), "the send checkbox is still disabled after the terms were accepted")
        check(not b.has("#send-disabled-reason"), "#send-disabled-reason is still shown after the terms were accepted")
        b.shot(name, "send-enabled")

        key_id, value = self.create_key_in_form(name, "Sending key", ["read", "write", "send"])
        b.shot(name, "send-key-created")
        scopes = self.workspace(value)["caller"]["scopes"]
        check("send" in scopes, f"a key made with send holds {scopes}")
        print(f"  terms: {after!r}; key {key_id} holds {scopes}")

    # 4.
    def revoke_key_check(self) -> None:
        b, name = self.b, "revoke-key"
        b.goto("/settings/api")
        b.shot(name, "keys")
        link = self.key_row(self.key_id).find_element("css selector", "a.revoke")
        b.click_and_load(link)
        check(b.path == f"/settings/api/keys/{self.key_id}/revoke", f"Revoke led to {b.driver.current_url}")
        b.expect("#confirm-revoke", "the confirmation form")
        b.shot(name, "confirm")
        check(self.workspace(self.key_value), "the key stopped working before the revocation was confirmed")
        b.submit("#confirm-revoke")
        check(b.path == "/settings/api", f"confirming the revocation led to {b.driver.current_url}")
        status = self.key_row(self.key_id).find_element("css selector", "td.status").text.strip()
        check(status == "revoked", f"the revoked key's status is {status!r}")
        check(not self.key_row(self.key_id).find_elements("css selector", "a.revoke"), "a revoked key still offers Revoke")
        b.shot(name, "revoked")
        reply = request("GET", f"{self.base}/api/v1/workspace", token=self.key_value)
        expect_refused(reply, 401, "credential_revoked", "the revoked key on GET /api/v1/workspace")
        reply = mcp_call(self.base, self.key_value, "service_get_workspace")
        expect_refused(reply, 401, "credential_revoked", "the revoked key on /api/mcp")
        print(f"  key {self.key_id} revoked: 401 credential_revoked on REST and MCP")

    # 5.
    def connected_app_check(self) -> None:
        b, name = self.b, "connected-app"
        resource = f"{self.base}/api/mcp"
        with Callback() as callback:
            reply = request("POST", f"{self.base}/oauth/register", json_body={
                "client_name": "CI browser app",
                "redirect_uris": [callback.redirect_uri],
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
            })
            check(reply.status == 201 and isinstance(reply.body, dict), f"POST /oauth/register: {reply}")
            client_id = reply.body.get("client_id", "")
            check(client_id, f"the registration has no client_id: {reply}")
            check(reply.body.get("redirect_uris") == [callback.redirect_uri], f"the registration does not echo the redirect URI: {reply}")

            verifier, challenge = pkce_pair()
            state = secrets.token_urlsafe(16)
            query = urllib.parse.urlencode({
                "response_type": "code",
                "client_id": client_id,
                "redirect_uri": callback.redirect_uri,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
                "state": state,
                "scope": "read write",
                "resource": resource,
            })
            # Signed out, so the flow goes through the sign-in page and back with its long `next`.
            b.driver.delete_all_cookies()
            b.goto(f"/oauth/authorize?{query}")
            if b.path == "/login":
                check(b.query.get("next", "").startswith("/oauth/authorize?"), f"the sign-in page lost the authorization request: {b.query}")
                b.shot(name, "login")
                self.sign_in(OWNER_EMAIL, OWNER_PASSWORD)
            if b.has("#choose-workspace"):
                b.shot(name, "choose-workspace")
                b.expect(f"#choose-workspace input[name=workspace_id][value='{self.workspace_id}']", "our workspace").click()
                b.submit("#choose-workspace")
            b.expect("#consent", "the consent form")
            check(b.path == "/oauth/authorize", f"the consent page is at {b.driver.current_url}")
            page = b.find("body").text
            check("CI browser app" in page, "the consent page does not name the client")
            granted = b.text("#granted-scopes")
            check("write" in granted, f"#granted-scopes does not list write: {granted!r}")
            b.shot(name, "consent")
            b.click_and_load(b.expect("#allow", "the Allow button"))
            answer = callback.wait()
            b.shot(name, "redirect-uri")

        check(answer.get("state") == state, f"the redirect carries state {answer.get('state')!r}, expected {state!r}")
        check(answer.get("iss") == self.base, f"the redirect carries iss {answer.get('iss')!r}, expected {self.base!r}")
        check(answer.get("code"), f"the redirect carries no code: {answer}")
        reply = request("POST", f"{self.base}/oauth/token", form={
            "grant_type": "authorization_code",
            "code": answer["code"],
            "redirect_uri": callback.redirect_uri,
            "client_id": client_id,
            "code_verifier": verifier,
            "resource": resource,
        })
        check(reply.status == 200 and isinstance(reply.body, dict), f"POST /oauth/token (authorization_code): {reply}")
        check("no-store" in reply.headers.get("cache-control", ""), f"the token response is not Cache-Control: no-store: {reply.headers}")
        tokens = reply.body
        check(tokens.get("token_type") == "Bearer", f"token_type is {tokens.get('token_type')!r}")
        access, refresh = tokens.get("access_token", ""), tokens.get("refresh_token", "")
        check(access and refresh, f"the token response lacks a token: {sorted(tokens)}")

        reply = mcp_call(self.base, access, "service_get_workspace")
        check(reply.status == 200 and isinstance(reply.body, dict) and "result" in reply.body, f"tools/call with the access token: {reply}")
        result = reply.body["result"]
        check(not result.get("isError"), f"service_get_workspace failed: {result}")
        caller = result["structuredContent"]["caller"]
        check(result["structuredContent"]["workspace"]["id"] == self.workspace_id, f"the token acts in another workspace: {result}")
        grant_id = caller["credential_id"]
        print(f"  client {client_id} connected: grant {grant_id}, scopes {caller['scopes']}")

        b.goto("/settings/api")
        rows = b.find_all("#connected-apps tr[data-grant-id]")
        check(rows, "no connected app is listed on /settings/api")
        ours = [row for row in rows if row.get_attribute("data-grant-id") == grant_id]
        check(ours, f"grant {grant_id} is not listed; listed: {[row.get_attribute('data-grant-id') for row in rows]}")
        check("CI browser app" in ours[0].text, f"the connected app's row does not name it: {ours[0].text!r}")
        b.shot(name, "connected-apps")
        b.click_and_load(ours[0].find_element("css selector", "a.disconnect"))
        check(b.path == f"/settings/apps/{grant_id}/disconnect", f"Disconnect led to {b.driver.current_url}")
        b.expect("#confirm-disconnect", "the confirmation form")
        b.shot(name, "confirm-disconnect")
        b.submit("#confirm-disconnect")
        check(b.path == "/settings/api", f"confirming the disconnection led to {b.driver.current_url}")
        still = [row for row in b.find_all("#connected-apps tr[data-grant-id]") if row.get_attribute("data-grant-id") == grant_id]
        check(not still or not still[0].find_elements("css selector", "a.disconnect"), "the disconnected app is still offered for disconnection")
        b.shot(name, "disconnected")

        expect_refused(mcp_call(self.base, access, "service_get_workspace"), 401, "credential_revoked", "the disconnected app's token on /api/mcp")
        expect_refused(request("GET", f"{self.base}/api/v1/workspace", token=access), 401, "credential_revoked",
                       "the disconnected app's token on GET /api/v1/workspace")
        reply = request("POST", f"{self.base}/oauth/token", form={
            "grant_type": "refresh_token", "refresh_token": refresh, "client_id": client_id, "resource": resource,
        })
        check(reply.status == 400 and isinstance(reply.body, dict) and reply.body.get("error") == "invalid_grant",
              f"the disconnected app's refresh token: expected 400 invalid_grant, got {reply}")
        print("  disconnected: the access token is 401 credential_revoked, the refresh token invalid_grant")

    # 6.
    def member_removed_check(self) -> None:
        b, name = self.b, "member-removed"
        email = f"member-{secrets.token_hex(3)}@example.com"
        b.goto("/settings/members")
        if b.path == "/login":
            b.shot(name, "login")
            self.sign_in(OWNER_EMAIL, OWNER_PASSWORD)
            b.goto("/settings/members")
        b.expect("#members", "the members table")
        b.shot(name, "members")
        b.fill("#add-member input[name=email]", email)
        b.fill("#add-member input[name=display_name]", "Mia Member")
        from selenium.webdriver.support.ui import Select

        Select(b.expect("#add-member select[name=role]", "the role select")).select_by_value("member")
        b.fill("#add-member input[name=password]", MEMBER_PASSWORD)
        b.submit("#add-member")
        check(not b.has(".flash-error"), f"adding a member failed: {b.text('.flash-error') if b.has('.flash-error') else ''}")
        if b.path != "/settings/members":
            b.goto("/settings/members")
        row = b.expect(f"#members tr[data-email='{email}']", "the new member's row")
        person_id = row.get_attribute("data-person-id")
        check(person_id.startswith("psn_"), f"the row's data-person-id is {person_id!r}")
        selects = row.find_elements("css selector", "select[name=role]")
        role = Select(selects[0]).first_selected_option.get_attribute("value") if selects else row.find_element("css selector", ".role-name").text
        check(role == "member", f"the new person's role is {role!r}, expected member")
        b.shot(name, "member-added")

        key = admin(self.binary, self.database_url, "key", "create", "--workspace", self.workspace_id,
                    "--email", email, "--name", "member laptop", "--scopes", "read")
        body = self.workspace(key["key"])
        check(body["caller"]["role"] == "member" and body["caller"]["person_id"] == person_id, f"the member's key acts as {body['caller']}")

        # The member's own view: write and send are greyed out, with the reason.
        b.driver.delete_all_cookies()
        b.goto("/settings/api")
        b.shot(name, "member-login")
        self.sign_in(email, MEMBER_PASSWORD)
        check(b.path == "/settings/api", f"the member's sign-in landed on {b.driver.current_url}")
        check(not b.expect("#scope-write", "the write checkbox").is_enabled(), "write is enabled for a plain member")
        check(not b.expect("#scope-send", "the send checkbox").is_enabled(), "send is enabled for a plain member")
        check("member" in b.text("#write-disabled-reason"), "#write-disabled-reason does not name the role")
        b.shot(name, "member-view")

        b.driver.delete_all_cookies()
        b.goto("/settings/members")
        b.shot(name, "owner-login")
        self.sign_in(OWNER_EMAIL, OWNER_PASSWORD)
        check(b.path == "/settings/members", f"signing in again landed on {b.driver.current_url}")
        b.shot(name, "members-again")
        row = b.expect(f"#members tr[data-person-id='{person_id}']", "the member's row")
        b.click_and_load(row.find_element("css selector", "a.remove"))
        check(b.path == f"/settings/members/{person_id}/remove", f"Remove led to {b.driver.current_url}")
        b.expect("#confirm-remove", "the confirmation form")
        b.shot(name, "confirm-remove")
        b.submit("#confirm-remove")
        check(b.path == "/settings/members", f"confirming the removal led to {b.driver.current_url}")
        check(not b.has(f"#members tr[data-person-id='{person_id}']"), "the removed member is still listed")
        b.shot(name, "member-removed")
        reply = request("GET", f"{self.base}/api/v1/workspace", token=key["key"])
        expect_refused(reply, 401, "not_a_member", "the removed member's key")
        print(f"  {email} added, keyed, removed: their key is 401 not_a_member")

    # 7.
    def landing_docs_check(self) -> None:
        b, name = self.b, "landing-docs"
        b.goto("/")
        b.expect("#landing-docs", "the docs link on /")
        check(b.has("#landing-sign-in") or b.has("#landing-settings"), "/ has no sign-in or settings link")
        b.shot(name, "landing")
        b.click_and_load(b.find("#landing-docs"))
        check(b.path == "/api/v1/docs", f"the docs link led to {b.driver.current_url}")
        b.driver.set_window_size(390, 844)
        try:
            b.goto("/api/v1/docs")
            b.expect("#getting-started", "the getting-started section")
            b.shot(name, "docs-phone")
            width = b.driver.execute_script("return window.innerWidth")
            scroll = b.driver.execute_script("return document.documentElement.scrollWidth")
            left = b.driver.execute_script("return document.querySelector('main').getBoundingClientRect().left")
            nav_height = b.driver.execute_script("return document.querySelector('nav').getBoundingClientRect().height")
            check(left < 40, f"on a phone the content starts {left}px from the left: the index takes the width")
            check(scroll <= width + 1, f"on a phone the docs scroll sideways ({scroll}px in a {width}px window)")
            b.find("nav summary").click()
            b.wait_until(lambda: b.driver.execute_script(
                "return document.querySelector('nav').getBoundingClientRect().height") < nav_height,
                "the index to fold")
            b.shot(name, "docs-phone-index-folded")
            curls = [pre.text for pre in b.find_all("pre.curl")]
            check(curls and all("Authorization: Bearer $KEY" in text for text in curls), "an operation has no curl example with the key")
            b.driver.execute_script("document.querySelector('pre.curl').scrollIntoView()")
            b.shot(name, "docs-phone-curl")
        finally:
            b.driver.set_window_size(1280, 900)
        b.goto("/api/v1/docs")
        b.shot(name, "docs-desktop")
        print(f"  / leads to the docs; on a phone the index folds above the content; {len(curls)} curl examples")

    def signed_in_owner(self, name: str, path: str, password: str = OWNER_PASSWORD) -> None:
        b = self.b
        b.goto(path)
        if b.path == "/login":
            self.sign_in(OWNER_EMAIL, password)
            b.goto(path)
        check(b.path == path, f"expected {path}, the browser is at {b.driver.current_url}")

    # 8.
    def credits_check(self) -> None:
        b, name = self.b, "credits"
        granted = admin(self.binary, self.database_url, "credits", "grant", "--workspace", self.workspace_id,
                        "--amount", "250", "--reason", "browser check")
        self.signed_in_owner(name, "/settings/api")
        b.click_and_load(b.expect(".site-nav a[href='/settings/credits']", "the Credits link"))
        check(b.path == "/settings/credits", f"the Credits link led to {b.driver.current_url}")
        shown = b.text("#credit-balance")
        check(shown == str(granted["balance"]), f"the page shows a balance of {shown}, the CLI said {granted['balance']}")
        rows = b.find_all("#ledger tr[data-entry-id]")
        check(rows and "browser check" in rows[0].text and "+250" in rows[0].text, "the newest ledger row is not the grant")
        b.shot(name, "credits")
        print(f"  balance {shown} with the grant first in the ledger")

    # 9.
    def webhooks_check(self) -> None:
        from standardwebhooks import Webhook

        b, name = self.b, "webhooks"
        self.signed_in_owner(name, "/settings/api")
        b.click_and_load(b.expect(".site-nav a[href='/settings/webhooks']", "the Webhooks link"))
        check(b.path == "/settings/webhooks", f"the Webhooks link led to {b.driver.current_url}")
        check(b.has("#no-endpoints"), "a new workspace lists endpoints")
        b.shot(name, "empty")
        with WebhookReceiver() as receiver:
            b.fill("#webhook-url", receiver.url)
            b.fill("#webhook-description", "browser check")
            for event_type in ("sequence.activated", "import.completed"):
                b.find(f"input[name='event_types'][value='{event_type}']").click()
            b.submit("#create-webhook", "#create-webhook-submit")
            secret = b.text("#new-secret-value")
            check(secret.startswith("whsec_"), f"the page showed `{secret}` as the secret")
            b.shot(name, "created")
            b.goto("/settings/webhooks")
            check(not b.has("#new-secret-value"), "a reload shows the secret again")
            section_css = "section.endpoint"
            endpoint_id = b.find(section_css).get_attribute("data-endpoint-id")
            check("sequence.activated, import.completed" in b.text(".event-types")
                  or "import.completed, sequence.activated" in b.text(".event-types"),
                  f"the endpoint receives `{b.text('.event-types')}`")

            b.submit(f"{section_css} .test-form")
            headers, body = receiver.wait_for(1)[0]
            Webhook(secret).verify(body, headers)
            check(json.loads(body)["type"] == "webhook.test", f"the test message was {body!r}")
            outcome = b.text("#test-outcome")
            check("delivered, HTTP 200" in outcome, f"the page says `{outcome}`")
            b.shot(name, "tested")

            b.submit(f"{section_css} .rotate-form")
            new_secret = b.text("#new-secret-value")
            check(new_secret.startswith("whsec_") and new_secret != secret, "rotation showed no new secret")
            b.submit(f"{section_css} .test-form")
            headers, body = receiver.wait_for(2)[1]
            check(len(headers["webhook-signature"].split(" ")) == 2, "a rotated endpoint signs once")
            Webhook(new_secret).verify(body, headers)
            Webhook(secret).verify(body, headers)
            b.shot(name, "rotated")

            b.submit(f"{section_css} .enabled-form")
            check("disabled" in b.text(f"{section_css} h2"), "Disable left the endpoint enabled")
            key = admin(self.binary, self.database_url, "key", "create", "--workspace", self.workspace_id,
                        "--email", OWNER_EMAIL, "--name", "webhook check", "--scopes", "read")["key"]
            listed = request("GET", f"{self.base}/api/v1/webhook-endpoints/{endpoint_id}", token=key)
            check(listed.status == 200 and listed.body["enabled"] is False, f"the API says {listed}")
            b.shot(name, "disabled")
        print("  created with its secret shown once; tests verified by standardwebhooks before and after a rotation; disabled")

    # 10.
    def password_check(self) -> None:
        b, name = self.b, "password"
        self.signed_in_owner(name, "/settings/password")
        b.shot(name, "form")
        b.fill("#current-password", "not the password")
        b.fill("#new-password", NEW_OWNER_PASSWORD)
        b.fill("#new-password-again", NEW_OWNER_PASSWORD)
        b.submit("#change-password", "#change-password-submit")
        check(b.has("#password-error"), "a wrong current password was not refused")
        check(b.has("#sign-out"), "the refusal lost the navigation")
        b.shot(name, "wrong-current")
        b.fill("#current-password", OWNER_PASSWORD)
        b.fill("#new-password", NEW_OWNER_PASSWORD)
        b.fill("#new-password-again", NEW_OWNER_PASSWORD)
        b.submit("#change-password", "#change-password-submit")
        b.expect("#password-changed", "the confirmation")
        b.shot(name, "changed")
        b.submit("#logout-form", "#sign-out")
        b.goto("/settings/api")
        self.sign_in(OWNER_EMAIL, OWNER_PASSWORD)
        check(b.path == "/login" and b.has(".flash-error"), "the old password still signs in")
        b.shot(name, "old-refused")
        self.sign_in(OWNER_EMAIL, NEW_OWNER_PASSWORD)
        check(b.path == "/settings/api", f"the new password did not sign in: at {b.driver.current_url}")
        b.shot(name, "new-works")
        print("  wrong current password refused with the navigation; the new password signs in, the old one not")


    # 11.
    def mcp_app_check(self) -> None:
        b, name = self.b, "mcp-app"
        admin(self.binary, self.database_url, "terms", "accept", "--workspace", self.workspace_id, "--email", OWNER_EMAIL)
        key = admin(self.binary, self.database_url, "key", "create", "--workspace", self.workspace_id,
                    "--email", OWNER_EMAIL, "--name", "mcp app host", "--scopes", "read,write,send")["key"]
        read_key = admin(self.binary, self.database_url, "key", "create", "--workspace", self.workspace_id,
                         "--email", OWNER_EMAIL, "--name", "mcp app reader", "--scopes", "read")["key"]
        sender = tool_output(self.base, key, "service_create_sender", {"name": "App check account", "timezone": "UTC"})
        people = {}
        for first, last, title in (("Ada", "Lovelace", "Head of Engineering"), ("Grace", "Hopper", "CTO"),
                                   ("Edsger", "Dijkstra", "Founder")):
            made = tool_output(self.base, key, "service_create_prospect", {
                "first_name": first, "last_name": last, "title": title, "company_name": "Engines",
                "profile_url": f"https://www.linkedin.com/in/ci-app-{first.lower()}-{secrets.token_hex(3)}/",
            })
            people[made["id"]] = f"{first} {last}"
        sequence = tool_output(self.base, key, "service_create_sequence", {
            "name": "App check",
            "sender_ids": [sender["id"]],
            "steps": [{"type": "connection_request", "delay_hours": 0, "note": "Hi {{first_name}}, glad to connect."}],
        })
        added = tool_output(self.base, key, "service_add_to_sequence",
                            {"sequence_id": sequence["id"], "prospect_ids": list(people)})
        by_name = {people[e["prospect_id"]]: e["approval_id"] for e in added["enrollments"]}
        check(len(by_name) == 3, f"three items wait for approval: {added}")
        arguments = {"sequence_id": sequence["id"]}

        with AppHost({"base": self.base, "key": key, "version": MCP_PROTOCOL_VERSION,
                      "uri": "ui://outreach/approvals.html", "title": "Approval queue",
                      "tool": "service_list_approvals", "arguments": arguments}) as host:
            b.goto(host.url)
            b.wait_until(lambda: b.text("#host-status") != "starting", "the host to start the app")
            check(b.text("#host-status") == "ready", f"the host says {b.text('#host-status')!r}")
            check(b.driver.execute_script("return window.appMimeType") == "text/html;profile=mcp-app",
                  "resources/read did not answer the app's MIME type")
            frame = b.expect("iframe#app", "the app's iframe")
            check(frame.get_attribute("sandbox") == "allow-scripts", "the iframe is not sandboxed")
            b.driver.switch_to.frame(frame)
            try:
                b.wait_until(lambda: len(b.find_all("article[data-approval-id]")) == 3, "three items in the app")
                page = b.find("main").text
                for person in by_name:
                    check(person in page, f"the app does not show {person}")
                check("Head of Engineering at Engines" in page and "Outreach in App check" in page,
                      f"the app does not show the headline and the sequence: {page[:400]!r}")
                check("Hi Ada, glad to connect." in page, "the app does not show the drafted text")

                def shot(page: str) -> None:
                    b.driver.switch_to.default_content()
                    b.shot(name, page)
                    b.driver.switch_to.frame(frame)

                shot("queue")

                def card(person: str) -> str:
                    return f"article[data-approval-id='{by_name[person]}']"

                # Read in one script: after each action the app redraws the queue, so an element
                # found first may be replaced before it is read.
                def read(css: str) -> str:
                    return b.driver.execute_script(
                        "const node = document.querySelector(arguments[0]);"
                        "return node ? node.textContent.trim() : '';", css)

                def notice_says(start: str):
                    return lambda: read("#notice").startswith(start) and read("#notice")

                # Edit Edsger's note and save it: the item waits with the new text.
                b.expect(f"{card('Edsger Dijkstra')} button.edit", "Edsger's Edit button").click()
                area = b.expect(f"{card('Edsger Dijkstra')} textarea", "the text editor")
                area.clear()
                area.send_keys("Hello Edsger, shortest paths brought me here.")
                b.expect(f"{card('Edsger Dijkstra')} button.save", "the Save button").click()
                b.wait_until(notice_says("Saved Edsger Dijkstra"), "the app to say the text was saved")
                b.wait_until(lambda: "shortest paths" in read(card("Edsger Dijkstra")), "the edited text shown")

                # A refusal is shown with its sentence: the host passes Approve on with a read key.
                def host_key(value: str) -> None:
                    b.driver.switch_to.default_content()
                    b.driver.execute_script("CONFIG.key = arguments[0];", value)
                    b.driver.switch_to.frame(frame)

                host_key(read_key)
                b.expect(f"{card('Ada Lovelace')} button.approve", "Ada's Approve button").click()
                outcome = f"{card('Ada Lovelace')} .outcome[role='alert']"
                refusal = b.wait_until(lambda: read(outcome), "the refusal's sentence")
                check("needs the `send` scope" in refusal, f"the app shows {refusal!r}")
                shot("refused")
                host_key(key)

                b.expect(f"{card('Ada Lovelace')} button.approve", "Ada's Approve button").click()
                approved = b.wait_until(notice_says("Approved Ada Lovelace"), "the app to say Ada was approved")
                b.wait_until(lambda: not b.has(card("Ada Lovelace")), "the approved item to leave the queue")
                shot("approved")

                b.expect(f"{card('Grace Hopper')} button.reject", "Grace's Reject button").click()
                rejected = b.wait_until(notice_says("Rejected Grace Hopper"), "the app to say Grace was rejected")
                b.wait_until(lambda: len(b.find_all("article[data-approval-id]")) == 1, "one item left in the app")
            finally:
                b.driver.switch_to.default_content()
            b.shot(name, "rejected")
            log = b.driver.execute_script("return window.hostLog")
            methods = [message.get("method") for message in log]
            first = log[0] if log else {}
            check(first.get("method") == "ui/initialize" and first["params"]["protocolVersion"] == "2026-01-26",
                  f"the app's first message is {first}")
            check("ui/notifications/size-changed" in methods, f"the app never told its size: {methods}")
            keys = [m["params"]["arguments"].get("idempotency_key") for m in log
                    if m.get("method") == "tools/call" and m["params"]["name"] != "service_list_approvals"]
            check(len(keys) == 4 and all(keys) and len(set(keys)) == 4, f"each action has its own key: {keys}")

        def items(status: str) -> list[dict]:
            reply = request("GET", f"{self.base}/api/v1/approvals?status={status}&sequence_id={sequence['id']}", token=key)
            check(reply.status == 200, f"GET /api/v1/approvals?status={status}: {reply}")
            return reply.body["items"]

        check([i["id"] for i in items("approved")] == [by_name["Ada Lovelace"]], f"approved: {items('approved')}")
        check([i["id"] for i in items("rejected")] == [by_name["Grace Hopper"]], f"rejected: {items('rejected')}")
        waiting = items("pending")
        check([i["id"] for i in waiting] == [by_name["Edsger Dijkstra"]], f"pending: {waiting}")
        check(waiting[0]["texts"][0]["text"] == "Hello Edsger, shortest paths brought me here.", f"the edit: {waiting[0]['texts']}")
        print(f"  in the app: {approved!r}; {rejected!r}; the edit saved; the REST API agrees")

    # 12.
    def mcp_app_dashboard_check(self) -> None:
        b, name = self.b, "mcp-app-dashboard"
        key = admin(self.binary, self.database_url, "key", "create", "--workspace", self.workspace_id,
                    "--email", OWNER_EMAIL, "--name", "dashboard app host", "--scopes", "read")["key"]
        with AppHost({"base": self.base, "key": key, "version": MCP_PROTOCOL_VERSION,
                      "uri": "ui://outreach/dashboard.html", "title": "Dashboard",
                      "tool": "service_get_dashboard", "arguments": {"period": "7d"}}) as host:
            b.goto(host.url)
            b.wait_until(lambda: b.text("#host-status") != "starting", "the host to start the app")
            check(b.text("#host-status") == "ready", f"the host says {b.text('#host-status')!r}")
            frame = b.expect("iframe#app", "the app's iframe")
            b.driver.switch_to.frame(frame)
            try:
                # Read in one script each: the app redraws the whole dashboard at once, so
                # elements found one by one may be replaced between two reads.
                def pressed() -> str:
                    return b.driver.execute_script(
                        "const on = document.querySelector(\"button[aria-pressed='true']\");"
                        "return on ? on.dataset.period : '';")

                b.wait_until(lambda: len(b.find_all(".kpi")) >= 10, "the dashboard's figures")
                check(pressed() == "7d", f"the period shown is {pressed()!r}, the call asked for 7d")
                b.expect("button[data-period='30d']", "the 30 days button").click()
                b.wait_until(lambda: pressed() == "30d", "the dashboard of 30 days")
                shown = b.driver.execute_script(
                    "return Object.fromEntries(Array.from(document.querySelectorAll('.kpi'), (kpi) =>"
                    " [kpi.querySelector('dt').textContent, kpi.querySelector('.value').textContent]));")
                tables = b.driver.execute_script(
                    "return Array.from(document.querySelectorAll('section.panel h2'), (h) => h.textContent);")
            finally:
                b.driver.switch_to.default_content()
            b.shot(name, "dashboard")
        reply = request("GET", f"{self.base}/api/v1/dashboard?period=30d", token=key)
        check(reply.status == 200, f"GET /api/v1/dashboard: {reply}")
        body = reply.body
        for label, value in (("Prospects", body["prospects"]["total"]), ("Waiting for approval", body["approvals"]["waiting"]),
                             ("Credits", body["credits"]["balance"])):
            check(shown.get(label) == f"{value:,}", f"the app shows {label} {shown.get(label)!r}, the API {value}")
        check("Sequences" in tables and "Sender accounts" in tables, f"the app's tables: {tables}")
        print(f"  {len(shown)} figures, {len(tables)} panels; switched from 7 to 30 days; the REST API agrees")


def main() -> int:
    parser = argument_parser(__doc__, "server and chromedriver logs")
    parser.add_argument("--screenshots", type=Path, help="where the PNGs go (default target/browser-screenshots/<database>)")
    parser.add_argument("--counts", type=Path, help="write `passed failed` here for .ci/run")
    args = parser.parse_args()

    binary = executable(args.binary)
    if binary is None:
        return 2
    for program in (CHROMIUM, CHROMEDRIVER):
        if not os.access(program, os.X_OK):
            print(f"error: {program} is missing (apt-get install chromium chromium-driver)", file=sys.stderr)
            return 2
    shots = (args.screenshots or Path(__file__).resolve().parent.parent / "target" / "browser-screenshots" / args.database).resolve()
    shutil.rmtree(shots, ignore_errors=True)
    shots.mkdir(parents=True)
    # Selenium must not look for or download a driver: it is given Debian's.
    os.environ["SE_OFFLINE"] = "true"

    checks = Checks(f"browser checks on {args.database}", args.counts)
    work = Path(tempfile.mkdtemp(prefix=f"outreach-browser-{args.database}-"))
    browser: Browser | None = None
    with guarded(checks, CHECKS, work, args.keep) as guard:
        try:
            section(f"browser checks on {args.database}: fresh database, workspace, server, Chromium")
            with fresh_database(args.database, work, args.postgres_url) as database_url:
                created = admin(binary, database_url, "workspace", "create", "--name", "CI browser",
                                "--owner-email", OWNER_EMAIL, "--owner-password", OWNER_PASSWORD)
                workspace_id = created["workspace_id"]
                server = Server(binary, database_url, work / "server.log")
                guard.server = server
                with server:
                    browser = Browser(server.base_url, shots, work)
                    checks.on_failure = browser.save_failure
                    flows = Flows(browser, server, binary, database_url, workspace_id)
                    checks.run("sign-in", flows.sign_in_check)
                    checks.run("create-key", flows.create_key_check, needs=("sign-in",))
                    checks.run("send-terms", flows.send_terms_check, needs=("sign-in",))
                    checks.run("revoke-key", flows.revoke_key_check, needs=("create-key",))
                    checks.run("connected-app", flows.connected_app_check)
                    checks.run("member-removed", flows.member_removed_check)
                    checks.run("landing-docs", flows.landing_docs_check)
                    checks.run("credits", flows.credits_check)
                    checks.run("webhooks", flows.webhooks_check)
                    checks.run("password", flows.password_check)
                    checks.run("mcp-app", flows.mcp_app_check)
                    checks.run("mcp-app-dashboard", flows.mcp_app_dashboard_check)
                    checks.no_internal_errors(server)
                    browser.close()
                    browser = None
        finally:
            if browser is not None:
                browser.close()
            print(f"screenshots: {shots} ({len(list(shots.glob('*.png')))} PNGs)")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
