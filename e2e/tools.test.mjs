// Every tool end to end, strict validation at the limit and one past it,
// and the error envelope as the TypeScript client checks it.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { dataDir, startServer } from './harness.mjs';

test('every tool works end to end', async (t) => {
  const s = await startServer(t, await dataDir(t));

  const r = await s.ok('remember', {
    id: 'pref-editor', text: 'Ana prefers Helix as her editor.', title: 'Editor',
    tags: ['ana', 'tools', 'ana'], metadata: { source: 'chat', weight: 2, pinned: true, none: null },
  });
  assert.equal(r.created, true);
  const m = r.memory;
  assert.equal(m.id, 'pref-editor');
  assert.equal(m.bytes, Buffer.byteLength('Ana prefers Helix as her editor.'));
  assert.deepEqual(m.tags, ['ana', 'tools'], 'duplicate tags dropped, order kept');
  assert.deepEqual(m.metadata, { source: 'chat', weight: 2, pinned: true, none: null });
  assert.match(m.created_at, /^\d{4}-\d\d-\d\dT.*Z$/);
  assert.ok(m.version >= 1);

  // A replace keeps created_at and changes the version.
  const r2 = await s.ok('remember', { id: 'pref-editor', text: 'Ana prefers Helix, with Vim keys.', if_version: m.version });
  assert.equal(r2.created, false);
  assert.equal(r2.memory.created_at, m.created_at);
  assert.ok(r2.memory.version > m.version);
  const conflict = await s.fail('remember', { id: 'pref-editor', text: 'stale write', if_version: m.version });
  assert.equal(conflict.code, 'version_conflict');

  // A server-made id is a UUIDv7.
  const made = await s.ok('remember', { text: 'Deploys happen on Tuesdays after the review.', tags: ['process'] });
  assert.match(made.memory.id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);

  const got = await s.ok('get', { id: 'pref-editor' });
  assert.equal(got.memory.text, 'Ana prefers Helix, with Vim keys.');

  const found = await s.ok('search', { query: 'which editor does Ana prefer' });
  assert.equal(found.hits[0].id, 'pref-editor');
  assert.equal(found.hits[0].score, 1);
  assert.equal(typeof found.hits[0].lexical_score, 'number');
  assert.equal(found.receipt.retrieval_mode, 'lexical');
  const byTag = await s.ok('search', { tags: ['process'] });
  assert.deepEqual(byTag.hits.map((h) => h.id), [made.memory.id]);

  const page1 = await s.ok('list', { limit: 1 });
  assert.equal(page1.memories.length, 1);
  assert.equal(page1.memories[0].id, made.memory.id, 'updated_desc: the latest write first');
  const page2 = await s.ok('list', { limit: 1, cursor: page1.next_cursor });
  assert.equal(page2.memories[0].id, 'pref-editor');
  assert.equal(page2.next_cursor, undefined);

  const stats = await s.ok('stats');
  assert.equal(stats.namespace, 'default');
  assert.equal(stats.count, 2);
  assert.equal(stats.recall, 'lexical (BM25) with metadata filters');
  assert.equal(stats.write_mode, 'full');
  assert.equal(stats.limits.max_memory_bytes, 65536);
  assert.ok(stats.store_bytes > 0);

  const exp = await s.client.callTool({ name: 'export', arguments: {} });
  assert.ok(!exp.isError);
  assert.equal(exp.structuredContent.count, 2);
  const lines = exp.content[0].text.trim().split('\n').map((l) => JSON.parse(l));
  assert.deepEqual(lines[0], { memgate_export: 1 });
  assert.deepEqual(lines.slice(1).map((l) => l.id).sort(), ['pref-editor', made.memory.id].sort());

  const gone = await s.ok('forget', { id: 'pref-editor' });
  assert.deepEqual(gone, { id: 'pref-editor', forgotten: true });
  const nf = await s.fail('get', { id: 'pref-editor' });
  assert.equal(nf.code, 'not_found');
  assert.equal((await s.fail('forget', { id: 'pref-editor' })).code, 'not_found');
  assert.equal((await s.ok('search', { query: 'Helix' })).hits.length, 0, 'search never sees a forgotten memory');
});

