// Operating a running server through the binary: the admin API behind its
// scope, the store commands through the control socket of a server that
// holds the store, a second HTTP server refused, rate limits and the audit
// log.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, writeFile, stat } from 'node:fs/promises';
import path from 'node:path';

import { dataDir, runBinary, startServer } from './harness.mjs';
import { startHttpServer, connectSession, request, rpcHeaders, initializeBody, STATEFUL } from './http-harness.mjs';

const ADMIN = 'admin-token-e2e-0123456789';
const USER = 'user-token-e2e-0123456789';

const admin = (srv, method, p, { token = ADMIN, body } = {}) =>
  request(srv.at(`/admin/v1/${p}`), { method, body, headers: token ? { Authorization: `Bearer ${token}` } : {} });

test('the admin API answers admins only, and operates a namespace', async (t) => {
  const dir = await dataDir(t);
  const srv = await startHttpServer(t, dir, [], { MEMGATE_TOKEN: USER, MEMGATE_ADMIN_TOKEN: ADMIN });
  assert.equal((await admin(srv, 'GET', 'namespaces', { token: '' })).status, 401);
  assert.equal((await admin(srv, 'GET', 'namespaces', { token: USER })).status, 403);
  const doc = await admin(srv, 'GET', 'openapi.json');
  assert.equal(doc.status, 200);
  assert.equal(JSON.parse(doc.text).openapi, '3.1.0');

  const lines = '{"memgate_export":1}\n{"id":"a","text":"first"}\n{"id":"b","text":"second"}\n';
  const imp = await admin(srv, 'POST', 'namespaces/team/import?on_conflict=fail', { body: lines });
  assert.equal(imp.status, 200, imp.text);
  assert.equal(JSON.parse(imp.text).imported, 2);
  const list = JSON.parse((await admin(srv, 'GET', 'namespaces')).text);
  assert.deepEqual(list.namespaces.map((n) => [n.namespace, n.count]), [['team', 2]]);
  const exp = await admin(srv, 'GET', 'namespaces/team/export');
  assert.equal(exp.text.trim().split('\n').length, 3);
  const backup = await admin(srv, 'GET', 'namespaces/team/backup');
  assert.equal(backup.status, 200);
  const erase = await admin(srv, 'DELETE', 'namespaces/team');
  assert.equal(erase.status, 200, erase.text);
  assert.equal(JSON.parse((await admin(srv, 'GET', 'namespaces/team')).text).count, 0);
  assert.ok(!srv.stderr().includes(ADMIN) && !srv.stderr().includes('first'));
});

test('store commands reach a store the server holds, and a second HTTP server refuses to start', async (t) => {
  const dir = await dataDir(t);
  const srv = await startHttpServer(t, dir, ['--trash-retention', '1h']);
  const { ok } = await connectSession(t, srv.url);
  await ok('remember', { id: 'kept', text: 'a memory the server holds' });

  const second = await runBinary(['serve', '--transport', 'http', '--bind', '127.0.0.1:0', '--data-dir', dir]);
  assert.equal(second.code, 2);
  assert.equal(second.stderr.trim().split('\n').length, 1);
  assert.match(second.stderr, /already serves this data folder over HTTP/);

  const stats = await runBinary(['stats', '--data-dir', dir]);
  assert.equal(stats.code, 0, stats.stderr);
  assert.equal(JSON.parse(stats.stdout).count, 1);
  const exp = await runBinary(['export', '--data-dir', dir]);
  assert.equal(exp.code, 0, exp.stderr);
  assert.match(exp.stdout, /a memory the server holds/);
  const file = path.join(dir, 'copy.db');
  const bk = await runBinary(['backup', '--data-dir', dir, file]);
  assert.equal(bk.code, 0, bk.stderr);
  assert.equal(JSON.parse(bk.stdout).bytes, (await stat(file)).size);
  const imp = await runBinary(['import', '--data-dir', dir, '-'], { input: '{"text":"imported while served"}\n' });
  assert.equal(imp.code, 0, imp.stderr);
  assert.equal(JSON.parse(imp.stdout).imported, 1);
  for (const args of [['candidates', 'list'], ['trash', 'list'], ['trash', 'purge']]) {
    const r = await runBinary([...args, '--data-dir', dir]);
    assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
  }
  const approve = await runBinary(['candidates', 'approve', '--data-dir', dir, 'none']);
  assert.equal(approve.code, 1);
  assert.match(approve.stderr, /not_found/);
  assert.equal((await ok('stats')).count, 2);
});

