// The binary over streamable HTTP: every protocol revision, many clients at
// once, restarts, and the gateway's guards (Host, Origin, body size, token).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { randomBytes } from 'node:crypto';

import { dataDir, runBinary, TOOLS, names } from './harness.mjs';
import {
  startHttpServer, connectSession, connectStateless, request, rpcHeaders,
  initializeBody, statelessBody, statelessHeaders, STATEFUL, STATELESS,
} from './http-harness.mjs';

/** A session id is 1 to 128 visible ASCII characters (0x21 to 0x7E). */
const SESSION_ID = /^[\x21-\x7E]{1,128}$/;

/** The JSON-RPC message of a response, whether sent as JSON or as one SSE event. */
function message(res) {
  if (res.json !== undefined) return res.json;
  const data = res.text.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).filter(Boolean);
  assert.ok(data.length > 0, `no JSON-RPC message in: ${res.status} ${res.text.slice(0, 200)}`);
  return JSON.parse(data[data.length - 1]);
}

test('over HTTP, a 2025-11-25 session initializes and every tool works', async (t) => {
  const srv = await startHttpServer(t, await dataDir(t));
  assert.match(srv.url, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
  const s = await connectSession(t, srv.url);
  assert.equal(s.transport.protocolVersion, STATEFUL);
  assert.match(s.transport.sessionId, SESSION_ID);
  assert.equal(s.client.getServerVersion().name, 'memgate');
  const caps = s.client.getServerCapabilities();
  assert.ok(caps.tools && caps.resources && caps.prompts, 'tools, resources and prompts capabilities');
  assert.deepEqual(names(s.tools), TOOLS);

  const r = await s.ok('remember', {
    id: 'pref-editor', text: '  Ana prefers Helix as her editor.\n', title: 'Editor',
    tags: ['ana', 'tools', 'ana'], metadata: { source: 'chat', weight: 2, pinned: true, none: null },
  });
  assert.equal(r.created, true);
  assert.equal(r.memory.text, '  Ana prefers Helix as her editor.\n', 'text round-trips byte for byte');
  assert.deepEqual(r.memory.tags, ['ana', 'tools']);
  const r2 = await s.ok('remember', { id: 'pref-editor', text: 'Ana prefers Helix, with Vim keys.', if_version: r.memory.version });
  assert.equal(r2.created, false);
  assert.ok(r2.memory.version > r.memory.version);
  const conflict = await s.fail('remember', { id: 'pref-editor', text: 'stale', if_version: r.memory.version });
  assert.equal(conflict.code, 'version_conflict');
  assert.equal(conflict.details.current_version, r2.memory.version);
  const made = await s.ok('remember', { text: 'Deploys happen on Tuesdays after the review.', tags: ['process'] });

  assert.equal((await s.ok('get', { id: 'pref-editor' })).memory.text, 'Ana prefers Helix, with Vim keys.');
  const found = await s.ok('search', { query: 'which editor does Ana prefer' });
  assert.equal(found.hits[0].id, 'pref-editor');
  assert.equal(found.receipt.retrieval_mode, 'lexical');
  assert.deepEqual((await s.ok('search', { tags: ['process'] })).hits.map((h) => h.id), [made.memory.id]);
  const listed = await s.ok('list', { order: 'created_asc' });
  assert.deepEqual(listed.memories.map((m) => m.id), ['pref-editor', made.memory.id]);
  const stats = await s.ok('stats');
  assert.equal(stats.count, 2);
  assert.equal(stats.namespace, 'default');
  const exp = await s.call('export');
  assert.ok(!exp.isError);
  assert.equal(exp.structuredContent.count, 2);
  assert.deepEqual(JSON.parse(exp.content[0].text.split('\n')[0]), { memgate_export: 1 });
  assert.deepEqual(await s.ok('forget', { id: 'pref-editor' }), { id: 'pref-editor', forgotten: true });
  assert.equal((await s.fail('get', { id: 'pref-editor' })).code, 'not_found');
  assert.equal((await s.fail('remember', { text: '' })).code, 'invalid_argument');

  // Resources and prompts go over the same session.
  const res = await s.client.readResource({ uri: `memgate://memory/${encodeURIComponent(made.memory.id)}` });
  assert.equal(res.contents[0].text, 'Deploys happen on Tuesdays after the review.');
  assert.ok((await s.client.listPrompts()).prompts.length > 0);

  assert.equal(srv.stdout(), `memgate listening on ${srv.url}\n`, 'stdout holds only the listening line');
});

test('raw initialize at 2025-03-26 and 2025-06-18 gets that revision and a session', async (t) => {
  const srv = await startHttpServer(t, await dataDir(t));
  const seen = new Set();
  for (const version of ['2025-03-26', '2025-06-18']) {
    const init = await request(srv.url, { method: 'POST', headers: rpcHeaders(), body: initializeBody(version) });
    assert.equal(init.status, 200, `${version}: ${init.text}`);
    const msg = message(init);
    assert.equal(msg.result.protocolVersion, version, `${version} is echoed`);
    assert.equal(msg.result.serverInfo.name, 'memgate');
    const sid = init.headers['mcp-session-id'];
    assert.match(sid ?? '', SESSION_ID, `${version}: a session id`);
    assert.ok(!seen.has(sid), 'each session has its own id');
    seen.add(sid);

    // 2025-03-26 has no MCP-Protocol-Version header; 2025-06-18 sends it.
    const h = version === '2025-03-26' ? { 'Mcp-Session-Id': sid } : { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': version };
    const note = await request(srv.url, { method: 'POST', headers: rpcHeaders(h),
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
    assert.equal(note.status, 202, `${version} initialized: ${note.text}`);
    const list = await request(srv.url, { method: 'POST', headers: rpcHeaders(h),
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }) });
    assert.equal(list.status, 200, list.text);
    assert.deepEqual(names(message(list).result.tools), TOOLS);
    const call = await request(srv.url, { method: 'POST', headers: rpcHeaders(h),
      body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/call',
        params: { name: 'remember', arguments: { id: `raw-${version}`, text: `written at ${version}` } } }) });
    assert.equal(call.status, 200, call.text);
    assert.equal(message(call).result.structuredContent.memory.id, `raw-${version}`);

    // Ending the session: its id is unknown afterwards (404).
    const del = await request(srv.url, { method: 'DELETE', headers: h });
    assert.ok(del.status >= 200 && del.status < 300, `DELETE: ${del.status}`);
    const after = await request(srv.url, { method: 'POST', headers: rpcHeaders(h),
      body: JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'tools/list' }) });
    assert.equal(after.status, 404, `a deleted session: ${after.status}`);
  }

  // An unknown revision gets one the server speaks; a request of a session
  // with an unsupported MCP-Protocol-Version header is a 400.
  const other = await request(srv.url, { method: 'POST', headers: rpcHeaders(), body: initializeBody('1999-01-01') });
  assert.equal(other.status, 200, other.text);
  assert.ok(['2025-11-25', '2025-06-18', '2025-03-26'].includes(message(other).result.protocolVersion));
  const sid = other.headers['mcp-session-id'];
  const bad = await request(srv.url, { method: 'POST',
    headers: rpcHeaders({ 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '1999-01-01' }),
    body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }) });
  assert.equal(bad.status, 400, `unsupported MCP-Protocol-Version: ${bad.status} ${bad.text}`);
});