test('validation: the limit passes and the limit plus one fails', async (t) => {
  const s = await startServer(t, await dataDir(t));
  const tags = (n) => Array.from({ length: n }, (_, i) => `tag-${i}`);
  const cases = [
    ['text of 65536 bytes', 'remember', { text: 'a'.repeat(65536) }, { text: 'a'.repeat(65537) }, 'too_large', 'text'],
    ['text of 65536 bytes in multi-byte characters', 'remember',
      { text: 'é'.repeat(32768) }, { text: `${'é'.repeat(32768)}x` }, 'too_large', 'text'],
    ['32 tags', 'remember', { text: 't', tags: tags(32) }, { text: 't', tags: tags(33) }, 'invalid_argument', 'tags'],
    ['a tag of 64 characters', 'remember', { text: 't', tags: ['x'.repeat(64)] }, { text: 't', tags: ['x'.repeat(65)] },
      'invalid_argument', 'tags'],
    ['an id of 256 bytes', 'remember', { text: 't', id: 'i'.repeat(256) }, { text: 't', id: 'i'.repeat(257) },
      'invalid_argument', 'id'],
    ['a title of 256 characters', 'remember', { text: 't', title: 'T'.repeat(256) }, { text: 't', title: 'T'.repeat(257) },
      'invalid_argument', 'title'],
    ['32 metadata keys', 'remember',
      { text: 't', metadata: Object.fromEntries(tags(32).map((k) => [k.replace('-', '_'), 1])) },
      { text: 't', metadata: Object.fromEntries(tags(33).map((k) => [k.replace('-', '_'), 1])) },
      'invalid_argument', 'metadata'],
    ['search limit 100', 'search', { query: 'a', limit: 100 }, { query: 'a', limit: 101 }, 'invalid_argument', 'limit'],
    ['search limit 1', 'search', { query: 'a', limit: 1 }, { query: 'a', limit: 0 }, 'invalid_argument', 'limit'],
    ['search budget 100000', 'search', { query: 'a', budget: 100000 }, { query: 'a', budget: 100001 },
      'invalid_argument', 'budget'],
    ['list limit 1000', 'list', { limit: 1000 }, { limit: 1001 }, 'invalid_argument', 'limit'],
    ['export limit 1000', 'export', { limit: 1000 }, { limit: 1001 }, 'invalid_argument', 'limit'],
  ];
  for (const [name, tool, atLimit, overLimit, code, field] of cases) {
    await t.test(name, async () => {
      await s.ok(tool, atLimit);
      const err = await s.fail(tool, overLimit);
      assert.equal(err.code, code);
      assert.equal(err.details?.field, field);
    });
  }
});

test('bad arguments are tool errors naming the field', async (t) => {
  const s = await startServer(t, await dataDir(t));
  const cases = [
    ['an unknown argument', 'get', { id: 'x', colour: 'red' }, 'colour'],
    ['a wrong type', 'get', { id: 7 }, 'id'],
    ['a missing argument', 'get', {}, 'id'],
    ['empty text', 'remember', { text: '   ' }, 'text'],
    ['a nested metadata value', 'remember', { text: 't', metadata: { a: { b: 1 } } }, 'metadata'],
    ['a tag with a space', 'remember', { text: 't', tags: ['two words'] }, 'tags'],
    ['an unknown order', 'list', { order: 'sideways' }, 'order'],
    ['a search with nothing to look for', 'search', {}, 'query'],
    ['a fractional limit', 'search', { query: 'a', limit: 1.5 }, 'limit'],
  ];
  for (const [name, tool, args, field] of cases) {
    await t.test(name, async () => {
      const err = await s.fail(tool, args);
      assert.equal(err.code, 'invalid_argument');
      assert.equal(err.details.field, field);
    });
  }
  // allow_empty lets white space through, byte for byte.
  const blank = await s.ok('remember', { text: ' \n\t ', allow_empty: true });
  assert.equal(blank.memory.text, ' \n\t ');
});

test('the error envelope passes the client\'s output-schema validation for every tool', async (t) => {
  const s = await startServer(t, await dataDir(t));
  // callTool validates structuredContent against each tool's output schema,
  // error results included: none of these may throw.
  const failures = {
    remember: { text: '' },
    get: { id: 'absent' },
    search: { limit: 0 },
    list: { limit: 0 },
    forget: { id: 'absent' },
    stats: { extra: true },
    export: { cursor: 'not-a-cursor' },
  };
  for (const [tool, args] of Object.entries(failures)) {
    const res = await s.client.callTool({ name: tool, arguments: args });
    assert.equal(res.isError, true, tool);
    assert.deepEqual(Object.keys(res.structuredContent.error).filter((k) => !['code', 'message', 'details'].includes(k)), []);
  }
});

test('secrets are refused without echoing them', async (t) => {
  const s = await startServer(t, await dataDir(t));
  const key = 'AKIAIOSFODNN7EXAMPLE';
  const err = await s.fail('remember', { text: `the deploy key is ${key}` });
  assert.equal(err.code, 'secret_detected');
  assert.ok(!JSON.stringify(err).includes(key));
  await s.ok('remember', { text: 'the deploy key is in ${DEPLOY_KEY}' });
});
