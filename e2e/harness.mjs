// The harness of memgate's end-to-end suite: the built binary (bin/memgate,
// or $MEMGATE_BIN) started over stdio and driven by the official TypeScript
// SDK client, each test in a data folder of its own.

import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';

const here = path.dirname(fileURLToPath(import.meta.url));

/** The binary under test. */
export const BIN = process.env.MEMGATE_BIN
  ? path.resolve(process.env.MEMGATE_BIN)
  : path.resolve(here, '..', 'bin', 'memgate');

/** The seven tools. (tools/list gives them sorted by name.) */
export const TOOLS = ['export', 'forget', 'get', 'list', 'remember', 'search', 'stats'];

/** The names of tools, sorted. */
export const names = (tools) => tools.map((x) => x.name).sort();

/**
 * A fresh data folder, removed when the test ends.
 * @param {import('node:test').TestContext} t
 */
export async function dataDir(t) {
  const dir = await mkdtemp(path.join(tmpdir(), 'memgate-e2e-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * The environment of a memgate process: none of the caller's MEMGATE_
 * variables, so only what a test passes configures it.
 */
function cleanEnv(extra = {}) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('MEMGATE_') && v !== undefined) env[k] = v;
  }
  return { ...env, ...extra };
}

/**
 * A client transport over a child process's stdin and stdout. It frames
 * messages with the SDK's own ReadBuffer and serializeMessage, exactly as
 * the SDK's StdioClientTransport does, but owns the child, so a test can see
 * its exit status, read its stderr and send it signals. close() ends stdin,
 * as hosts do, and waits for the exit.
 */
class ProcessTransport {
  constructor(command, args, env) {
    this.command = command;
    this.args = args;
    this.env = env;
    this.stderr = '';
    this.buffer = new ReadBuffer();
  }

  async start() {
    const child = spawn(this.command, this.args, { env: this.env, stdio: ['pipe', 'pipe', 'pipe'] });
    this.child = child;
    this.exit = new Promise((resolve) => {
      child.on('close', (code, signal) => {
        resolve({ code, signal });
        this.onclose?.();
      });
    });
    child.stderr.on('data', (c) => { this.stderr += c; });
    child.stdout.on('data', (chunk) => {
      this.buffer.append(chunk);
      for (;;) {
        let msg;
        try {
          msg = this.buffer.readMessage();
        } catch (err) {
          this.onerror?.(err);
          continue;
        }
        if (msg === null) break;
        this.onmessage?.(msg);
      }
    });
    child.stdin.on('error', (err) => this.onerror?.(err));
    await new Promise((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
  }

  async send(message) {
    await new Promise((resolve, reject) => {
      this.child.stdin.write(serializeMessage(message), (err) => (err ? reject(err) : resolve()));
    });
  }

  async close() {
    if (!this.child) return;
    this.child.stdin.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 10000);
    await this.exit;
    clearTimeout(timer);
  }
}

/**
 * Starts `memgate serve --data-dir DIR ...args` and connects a client to it.
 * The tools are listed at once, as hosts do, which arms the client's
 * output-schema validation of every later callTool. The server is stopped
 * when the test ends, if the test has not stopped it.
 *
 * @param {import('node:test').TestContext} t
 * @param {string} dir the data folder
 * @param {string[]} [args] more flags of serve
 * @param {Record<string,string>} [env] more environment
 */
export async function startServer(t, dir, args = [], env = {}) {
  const transport = new ProcessTransport(BIN, ['serve', '--data-dir', dir, ...args], cleanEnv(env));
  const client = new Client({ name: 'memgate-e2e', version: '1.0.0' });
  t.after(() => transport.close());
  await client.connect(transport);
  const tools = await client.listTools();
  const server = {
    client,
    tools: tools.tools,
    child: transport.child,
    /** Everything the server wrote on stderr so far. */
    stderr: () => transport.stderr,
    /** Ends stdin, as a host does, and resolves to the exit {code, signal}. */
    async close() {
      await client.close();
      return transport.exit;
    },
    /** Resolves to the exit {code, signal} once the process has ended. */
    exit: () => transport.exit,
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
      assert.deepEqual(Object.keys(res.structuredContent), ['error']);
      return error;
    },
  };
  return server;
}

/** Every result carries its structured content as JSON text too. */
function checkText(name, res) {
  // export's first content is the JSON Lines payload; the JSON comes after.
  const i = name === 'export' && !res.isError ? 1 : 0;
  assert.equal(res.content[i]?.type, 'text', `${name}: content[${i}]`);
  assert.deepEqual(JSON.parse(res.content[i].text), res.structuredContent, `${name}: text and structured content differ`);
}

/**
 * Runs the binary with args (and stdin) to its end; resolves to
 * {code, signal, stdout, stderr}. A run that outlasts timeoutMs is killed
 * and fails the test.
 */
export function runBinary(args, { input, env = {}, timeoutMs = 20000 } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(BIN, args, { env: cleanEnv(env), stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => { stdout += c; });
    child.stderr.on('data', (c) => { stderr += c; });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`memgate ${args[0]} did not exit within ${timeoutMs} ms`));
    }, timeoutMs);
    child.on('error', (err) => { clearTimeout(timer); reject(err); });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
    child.stdin.end(input ?? '');
  });
}

/**
 * Expects a JSON-RPC error with code from fn.
 */
export async function rejectsWithCode(fn, code) {
  await assert.rejects(fn, (err) => {
    assert.equal(err.code, code, `error code of ${err.message}`);
    return true;
  });
}