test('a stateful request without a session id, other than initialize, is 400', async (t) => {
  const srv = await startHttpServer(t, await dataDir(t));
  for (const method of ['tools/list', 'tools/call']) {
    const r = await request(srv.url, { method: 'POST', headers: rpcHeaders({ 'MCP-Protocol-Version': STATEFUL }),
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: { name: 'stats', arguments: {} } }) });
    assert.equal(r.status, 400, `${method} without Mcp-Session-Id: ${r.status} ${r.text}`);
    assert.equal(r.headers['mcp-session-id'], undefined);
  }
});

test('2026-07-28: the SDK v2 client works without a session, and shares the store with sessions', async (t) => {
  const srv = await startHttpServer(t, await dataDir(t));
  const m = await connectStateless(t, srv.url);
  assert.equal(m.client.getNegotiatedProtocolVersion(), STATELESS);
  assert.equal(m.client.getProtocolEra(), 'modern');
  assert.equal(m.client.getServerVersion().name, 'memgate');
  assert.deepEqual(names(m.tools), TOOLS);

  const w = await m.ok('remember', { id: 'modern', text: 'written without a session', tags: ['era'] });
  assert.equal(w.created, true);
  assert.equal((await m.fail('get', { id: 'absent' })).code, 'not_found');

  // What one revision writes, the other reads.
  const s = await connectSession(t, srv.url);
  assert.deepEqual((await s.ok('get', { id: 'modern' })).memory, w.memory);
  const l = await s.ok('remember', { id: 'legacy', text: 'written in a session', tags: ['era'] });
  assert.deepEqual((await m.ok('get', { id: 'legacy' })).memory, l.memory);
  assert.deepEqual((await m.ok('search', { tags: ['era'] })).hits.map((h) => h.id).sort(), ['legacy', 'modern']);

  // Raw: no session id is issued, and there is no stream to GET or session to DELETE.
  const raw = await request(srv.url, { method: 'POST', headers: statelessHeaders('tools/call', 'get'),
    body: statelessBody('tools/call', { name: 'get', arguments: { id: 'modern' } }) });
  assert.equal(raw.status, 200, raw.text);
  assert.equal(raw.headers['mcp-session-id'], undefined, 'no session at 2026-07-28');
  assert.equal(message(raw).result.structuredContent.memory.text, 'written without a session');
  const list = await request(srv.url, { method: 'POST', headers: statelessHeaders('tools/list'), body: statelessBody('tools/list') });
  assert.equal(list.status, 200, list.text);
  assert.deepEqual(names(message(list).result.tools), TOOLS);
  for (const method of ['GET', 'DELETE']) {
    const r = await request(srv.url, { method, headers: { Accept: 'text/event-stream', 'MCP-Protocol-Version': STATELESS } });
    assert.equal(r.status, 405, `${method} at ${STATELESS}: ${r.status}`);
  }
});

