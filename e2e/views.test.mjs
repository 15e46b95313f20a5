// Views across namespaces (--include-namespace): search and get read the
// included namespaces too, writes stay on the call's own.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import path from 'node:path';

import { dataDir, startServer, runBinary } from './harness.mjs';
import { startHttpServer, connectSession } from './http-harness.mjs';

const NOTES = {
  proj: ['The build uses tabs in Go files and spaces in YAML', 'Deploy with the release script after review'],
  global: ['I prefer tabs over spaces everywhere', 'Review pull requests before lunch', 'tabs tabs tabs'],
};

test('a view ranks the included namespace with the primary, on the scale of one store', async (t) => {
  const dir = await dataDir(t);
  // Seed proj and global, and a union namespace holding the memories of both.
  const seed = await startServer(t, dir, ['--namespace-arg']);
  for (const [ns, texts] of Object.entries(NOTES)) {
    for (const [i, text] of texts.entries()) {
      const id = `${ns}-${i}`;
      await seed.ok('remember', { id, text, namespace: ns });
      await seed.ok('remember', { id, text, namespace: 'union' });
    }
  }
  await seed.ok('remember', { id: 'same', text: 'in the project', namespace: 'proj' });
  await seed.ok('remember', { id: 'same', text: 'in global', namespace: 'global' });
  await seed.ok('remember', { id: 'same-proj', text: 'in the project', namespace: 'union' });
  await seed.ok('remember', { id: 'same-global', text: 'in global', namespace: 'union' });
  await seed.close();

  const view = await startServer(t, dir, ['--namespace', 'proj', '--include-namespace', 'global',
    '--include-namespace', 'nowhere']);
  const union = await startServer(t, dir, ['--namespace', 'union']);
  for (const query of ['tabs spaces', 'review', 'release tabs']) {
    const got = await view.ok('search', { query, limit: 20 });
    const want = await union.ok('search', { query, limit: 20 });
    assert.deepEqual(got.receipt.namespaces, ['proj', 'global', 'nowhere']);
    assert.equal(want.receipt.namespaces, undefined, 'no view, no namespaces');
    // The same hits with the same scores (of equal scores, the view puts
    // the primary's first, one store the newer first).
    const unionID = (h) => (h.id === 'same' ? `same-${h.namespace}` : h.id);
    assert.deepEqual(got.hits.map(unionID).sort(), want.hits.map((h) => h.id).sort(), query);
    const wanted = Object.fromEntries(want.hits.map((h) => [h.id, h]));
    for (const [i, h] of got.hits.entries()) {
      const w = wanted[unionID(h)];
      assert.ok(Math.abs(h.lexical_score - w.lexical_score) < 1e-9, `${query}: ${h.id}`);
      assert.ok(Math.abs(h.score - w.score) < 1e-9);
      assert.ok(Math.abs(h.lexical_score - want.hits[i].lexical_score) < 1e-9, `${query}: rank ${i}`);
      assert.equal(h.namespace, h.id === 'same' ? h.namespace : h.id.split('-')[0]);
      assert.equal(w.namespace, undefined);
    }
  }
  // get: the primary first, then the included namespaces in order.
  assert.deepEqual((await view.ok('get', { id: 'same' })).memory.namespace, 'proj');
  assert.equal((await view.ok('get', { id: 'global-1' })).memory.namespace, 'global');
  assert.equal((await view.fail('get', { id: 'union-0' })).code, 'not_found');
  // Writes, list and export stay on the primary.
  const m = (await view.ok('remember', { id: 'new', text: 'a new project note' })).memory;
  assert.equal(m.namespace, 'proj');
  assert.equal((await view.fail('forget', { id: 'global-0' })).code, 'not_found');
  const list = await view.ok('list', {});
  assert.ok(list.memories.every((x) => x.namespace === 'proj'));
  assert.equal(list.memories.length, 4);
  // The prompt recalls through the view; a memory of global has its URI, which reads it.
  const prompt = await view.client.getPrompt({ name: 'recall-context', arguments: { topic: 'lunch' } });
  const res = prompt.messages[1].content.resource;
  assert.equal(res.uri, 'memgate://namespace/global/memory/global-1');
  assert.equal((await view.client.readResource({ uri: res.uri })).contents[0].text, NOTES.global[1]);
  await view.close();

  const got = await runBinary(['get', '--data-dir', dir, '--namespace', 'global', 'new']);
  assert.notEqual(got.code, 0, 'the view wrote to the included namespace');
  assert.ok(!existsSync(path.join(dir, 'stores', 'nowhere')), 'a read made a store');
  // The CLI's search takes the view too.
  const cli = await runBinary(['search', '--data-dir', dir, '--namespace', 'proj', '--include-namespace', 'global', 'lunch']);
  assert.equal(cli.code, 0, cli.stderr);
  assert.deepEqual(JSON.parse(cli.stdout).hits.map((h) => [h.namespace, h.id]), [['global', 'global-1']]);
});

test('under the token strategy a view leaves out what the token may not use', async (t) => {
  const dir = await dataDir(t);
  for (const ns of ['ana', 'bob', 'team', 'global']) {
    const r = await runBinary(['remember', '--data-dir', dir, '--namespace', ns, '--id', `${ns}-note`, `shared plan of ${ns}`]);
    assert.equal(r.code, 0, r.stderr);
  }
  const tokens = { ana: randomBytes(24).toString('hex'), bob: randomBytes(24).toString('hex') };
  const sha = (s) => createHash('sha256').update(s).digest('hex');
  const file = path.join(dir, 'tokens.jsonl');
  await writeFile(file, [
    JSON.stringify({ sha256: sha(tokens.ana), subject: 'ana', namespaces: ['ana', 'team'], namespace: 'ana' }),
    JSON.stringify({ sha256: sha(tokens.bob), subject: 'bob', namespace: 'bob' }),
  ].join('\n') + '\n');
  const s = await startHttpServer(t, dir, ['--tokens-file', file, '--namespace-strategy', 'token',
    '--include-namespace', 'team', '--include-namespace', 'global']);

  const ana = await connectSession(t, s.url, { Authorization: `Bearer ${tokens.ana}` });
  const found = await ana.ok('search', { query: 'shared plan' });
  assert.deepEqual(found.receipt.namespaces, ['ana', 'team']);
  assert.deepEqual(found.hits.map((h) => h.namespace).sort(), ['ana', 'team']);
  assert.equal((await ana.ok('get', { id: 'team-note' })).memory.namespace, 'team');
  assert.equal((await ana.fail('get', { id: 'global-note' })).code, 'not_found');

  const bob = await connectSession(t, s.url, { Authorization: `Bearer ${tokens.bob}` });
  const own = await bob.ok('search', { query: 'shared plan' });
  assert.deepEqual(own.receipt.namespaces, ['bob']);
  assert.deepEqual(own.hits.map((h) => h.id), ['bob-note']);
  assert.equal((await bob.fail('get', { id: 'team-note' })).code, 'not_found');
});
