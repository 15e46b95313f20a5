// The npm and Python launchers against a release of the host platform served
// from 127.0.0.1: each downloads, verifies, caches and runs memgate, refuses
// a tampered binary, a wrong size, a 404 and a server that hangs, passes
// stdio and SIGTERM through; and two builds of one tree give the same bytes.
//
// Needs Go, npm, and python3 with venv. Under CI=true a missing part fails;
// elsewhere its tests are skipped with how to get it.
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const inCI = process.env.CI === 'true';
const exe = process.platform === 'win32' ? '.exe' : '';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'memgate-launchers-'));
const dist = path.join(tmp, 'dist');
const pkgs = path.join(tmp, 'launchers');

let goos, goarch, asset, binary, version;
let server, base;
const hits = new Map(); // route -> requests
const hung = new Set();

function sh(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 15 * 60 * 1000, ...opts });
  if (r.error) throw new Error(`${cmd} ${args.join(' ')}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

function have(cmd, args) {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  return !r.error && r.status === 0;
}

// Missing is a tool the machine lacks (rather than a failure of the test).
class Missing extends Error {}

// missing skips a test whose tool is absent, or fails it under CI.
function missing(t, what, how) {
  if (inCI) assert.fail(`${what} is missing (${how})`);
  t.skip(`${what} is missing: ${how}`);
}

// release builds the host platform's assets from the tree at src into out,
// with the launchers' tables written into pkgDir.
function release(src, out, pkgDir, extraEnv = {}) {
  sh(path.join(src, 'scripts', 'release.sh'), [], {
    cwd: src,
    env: { ...process.env, DIST: out, PLATFORMS: `${goos}/${goarch}`, LAUNCHERS: pkgDir, ...extraEnv },
  });
}

function copyTree(from, to, skip = () => false) {
  fs.cpSync(from, to, {
    recursive: true,
    filter: (p) => !skip(p) && !/(^|[\\/])(__pycache__|node_modules|checksums\.json)$/.test(p),
  });
}

before(() => {
  [goos, goarch] = sh('go', ['env', 'GOOS', 'GOARCH'], { cwd: root }).trim().split(/\s+/);
  asset = `memgate-${goos}-${goarch}${goos === 'windows' ? '.exe' : ''}`;
  copyTree(path.join(root, 'launchers', 'npm'), path.join(pkgs, 'npm'));
  copyTree(path.join(root, 'launchers', 'python'), path.join(pkgs, 'python'));
  release(root, dist, pkgs);
  binary = fs.readFileSync(path.join(dist, asset));
  version = JSON.parse(fs.readFileSync(path.join(pkgs, 'npm', 'package.json'), 'utf8')).version;

  const tampered = Buffer.from(binary);
  tampered[tampered.length >> 1] ^= 0xff;
  server = http.createServer((req, res) => {
    const [, route, name] = req.url.split('/');
    hits.set(route, (hits.get(route) || 0) + 1);
    if (name !== asset) {
      res.writeHead(404).end();
      return;
    }
    switch (route) {
      case 'good': res.writeHead(200, { 'content-length': binary.length }).end(binary); break;
      case 'redirect': res.writeHead(302, { location: `/good/${asset}` }).end(); break;
      case 'tampered': res.writeHead(200, { 'content-length': tampered.length }).end(tampered); break;
      case 'short': res.writeHead(200, { 'content-length': binary.length - 1 }).end(binary.subarray(1)); break;
      case 'long': // chunked, so only the count of bytes can tell
        res.writeHead(200);
        res.write(binary);
        res.end(Buffer.from('x'));
        break;
      case 'hang': hung.add(res); break; // headers never come
      default: res.writeHead(404).end();
    }
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => {
    base = `http://127.0.0.1:${server.address().port}`;
    resolve();
  }));
});

