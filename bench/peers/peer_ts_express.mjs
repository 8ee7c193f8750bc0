// The official MCP TypeScript SDK's stateless server in the shape its documentation shows: the
// SDK's own Express app (`createMcpExpressApp`, which parses JSON and checks the Host header), a
// new server and transport per POST /mcp, JSON responses, no sessions. The tool answers the bytes
// of a real `GET /api/v1/workspace` body (argv[2]) as structuredContent and as a text block.
// `peer_ts.mjs` is the same server on node's bare `http`, without Express.
// Prints the bound address on the first line of stdout.
import { readFileSync } from "node:fs";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { createMcpExpressApp } from "@modelcontextprotocol/sdk/server/express.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";

const workspace = JSON.parse(readFileSync(process.argv[2], "utf8"));
const text = JSON.stringify(workspace);

function server() {
  const mcp = new McpServer({ name: "peer-typescript-express", version: "1.0.0" });
  mcp.registerTool(
    "service_get_workspace",
    { description: "Show the workspace and the caller.", inputSchema: {} },
    async () => ({ content: [{ type: "text", text }], structuredContent: workspace }),
  );
  return mcp;
}

const app = createMcpExpressApp();
app.post("/mcp", async (req, res) => {
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
  await transport.handleRequest(req, res, req.body);
});
const listener = app.listen(0, "127.0.0.1", () => {
  const { address, port } = listener.address();
  console.log(`${address}:${port}`);
});
listener.keepAliveTimeout = 60_000;
