// Many calls in flight on one stdio session.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { dataDir, startServer } from './harness.mjs';

test('50 pipelined writes and 25 reads are all answered, and every write is there afterwards', async (t) => {
  const s = await startServer(t, await dataDir(t));
  const n = 50;
  const writes = Array.from({ length: n }, (_, i) => s.ok('remember', {
    id: `concurrent-${i}`, text: `memory number ${i} about parallel lanterns`, tags: ['batch'],
  }));
  const reads = Array.from({ length: 25 }, () => s.ok('stats'));
  const [written, read] = await Promise.all([Promise.all(writes), Promise.all(reads)]);
  assert.equal(written.length, n);
  assert.ok(written.every((w) => w.created === true));
  // Every write took its own version.
  assert.equal(new Set(written.map((w) => w.memory.version)).size, n);
  assert.ok(read.every((r) => r.count >= 0 && r.count <= n));

  const listed = await s.ok('list', { limit: 1000, tags: ['batch'] });
  assert.deepEqual(listed.memories.map((m) => m.id).sort(),
    Array.from({ length: n }, (_, i) => `concurrent-${i}`).sort());
  assert.equal((await s.ok('stats')).count, n);
  assert.equal((await s.ok('search', { query: 'lanterns', limit: 100 })).hits.length, n);

  // Compare-and-set under a race: of ten writers holding one version, one wins.
  const v = (await s.ok('get', { id: 'concurrent-0' })).memory.version;
  const race = await Promise.all(Array.from({ length: 10 }, (_, i) => s.client.callTool({
    name: 'remember', arguments: { id: 'concurrent-0', text: `racer ${i}`, if_version: v },
  })));
  assert.equal(race.filter((r) => !r.isError).length, 1);
  assert.ok(race.filter((r) => r.isError).every((r) => r.structuredContent.error.code === 'version_conflict'));
});
