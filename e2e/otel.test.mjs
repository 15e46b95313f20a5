// OpenTelemetry: the built binary, configured by the standard OTEL_*
// variables alone, exports the spans of a tools/call to an OTLP/HTTP
// receiver on 127.0.0.1, in the caller's trace: from the traceparent header
// over HTTP, from params._meta over HTTP and stdio.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { dataDir, startServer } from './harness.mjs';
import { startHttpServer, connectSession } from './http-harness.mjs';
import { startReceiver, KIND } from './otlp.mjs';

const agentHTTP = { trace: '4bf92f3577b34da6a3ce929d0e0e4736', span: '00f067aa0ba902b7' };
const agentMeta = { trace: '0af7651916cd43dd8448eb211c80319c', span: 'b7ad6b7169203331' };
const agentPipe = { trace: '5b8efff798038103d269b633813fc60c', span: 'eee19b7ec3c1b174' };
const traceparent = (c) => `00-${c.trace}-${c.span}-01`;

/** The variables of an OTLP endpoint, and nothing else of the caller's OTEL_ ones. */
function otelEnv(url) {
  const env = {};
  for (const k of Object.keys(process.env)) if (k.startsWith('OTEL_')) env[k] = '';
  return { ...env, OTEL_EXPORTER_OTLP_ENDPOINT: url, OTEL_SERVICE_NAME: 'memgate-e2e', OTEL_BSP_SCHEDULE_DELAY: '50' };
}

const named = (spans, name, trace) => spans.filter((s) => s.name === name && (!trace || s.traceId === trace));
const childrenOf = (spans, parent) =>
  Object.fromEntries(spans.filter((s) => s.traceId === parent.traceId && s.parentSpanId === parent.spanId).map((s) => [s.name, s]));

function checkCall(spans, call, transport) {
  assert.equal(call.kind, KIND.SERVER);
  assert.equal(call.attributes['mcp.method.name'], 'tools/call');
  assert.equal(call.attributes['gen_ai.tool.name'], 'search');
  assert.equal(call.attributes['gen_ai.operation.name'], 'execute_tool');
  assert.equal(call.attributes['network.transport'], transport);
  assert.match(call.attributes['jsonrpc.request.id'] ?? '', /^\d+$/);
  assert.equal(call.attributes['error.type'], undefined);
  assert.equal(call.resource['service.name'], 'memgate-e2e');
  const kids = childrenOf(spans, call);
  assert.ok(kids['memgate.lease'], `no lease span under the call: ${Object.keys(kids)}`);
  const op = kids.search_memory;
  assert.ok(op, `no search_memory span under the call: ${Object.keys(kids)}`);
  assert.equal(op.kind, KIND.INTERNAL);
  assert.equal(op.attributes['gen_ai.operation.name'], 'search_memory');
  assert.equal(op.attributes['gen_ai.memory.record.count'], '1');
  assert.match(op.attributes['gen_ai.memory.store.id'], /^[0-9a-f]{32}$/);
}

test('over HTTP, a call joins the trace of its traceparent header, or of its _meta', async (t) => {
  const rcv = await startReceiver(t);
  const server = await startHttpServer(t, await dataDir(t), [], otelEnv(rcv.url));
  const s = await connectSession(t, server.url, { traceparent: traceparent(agentHTTP) });
  await s.ok('remember', { text: 'staging deploys happen on Tuesdays' });
  await s.ok('search', { query: 'staging deploys' });
  const res = await s.client.callTool({ name: 'search', arguments: { query: 'deploys' }, _meta: { traceparent: traceparent(agentMeta) } });
  assert.ok(!res.isError);

  const spans = await rcv.waitFor((all) => named(all, 'tools/call search', agentHTTP.trace).length >= 1 &&
    named(all, 'tools/call search', agentMeta.trace).length >= 1 && named(all, 'search_memory').length >= 2);

  // The header: caller → POST /mcp → tools/call search → lease, search_memory.
  const call = named(spans, 'tools/call search', agentHTTP.trace)[0];
  const httpSpan = spans.find((x) => x.spanId === call.parentSpanId);
  assert.ok(httpSpan, 'the HTTP span of the call was exported');
  assert.equal(httpSpan.name, 'POST /mcp');
  assert.equal(httpSpan.kind, KIND.SERVER);
  assert.equal(httpSpan.traceId, agentHTTP.trace);
  assert.equal(httpSpan.parentSpanId, agentHTTP.span);
  assert.equal(httpSpan.attributes['http.route'], '/mcp');
  assert.equal(call.attributes['mcp.protocol.version'], '2025-11-25');
  checkCall(spans, call, 'tcp');

  // _meta: the call's parent is the one it names; it links to its HTTP span.
  const metaCall = named(spans, 'tools/call search', agentMeta.trace)[0];
  assert.equal(metaCall.parentSpanId, agentMeta.span);
  assert.equal(metaCall.links.length, 1);
  assert.equal(metaCall.links[0].traceId, agentHTTP.trace);
  assert.equal(spans.find((x) => x.spanId === metaCall.links[0].spanId)?.name, 'POST /mcp');
  checkCall(spans, metaCall, 'tcp');

  // Nothing exported holds what the calls carried.
  const all = JSON.stringify(spans);
  for (const word of ['staging', 'Tuesdays', 'deploys']) assert.ok(!all.includes(word), `a span holds "${word}"`);
});

test('over stdio, a call joins the trace of its _meta', async (t) => {
  const rcv = await startReceiver(t);
  const server = await startServer(t, await dataDir(t), [], otelEnv(rcv.url));
  await server.ok('remember', { text: 'staging deploys happen on Tuesdays' });
  const res = await server.client.callTool({ name: 'search', arguments: { query: 'staging' }, _meta: { traceparent: traceparent(agentPipe) } });
  assert.ok(!res.isError);
  assert.equal((await server.close()).code, 0); // the end of stdin exports what is left

  const spans = await rcv.waitFor((all) => named(all, 'tools/call search', agentPipe.trace).length >= 1);
  const call = named(spans, 'tools/call search', agentPipe.trace)[0];
  assert.equal(call.parentSpanId, agentPipe.span);
  checkCall(spans, call, 'pipe');
  const remember = named(spans, 'tools/call remember')[0];
  assert.ok(remember, 'the remember was traced too');
  assert.equal(remember.parentSpanId, '', 'a call without a parent starts a trace');
  assert.ok(childrenOf(spans, remember).upsert_memory, 'upsert_memory under the remember');
});

test('with no OTEL_ variable, nothing is exported', async (t) => {
  // Where the SDK sends by default (OTLP/HTTP on localhost:4318), when that
  // port is free here; else a receiver nothing names.
  let rcv;
  try {
    rcv = await startReceiver(t, 4318);
  } catch (err) {
    t.diagnostic(`127.0.0.1:4318 is taken (${err.code}): a receiver on another port stands in`);
    rcv = await startReceiver(t);
  }
  const env = otelEnv(rcv.url);
  delete env.OTEL_EXPORTER_OTLP_ENDPOINT;
  const server = await startServer(t, await dataDir(t), [], env);
  await server.ok('remember', { text: 'a memory' });
  await server.ok('search', { query: 'memory' });
  assert.equal((await server.close()).code, 0);
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(rcv.connections(), 0);
});
