"""The official MCP Python SDK's stateless server with one tool, for the bench's `peers` phase.

Stateless with JSON responses (`stateless_http=True, json_response=True`), served by uvicorn in
one process, as the SDK runs it. The tool answers the JSON of a real `GET /api/v1/workspace` body
(argv[1]) as structuredContent (and the SDK's text block), as our `service_get_workspace` does.
Prints the bound address on the first line of stdout.
"""

import json
import socket
import sys
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer

with open(sys.argv[1], encoding="utf-8") as file:
    WORKSPACE = json.load(file)

server = MCPServer("peer-python", log_level="WARNING")


@server.tool(name="service_get_workspace", description="Show the workspace and the caller.")
def get_workspace() -> dict[str, Any]:
    return WORKSPACE


app = server.streamable_http_app(json_response=True, stateless_http=True)
sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
sock.bind(("127.0.0.1", 0))
host, port = sock.getsockname()
print(f"{host}:{port}", flush=True)
config = uvicorn.Config(app, log_level="warning", access_log=False)
uvicorn.Server(config).run(sockets=[sock])
