// The HTTP side of the end-to-end harness: `memgate serve --transport http`
// on a free loopback port, clients of every protocol revision, and raw
// requests for what no client sends (another Host, an Origin, a huge body).

import { spawn } from 'node:child_process';
import http from 'node:http';
import assert from 'node:assert/strict';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  Client as ModernClient,
  StreamableHTTPClientTransport as ModernTransport,
} from '@modelcontextprotocol/client';

import { BIN } from './harness.mjs';

/** The stateless revision, and the newest stateful one. */
export const STATELESS = '2026-07-28';
export const STATEFUL = '2025-11-25';

const LISTENING = /^memgate listening on (http:\/\/127\.0\.0\.1:(\d+)(\/\S*))$/m;

/** The environment of a memgate process: none of the caller's MEMGATE_ variables. */
function cleanEnv(extra = {}) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('MEMGATE_') && v !== undefined) env[k] = v;
  }
  return { ...env, ...extra };
}

/**
 * Starts `memgate serve --transport http --bind 127.0.0.1:0 --data-dir DIR
 * ...args` and waits for the line that names its URL. The process is
 * stopped (SIGTERM, then SIGKILL after 10 s) when the test ends, unless the
 * test stopped it.
 *
 * @param {import('node:test').TestContext} t
 * @param {string} dir the data folder
 * @param {string[]} [args] more flags of serve
 * @param {Record<string,string>} [env] more environment
 */
export async function startHttpServer(t, dir, args = [], env = {}) {
  const child = spawn(BIN, ['serve', '--transport', 'http', '--bind', '127.0.0.1:0', '--data-dir', dir, ...args],
    { env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (c) => { stderr += c; });
  const exit = new Promise((resolve) => {
    child.on('close', (code, signal) => resolve({ code, signal }));
  });
  let exited = false;
  exit.then(() => { exited = true; });

  const found = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`memgate did not announce its URL within 10 s; stderr: ${stderr}`));
    }, 10000);
    child.on('error', (err) => { clearTimeout(timer); reject(err); });
    child.stdout.on('data', (c) => {
      stdout += c;
      const m = LISTENING.exec(stdout);
      if (m) { clearTimeout(timer); resolve(m); }
    });
    exit.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`memgate exited (${code ?? signal}) before listening; stderr: ${stderr}`));
    });
  });

  const stop = async (signal = 'SIGTERM') => {
    if (!exited) child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), 10000);
    const status = await exit;
    clearTimeout(timer);
    return status;
  };
  t.after(() => stop());

  const url = found[1];
  const port = Number(found[2]);
  return {
    url,
    port,
    /** scheme://host:port of the server, as a browser would name it. */
    origin: `http://127.0.0.1:${port}`,
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    /** Resolves to the exit {code, signal} once the process has ended. */
    exit: () => exit,
    /** Sends signal (SIGTERM) and resolves to the exit {code, signal}. */
    stop,
    /** Another path of the same server, such as /health. */
    at: (path) => `http://127.0.0.1:${port}${path}`,
  };
}

/** Every result carries its structured content as JSON text too. */
function checkText(name, res) {
  // export's first content is the JSON Lines payload; the JSON comes after.
  const i = name === 'export' && !res.isError ? 1 : 0;
  assert.equal(res.content[i]?.type, 'text', `${name}: content[${i}]`);
  assert.deepEqual(JSON.parse(res.content[i].text), res.structuredContent, `${name}: text and structured content differ`);
}

/** ok/fail around a client's callTool, as the stdio harness has them. */
function toolHelpers(client) {
  return {
    /** Calls a tool that must succeed; returns its structured content. */
    async ok(name, args = {}) {
      const res = await client.callTool({ name, arguments: args });
      assert.ok(!res.isError, `${name} failed: ${JSON.stringify(res.structuredContent)}`);
      checkText(name, res);
      return res.structuredContent;
    },
    /** Calls a tool that must fail; returns its error {code, message, details}. */
    async fail(name, args = {}) {
      const res = await client.callTool({ name, arguments: args });
      assert.equal(res.isError, true, `${name} succeeded: ${JSON.stringify(res.structuredContent)}`);
      checkText(name, res);
      const { error } = res.structuredContent;
      assert.ok(error && typeof error.code === 'string' && typeof error.message === 'string',
        `error envelope: ${JSON.stringify(res.structuredContent)}`);
      return error;
    },
    /** The raw result of a call. */
    call: (name, args = {}) => client.callTool({ name, arguments: args }),
  };
}

/**
 * A session of the official TypeScript SDK (v1, revisions up to 2025-11-25)
 * over StreamableHTTPClientTransport. The tools are listed at once, which
 * arms the client's output-schema validation. Closed when the test ends.
 *
 * @param {import('node:test').TestContext} t
 * @param {string} url
 * @param {Record<string,string>} [headers] sent with every request
 */
