// Initialisation, tools/list, resources and prompts, as a host sees them.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { dataDir, startServer, rejectsWithCode, TOOLS, names } from './harness.mjs';

test('initialize announces memgate and its capabilities', async (t) => {
  const s = await startServer(t, await dataDir(t));
  const info = s.client.getServerVersion();
  assert.equal(info.name, 'memgate');
  assert.equal(typeof info.version, 'string');
  const caps = s.client.getServerCapabilities();
  assert.ok(caps.tools, 'tools capability');
  assert.ok(caps.resources, 'resources capability');
  assert.ok(caps.prompts, 'prompts capability');
  const instructions = s.client.getInstructions();
  assert.match(instructions, /search/);
  assert.match(instructions, /remember/);
});

test('tools/list has every tool with input and output schemas and annotations', async (t) => {
  const s = await startServer(t, await dataDir(t));
  assert.deepEqual(names(s.tools), TOOLS);
  for (const tool of s.tools) {
    assert.equal(tool.inputSchema.type, 'object', `${tool.name} input schema`);
    assert.equal(tool.inputSchema.additionalProperties, false, `${tool.name} refuses unknown arguments`);
    assert.ok(tool.outputSchema, `${tool.name} output schema`);
    assert.ok(tool.description.length > 20, `${tool.name} description`);
    assert.ok(tool.annotations, `${tool.name} annotations`);
    // No namespace argument unless --namespace-arg.
    assert.equal(tool.inputSchema.properties?.namespace, undefined, `${tool.name} namespace`);
  }
  const byName = Object.fromEntries(s.tools.map((x) => [x.name, x]));
  for (const reader of ['get', 'search', 'list', 'stats', 'export']) {
    assert.equal(byName[reader].annotations.readOnlyHint, true, `${reader} readOnlyHint`);
  }
  assert.notEqual(byName.remember.annotations.readOnlyHint, true);
  assert.equal(byName.forget.annotations.destructiveHint, true);
  assert.equal(byName.forget.annotations.idempotentHint, true);
  assert.deepEqual(byName.remember.inputSchema.required, ['text']);
  assert.equal(byName.remember.inputSchema.properties.text.type, 'string');
  assert.equal(byName.remember.inputSchema.properties.tags.maxItems, 32);
  assert.equal(byName.search.inputSchema.properties.limit.maximum, 100);
});

test('resources: a memory by URI, the listing, the templates and stats', async (t) => {
  const s = await startServer(t, await dataDir(t));
  const id = 'notes/2026 plan';
  await s.ok('remember', { id, text: '  Ship the CLI first.\n', title: 'Plan', tags: ['plan'] });

  // The id percent-encoded: every byte outside RFC 3986's unreserved set.
  const uri = `memgate://memory/${encodeURIComponent(id).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)}`;
  assert.equal(uri, 'memgate://memory/notes%2F2026%20plan');
  const read = await s.client.readResource({ uri });
  assert.equal(read.contents.length, 1);
  assert.equal(read.contents[0].mimeType, 'text/plain');
  assert.equal(read.contents[0].text, '  Ship the CLI first.\n', 'the text round-trips byte for byte');
  const meta = read.contents[0]._meta;
  assert.equal(meta.id, id);
  assert.equal(meta.title, 'Plan');
  assert.deepEqual(meta.tags, ['plan']);
  assert.equal(meta.bytes, 22);

  const list = await s.client.listResources();
  const uris = list.resources.map((r) => r.uri);
  assert.ok(uris.includes(uri), `listing holds ${uri}: ${uris}`);
  assert.ok(uris.includes('memgate://stats'), 'listing holds the stats resource');

  const stats = await s.client.readResource({ uri: 'memgate://stats' });
  assert.equal(JSON.parse(stats.contents[0].text).count, 1);

  const templates = await s.client.listResourceTemplates();
  assert.ok(templates.resourceTemplates.some((x) => x.uriTemplate === 'memgate://memory/{id}'));

  await rejectsWithCode(() => s.client.readResource({ uri: 'memgate://memory/absent' }), -32602);
  await rejectsWithCode(() => s.client.readResource({ uri: 'file:///etc/passwd' }), -32602);
});

test('prompts: recall-context, save-memory and review-memories', async (t) => {
  const s = await startServer(t, await dataDir(t));
  await s.ok('remember', { text: 'The staging database is rebuilt every night at 02:00.', tags: ['ops'] });
  const { prompts } = await s.client.listPrompts();
  assert.deepEqual(prompts.map((p) => p.name).sort(), ['recall-context', 'review-memories', 'save-memory']);

  const recall = await s.client.getPrompt({ name: 'recall-context', arguments: { topic: 'staging database' } });
  assert.ok(JSON.stringify(recall.messages).includes('rebuilt every night'), 'recall embeds the memory found');

  const save = await s.client.getPrompt({ name: 'save-memory', arguments: { content: 'Use pnpm in this repo.' } });
  assert.ok(JSON.stringify(save.messages).includes('remember'));

  const review = await s.client.getPrompt({ name: 'review-memories', arguments: { tag: 'ops' } });
  assert.ok(JSON.stringify(review.messages).includes('rebuilt every night'));

  await rejectsWithCode(() => s.client.getPrompt({ name: 'no-such-prompt', arguments: {} }), -32602);
  await rejectsWithCode(() => s.client.getPrompt({ name: 'recall-context', arguments: {} }), -32602);
});
