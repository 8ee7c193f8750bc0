"""Connect the official MCP Python SDK's OAuth client to `/api/mcp` with no key at all.

Usage:
    mcp_oauth_check.py --binary target/debug/outreach --database sqlite|postgres \
        [--postgres-url URL] [--counts FILE] [--keep]

`mcp.client.auth.OAuthClientProvider` is given only the MCP address. From the 401 it discovers the
protected-resource metadata and the authorization server's metadata, gets a client ID, sends "the
person" to the authorization URL, exchanges the code (PKCE S256, `resource`, `iss` checked) and calls
the tools with the access token. The person's part is played headlessly, over HTTP, by the
redirect handler here, with a cookie-keeping client: it opens the authorization URL, follows it to
`/login`, signs in (email, password, the form's `csrf_token` and `next`), comes back to
`/oauth/authorize`, picks the workspace on `#choose-workspace` (the owner here has two), allows on
`#consent`, and takes the `code`, `state` and `iss` from the 303 to the redirect URI without
following it; the callback handler hands them to the SDK.

Two named checks, each a fresh connection that lists the tools and calls `service_get_workspace`
(its structuredContent must equal `GET /api/v1/workspace` with the same access token, in the chosen
workspace, as an OAuth grant):

1. dynamic-registration: the SDK registers itself at `/oauth/register` (RFC 7591);
2. client-metadata-document: the SDK's client ID is the https URL of a client ID metadata document,
   served here by a local https server with a certificate made for 127.0.0.1 by a throw-away CA;
   `outreach serve` runs with `--cimd-allow-loopback --cimd-root-cert <that CA>` so it may fetch it.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import sys
import tempfile
import urllib.parse
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from ci_server import (
    BackgroundHTTPServer, CheckFailed, Checks, Server, admin, argument_parser, check, executable,
    free_port, fresh_database, guarded, section,
)

OWNER_EMAIL = "oauth-owner@example.com"
OWNER_PASSWORD = "mcp oauth check password"
CLIENT_NAME = "CI MCP SDK client"
CHECKS = ["dynamic-registration", "client-metadata-document"]
CONNECT_TIMEOUT = 120.0


# --- the client ID metadata document, over https ----------------------------------------------


def make_certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A throw-away CA and a server certificate it signed for 127.0.0.1 and localhost; returns the
    paths of the CA's PEM (for `--cimd-root-cert`), the server's certificate and its key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=2)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "outreach CI throw-away CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                          data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                          encipher_only=False, decipher_only=False),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_pem, cert_pem, key_pem = folder / "cimd-ca.pem", folder / "cimd-server.pem", folder / "cimd-server.key"
    ca_pem.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_pem.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_pem.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return ca_pem, cert_pem, key_pem


class MetadataDocumentServer(BackgroundHTTPServer):
    """Serves one client ID metadata document over https at a non-root path, and counts fetches."""

    PATH = "/clients/ci-mcp-sdk.json"

    def __init__(self, cert: Path, key: Path, redirect_uri: str) -> None:
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}{self.PATH}"
        self.document = {
            "client_id": self.url,
            "client_name": f"{CLIENT_NAME} (metadata document)",
            "client_uri": f"https://127.0.0.1:{self.port}/",
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }
        self.fetches = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                if self.path != MetadataDocumentServer.PATH:
                    self.send_error(404)
                    return
                outer.fetches += 1
                body = json.dumps(outer.document).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "max-age=300")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, fmt: str, *args) -> None:
                print(f"  [metadata document server] {fmt % args}")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        super().__init__()


# --- the person, headless -----------------------------------------------------------------------


class Forms(HTMLParser):
    """The forms of a page with an id: method, action and the values they would submit."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.forms: dict[str, dict] = {}
        self.current: dict | None = None
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {name: value or "" for name, value in attrs}
        if tag == "form":
            self.current = {"method": a.get("method", "get").lower(), "action": a.get("action", ""),
                            "fields": [], "radios": {}}
            if a.get("id"):
                self.forms[a["id"]] = self.current
        elif tag == "input" and self.current is not None and a.get("name"):
            kind = a.get("type", "text").lower()
            if kind == "radio":
                self.current["radios"].setdefault(a["name"], []).append(a.get("value", ""))
            elif kind == "checkbox":
                if "checked" in a:
                    self.current["fields"].append((a["name"], a.get("value", "on")))
            elif kind not in ("submit", "button", "image", "reset"):
                self.current["fields"].append((a["name"], a.get("value", "")))

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.current = None


def as_form(fields: list[tuple[str, str]]) -> dict[str, str | list[str]]:
    """Form fields in the shape httpx2 encodes (a list of pairs would be taken as a raw body)."""
    form: dict[str, list[str]] = {}
    for name, value in fields:
        form.setdefault(name, []).append(value)
    return {name: values[0] if len(values) == 1 else values for name, values in form.items()}