after(() => {
  for (const res of hung) res.destroy();
  server?.closeAllConnections?.();
  server?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('two builds of one tree give the same bytes, and SHA256SUMS and the tables agree', () => {
  // The second build is of a copy of the tree in another folder.
  const src = path.join(tmp, 'src');
  const files = sh('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: root })
    .split('\0').filter(Boolean);
  for (const f of files) {
    if (!fs.existsSync(path.join(root, f))) continue; // deleted in the work tree
    fs.mkdirSync(path.dirname(path.join(src, f)), { recursive: true });
    fs.copyFileSync(path.join(root, f), path.join(src, f));
  }
  fs.chmodSync(path.join(src, 'scripts', 'release.sh'), 0o755);
  const pkgs2 = path.join(tmp, 'launchers2');
  copyTree(pkgs, pkgs2);
  const commit = sh('git', ['rev-parse', 'HEAD'], { cwd: root }).trim();
  const dirty = sh('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: root }).trim() !== '';
  const dist2 = path.join(tmp, 'dist2');
  release(src, dist2, pkgs2, { COMMIT: commit, MODIFIED: String(dirty) });
  const again = fs.readFileSync(path.join(dist2, asset));
  assert.equal(again.length, binary.length);
  assert.ok(again.equals(binary), 'the two builds differ');

  const sum = crypto.createHash('sha256').update(binary).digest('hex');
  assert.equal(fs.readFileSync(path.join(dist, 'SHA256SUMS'), 'utf8'), `${sum}  ${asset}\n`);
  const npmTable = fs.readFileSync(path.join(pkgs, 'npm', 'checksums.json'), 'utf8');
  const pyTable = fs.readFileSync(path.join(pkgs, 'python', 'memgate_mcp', 'checksums.json'), 'utf8');
  assert.equal(npmTable, pyTable);
  assert.deepEqual(JSON.parse(npmTable), { version, assets: { [asset]: { sha256: sum, size: binary.length } } });

  const out = spawnSync(path.join(dist, asset), ['version'], { encoding: 'utf8' });
  assert.equal(out.status, 0);
  assert.match(out.stdout, new RegExp(`^memgate v${version.replaceAll('.', '\\.')}, commit ${commit}`));
});

// launcherEnv is the environment of one launcher run: a cache folder of its
// own, nothing of memgate's from the outside, no proxy for 127.0.0.1.
function launcherEnv(cache, extra) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('MEMGATE_')));
  return {
    ...env, XDG_CACHE_HOME: cache, LOCALAPPDATA: cache,
    NO_PROXY: '127.0.0.1,localhost', no_proxy: '127.0.0.1,localhost', ...extra,
  };
}

function cached(cache) {
  return path.join(cache, 'memgate-mcp', version, asset);
}

// mcpSession starts `serve` through the launcher and talks MCP over its stdio.
function mcpSession(cmd, args, env) {
  const child = spawn(cmd, args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
  let buf = '';
  let stderr = '';
  const waiting = [];
  const lines = [];
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (d) => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (waiting.length) waiting.shift()(line);
      else lines.push(line);
    }
  });
  child.stderr.on('data', (d) => { stderr += d; });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const next = () => new Promise((resolve, reject) => {
    if (lines.length) return resolve(lines.shift());
    waiting.push(resolve);
    exited.then(() => reject(new Error(`the server exited; stderr: ${stderr}`)));
  });
  const call = async (id, method, params) => {
    child.stdin.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
    const msg = JSON.parse(await next());
    assert.equal(msg.id, id, `answer to ${method}`);
    return msg;
  };
  const notify = (method) => child.stdin.write(JSON.stringify({ jsonrpc: '2.0', method }) + '\n');
  return { child, call, notify, exited, stderr: () => stderr };
}

