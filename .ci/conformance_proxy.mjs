// The MCP conformance suite's way in (used by .ci/mcp_ts_check.py): a reverse proxy that adds
// `Authorization: Bearer $MCP_TOKEN` to every request and forwards it as it came (method, path,
// headers with Host and Origin, a streamed body and a streamed answer) to $UPSTREAM
// (http://127.0.0.1:PORT). The conformance CLI (0.1.16, and 0.2.0-alpha.12) cannot send a header
// in server mode (modelcontextprotocol/conformance#453), and every call here needs a credential.
// Host and Origin pass unchanged so its DNS-rebinding scenario still reaches the server's check.
import http from 'node:http';

const upstream = new URL(process.env.UPSTREAM);
const token = process.env.MCP_TOKEN;
const listenPort = Number(process.env.PROXY_PORT || 0);

const server = http.createServer((req, res) => {
  const headers = { ...req.headers };
  if (!headers.authorization) headers.authorization = `Bearer ${token}`;
  const up = http.request(
    {
      hostname: upstream.hostname,
      port: upstream.port,
      method: req.method,
      path: req.url,
      headers, // Host/Origin passed through unchanged (dns-rebinding scenario)
    },
    (upRes) => {
      res.writeHead(upRes.statusCode, upRes.rawHeaders);
      upRes.pipe(res);
    },
  );
  up.on('error', (e) => {
    if (!res.headersSent) res.writeHead(502);
    res.end(String(e));
  });
  req.pipe(up);
  res.on('close', () => up.destroy());
});
server.listen(listenPort, '127.0.0.1', () => {
  console.log(`proxy listening on ${server.address().port} -> ${upstream.href}`);
});
