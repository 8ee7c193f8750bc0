// The official MCP TypeScript SDK's stateless server with one tool, for the bench's `peers` phase.
// Stateless as the SDK documents it: a new server and transport per request, JSON responses, no
// sessions. The tool answers the bytes of a real `GET /api/v1/workspace` body (argv[2]) as
// structuredContent and as a text block, as our `service_get_workspace` does.
// Prints the bound address on the first line of stdout.
import { readFileSync } from "node:fs";
import http from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";

const workspace = JSON.parse(readFileSync(process.argv[2], "utf8"));
const text = JSON.stringify(workspace);

function server() {
  const mcp = new McpServer({ name: "peer-typescript", version: "1.0.0" });
  mcp.registerTool(
    "service_get_workspace",
    { description: "Show the workspace and the caller.", inputSchema: {} },
    async () => ({ content: [{ type: "text", text }], structuredContent: workspace }),
  );
  return mcp;
}

const listener = http.createServer(async (req, res) => {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  let body;
  try {
    body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    res.writeHead(400).end();
    return;
  }
  const mcp = server();
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: true,
  });
  res.on("close", () => {
    transport.close();
    mcp.close();
  });
  await mcp.connect(transport);
  await transport.handleRequest(req, res, body);
});
listener.keepAliveTimeout = 60_000;
listener.listen(0, "127.0.0.1", () => {
  const { address, port } = listener.address();
  console.log(`${address}:${port}`);
});