export async function connectSession(t, url, headers = {}) {
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name: 'memgate-e2e-http', version: '1.0.0' });
  t.after(() => client.close().catch(() => {}));
  await client.connect(transport);
  const tools = (await client.listTools()).tools;
  return { client, transport, tools, ...toolHelpers(client) };
}

/**
 * A client of the stateless revision (2026-07-28), with the SDK's v2 client
 * pinned to it: no initialize, no session. Closed when the test ends.
 *
 * @param {import('node:test').TestContext} t
 * @param {string} url
 * @param {Record<string,string>} [headers] sent with every request
 */
export async function connectStateless(t, url, headers = {}) {
  const transport = new ModernTransport(new URL(url), { requestInit: { headers } });
  const client = new ModernClient({ name: 'memgate-e2e-modern', version: '1.0.0' },
    { versionNegotiation: { mode: { pin: STATELESS } } });
  t.after(() => client.close().catch(() => {}));
  await client.connect(transport);
  const tools = (await client.listTools()).tools;
  return { client, transport, tools, ...toolHelpers(client) };
}

/**
 * One HTTP request with full control of its headers (Host included) and
 * body; resolves to {status, headers, text, json}. The server may answer
 * before it has read the whole body (413): what it answered counts, and a
 * write error after the answer is ignored. The request is aborted after
 * timeoutMs.
 *
 * @param {string} url
 * With expectContinue, the body waits for the server's 100 Continue, as
 * curl does for large bodies: a server that refuses it on its header never
 * gets it.
 *
 * @param {{method?: string, headers?: Record<string,string>, body?: string|Buffer, chunked?: boolean, expectContinue?: boolean, timeoutMs?: number}} [opts]
 */
export function request(url, { method = 'GET', headers = {}, body, chunked = false, expectContinue = false, timeoutMs = 10000 } = {}) {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const h = { ...headers };
    if (body !== undefined && !chunked && !Object.keys(h).some((k) => k.toLowerCase() === 'content-length')) {
      h['Content-Length'] = Buffer.byteLength(body);
    }
    if (expectContinue) h.Expect = '100-continue';
    const req = http.request({
      host: u.hostname, port: u.port, path: u.pathname + u.search, method, headers: h,
      agent: false, setHost: !Object.keys(h).some((k) => k.toLowerCase() === 'host'),
    });
    let answered = false;
    const timer = setTimeout(() => req.destroy(new Error(`${method} ${u.pathname}: no answer within ${timeoutMs} ms`)), timeoutMs);
    req.on('response', (res) => {
      answered = true;
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      const done = () => {
        clearTimeout(timer);
        const text = Buffer.concat(chunks).toString('utf8');
        let json;
        try { json = JSON.parse(text); } catch { json = undefined; }
        resolve({ status: res.statusCode, headers: res.headers, text, json });
      };
      res.on('end', done);
      res.on('error', done);
      res.on('aborted', done);
    });
    req.on('error', (err) => {
      if (answered) return;
      clearTimeout(timer);
      reject(err);
    });
    if (body === undefined) {
      req.end();
    } else if (expectContinue) {
      req.on('continue', () => req.end(body));
    } else if (chunked) {
      // Several chunks and no Content-Length: the size is found while reading.
      const buf = Buffer.from(body);
      const step = 64 << 10;
      for (let i = 0; i < buf.length; i += step) req.write(buf.subarray(i, i + step));
      req.end();
    } else {
      req.end(body);
    }
  });
}

/** The headers of a JSON-RPC POST; more (a session, a revision) from extra. */
export function rpcHeaders(extra = {}) {
  return { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...extra };
}

/** An initialize request of protocolVersion. */
export function initializeBody(protocolVersion, id = 1) {
  return JSON.stringify({
    jsonrpc: '2.0', id, method: 'initialize',
    params: { protocolVersion, capabilities: {}, clientInfo: { name: 'memgate-e2e-raw', version: '1.0.0' } },
  });
}

/**
 * A stateless (2026-07-28) request body: the revision, the client and its
 * capabilities travel in _meta, as that revision wants.
 */
export function statelessBody(method, params = {}, id = 1) {
  return JSON.stringify({
    jsonrpc: '2.0', id, method,
    params: {
      ...params,
      _meta: {
        'io.modelcontextprotocol/protocolVersion': STATELESS,
        'io.modelcontextprotocol/clientInfo': { name: 'memgate-e2e-raw', version: '1.0.0' },
        'io.modelcontextprotocol/clientCapabilities': {},
      },
    },
  });
}

/** The headers of a stateless POST of method (and tool name). */
export function statelessHeaders(method, name) {
  const h = rpcHeaders({ 'MCP-Protocol-Version': STATELESS, 'Mcp-Method': method });
  if (name !== undefined) h['Mcp-Name'] = name;
  return h;
}
