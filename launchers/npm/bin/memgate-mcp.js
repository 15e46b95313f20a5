#!/usr/bin/env node
// memgate-mcp: runs the memgate release binary for this platform.
//
// The binary comes from the GitHub release of this package's version (or
// MEMGATE_DOWNLOAD_BASE/<asset>), is checked against the size and SHA-256 in
// checksums.json (written by `make release`), and is kept per version in the
// user's cache folder. One that does not match never runs. MEMGATE_BINARY
// runs a local build instead. Arguments, stdio, signals and the exit code
// pass through.
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const http = require('http');
const https = require('https');
const os = require('os');
const path = require('path');
const { spawn } = require('child_process');

const NAME = 'memgate-mcp';
const VERSION = require('../package.json').version;
const RELEASES = 'https://github.com/memgate/memgate/releases/download/v' + VERSION;
const DEFAULT_TIMEOUT_SECONDS = 300;
const MAX_REDIRECTS = 5;

// Refusal is a failure the launcher reports in one line before exiting.
class Refusal extends Error {}

function assetName() {
  const goos = { linux: 'linux', darwin: 'darwin', win32: 'windows' }[process.platform];
  const goarch = { x64: 'amd64', arm64: 'arm64' }[process.arch];
  if (!goos || !goarch) {
    throw new Refusal(`no release binary for ${process.platform}/${process.arch}; ` +
      'build memgate from source and set MEMGATE_BINARY to it');
  }
  return `memgate-${goos}-${goarch}${goos === 'windows' ? '.exe' : ''}`;
}

function loadTable() {
  let table;
  try {
    table = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'checksums.json'), 'utf8'));
  } catch {
    throw new Refusal(`this package has no checksum table (packed without make release)`);
  }
  if (!table || table.version !== VERSION || typeof table.assets !== 'object') {
    throw new Refusal(`the checksum table is not for version ${VERSION}`);
  }
  return table.assets;
}

function cacheDir() {
  let base;
  if (process.platform === 'win32') {
    base = process.env.LOCALAPPDATA || path.join(os.homedir(), 'AppData', 'Local');
  } else {
    const xdg = process.env.XDG_CACHE_HOME;
    base = xdg && path.isAbsolute(xdg) ? xdg : path.join(os.homedir(), '.cache');
  }
  return path.join(base, NAME, VERSION);
}

function timeoutSeconds() {
  const v = process.env.MEMGATE_DOWNLOAD_TIMEOUT;
  if (v === undefined || v === '') return DEFAULT_TIMEOUT_SECONDS;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new Refusal('MEMGATE_DOWNLOAD_TIMEOUT is not a number of seconds');
  return n;
}

function sha256(buf) {
  return crypto.createHash('sha256').update(buf).digest('hex');
}

// shown drops any user and password from a URL before it is printed.
function shown(url) {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    return u.toString();
  } catch {
    return '(an invalid URL)';
  }
}

// fetchAsset downloads url and resolves to its bytes, refusing a body that is
// not exactly want.size bytes; the whole download ends by deadline.
function fetchAsset(url, asset, want, seconds) {
  return new Promise((resolve, reject) => {
    let req;
    let settled = false;
    const finish = (err, buf) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (req) req.destroy();
      if (err) reject(err);
      else resolve(buf);
    };
    const timer = setTimeout(() => {
      finish(new Refusal(`cannot download ${asset}: no complete answer from ${shown(url)} within ${seconds}s`));
    }, seconds * 1000);

    const get = (current, redirects) => {
      let u;
      try {
        u = new URL(current);
      } catch {
        return finish(new Refusal(`cannot download ${asset}: ${shown(current)} is not a URL`));
      }
      const mod = u.protocol === 'https:' ? https : u.protocol === 'http:' ? http : null;
      if (!mod) return finish(new Refusal(`cannot download ${asset}: ${u.protocol} is not http or https`));
      req = mod.get(u, { headers: { 'user-agent': `${NAME}/${VERSION}` } }, (res) => {
        const status = res.statusCode;
        if (status >= 300 && status < 400 && res.headers.location) {
          res.resume();
          if (redirects >= MAX_REDIRECTS) {
            return finish(new Refusal(`cannot download ${asset}: too many redirects from ${shown(url)}`));
          }
          return get(new URL(res.headers.location, u).toString(), redirects + 1);
        }
        if (status !== 200) {
          res.resume();
          return finish(new Refusal(`cannot download ${asset}: HTTP ${status} from ${shown(current)}`));
        }
        const declared = res.headers['content-length'];
        if (declared !== undefined && Number(declared) !== want.size) {
          return finish(new Refusal(`refused ${asset}: the server sends ${declared} bytes, ` +
            `the checksum table says ${want.size}`));
        }
        const chunks = [];
        let got = 0;
        res.on('data', (chunk) => {
          got += chunk.length;
          if (got > want.size) {
            return finish(new Refusal(`refused ${asset}: more than the ${want.size} bytes the checksum table says`));
          }
          chunks.push(chunk);
        });
        res.on('end', () => {
          if (got !== want.size) {
            return finish(new Refusal(`refused ${asset}: ${got} bytes, the checksum table says ${want.size}`));
          }
          finish(null, Buffer.concat(chunks));
        });
        res.on('aborted', () => finish(new Refusal(`cannot download ${asset}: ${shown(current)} closed the connection`)));
        res.on('error', (err) => finish(new Refusal(`cannot download ${asset} from ${shown(current)}: ${err.code || err.message}`)));
      });
      req.on('error', (err) => finish(new Refusal(`cannot download ${asset} from ${shown(current)}: ${err.code || err.message}`)));
    };
    get(url, 0);
  });
}