test('60 concurrent writes and 30 concurrent reads from four clients: every acknowledged write is there', async (t) => {
  const srv = await startHttpServer(t, await dataDir(t));
  const clients = [
    await connectSession(t, srv.url), await connectSession(t, srv.url),
    await connectSession(t, srv.url), await connectStateless(t, srv.url),
  ];
  const n = 60;
  const writes = Array.from({ length: n }, (_, i) => clients[i % clients.length].ok('remember', {
    id: `concurrent-${i}`, text: `memory number ${i} about parallel lanterns`, tags: ['batch'],
  }));
  const reads = Array.from({ length: 30 }, (_, i) => {
    const c = clients[(i + 1) % clients.length];
    if (i % 3 === 0) return c.ok('stats');
    if (i % 3 === 1) return c.ok('search', { query: 'lanterns', limit: 100 });
    return c.ok('list', { limit: 100, tags: ['batch'] });
  });
  const [written, read] = await Promise.all([Promise.all(writes), Promise.all(reads)]);
  assert.ok(written.every((w) => w.created === true));
  assert.equal(new Set(written.map((w) => w.memory.version)).size, n, 'every write took its own version');
  assert.equal(read.length, 30);

  const fresh = await connectSession(t, srv.url);
  const listed = await fresh.ok('list', { limit: 1000, tags: ['batch'] });
  assert.deepEqual(listed.memories.map((m) => m.id).sort(), written.map((w) => w.memory.id).sort());
  assert.equal((await fresh.ok('stats')).count, n);
  assert.equal((await fresh.ok('search', { query: 'lanterns', limit: 100 })).hits.length, n);
});

