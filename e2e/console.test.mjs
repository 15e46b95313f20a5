// The web console (`--console`) in a real browser: Debian's chromium,
// headless, driven by playwright-core. An administrator signs in, searches,
// edits a memory another writer changed meanwhile (a conflict), forgets it,
// restores it from the trash and approves a candidate; a token without the
// admin scope sees nothing; the page loads nothing from another origin,
// keeps no token anywhere but in its memory, and fits a phone's width. A
// screenshot of each view goes to e2e/artifacts/console/.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

import { dataDir } from './harness.mjs';
import { startHttpServer, connectSession, request } from './http-harness.mjs';

const ADMIN = 'admin-token-console-0123456789';
const USER = 'user-token-console-0123456789';
const BROWSER = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
const ARTIFACTS = path.join(path.dirname(fileURLToPath(import.meta.url)), 'artifacts', 'console');

const missing = !existsSync(BROWSER);
if (missing && process.env.CI === 'true') {
  throw new Error(`no browser at ${BROWSER}: e2e/install-chromium.sh installs Debian's chromium`);
}

/** Runs a tool through the admin API; returns {status, body}. */
async function tool(srv, ns, name, args) {
  const res = await request(srv.at(`/admin/v1/namespaces/${ns}/tools/${name}`), {
    method: 'POST', body: JSON.stringify(args), headers: { Authorization: `Bearer ${ADMIN}` },
  });
  return { status: res.status, body: JSON.parse(res.text) };
}