test('rate limits answer 429 past the burst, and the audit log records calls without content', async (t) => {
  const dir = await dataDir(t);
  const audit = path.join(dir, 'audit.jsonl');
  const srv = await startHttpServer(t, dir, ['--rate-limit', '0.01', '--rate-burst', '2', '--audit-log', audit],
    { MEMGATE_ADMIN_TOKEN: ADMIN });
  const codes = [];
  for (let i = 0; i < 3; i++) {
    const r = await request(srv.url, { method: 'POST', headers: rpcHeaders(), body: initializeBody(STATEFUL) });
    codes.push(r.status);
    if (i === 2) assert.ok(Number(r.headers['retry-after']) >= 1);
  }
  assert.deepEqual(codes, [200, 200, 429]);
  const a = await admin(srv, 'GET', 'namespaces/default');
  assert.equal(a.status, 200);
  await srv.stop();
  const lines = (await readFile(audit, 'utf8')).trim().split('\n').map((l) => JSON.parse(l));
  assert.ok(lines.some((l) => l.op === 'admin.stats' && l.code === 'ok' && l.subject === 'admin'));
  assert.ok(!(await readFile(audit, 'utf8')).includes(ADMIN));
});

test('store commands reach the stores editors\' stdio servers hold, each through its own server', async (t) => {
  const dir = await dataDir(t);
  const a = await startServer(t, dir, ['--namespace', 'proj-a', '--trash-retention', '1h']);
  const b = await startServer(t, dir, ['--namespace', 'proj-b']);
  await a.ok('remember', { id: 'a1', text: 'held by the first editor' });
  await b.ok('remember', { id: 'b1', text: 'held by the second editor' });
  const direct = await runBinary(['remember', '--data-dir', dir, '--namespace', 'proj-a', 'x']);
  assert.equal(direct.code, 1);
  assert.match(direct.stdout + direct.stderr, /store_locked/);
  for (const [ns, text] of [['proj-a', /held by the first editor/], ['proj-b', /held by the second editor/]]) {
    const exp = await runBinary(['export', '--data-dir', dir, '--namespace', ns]);
    assert.equal(exp.code, 0, exp.stderr);
    assert.match(exp.stdout, text);
    const stats = await runBinary(['stats', '--data-dir', dir, '--namespace', ns]);
    assert.equal(JSON.parse(stats.stdout).count, 1, stats.stderr);
  }
  const file = path.join(dir, 'a.db');
  const bk = await runBinary(['backup', '--data-dir', dir, '--namespace', 'proj-a', file]);
  assert.equal(bk.code, 0, bk.stderr);
  const imp = await runBinary(['import', '--data-dir', dir, '--namespace', 'proj-a', '-'], { input: '{"text":"imported while the editor runs"}\n' });
  assert.equal(JSON.parse(imp.stdout).imported, 1, imp.stderr);
  assert.equal((await a.ok('stats')).count, 2);
  assert.equal((await a.close()).code, 0);
  const after = await runBinary(['remember', '--data-dir', dir, '--namespace', 'proj-a', 'written directly once the editor is gone']);
  assert.equal(after.code, 0, after.stderr);
});

test('a stdio server audits its tool calls too, without their content', async (t) => {
  const dir = await dataDir(t);
  const audit = path.join(dir, 'audit.jsonl');
  const srv = await startServer(t, dir, ['--audit-log', audit]);
  await srv.ok('remember', { id: 'stdio-id-42', text: 'a stdio memory of pistachio' });
  await srv.fail('get', { id: 'absent-id-7' });
  assert.equal((await srv.close()).code, 0);
  const text = await readFile(audit, 'utf8');
  const lines = text.trim().split('\n').map((l) => JSON.parse(l));
  assert.deepEqual(lines.map((l) => [l.op, l.code, l.namespace]),
    [['tools/call remember', 'ok', 'default'], ['tools/call get', 'not_found', 'default']]);
  for (const secret of ['stdio-id-42', 'absent-id-7', 'pistachio']) assert.ok(!text.includes(secret), secret);
});