test('compare-and-set across clients: of many writers holding one version, exactly one wins', async (t) => {
  const srv = await startHttpServer(t, await dataDir(t));
  const clients = [];
  for (let i = 0; i < 8; i++) {
    clients.push(i % 2 === 0 ? await connectSession(t, srv.url) : await connectStateless(t, srv.url));
  }
  const base = await clients[0].ok('remember', { id: 'contended', text: 'the original' });
  const v = base.memory.version;
  const race = await Promise.all(clients.map((c, i) => c.call('remember', { id: 'contended', text: `racer ${i}`, if_version: v })));
  const winners = race.filter((r) => !r.isError);
  assert.equal(winners.length, 1, 'exactly one winner');
  const won = winners[0].structuredContent.memory;
  for (const r of race.filter((x) => x.isError)) {
    assert.equal(r.structuredContent.error.code, 'version_conflict');
    assert.equal(r.structuredContent.error.details.current_version, won.version);
  }
  assert.deepEqual((await clients[3].ok('get', { id: 'contended' })).memory, won);

  // if_version 0 means "only if it does not exist": one creator.
  const create = await Promise.all(clients.map((c, i) => c.call('remember', { id: 'created-once', text: `creator ${i}`, if_version: 0 })));
  assert.equal(create.filter((r) => !r.isError).length, 1, 'exactly one creator');
  assert.ok(create.filter((r) => r.isError).every((r) => r.structuredContent.error.code === 'version_conflict'));
});