// launcherTests is one suite of checks for one launcher; setup installs it
// and returns the command that runs it, or throws Missing.
function launcherTests(name, setup) {
  describe(`${name} launcher`, () => {
    let cmd = null;
    let why = '';
    before(() => {
      try {
        cmd = setup();
      } catch (err) {
        if (!(err instanceof Missing)) throw err;
        why = err.message;
      }
    });
    let n = 0;
    const fresh = () => path.join(tmp, `${name}-cache-${++n}`);
    // run is asynchronous: the server answering the launcher is in this process.
    const run = (args, cache, extra = {}) => new Promise((resolve, reject) => {
      const child = spawn(cmd, args, { env: launcherEnv(cache, extra), stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (d) => { stdout += d; });
      child.stderr.setEncoding('utf8').on('data', (d) => { stderr += d; });
      child.on('error', reject);
      child.on('close', (status, signal) => resolve({ status, signal, stdout, stderr }));
    });
    const ready = (t) => {
      if (cmd) return true;
      missing(t, `the ${name} launcher`, why);
      return false;
    };
    const refused = (r, line) => {
      assert.notEqual(r.status, 0, 'a refusal exits non-zero');
      assert.equal(r.stdout, '', 'nothing ran');
      const lines = r.stderr.split('\n').filter(Boolean);
      assert.equal(lines.length, 1, `one line on stderr: ${r.stderr}`);
      assert.match(lines[0], line);
    };

    test('verify passes, and the second run uses the cache', async (t) => {
      if (!ready(t)) return;
      const cache = fresh();
      const before = hits.get('good') || 0;
      const r = await run(['verify'], cache, { MEMGATE_DOWNLOAD_BASE: `${base}/good` });
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stdout, /^memgate verify: ok \(7 tools, \d+ms\)\n$/);
      assert.equal(hits.get('good'), before + 1);
      assert.ok(fs.readFileSync(cached(cache)).equals(binary));
      assert.equal(fs.readdirSync(path.dirname(cached(cache))).length, 1, 'no temporary file left');

      // A base that has nothing: the cached binary runs all the same.
      const again = await run(['version'], cache, { MEMGATE_DOWNLOAD_BASE: `${base}/missing` });
      assert.equal(again.status, 0, again.stderr);
      assert.match(again.stdout, new RegExp(`^memgate v${version.replaceAll('.', '\\.')}, `));
      assert.equal(hits.get('good'), before + 1);
    });

    test('a damaged cached binary is downloaded again, a redirect is followed', async (t) => {
      if (!ready(t)) return;
      const cache = fresh();
      fs.mkdirSync(path.dirname(cached(cache)), { recursive: true });
      fs.writeFileSync(cached(cache), '#!/bin/sh\necho not memgate\n', { mode: 0o755 });
      const r = await run(['version'], cache, { MEMGATE_DOWNLOAD_BASE: `${base}/redirect` });
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stdout, /^memgate v/);
      assert.ok(fs.readFileSync(cached(cache)).equals(binary));
    });

    test('a tampered binary is refused and never cached', async (t) => {
      if (!ready(t)) return;
      const cache = fresh();
      refused(await run(['version'], cache, { MEMGATE_DOWNLOAD_BASE: `${base}/tampered` }),
        new RegExp(`^memgate-mcp: refused ${asset}: its SHA-256 does not match the checksum table of memgate-mcp ${version}$`));
      assert.equal(fs.existsSync(cached(cache)), false);
    });

    test('a wrong size is refused', async (t) => {
      if (!ready(t)) return;
      const cache = fresh();
      refused(await run(['version'], cache, { MEMGATE_DOWNLOAD_BASE: `${base}/short` }),
        new RegExp(`^memgate-mcp: refused ${asset}: the server sends ${binary.length - 1} bytes, the checksum table says ${binary.length}$`));
      refused(await run(['version'], cache, { MEMGATE_DOWNLOAD_BASE: `${base}/long` }),
        new RegExp(`^memgate-mcp: refused ${asset}: more than the ${binary.length} bytes the checksum table says$`));
      assert.equal(fs.existsSync(cached(cache)), false);
    });

    test('a 404 is refused', async (t) => {
      if (!ready(t)) return;
      refused(await run(['version'], fresh(), { MEMGATE_DOWNLOAD_BASE: `${base}/missing` }),
        new RegExp(`^memgate-mcp: cannot download ${asset}: HTTP 404 from ${base}/missing/${asset}$`));
    });

    test('a server that hangs is refused', async (t) => {
      if (!ready(t)) return;
      refused(await run(['version'], fresh(), { MEMGATE_DOWNLOAD_BASE: `${base}/hang`, MEMGATE_DOWNLOAD_TIMEOUT: '1' }),
        new RegExp(`^memgate-mcp: cannot download ${asset}: no complete answer from ${base}/hang/${asset} within 1s$`));
    });

    test('MEMGATE_BINARY runs a local build with no download', async (t) => {
      if (!ready(t)) return;
      const before = [...hits.values()].reduce((a, b) => a + b, 0);
      const r = await run(['version'], fresh(), { MEMGATE_BINARY: path.join(dist, asset), MEMGATE_DOWNLOAD_BASE: `${base}/good` });
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stdout, /^memgate v/);
      assert.equal([...hits.values()].reduce((a, b) => a + b, 0), before);
      refused(await run(['version'], fresh(), { MEMGATE_BINARY: path.join(tmp, 'no-such-binary') }),
        /^memgate-mcp: cannot run memgate: /);
    });

    test('MCP over stdio through the launcher, and SIGTERM reaches the server', async (t) => {
      if (!ready(t)) return;
      if (process.platform === 'win32') return t.skip('no SIGTERM on Windows');
      const data = path.join(tmp, `${name}-data`);
      const s = mcpSession(cmd, ['serve', '--data-dir', data, '--namespace', 'launch'],
        launcherEnv(fresh(), { MEMGATE_DOWNLOAD_BASE: `${base}/good` }));
      const init = await s.call(1, 'initialize', {
        protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'launcher-test', version: '1' },
      });
      assert.equal(init.result.serverInfo.name, 'memgate', JSON.stringify(init));
      assert.equal(init.result.serverInfo.version, `v${version}`);
      s.notify('notifications/initialized');
      const rem = await s.call(2, 'tools/call', { name: 'remember', arguments: { text: 'through the launcher' } });
      assert.equal(rem.result.isError, undefined, JSON.stringify(rem));
      assert.equal(rem.result.structuredContent.created, true);

      s.child.kill('SIGTERM');
      // A launcher that keeps the signal to itself never ends: stop it, and fail.
      let kept = false;
      const guard = setTimeout(() => { kept = true; s.child.kill('SIGKILL'); }, 60000);
      const { code, signal } = await s.exited;
      clearTimeout(guard);
      assert.equal(kept, false, 'the launcher did not end on SIGTERM');
      assert.equal(signal, null, `the launcher ended by ${signal}, not with the server's exit code`);
      assert.equal(code, 0, s.stderr());
      // The server shut down and let go of its store, with the memory in it.
      const list = spawnSync(path.join(dist, asset), ['list', '--data-dir', data, '--namespace', 'launch'], { encoding: 'utf8' });
      assert.equal(list.status, 0, list.stderr);
      assert.deepEqual(JSON.parse(list.stdout).memories.map((m) => m.text), ['through the launcher']);
    });
  });
}