// writeAtomically puts buf at file by way of a temporary file in the same
// folder, so that a reader sees the whole binary or none.
function writeAtomically(file, buf) {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.${crypto.randomBytes(4).toString('hex')}.tmp`);
  try {
    const fd = fs.openSync(tmp, 'wx', 0o755);
    try {
      fs.writeSync(fd, buf);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.chmodSync(tmp, 0o755);
    fs.renameSync(tmp, file);
  } catch (err) {
    try { fs.unlinkSync(tmp); } catch { /* never written */ }
    throw err;
  }
}

function matches(buf, want) {
  return buf.length === want.size && sha256(buf) === want.sha256;
}

async function binary() {
  const asset = assetName();
  const want = loadTable()[asset];
  if (!want || typeof want.sha256 !== 'string' || typeof want.size !== 'number') {
    throw new Refusal(`the checksum table has no ${asset}`);
  }
  const dir = cacheDir();
  const file = path.join(dir, asset);
  let cached = null;
  try {
    cached = fs.readFileSync(file);
  } catch { /* not cached yet */ }
  if (cached && matches(cached, want)) return file;

  const base = process.env.MEMGATE_DOWNLOAD_BASE || RELEASES;
  const url = base.replace(/\/+$/, '') + '/' + asset;
  const buf = await fetchAsset(url, asset, want, timeoutSeconds());
  if (sha256(buf) !== want.sha256) {
    throw new Refusal(`refused ${asset}: its SHA-256 does not match the checksum table of ${NAME} ${VERSION}`);
  }
  try {
    fs.mkdirSync(dir, { recursive: true });
    writeAtomically(file, buf);
  } catch (err) {
    throw new Refusal(`cannot write ${asset} into the cache folder: ${err.code || err.message}`);
  }
  return file;
}

function run(bin, args) {
  const child = spawn(bin, args, { stdio: 'inherit' });
  const signals = process.platform === 'win32'
    ? ['SIGINT', 'SIGTERM', 'SIGBREAK']
    : ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT'];
  for (const s of signals) {
    process.on(s, () => {
      try { child.kill(s); } catch { /* already gone */ }
    });
  }
  if (process.platform !== 'win32') {
    // npx ends on SIGTERM without passing it on: a launcher whose parent
    // has gone stops its server as if it had been signalled, so the store
    // is not left locked by a server nobody can reach.
    const parent = process.ppid;
    const watch = setInterval(() => {
      if (process.ppid !== parent) {
        clearInterval(watch);
        try { child.kill('SIGTERM'); } catch { /* already gone */ }
      }
    }, 500);
    watch.unref();
  }
  child.on('error', (err) => {
    process.stderr.write(`${NAME}: cannot run memgate: ${err.code || err.message}\n`);
    process.exit(1);
  });
  child.on('exit', (code, signal) => {
    if (signal) {
      // End the way the child ended.
      for (const s of signals) process.removeAllListeners(s);
      try { process.kill(process.pid, signal); } catch { /* not a signal here */ }
      process.exit(1);
    }
    process.exit(code);
  });
}

async function main() {
  const args = process.argv.slice(2);
  const local = process.env.MEMGATE_BINARY;
  if (local) return run(local, args);
  run(await binary(), args);
}

main().catch((err) => {
  const msg = err instanceof Refusal ? err.message : `unexpected failure: ${err && err.message}`;
  process.stderr.write(`${NAME}: ${msg.replace(/[\r\n]+/g, ' ')}\n`);
  process.exit(1);
});