test('the console in a real browser', { skip: missing && `no browser at ${BROWSER}; run e2e/install-chromium.sh (Debian's chromium)`, timeout: 120000 }, async (t) => {
  await mkdir(ARTIFACTS, { recursive: true });
  const dir = await dataDir(t);
  const srv = await startHttpServer(t, dir, ['--console', '--write-mode', 'candidate', '--trash-retention', '1h', '--namespace-arg'],
    { MEMGATE_ADMIN_TOKEN: ADMIN, MEMGATE_TOKEN: USER });

  // Memories written by the admin API (directly, whatever the write mode),
  // and a candidate proposed by an agent over MCP.
  for (const [id, text, title, tags] of [
    ['pref-editor', 'Ana prefers Helix as her editor, with Vim keys.', 'Editor preference', ['ana', 'tools']],
    ['deploys', 'Deploys happen on Tuesdays after the design review.', 'Deploy day', ['process']],
    ['db', 'The billing service keeps its ledger in PostgreSQL 16.', 'Billing database', ['billing']],
    ['markup', '<img src=x onerror="window.pwned=1"><script>window.pwned=1</script> is markup', '<b>not bold</b>', ['web']],
  ]) {
    assert.equal((await tool(srv, 'team-a', 'remember', { id, text, title, tags })).status, 200);
  }
  const agent = await connectSession(t, srv.url, { Authorization: `Bearer ${USER}` });
  const proposed = await agent.ok('remember', { namespace: 'team-a', text: 'Standups move to 9:30 from January.', title: 'Standup time', tags: ['process'] });
  assert.equal(proposed.candidate, true, JSON.stringify(proposed));

  const browser = await chromium.launch({ executablePath: BROWSER, headless: true, args: ['--no-sandbox'] });
  t.after(() => browser.close());
  const context = await browser.newContext({ viewport: { width: 1100, height: 800 } });
  const page = await context.newPage();
  const requests = [];
  const problems = [];
  page.on('request', (r) => requests.push(r.url()));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(m.text()); });
  page.on('pageerror', (e) => problems.push(String(e)));
  const shot = (name) => page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
  const status = page.locator('#status');

  const res = await page.goto(srv.at('/console/'));
  const csp = res.headers()['content-security-policy'];
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /connect-src 'self'/);
  assert.equal(res.headers()['set-cookie'], undefined);
  await page.locator('#sign-in').waitFor();
  await shot('1-sign-in');

  // A token without the admin scope, and no token at all, see nothing.
  for (const [token, says] of [[USER, /no admin rights/], ['not-a-token-at-all-0123', /not valid/]]) {
    await page.fill('#token', token);
    await page.click('#sign-in button');
    await status.filter({ hasText: says }).waitFor();
    assert.equal(await page.locator('#namespaces').count(), 0);
    assert.equal(await page.locator('#sign-in').count(), 1);
  }

  // The administrator: namespaces with their stats.
  await page.fill('#token', ADMIN);
  await page.click('#sign-in button');
  const row = page.locator('#namespaces tr', { hasText: 'team-a' });
  await row.waitFor();
  assert.match(await row.innerText(), /team-a\s+4/);
  await shot('2-namespaces');

  // A memory's markup is shown as text, never run.
  await row.locator('a').click();
  const markup = page.locator('article.memory', { hasText: '<img src=x onerror=' });
  await markup.waitFor();
  assert.equal(await markup.locator('h2').innerText(), '<b>not bold</b>');
  assert.equal(await page.evaluate(() => window.pwned), undefined);
  assert.equal(await page.locator('article.memory img, article.memory b, article.memory script').count(), 0);

  // Search, then open the hit.
  await page.fill('#search input', 'helix editor');
  await page.click('#search button');
  const hit = page.locator('article.memory', { hasText: 'Helix' });
  await hit.waitFor();
  assert.equal(await page.locator('article.memory').count(), 1);
  await shot('3-search');
  await hit.locator('h2 a').click();
  await page.locator('#edit').waitFor();
  assert.equal(await page.inputValue('#text'), 'Ana prefers Helix as her editor, with Vim keys.');

  // Another writer gets there first: the save is a conflict, and nothing of
  // the other write is lost.
  const read = await tool(srv, 'team-a', 'get', { id: 'pref-editor' });
  const other = await tool(srv, 'team-a', 'remember', { id: 'pref-editor', text: 'Ana moved to Zed.', title: 'Editor preference',
    tags: ['ana', 'tools'], if_version: read.body.memory.version });
  assert.equal(other.status, 200);
  await page.fill('#text', 'Ana prefers Helix, with Vim keys and a light theme.');
  await page.click('#edit button[type=submit]');
  await page.locator('.conflict').filter({ hasText: 'Another writer changed this memory' }).waitFor();
  assert.equal(await page.inputValue('#text'), 'Ana prefers Helix, with Vim keys and a light theme.');
  await shot('4-conflict');
  assert.equal((await tool(srv, 'team-a', 'get', { id: 'pref-editor' })).body.memory.text, 'Ana moved to Zed.');

  // The latest version, edited and saved.
  await page.click('.conflict button');
  await page.waitForFunction(() => document.querySelector('#text')?.value === 'Ana moved to Zed.');
  await page.fill('#text', 'Ana moved to Zed, with Vim keys.');
  await page.fill('#tags', 'ana, tools, editor');
  await page.click('#edit button[type=submit]');
  await status.filter({ hasText: 'Saved' }).waitFor();
  const saved = (await tool(srv, 'team-a', 'get', { id: 'pref-editor' })).body.memory;
  assert.equal(saved.text, 'Ana moved to Zed, with Vim keys.');
  assert.deepEqual(saved.tags, ['ana', 'tools', 'editor']);
  assert.equal(saved.title, 'Editor preference');

  // Forget it (two clicks), then restore it from the trash.
  await page.locator('#edit .meta', { hasText: `version ${saved.version} ` }).waitFor();
  await page.click('#edit button.danger');
  await page.click('#edit button.danger');
  await status.filter({ hasText: 'Forgotten' }).waitFor();
  assert.equal((await tool(srv, 'team-a', 'get', { id: 'pref-editor' })).status, 404);
  await page.click('.tabs a:has-text("Trash")');
  const trashed = page.locator('article.memory', { hasText: 'Zed' });
  await trashed.waitFor();
  await shot('5-trash');
  await trashed.locator('button', { hasText: 'Restore' }).click();
  await status.filter({ hasText: 'Restored' }).waitFor();
  assert.equal((await tool(srv, 'team-a', 'get', { id: 'pref-editor' })).body.memory.text, 'Ana moved to Zed, with Vim keys.');

  // Approve the agent's candidate.
  await page.click('.tabs a:has-text("Candidates")');
  const candidate = page.locator('article.memory', { hasText: 'Standups move' });
  await candidate.waitFor();
  await shot('6-candidates');
  await candidate.locator('button', { hasText: 'Approve' }).click();
  await status.filter({ hasText: 'Approved' }).waitFor();
  const found = await tool(srv, 'team-a', 'search', { query: 'standups january' });
  assert.equal(found.body.hits.length, 1);

  // A phone's width: nothing wider than the screen.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.click('.tabs a:has-text("Memories")');
  await page.locator('article.memory').first().waitFor();
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'the page is wider than a phone');
  await shot('7-phone');

  // The token is in the page's memory only: no cookie, nothing stored, and
  // a reload signs out.
  assert.deepEqual(await context.cookies(), []);
  assert.deepEqual(await page.evaluate(() => [localStorage.length, sessionStorage.length, document.cookie]), [0, 0, '']);
  await page.reload();
  await page.locator('#sign-in').waitFor();

  // Nothing came from another origin, and the policy refused nothing.
  const foreign = requests.filter((u) => !u.startsWith(srv.origin + '/'));
  assert.deepEqual(foreign, []);
  // (401, 403, 404 and 409 answers are the tests' own: a bad token, a conflict.)
  assert.deepEqual(problems.filter((p) => !/status of 40[1349]/.test(p)), []);
  assert.ok(!srv.stderr().includes('Helix') && !srv.stderr().includes(ADMIN), 'the log holds text or a token');
});
