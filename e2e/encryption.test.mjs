// Encryption at rest through the binary: no content in any file of the data
// folder, the passphrase in no output, the refusals, rekey and backup.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';

import { dataDir, startServer, runBinary } from './harness.mjs';

const PASSPHRASE = 'e2e-Passphrase-Kept-Out-Of-Output';
const NEW_PASSPHRASE = 'e2e-New-Passphrase-Also-Kept-Out';
const WORD = 'Xylophonicity';

/** Every file under dir, recursively. */
async function files(dir) {
  const out = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...(await files(p)));
    else out.push(p);
  }
  return out;
}

/** The files under dir whose bytes hold any of words, case-insensitively. */
async function filesHolding(dir, words) {
  const hits = [];
  for (const f of await files(dir)) {
    const text = (await readFile(f)).toString('latin1').toLowerCase();
    for (const w of words) {
      if (text.includes(w.toLowerCase())) hits.push(`${path.basename(f)}: ${w}`);
    }
  }
  return hits;
}

/** Fails if the passphrases are anywhere in what a process printed. */
function noPassphrase(...outputs) {
  for (const o of outputs) {
    assert.ok(!o.includes(PASSPHRASE) && !o.includes(NEW_PASSPHRASE), `a passphrase was printed: ${o}`);
  }
}

const env = { MEMGATE_PASSPHRASE: PASSPHRASE, MEMGATE_LOG: 'debug' };

test('an encrypted store holds no content in any file, and the passphrase is in no output', async (t) => {
  const dir = await dataDir(t);
  const s = await startServer(t, dir, ['--encrypt'], env);
  for (let i = 0; i < 30; i++) {
    await s.ok('remember', {
      id: `${WORD}-${i}`,
      title: `${WORD} title`,
      text: `The ${WORD} of ${WORD}s, note ${i}`,
      tags: [WORD.toLowerCase()],
      metadata: { [WORD]: `${WORD} value` },
    });
  }
  for (let i = 0; i < 30; i += 3) await s.ok('forget', { id: `${WORD}-${i}` });
  for (let i = 1; i < 30; i += 3) await s.ok('remember', { id: `${WORD}-${i}`, text: `replaced ${WORD}ed text` });
  const found = await s.ok('search', {
    query: WORD.toLowerCase(), tags: [WORD.toLowerCase()], filter: { [WORD]: `${WORD} value` }, limit: 50,
  });
  assert.equal(found.hits.length, 10, 'the memories neither forgotten nor replaced');
  assert.deepEqual(await s.close(), { code: 0, signal: null });
  noPassphrase(s.stderr());

  const backup = path.join(dir, 'copy.db');
  const b = await runBinary(['backup', '--data-dir', dir, '--encrypt', backup], { env });
  assert.equal(b.code, 0, b.stderr);
  noPassphrase(b.stdout, b.stderr);

  // "xylophon" is the stem the index would hold.
  assert.deepEqual(await filesHolding(dir, [WORD, 'xylophon']), []);

  // With the passphrase, the CLI reads it all back, export in plaintext.
  const exp = await runBinary(['export', '--data-dir', dir, '--encrypt'], { env });
  assert.equal(exp.code, 0, exp.stderr);
  assert.ok(exp.stdout.includes(`replaced ${WORD}ed text`));
  noPassphrase(exp.stdout, exp.stderr);
});

test('encryption refuses to start without the passphrase, with a wrong one, or in the other mode', async (t) => {
  const dir = await dataDir(t);
  const plain = await dataDir(t);
  assert.equal((await runBinary(['remember', '--data-dir', dir, '--encrypt', 'kept secret'], { env })).code, 0);
  assert.equal((await runBinary(['remember', '--data-dir', plain, 'kept plain'])).code, 0);

  const cases = [
    [['serve', '--data-dir', dir, '--encrypt'], {}, 2, /MEMGATE_PASSPHRASE is unset or empty/],
    [['serve', '--data-dir', dir, '--encrypt'], { MEMGATE_PASSPHRASE: 'not the passphrase' }, 1, /the passphrase does not open this store/],
    [['serve', '--data-dir', dir], env, 1, /the store is encrypted/],
    [['serve', '--data-dir', plain, '--encrypt'], env, 1, /the store is not encrypted/],
  ];
  for (const [args, e, code, message] of cases) {
    const r = await runBinary(args, { env: e });
    assert.equal(r.code, code, `${args.join(' ')}: ${r.stderr}`);
    const lines = r.stderr.trimEnd().split('\n');
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0], message);
    assert.ok(!r.stderr.includes('not the passphrase'), 'the wrong passphrase is not echoed');
    noPassphrase(r.stdout, r.stderr);
  }
});

test('rekey moves every store to the new passphrase', async (t) => {
  const dir = await dataDir(t);
  for (const ns of ['one', 'two']) {
    const r = await runBinary(['remember', '--data-dir', dir, '--encrypt', '--namespace', ns, '--id', 'k', `${WORD} in ${ns}`], { env });
    assert.equal(r.code, 0, r.stderr);
  }
  const r = await runBinary(['rekey', '--data-dir', dir], { env: { ...env, MEMGATE_NEW_PASSPHRASE: NEW_PASSPHRASE } });
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), { rekeyed: 2, unchanged: 0 });
  noPassphrase(r.stdout, r.stderr);

  for (const ns of ['one', 'two']) {
    const now = await runBinary(['get', 'k', '--data-dir', dir, '--encrypt', '--namespace', ns], { env: { MEMGATE_PASSPHRASE: NEW_PASSPHRASE } });
    assert.equal(now.code, 0, now.stderr);
    assert.equal(JSON.parse(now.stdout).memory.text, `${WORD} in ${ns}`);
    const before = await runBinary(['get', 'k', '--data-dir', dir, '--encrypt', '--namespace', ns], { env });
    assert.equal(before.code, 1);
    assert.match(before.stderr, /the passphrase does not open this store/);
  }
  assert.deepEqual(await filesHolding(dir, [WORD]), []);
});
