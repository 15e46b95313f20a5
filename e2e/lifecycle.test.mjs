// The process: clean exits, restarts, and one writer per store.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { dataDir, startServer, runBinary } from './harness.mjs';

test('the end of stdin is a clean exit, and memories survive a restart', async (t) => {
  const dir = await dataDir(t);
  const first = await startServer(t, dir);
  const { memory } = (await first.ok('remember', { id: 'durable', text: 'written before the restart', tags: ['keep'] }));
  assert.deepEqual(await first.close(), { code: 0, signal: null });
  assert.equal(first.stderr(), '', 'nothing on stderr at the default level');

  const second = await startServer(t, dir);
  const got = await second.ok('get', { id: 'durable' });
  assert.deepEqual(got.memory, memory);
  assert.equal((await second.ok('search', { query: 'restart' })).hits[0].id, 'durable');
  // Versions go on from where they were.
  const next = await second.ok('remember', { text: 'written after the restart' });
  assert.ok(next.memory.version > memory.version);
});

test('SIGTERM and SIGINT stop the server with status 0, its writes flushed', async (t) => {
  const dir = await dataDir(t);
  for (const signal of ['SIGTERM', 'SIGINT']) {
    const s = await startServer(t, dir);
    await s.ok('remember', { id: `before-${signal}`, text: `written before ${signal}` });
    s.child.kill(signal);
    assert.deepEqual(await s.exit(), { code: 0, signal: null }, signal);
  }
  const s = await startServer(t, dir);
  await s.ok('get', { id: 'before-SIGTERM' });
  await s.ok('get', { id: 'before-SIGINT' });
});

test('a second serve on the same store fails at once with store_locked', async (t) => {
  const dir = await dataDir(t);
  const first = await startServer(t, dir);
  await first.ok('remember', { text: 'the first server holds this store' });

  const started = Date.now();
  const second = await runBinary(['serve', '--data-dir', dir]);
  assert.notEqual(second.code, 0);
  const lines = second.stderr.trimEnd().split('\n');
  assert.equal(lines.length, 1, `one line on stderr: ${JSON.stringify(second.stderr)}`);
  assert.match(lines[0], /store_locked/);
  assert.equal(second.stdout, '', 'nothing on stdout');
  assert.ok(Date.now() - started < 5000, 'it fails at once');

  // A write from the command line meets the same lock (a store command
  // goes through the server's control socket); another namespace is free.
  const cli = await runBinary(['remember', '--data-dir', dir, 'a second writer']);
  assert.equal(cli.code, 1);
  assert.match(cli.stderr, /^memgate: store_locked: /);
  const held = await runBinary(['stats', '--data-dir', dir]);
  assert.equal(JSON.parse(held.stdout).count, 1, held.stderr);
  const other = await runBinary(['stats', '--data-dir', dir, '--namespace', 'other']);
  assert.equal(other.code, 0, other.stderr);

  // The first server is unaffected, and once it has gone the store is free.
  await first.ok('stats');
  await first.close();
  const after = await runBinary(['stats', '--data-dir', dir]);
  assert.equal(after.code, 0, after.stderr);
  assert.equal(JSON.parse(after.stdout).count, 1);
});

test('serve refuses a configuration it cannot run, naming each flag, with status 2', async (t) => {
  const dir = await dataDir(t);
  const r = await runBinary(['serve', '--data-dir', dir, '--transport', 'pigeon', '--namespace-strategy', 'token',
    '--max-stores', '0']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--transport: must be stdio or http/);
  assert.match(r.stderr, /--namespace-strategy: token/);
  assert.match(r.stderr, /--max-stores: must be at least 1/);
  assert.equal(r.stderr.trimEnd().split('\n').length, 3, 'one line per problem');
  assert.equal(r.stdout, '');
});

test('invoke, verify and version work from the built binary', async (t) => {
  const dir = await dataDir(t);
  const ok = await runBinary(['invoke', 'remember', '--data-dir', dir], { input: '{"id":"cli","text":"from invoke"}' });
  assert.equal(ok.code, 0, ok.stderr);
  assert.equal(JSON.parse(ok.stdout).memory.text, 'from invoke');
  const bad = await runBinary(['invoke', '--data-dir', dir, 'get'], { input: '{"id":"absent"}' });
  assert.equal(bad.code, 1);
  assert.equal(JSON.parse(bad.stdout).error.code, 'not_found');
  assert.equal(bad.stderr, 'memgate: not_found: no memory has this id\n');

  const verify = await runBinary(['verify']);
  assert.equal(verify.code, 0, verify.stderr);
  assert.match(verify.stdout, /^memgate verify: ok \(7 tools, \d+ms\)\n$/);
  const version = await runBinary(['version']);
  assert.equal(version.code, 0);
  assert.match(version.stdout, /^memgate \S+/);
});
