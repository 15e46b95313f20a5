// A loopback reverse proxy for the conformance run: it adds
// `Authorization: Bearer $CONFORMANCE_BEARER` to every request and passes
// everything else through unchanged (Host and Origin included, so the
// gateway's DNS-rebinding guard sees what the suite sent), streaming both
// ways. The suite has no option to send a credential; this lets it run
// against a server with a token.
//
// Usage: CONFORMANCE_BEARER=TOKEN node auth-proxy.mjs http://127.0.0.1:PORT
// Prints "proxy listening on http://127.0.0.1:PORT" once bound.

import http from 'node:http';

const upstream = new URL(process.argv[2] ?? '');
const token = process.env.CONFORMANCE_BEARER ?? '';
if (upstream.hostname !== '127.0.0.1' || token === '') {
  console.error('usage: CONFORMANCE_BEARER=TOKEN node auth-proxy.mjs http://127.0.0.1:PORT');
  process.exit(2);
}

const agent = new http.Agent({ keepAlive: true });
const server = http.createServer((req, res) => {
  const headers = { ...req.headers, authorization: `Bearer ${token}` };
  const up = http.request({
    host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers, agent,
  }, (answer) => {
    res.writeHead(answer.statusCode, answer.headers);
    answer.pipe(res);
  });
  up.on('error', () => res.destroy());
  res.on('close', () => up.destroy());
  req.pipe(up);
});
server.listen(0, '127.0.0.1', () => {
  console.log(`proxy listening on http://127.0.0.1:${server.address().port}`);
});
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    server.close();
    server.closeAllConnections();
    agent.destroy();
    process.exit(0);
  });
}