class HeadlessPerson:
    """Plays the person's part of the authorization over HTTP, as a browser would."""

    def __init__(self, base: str, redirect_uri: str, workspace_id: str) -> None:
        self.base = base
        self.redirect_uri = redirect_uri
        self.workspace_id = workspace_id
        self.result: AuthorizationCodeResult | None = None
        self.pages: list[str] = []

    async def redirect_handler(self, authorization_url: str) -> None:
        parsed = urllib.parse.urlsplit(authorization_url)
        query = dict(urllib.parse.parse_qsl(parsed.query))
        print(f"  authorization URL: {parsed.path} client_id={query.get('client_id')} "
              f"scope={query.get('scope')!r} resource={query.get('resource')}")
        check(query.get("code_challenge_method") == "S256", f"the SDK did not use S256: {query}")
        async with httpx2.AsyncClient(follow_redirects=False, timeout=30.0) as http:
            response = await http.get(authorization_url)
            for _ in range(12):
                path = response.request.url.path
                if response.status_code in (301, 302, 303, 307, 308):
                    location = urllib.parse.urljoin(str(response.request.url), response.headers["location"])
                    self.pages.append(f"{response.request.method} {path} -> {response.status_code}")
                    if location.startswith(self.redirect_uri):
                        answer = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query))
                        check("error" not in answer, f"the authorization ended in an error: {answer}")
                        check(answer.get("code"), f"the redirect to the client has no code: {location}")
                        self.result = AuthorizationCodeResult(code=answer["code"], state=answer.get("state"),
                                                              iss=answer.get("iss"))
                        print(f"  the person's way: {'; '.join(self.pages)}; then back to the redirect URI "
                              f"with code, state and iss={answer.get('iss')}")
                        return
                    check(location.startswith(self.base), f"the authorization left the server for {location}")
                    response = await http.get(location)
                    continue
                forms = Forms(response.text).forms
                self.pages.append(f"{response.request.method} {path} -> {response.status_code} "
                                  f"{'#' + ', #'.join(forms) if forms else '(no form)'}")
                if "login-form" in forms:
                    check(response.status_code == 200, f"the sign-in page answered {response.status_code}")
                    form = forms["login-form"]
                    fields = dict(form["fields"])
                    check(fields.get("csrf_token"), "the sign-in form has no csrf_token")
                    check(fields.get("next", "").startswith("/oauth/authorize?"),
                          f"the sign-in form lost the authorization request: next={fields.get('next')!r}")
                    fields.update(email=OWNER_EMAIL, password=OWNER_PASSWORD)
                    response = await http.post(urllib.parse.urljoin(self.base, form["action"] or "/login"), data=fields)
                elif "choose-workspace" in forms:
                    form = forms["choose-workspace"]
                    offered = form["radios"].get("workspace_id", [])
                    check(self.workspace_id in offered, f"#choose-workspace does not offer {self.workspace_id}: {offered}")
                    fields = [(name, value) for name, value in form["fields"] if name != "workspace_id"]
                    fields.append(("workspace_id", self.workspace_id))
                    url = urllib.parse.urljoin(self.base, form["action"] or "/oauth/authorize")
                    check(form["method"] == "get", f"#choose-workspace should be a GET form, is {form['method']}")
                    response = await http.get(url, params=as_form(fields))
                elif "consent" in forms:
                    check(response.status_code == 200, f"the consent page answered {response.status_code}")
                    check(CLIENT_NAME in response.text, f"the consent page does not name the client {CLIENT_NAME!r}")
                    form = forms["consent"]
                    fields = [(name, value) for name, value in form["fields"] if name != "decision"]
                    check(dict(fields).get("csrf_token"), "the consent form has no csrf_token")
                    fields.append(("decision", "allow"))
                    response = await http.post(urllib.parse.urljoin(self.base, form["action"] or "/oauth/authorize"),
                                               data=as_form(fields))
                else:
                    raise CheckFailed(f"unexpected page on the way to consent: {response.request.method} "
                                      f"{response.request.url} answered {response.status_code}: {response.text[:500]}")
            raise CheckFailed(f"the authorization did not reach the redirect URI: {'; '.join(self.pages)}")

    async def callback_handler(self) -> AuthorizationCodeResult:
        check(self.result is not None, "the redirect handler did not obtain a code")
        return self.result


class MemoryStorage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