launcherTests('npm', () => {
  if (!have('npm', ['--version'])) throw new Missing('install Node.js 18 or newer with npm');
  const packed = sh('npm', ['pack', '--silent', '--pack-destination', tmp], { cwd: path.join(pkgs, 'npm') }).trim().split('\n').pop();
  const prefix = path.join(tmp, 'npm-install');
  fs.mkdirSync(prefix);
  fs.writeFileSync(path.join(prefix, 'package.json'), '{"private": true}\n');
  sh('npm', ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', path.join(tmp, packed)], { cwd: prefix });
  return path.join(prefix, 'node_modules', '.bin', `memgate-mcp${process.platform === 'win32' ? '.cmd' : ''}`);
});

test('npx memgate-mcp verify passes in the folder it is installed in', async (t) => {
  if (!have('npx', ['--version'])) return missing(t, 'npx', 'install Node.js 18 or newer with npm');
  const prefix = path.join(tmp, 'npm-install');
  if (!fs.existsSync(path.join(prefix, 'node_modules', 'memgate-mcp'))) return missing(t, 'the npm launcher', 'see above');
  // npx finds the installed bin and never asks a registry.
  const r = await new Promise((resolve, reject) => {
    const child = spawn('npx', ['--offline', '--no', 'memgate-mcp', 'verify'], {
      cwd: prefix, env: launcherEnv(path.join(tmp, 'npx-cache'), { MEMGATE_DOWNLOAD_BASE: `${base}/good` }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d) => { stdout += d; });
    child.stderr.setEncoding('utf8').on('data', (d) => { stderr += d; });
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^memgate verify: ok \(7 tools, \d+ms\)\n$/);
});

launcherTests('python', () => {
  const python = process.platform === 'win32' ? 'python' : 'python3';
  const venv = path.join(tmp, 'venv');
  const made = spawnSync(python, ['-m', 'venv', venv], { encoding: 'utf8' });
  if (made.error || made.status !== 0) {
    throw new Missing('install python3 with venv (Debian and Ubuntu: apt-get install python3-venv)');
  }
  const bin = path.join(venv, process.platform === 'win32' ? 'Scripts' : 'bin');
  const py = path.join(bin, `python${exe}`);
  // The wheel, from the package's own backend: no index, no setuptools.
  const wheels = [path.join(tmp, 'wheels-1'), path.join(tmp, 'wheels-2')];
  for (const w of wheels) {
    sh(py, ['-m', 'pip', 'wheel', '--disable-pip-version-check', '--no-index', '--no-build-isolation', '--no-deps', '-q', '-w', w, path.join(pkgs, 'python')]);
  }
  const whl = `memgate_mcp-${version}-py3-none-any.whl`;
  assert.ok(fs.readFileSync(path.join(wheels[0], whl)).equals(fs.readFileSync(path.join(wheels[1], whl))), 'two wheels differ');
  sh(py, ['-m', 'pip', 'install', '--disable-pip-version-check', '--no-index', '-q', path.join(wheels[0], whl)]);
  return path.join(bin, `memgate-mcp${exe}`);
});
