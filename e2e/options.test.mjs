// What the flags of serve change, seen from the client.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { dataDir, startServer, rejectsWithCode, runBinary, TOOLS, names } from './harness.mjs';

test('--namespace-arg keeps namespaces apart', async (t) => {
  const s = await startServer(t, await dataDir(t), ['--namespace-arg']);
  for (const tool of s.tools) {
    assert.equal(tool.inputSchema.properties.namespace?.type, 'string', `${tool.name} takes a namespace`);
  }
  await s.ok('remember', { id: 'shared-id', text: 'alpha team secret sauce recipe', namespace: 'alpha' });
  await s.ok('remember', { id: 'shared-id', text: 'beta team notes', namespace: 'beta' });

  assert.equal((await s.ok('get', { id: 'shared-id', namespace: 'alpha' })).memory.text, 'alpha team secret sauce recipe');
  assert.equal((await s.ok('get', { id: 'shared-id', namespace: 'beta' })).memory.text, 'beta team notes');
  assert.equal((await s.fail('get', { id: 'shared-id' })).code, 'not_found', 'the default namespace has neither');
  assert.equal((await s.ok('search', { query: 'sauce', namespace: 'beta' })).hits.length, 0);
  assert.equal((await s.ok('search', { query: 'sauce', namespace: 'alpha' })).hits.length, 1);
  assert.equal((await s.ok('stats', { namespace: 'alpha' })).count, 1);
  assert.equal((await s.ok('stats', { namespace: 'alpha' })).namespace, 'alpha');

  const bad = await s.fail('get', { id: 'x', namespace: 'Not/Valid' });
  assert.equal(bad.code, 'invalid_argument');
  assert.equal(bad.details.field, 'namespace');

  const read = await s.client.readResource({ uri: 'memgate://namespace/alpha/memory/shared-id' });
  assert.equal(read.contents[0].text, 'alpha team secret sauce recipe');
});

test('--namespace picks the store; without --namespace-arg the argument is refused', async (t) => {
  const dir = await dataDir(t);
  const a = await startServer(t, dir, ['--namespace', 'project-a']);
  await a.ok('remember', { id: 'only-in-a', text: 'in project a' });
  assert.equal((await a.ok('stats')).namespace, 'project-a');
  assert.equal((await a.fail('get', { id: 'only-in-a', namespace: 'project-a' })).code, 'invalid_argument');
  const b = await startServer(t, dir, [], { MEMGATE_NAMESPACE: 'project-b' });
  assert.equal((await b.ok('stats')).namespace, 'project-b');
  assert.equal((await b.fail('get', { id: 'only-in-a' })).code, 'not_found');
});

test('--disable-tool hides a tool, and calling it is -32602', async (t) => {
  const s = await startServer(t, await dataDir(t), ['--disable-tool', 'forget', '--disable-tool', 'export']);
  assert.deepEqual(names(s.tools), TOOLS.filter((x) => x !== 'forget' && x !== 'export'));
  await rejectsWithCode(() => s.client.callTool({ name: 'forget', arguments: { id: 'x' } }), -32602);
  await rejectsWithCode(() => s.client.callTool({ name: 'export', arguments: {} }), -32602);
  await rejectsWithCode(() => s.client.callTool({ name: 'no-such-tool', arguments: {} }), -32602);
  await s.ok('remember', { text: 'the other tools still work' });
});

test('--write-mode read-only offers no remember and no forget, nor the prompt that needs remember', async (t) => {
  const dir = await dataDir(t);
  const w = await startServer(t, dir);
  await w.ok('remember', { id: 'ro', text: 'written while writable' });
  await w.close();
  const s = await startServer(t, dir, ['--write-mode', 'read-only']);
  assert.deepEqual(names(s.tools), ['export', 'get', 'list', 'search', 'stats']);
  await rejectsWithCode(() => s.client.callTool({ name: 'remember', arguments: { text: 'x' } }), -32602);
  assert.equal((await s.ok('get', { id: 'ro' })).memory.text, 'written while writable');
  assert.equal((await s.ok('stats')).write_mode, 'read-only');
  const { prompts } = await s.client.listPrompts();
  assert.ok(!prompts.some((p) => p.name === 'save-memory'));
});