async def connect(base: str, workspace_id: str, redirect_uri: str, metadata_url: str | None) -> None:
    storage = MemoryStorage()
    person = HeadlessPerson(base, redirect_uri, workspace_id)
    provider = OAuthClientProvider(
        server_url=f"{base}/api/mcp",
        client_metadata=OAuthClientMetadata(
            client_name=CLIENT_NAME,
            redirect_uris=[redirect_uri],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=person.redirect_handler,
        callback_handler=person.callback_handler,
        client_metadata_url=metadata_url,
    )
    with anyio.fail_after(CONNECT_TIMEOUT):
        async with httpx2.AsyncClient(auth=provider, timeout=httpx2.Timeout(30.0)) as http:
            async with Client(streamable_http_client(f"{base}/api/mcp", http_client=http), read_timeout_seconds=30.0) as client:
                print(f"  connected: protocol {client.protocol_version}")
                listed = await client.list_tools()
                names = [tool.name for tool in listed.tools]
                print(f"  tools/list: {len(names)} tools")
                check("service_get_workspace" in names, f"service_get_workspace is not listed: {names}")
                check(all(name.startswith("service_") for name in names), f"a tool without the service_ prefix: {names}")
                result = await client.call_tool("service_get_workspace", {})
                check(not result.is_error, f"service_get_workspace failed: {result}")
                view = result.structured_content

    client_info, tokens = storage.client_info, storage.tokens
    check(client_info is not None and tokens is not None, "the SDK stored no client or no tokens")
    if metadata_url:
        check(client_info.client_id == metadata_url, f"the client ID is {client_info.client_id}, not the metadata document URL")
    else:
        check(client_info.client_id != metadata_url and client_info.client_id.startswith("cli_"),
              f"the registered client ID is {client_info.client_id!r}, expected cli_...")
    check(tokens.access_token.startswith("oat_"), "the access token is not an oat_ token")
    check(tokens.refresh_token and tokens.refresh_token.startswith("ort_"), "no ort_ refresh token")
    print(f"  client {client_info.client_id}; token scope {tokens.scope!r}, expires in {tokens.expires_in}s")

    check(view["workspace"]["id"] == workspace_id, f"the grant acts in {view['workspace']['id']}, not the chosen {workspace_id}")
    check(view["caller"]["email"] == OWNER_EMAIL, f"the grant acts as {view['caller']['email']}")
    check(view["caller"]["credential_id"].startswith("grt_"), f"the credential is {view['caller']['credential_id']}, not a grant")
    async with httpx2.AsyncClient(timeout=30.0) as http:
        response = await http.get(f"{base}/api/v1/workspace", headers={"Authorization": f"Bearer {tokens.access_token}"})
    check(response.status_code == 200, f"the access token on GET /api/v1/workspace: {response.status_code} {response.text}")
    check(response.json() == view, f"service_get_workspace differs from GET /api/v1/workspace:\n{view}\n{response.json()}")
    print(f"  service_get_workspace: workspace {view['workspace']['name']!r} as grant {view['caller']['credential_id']} "
          f"with scopes {view['caller']['scopes']}; equal to GET /api/v1/workspace with the same token")


def main() -> int:
    parser = argument_parser(__doc__, "server log, certificates")
    parser.add_argument("--counts", type=Path, help="write `passed failed` here for .ci/run")
    args = parser.parse_args()

    binary = executable(args.binary)
    if binary is None:
        return 2

    checks = Checks(f"MCP OAuth checks on {args.database}", args.counts)
    work = Path(tempfile.mkdtemp(prefix=f"outreach-mcp-oauth-{args.database}-"))
    # Never requested: the person's part stops at the 303 that points there.
    redirect_uri = f"http://127.0.0.1:{free_port()}/callback"
    with guarded(checks, CHECKS, work, args.keep) as guard:
        section(f"MCP OAuth on {args.database}: certificates, metadata document, fresh database, two workspaces, server")
        ca, cert, key = make_certificates(work)
        with MetadataDocumentServer(cert, key, redirect_uri) as document, \
                fresh_database(args.database, work, args.postgres_url) as database_url:
            first = admin(binary, database_url, "workspace", "create", "--name", "CI MCP OAuth",
                          "--owner-email", OWNER_EMAIL, "--owner-password", OWNER_PASSWORD)
            # A second workspace, so the person is asked which one the client may act in.
            admin(binary, database_url, "workspace", "create", "--name", "CI MCP OAuth (other)", "--owner-email", OWNER_EMAIL)
            workspace_id = first["workspace_id"]
            print(f"metadata document at {document.url}; owner {OWNER_EMAIL} of {workspace_id} and one more workspace")
            server = Server(binary, database_url, work / "server.log",
                            extra_args=["--cimd-allow-loopback", "--cimd-root-cert", str(ca)])
            guard.server = server
            with server:
                base = server.base_url
                checks.run("dynamic-registration", lambda: anyio.run(connect, base, workspace_id, redirect_uri, None))

                def with_document() -> None:
                    anyio.run(connect, base, workspace_id, redirect_uri, document.url)
                    check(document.fetches >= 1, "the server never fetched the client metadata document")
                    print(f"  the server fetched the metadata document {document.fetches} time(s)")

                checks.run("client-metadata-document", with_document)
                checks.no_internal_errors(server)
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
