// A memory's lifecycle through the binary: expiry and the sweeper,
// duplicates, provenance, quotas and the trash.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { dataDir, startServer, runBinary } from './harness.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

test('an expired memory is gone at once, and the sweeper deletes it', async (t) => {
  const dir = await dataDir(t);
  const s = await startServer(t, dir, ['--sweep-interval', '1s']);
  const short = await s.ok('remember', { text: 'the build cache is warm for an hour', ttl_seconds: 1, tags: ['tmp'] });
  assert.match(short.memory.expires_at, /^\d{4}-\d\d-\d\dT.*Z$/);
  const later = new Date(Date.now() + 3600e3).toISOString();
  const kept = await s.ok('remember', { text: 'the build cache lives in /var/cache', expires_at: later });
  assert.equal(Date.parse(kept.memory.expires_at), Date.parse(later));
  assert.equal((await s.ok('search', { query: 'build cache' })).hits.length, 2);

  const both = await s.fail('remember', { text: 'x', ttl_seconds: 5, expires_at: later });
  assert.equal(both.code, 'invalid_argument');
  assert.equal(both.details.field, 'ttl_seconds');
  const past = await s.fail('remember', { text: 'x', expires_at: '2020-01-01T00:00:00Z' });
  assert.equal(past.details.field, 'expires_at');
  assert.equal((await s.fail('remember', { text: 'x', ttl_seconds: 0 })).details.field, 'ttl_seconds');
  assert.equal((await s.fail('remember', { text: 'x', ttl_seconds: 315360001 })).details.field, 'ttl_seconds');
  await s.ok('remember', { text: 'ten years', ttl_seconds: 315360000 });

  await sleep(1100);
  assert.equal((await s.fail('get', { id: short.memory.id })).code, 'not_found');
  assert.deepEqual((await s.ok('search', { query: 'build cache' })).hits.map((h) => h.id), [kept.memory.id]);
  assert.equal((await s.ok('search', { tags: ['tmp'] })).hits.length, 0);
  assert.equal((await s.ok('stats')).count, 2);
  // The sweeper runs every second; give it two.
  await sleep(2100);
  assert.equal((await s.close()).code, 0);
  const exported = await runBinary(['export', '--data-dir', dir]);
  assert.equal(exported.code, 0);
  assert.ok(!exported.stdout.includes('warm for an hour'));
  assert.ok(exported.stdout.includes('"expires_at"'));
});

test('duplicates are answered with the live memory, unless allowed', async (t) => {
  const s = await startServer(t, await dataDir(t));
  const first = await s.ok('remember', { text: 'Deploys happen on Tuesdays.' });
  for (let i = 0; i < 3; i++) {
    const again = await s.ok('remember', { text: '  deploys   HAPPEN on tuesdays. ' });
    assert.equal(again.created, false);
    assert.equal(again.deduplicated, true);
    assert.equal(again.memory.id, first.memory.id);
  }
  const forced = await s.ok('remember', { text: 'Deploys happen on Tuesdays.', allow_duplicate: true });
  assert.equal(forced.created, true);
  assert.equal(forced.deduplicated, undefined);
  assert.equal((await s.ok('stats')).count, 2);
});

test('a source is kept and narrows a search', async (t) => {
  const s = await startServer(t, await dataDir(t));
  const source = { kind: 'url', reference: 'https://example.org/runbook', actor: 'ana', observed_at: '2026-11-30T10:00:00Z' };
  const r = await s.ok('remember', { text: 'the runbook says restart the worker', source });
  assert.deepEqual(r.memory.source, source);
  await s.ok('remember', { text: 'a chat said restart the worker', source: { kind: 'conversation', reference: 'thread 9', actor: 'bo' } });
  const hits = (await s.ok('search', { query: 'restart worker', source_kind: 'url' })).hits;
  assert.deepEqual(hits.map((h) => h.id), [r.memory.id]);
  assert.deepEqual(hits[0].source, source);
  const extra = await s.fail('remember', { text: 'x', source: { ...source, extra: 1 } });
  assert.equal(extra.code, 'invalid_argument');
  const long = await s.fail('remember', { text: 'x', source: { ...source, actor: 'a'.repeat(257) } });
  assert.equal(long.details.field, 'source.actor');
  await s.ok('remember', { text: 'at the bound', source: { ...source, actor: 'a'.repeat(256) } });
  const bad = await s.fail('search', { query: 'x', source_kind: 'URL' });
  assert.equal(bad.details.field, 'source_kind');
});

test('quotas refuse the write past them, and stats shows them', async (t) => {
  const s = await startServer(t, await dataDir(t), ['--max-memories', '2', '--max-namespace-bytes', '40']);
  await s.ok('remember', { id: 'a', text: 'twenty bytes of text' });
  await s.ok('remember', { id: 'b', text: 'ten bytes!' });
  const over = await s.fail('remember', { text: 'one more' });
  assert.equal(over.code, 'quota_exceeded');
  assert.deepEqual(over.details, { kind: 'memories', limit: 2 });
  const big = await s.fail('remember', { id: 'b', text: 'twenty one bytes!!!!!' });
  assert.deepEqual(big.details, { kind: 'bytes', limit: 40 });
  await s.ok('remember', { id: 'b', text: 'twenty bytes exactly' });
  const { limits } = await s.ok('stats');
  assert.equal(limits.max_memories, 2);
  assert.equal(limits.max_namespace_bytes, 40);
});

test('forget fills the trash, and memgate trash restores and purges', async (t) => {
  const dir = await dataDir(t);
  const flags = ['--trash-retention', '1h'];
  const s = await startServer(t, dir, flags);
  const m = await s.ok('remember', { id: 'oops', text: 'the deploy key lives in the vault', tags: ['ops'] });
  await s.ok('forget', { id: 'oops' });
  assert.equal((await s.fail('get', { id: 'oops' })).code, 'not_found');
  assert.equal((await s.close()).code, 0);

  const list = await runBinary(['trash', 'list', '--data-dir', dir]);
  assert.equal(list.code, 0, list.stderr);
  const page = JSON.parse(list.stdout);
  assert.equal(page.memories.length, 1);
  assert.equal(page.memories[0].memory.id, 'oops');
  assert.match(page.memories[0].deleted_at, /Z$/);

  const restored = await runBinary(['trash', 'restore', 'oops', '--data-dir', dir, ...flags]);
  assert.equal(restored.code, 0, restored.stderr);
  const back = JSON.parse(restored.stdout).memory;
  assert.equal(back.text, m.memory.text);
  assert.ok(back.version > m.memory.version);
  const again = await runBinary(['trash', 'restore', 'oops', '--data-dir', dir, ...flags]);
  assert.equal(again.code, 1);

  const s2 = await startServer(t, dir, flags);
  assert.equal((await s2.ok('get', { id: 'oops' })).memory.text, m.memory.text);
  await s2.ok('forget', { id: 'oops' });
  assert.equal((await s2.close()).code, 0);
  const purged = await runBinary(['trash', 'purge', '--data-dir', dir]);
  assert.equal(JSON.parse(purged.stdout).purged, 1);
});