test('--write-mode candidate: remember proposes, a person approves with memgate candidates', async (t) => {
  const dir = await dataDir(t);
  const s = await startServer(t, dir, ['--write-mode', 'candidate']);
  assert.deepEqual(names(s.tools), TOOLS.filter((x) => x !== 'forget'));
  const r = await s.ok('remember', { id: 'idea', text: 'Cache the parsed config between runs.', tags: ['proposal'] });
  assert.equal(r.candidate, true);
  assert.equal(r.memory.version, 0);
  assert.equal((await s.fail('get', { id: 'idea' })).code, 'not_found', 'a candidate is not a memory yet');
  assert.equal((await s.ok('search', { query: 'parsed config' })).hits.length, 0);
  assert.equal((await s.ok('stats')).write_mode, 'candidate');
  await rejectsWithCode(() => s.client.callTool({ name: 'forget', arguments: { id: 'idea' } }), -32602);
  await s.close();

  const listed = await runBinary(['candidates', 'list', '--data-dir', dir]);
  assert.equal(listed.code, 0, listed.stderr);
  assert.deepEqual(JSON.parse(listed.stdout).memories.map((m) => m.id), ['idea']);
  const approved = await runBinary(['candidates', 'approve', 'idea', '--data-dir', dir]);
  assert.equal(approved.code, 0, approved.stderr);

  const after = await startServer(t, dir, ['--write-mode', 'candidate']);
  assert.equal((await after.ok('get', { id: 'idea' })).memory.text, 'Cache the parsed config between runs.');
  assert.equal((await after.ok('search', { query: 'parsed config' })).hits[0].id, 'idea');
});

test('--max-memory-bytes moves the text limit', async (t) => {
  const s = await startServer(t, await dataDir(t), [], { MEMGATE_MAX_MEMORY_BYTES: '1000' });
  await s.ok('remember', { text: 'x'.repeat(1000) });
  const err = await s.fail('remember', { text: 'x'.repeat(1001) });
  assert.equal(err.code, 'too_large');
  assert.equal((await s.ok('stats')).limits.max_memory_bytes, 1000);
});

test('--allow-secrets turns the credential check off', async (t) => {
  const s = await startServer(t, await dataDir(t), ['--allow-secrets']);
  await s.ok('remember', { text: 'the key is AKIAIOSFODNN7EXAMPLE' });
});

test('logs at --log debug hold no memory text, query, id or title', async (t) => {
  const s = await startServer(t, await dataDir(t), ['--log', 'debug']);
  const text = 'xylophone-narwhal-4821 recorded the tide tables';
  const id = 'id-gooseberry-7314';
  const title = 'title-wombat-9051';
  const query = 'narwhal tide';
  await s.ok('remember', { id, text, title, tags: ['tag-kumquat-2211'], metadata: { k: 'meta-quince-5530' } });
  await s.ok('get', { id });
  await s.ok('search', { query });
  await s.ok('list', { tags: ['tag-kumquat-2211'] });
  await s.fail('remember', { id, text, if_version: 12345 });
  await s.fail('remember', { text: `AKIAIOSFODNN7EXAMPLE ${text}` });
  await s.client.readResource({ uri: `memgate://memory/${id}` });
  await s.client.getPrompt({ name: 'recall-context', arguments: { topic: 'topic-pangolin-6632' } });
  await s.ok('forget', { id });
  await s.fail('get', { id });
  await s.close();
  const logs = s.stderr();
  assert.ok((logs.match(/mcp call/g) ?? []).length >= 10, `too few log lines to judge:\n${logs}`);
  for (const secret of ['xylophone', 'narwhal', 'gooseberry', 'wombat', 'kumquat', 'quince', 'pangolin', 'AKIA', 'tide']) {
    assert.ok(!logs.includes(secret), `stderr holds ${secret}:\n${logs}`);
  }
});