test('SIGTERM stops the server with status 0, open sessions and all; a restart finds every memory', async (t) => {
  const dir = await dataDir(t);
  const first = await startHttpServer(t, dir);
  const s = await connectSession(t, first.url);
  const m = await connectStateless(t, first.url);
  const a = (await s.ok('remember', { id: 'durable-session', text: 'written in a session before SIGTERM' })).memory;
  const b = (await m.ok('remember', { id: 'durable-stateless', text: 'written statelessly before SIGTERM' })).memory;
  // A raw SSE stream of another session stays open until the shutdown ends it.
  const init = await request(first.url, { method: 'POST', headers: rpcHeaders(), body: initializeBody(STATEFUL) });
  const sid = init.headers['mcp-session-id'];
  await request(first.url, { method: 'POST', headers: rpcHeaders({ 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': STATEFUL }),
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
  const stream = request(first.url, { headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': STATEFUL },
    timeoutMs: 20000 }).catch((err) => ({ error: err }));

  const started = Date.now();
  assert.deepEqual(await first.stop('SIGTERM'), { code: 0, signal: null });
  assert.ok(Date.now() - started < 8000, `stopped in ${Date.now() - started} ms`);
  await stream;

  const second = await startHttpServer(t, dir);
  const again = await connectSession(t, second.url);
  assert.deepEqual((await again.ok('get', { id: 'durable-session' })).memory, a);
  assert.deepEqual((await again.ok('get', { id: 'durable-stateless' })).memory, b);
  const next = await again.ok('remember', { text: 'written after the restart' });
  assert.ok(next.memory.version > Math.max(a.version, b.version), 'versions go on from where they were');
  assert.deepEqual(await second.stop('SIGINT'), { code: 0, signal: null });
});

test('SIGTERM under concurrent writes: status 0, and every acknowledged write is there after a restart', async (t) => {
  const dir = await dataDir(t);
  const first = await startHttpServer(t, dir);
  const acked = new Map();
  let next = 0;
  // Each writer goes on until the server stops answering (a refused
  // connection, a reset, or 503 while it shuts down), at most 500 writes.
  const writer = async (w) => {
    for (let i = 0; i < 500; i++) {
      const id = `w${w}-${next++}`;
      let r;
      try {
        r = await request(first.url, { method: 'POST', headers: statelessHeaders('tools/call', 'remember'),
          body: statelessBody('tools/call', { name: 'remember', arguments: { id, text: `text of ${id}` } }) });
      } catch {
        return;
      }
      if (r.status === 503) return;
      assert.equal(r.status, 200, `${id}: ${r.status} ${r.text}`);
      const result = message(r).result;
      assert.ok(!result.isError, `${id}: ${JSON.stringify(result.structuredContent)}`);
      acked.set(id, result.structuredContent.memory);
    }
  };
  const writers = Array.from({ length: 8 }, (_, w) => writer(w));
  await new Promise((r) => setTimeout(r, 300));
  const stopped = first.stop('SIGTERM');
  await Promise.all(writers);
  assert.deepEqual(await stopped, { code: 0, signal: null });
  assert.ok(acked.size > 0, 'some writes were acknowledged before the signal');

  const second = await startHttpServer(t, dir);
  const s = await connectSession(t, second.url);
  const all = [];
  let cursor;
  do {
    const page = await s.ok('list', { limit: 1000, ...(cursor ? { cursor } : {}) });
    all.push(...page.memories);
    cursor = page.next_cursor;
  } while (cursor);
  const byId = new Map(all.map((m) => [m.id, m]));
  for (const [id, m] of acked) {
    assert.deepEqual(byId.get(id), m, `acknowledged write ${id} is there, exactly`);
  }
});

test('a non-loopback bind needs --allow-remote and an auth mode', async (t) => {
  const dir = await dataDir(t);
  const open = await runBinary(['serve', '--transport', 'http', '--bind', '0.0.0.0:0', '--data-dir', dir]);
  assert.equal(open.code, 2);
  assert.match(open.stderr, /--bind/);
  assert.equal(open.stdout, '', 'it never listened');
  const noAuth = await runBinary(['serve', '--transport', 'http', '--bind', '0.0.0.0:0', '--allow-remote', '--data-dir', dir]);
  assert.equal(noAuth.code, 2);
  assert.match(noAuth.stderr, /auth/);
  assert.equal(noAuth.stdout, '');
});

test('Host must be loopback or allowed, and an Origin must be allowed: else 403', async (t) => {
  const srv = await startHttpServer(t, await dataDir(t),
    ['--allow-host', 'memgate.test', '--allow-origin', 'https://app.example.com']);
  const post = (headers) => request(srv.url, { method: 'POST', headers: rpcHeaders(headers), body: initializeBody(STATEFUL) });

  for (const host of ['evil.example.com', `evil.example.com:${srv.port}`, '127.0.0.1.nip.io', `localhost.evil:${srv.port}`]) {
    assert.equal((await post({ Host: host })).status, 403, `POST with Host ${host}`);
  }
  for (const method of ['GET', 'DELETE']) {
    const r = await request(srv.url, { method, headers: { Host: 'evil.example.com', Accept: 'text/event-stream', 'Mcp-Session-Id': 'x' } });
    assert.equal(r.status, 403, `${method} with a foreign Host`);
  }
  for (const host of [`localhost:${srv.port}`, `127.0.0.1:${srv.port}`, `[::1]:${srv.port}`, 'memgate.test', `memgate.test:${srv.port}`]) {
    assert.equal((await post({ Host: host })).status, 200, `POST with Host ${host}`);
  }

  for (const origin of ['http://evil.example.com', 'null', 'https://app.example.com.evil', 'http://app.example.com']) {
    assert.equal((await post({ Origin: origin })).status, 403, `Origin ${origin}`);
  }
  for (const origin of ['https://app.example.com', srv.origin]) {
    assert.equal((await post({ Origin: origin })).status, 200, `Origin ${origin}`);
  }
  // The stateless revision meets the same guards.
  const foreign = await request(srv.url, { method: 'POST',
    headers: { ...statelessHeaders('tools/list'), Host: 'evil.example.com' }, body: statelessBody('tools/list') });
  assert.equal(foreign.status, 403);
  const cross = await request(srv.url, { method: 'POST',
    headers: { ...statelessHeaders('tools/list'), Origin: 'http://evil.example.com' }, body: statelessBody('tools/list') });
  assert.equal(cross.status, 403);
});

test('a body over --max-request-bytes is 413; one at the limit is served', async (t) => {
  const limit = 4096;
  const srv = await startHttpServer(t, await dataDir(t), ['--max-request-bytes', String(limit)]);
  // A valid initialize padded with white space to exactly n bytes.
  const sized = (n) => {
    const body = initializeBody(STATEFUL);
    return body + ' '.repeat(n - Buffer.byteLength(body));
  };
  const at = await request(srv.url, { method: 'POST', headers: rpcHeaders(), body: sized(limit) });
  assert.equal(at.status, 200, `at the limit: ${at.status} ${at.text}`);
  const over = await request(srv.url, { method: 'POST', headers: rpcHeaders(), body: sized(limit + 1) });
  assert.equal(over.status, 413, 'one byte over, with Content-Length');
  const chunked = await request(srv.url, { method: 'POST', headers: rpcHeaders(), body: sized(4 * limit), chunked: true });
  assert.equal(chunked.status, 413, 'over, chunked without Content-Length');
  // A client that sends 2 MiB regardless may meet a reset instead of the
  // answer, once the server closes a connection it did not read; one that
  // waits for 100 Continue always reads the 413.
  const huge = await request(srv.url, { method: 'POST', headers: rpcHeaders(), body: sized(2 << 20), expectContinue: true });
  assert.equal(huge.status, 413, '2 MiB');
  const stateless = await request(srv.url, { method: 'POST', headers: statelessHeaders('tools/list'),
    body: statelessBody('tools/list') + ' '.repeat(limit) });
  assert.equal(stateless.status, 413, 'at 2026-07-28 too');
  // The server is still fine.
  const s = await connectSession(t, srv.url);
  await s.ok('stats');
});

test('a body sent too slowly is answered 408 within --request-timeout, and its connection is freed', async (t) => {
  const srv = await startHttpServer(t, await dataDir(t), ['--request-timeout', '1s', '--max-connections', '2']);
  // Two clients announce 100 bytes and send 10, holding both connection places.
  const slow = await Promise.all([0, 1].map(() => new Promise((resolve, reject) => {
    const sock = net.connect(srv.port, '127.0.0.1', () => {
      sock.write('POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
        'Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{"jsonrpc"');
      resolve(sock);
    });
    sock.on('error', reject);
  })));
  t.after(() => slow.forEach((sock) => sock.destroy()));
  const answers = slow.map((sock) => new Promise((resolve) => {
    let got = '';
    const timer = setTimeout(() => resolve({ got, closed: false }), 5000);
    sock.on('data', (c) => { got += c; });
    sock.on('close', () => { clearTimeout(timer); resolve({ got, closed: true }); });
    sock.on('error', () => {});
  }));
  for (const a of await Promise.all(answers)) {
    assert.match(a.got, /^HTTP\/1\.1 408 /, `the slow client is told: ${JSON.stringify(a.got.slice(0, 40))}`);
    assert.ok(a.closed, 'and its connection is closed');
  }
  // Their places are free again.
  assert.equal((await request(srv.at('/health'))).status, 200);
});

test('2026-07-28 subscriptions/listen streams count as streams, not as requests in progress', async (t) => {
  const srv = await startHttpServer(t, await dataDir(t),
    ['--max-inflight', '2', '--max-streams', '2', '--request-timeout', '2s']);
  const listen = () => request(srv.url, {
    method: 'POST', headers: statelessHeaders('subscriptions/listen'),
    body: statelessBody('subscriptions/listen', { notifications: { toolsListChanged: true } }), timeoutMs: 8000,
  }).then((r) => ({ ended: true, status: r.status }), () => ({ ended: true, status: 'error' }));
  const streams = [listen(), listen()];
  await new Promise((r) => setTimeout(r, 500));
  const list = await request(srv.url, { method: 'POST', headers: statelessHeaders('tools/list'), body: statelessBody('tools/list') });
  assert.equal(list.status, 200, `a request beside two open listen streams: ${list.status}`);
  // A third stream is past --max-streams.
  const third = await request(srv.url, { method: 'POST', headers: statelessHeaders('subscriptions/listen'),
    body: statelessBody('subscriptions/listen', { notifications: { toolsListChanged: true } }) });
  assert.equal(third.status, 503, `a third listen stream: ${third.status}`);
  assert.ok(third.headers['retry-after'], 'Retry-After');
  // Past --request-timeout the streams are still open.
  const late = await Promise.race([Promise.race(streams), new Promise((r) => setTimeout(() => r({ ended: false }), 3500))]);
  assert.deepEqual(late, { ended: false }, 'the listen streams outlive --request-timeout');
});

test('/health and /ready answer without a session', async (t) => {
  const srv = await startHttpServer(t, await dataDir(t));
  const health = await request(srv.at('/health'));
  assert.equal(health.status, 200);
  assert.equal(health.text.trim(), 'ok');
  const ready = await request(srv.at('/ready'));
  assert.equal(ready.status, 200, ready.text);
  assert.equal((await request(srv.at('/no-such-path'))).status, 404);
});

test('with MEMGATE_TOKEN, a missing or wrong bearer token is 401 with WWW-Authenticate', async (t) => {
  const token = randomBytes(24).toString('hex');
  const srv = await startHttpServer(t, await dataDir(t), ['--log', 'debug'], { MEMGATE_TOKEN: token });
  const post = (headers, url = srv.url) => request(url, { method: 'POST', headers: rpcHeaders(headers), body: initializeBody(STATEFUL) });

  const missing = await post({});
  assert.equal(missing.status, 401, `missing: ${missing.status}`);
  assert.match(missing.headers['www-authenticate'] ?? '', /^Bearer\b/, 'missing: WWW-Authenticate');
  assert.doesNotMatch(missing.headers['www-authenticate'], /error=/, 'no error code when no credential was sent');
  const refused = {
    wrong: { Authorization: `Bearer ${randomBytes(24).toString('hex')}` },
    'a prefix of the token': { Authorization: `Bearer ${token.slice(0, -1)}` },
    'the token with a suffix': { Authorization: `Bearer ${token}x` },
  };
  for (const [name, headers] of Object.entries(refused)) {
    const r = await post(headers);
    assert.equal(r.status, 401, `${name}: ${r.status}`);
    assert.match(r.headers['www-authenticate'] ?? '', /^Bearer\b.*error="invalid_token"/, `${name}: WWW-Authenticate`);
    assert.equal(r.headers['mcp-session-id'], undefined, `${name}: no session`);
  }
  for (const [name, headers] of Object.entries({
    'another scheme': { Authorization: `Basic ${Buffer.from(`user:${token}`).toString('base64')}` },
    'the token without a scheme': { Authorization: token },
  })) {
    const r = await post(headers);
    assert.equal(r.status, 401, `${name}: ${r.status}`);
    assert.match(r.headers['www-authenticate'] ?? '', /^Bearer\b/, `${name}: WWW-Authenticate`);
  }
  // A token in the query string is refused even beside the right header.
  const query = await post({ Authorization: `Bearer ${token}` }, `${srv.url}?access_token=${token}`);
  assert.ok(query.status === 400 || query.status === 401, `access_token in the query: ${query.status}`);
  assert.equal(query.headers['mcp-session-id'], undefined);

  const stateless = await request(srv.url, { method: 'POST', headers: statelessHeaders('tools/list'), body: statelessBody('tools/list') });
  assert.equal(stateless.status, 401, 'stateless without a token');
  assert.match(stateless.headers['www-authenticate'] ?? '', /^Bearer\b/);
  const get = await request(srv.url, { headers: { Accept: 'text/event-stream' } });
  assert.equal(get.status, 401, 'GET without a token');

  // The scheme is case-insensitive; the right token opens sessions of both
  // kinds; health needs none.
  assert.equal((await post({ Authorization: `bearer ${token}` })).status, 200, 'bearer in lower case');
  const auth = { Authorization: `Bearer ${token}` };
  const s = await connectSession(t, srv.url, auth);
  await s.ok('remember', { id: 'behind-a-token', text: 'only for the token holder' });
  const m = await connectStateless(t, srv.url, auth);
  assert.equal((await m.ok('get', { id: 'behind-a-token' })).memory.text, 'only for the token holder');
  assert.equal((await request(srv.at('/health'))).status, 200);

  assert.deepEqual(await srv.stop(), { code: 0, signal: null });
  assert.ok(!srv.stderr().includes(token), 'the token is never logged');
  assert.ok(!srv.stderr().includes('only for the token holder'), 'memory text is never logged');
});

test('--max-sessions refuses one session too many with 503; --session-idle ends idle sessions', async (t) => {
  const srv = await startHttpServer(t, await dataDir(t), ['--max-sessions', '2', '--session-idle', '1s']);
  const open = async () => request(srv.url, { method: 'POST', headers: rpcHeaders(), body: initializeBody(STATEFUL) });
  const a = await open();
  const b = await open();
  assert.equal(a.status, 200);
  assert.equal(b.status, 200);
  const c = await open();
  assert.equal(c.status, 503, `a third session: ${c.status} ${c.text}`);
  assert.ok(c.headers['retry-after'], 'Retry-After');
  // Stateless requests open no session, so the cap does not apply to them.
  const free = await request(srv.url, { method: 'POST', headers: statelessHeaders('tools/list'), body: statelessBody('tools/list') });
  assert.equal(free.status, 200);

  // Idle past --session-idle, both sessions end: their ids are unknown, and
  // there is room for new ones.
  await new Promise((r) => setTimeout(r, 2500));
  const stale = await request(srv.url, { method: 'POST',
    headers: rpcHeaders({ 'Mcp-Session-Id': a.headers['mcp-session-id'], 'MCP-Protocol-Version': STATEFUL }),
    body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }) });
  assert.equal(stale.status, 404, `an expired session: ${stale.status}`);
  assert.equal((await open()).status, 200);
});

test('--max-inflight and --max-streams answer 503 with Retry-After at once; nothing waits', async (t) => {
  const srv = await startHttpServer(t, await dataDir(t), ['--max-inflight', '1', '--max-streams', '1']);
  const started = Date.now();
  const results = await Promise.all(Array.from({ length: 100 }, (_, i) => request(srv.url, {
    method: 'POST', headers: statelessHeaders('tools/call', 'remember'),
    body: statelessBody('tools/call', { name: 'remember', arguments: { id: `n${i}`, text: `write ${i}` } }, i + 1),
  })));
  assert.ok(Date.now() - started < 10000, 'every request answered at once');
  const statuses = results.map((r) => r.status);
  assert.ok(statuses.every((st) => st === 200 || st === 503), `statuses: ${[...new Set(statuses)]}`);
  assert.ok(statuses.includes(503), 'one request at a time: the others are refused');
  assert.ok(results.filter((r) => r.status === 503).every((r) => r.headers['retry-after']), 'Retry-After');
  const written = results.filter((r) => r.status === 200).map((r) => message(r).result.structuredContent.memory.id);
  const s = await connectSession(t, srv.url);
  assert.equal((await s.ok('stats')).count, written.length, 'exactly the acknowledged writes are there');

  // One SSE stream: a second session's GET stream is refused.
  const open = async () => {
    const init = await request(srv.url, { method: 'POST', headers: rpcHeaders(), body: initializeBody(STATEFUL) });
    const sid = init.headers['mcp-session-id'];
    await request(srv.url, { method: 'POST', headers: rpcHeaders({ 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': STATEFUL }),
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
    return sid;
  };
  const get = (sid) => request(srv.url, { headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': STATEFUL },
    timeoutMs: 20000 }).catch(() => ({}));
  await s.client.close(); // the SDK client's own GET stream
  await new Promise((r) => setTimeout(r, 200));
  const first = get(await open());
  await new Promise((r) => setTimeout(r, 300));
  const second = await request(srv.url, { headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': await open(), 'MCP-Protocol-Version': STATEFUL } });
  assert.equal(second.status, 503, `a second stream: ${second.status}`);
  assert.ok(second.headers['retry-after'], 'Retry-After');
  await srv.stop();
  await first;
});
