// An OTLP/HTTP receiver for the end-to-end suite: it listens on 127.0.0.1,
// decodes the protobuf export requests of traces that an OpenTelemetry
// exporter sends (opentelemetry-proto's ExportTraceServiceRequest), and keeps
// the spans. The decoder reads the protobuf wire format itself: the fields
// of the messages below, by their numbers in opentelemetry-proto, and skips
// the rest.

import http from 'node:http';
import zlib from 'node:zlib';

/** Reads one protobuf message into [fieldNumber, wireType, value] entries. */
function fields(buf) {
  const out = [];
  let i = 0;
  const varint = () => {
    let v = 0n;
    let shift = 0n;
    for (;;) {
      if (i >= buf.length) throw new Error('truncated varint');
      const b = buf[i++];
      v |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
      shift += 7n;
    }
  };
  while (i < buf.length) {
    const key = Number(varint());
    const num = key >>> 3;
    const type = key & 7;
    switch (type) {
      case 0: out.push([num, type, varint()]); break;
      case 1: out.push([num, type, buf.subarray(i, i + 8)]); i += 8; break;
      case 2: {
        const n = Number(varint());
        if (i + n > buf.length) throw new Error('truncated field');
        out.push([num, type, buf.subarray(i, i + n)]);
        i += n;
        break;
      }
      case 5: out.push([num, type, buf.subarray(i, i + 4)]); i += 4; break;
      default: throw new Error(`wire type ${type}`);
    }
  }
  return out;
}

const each = (buf, num) => fields(buf).filter(([n]) => n === num).map(([, , v]) => v);
const one = (buf, num) => each(buf, num)[0];
const text = (v) => (v === undefined ? '' : Buffer.from(v).toString('utf8'));
const hex = (v) => (v === undefined ? '' : Buffer.from(v).toString('hex'));

/** AnyValue: string_value 1, bool_value 2, int_value 3, double_value 4. */
function anyValue(buf) {
  for (const [num, type, v] of fields(buf)) {
    if (num === 1 && type === 2) return text(v);
    if (num === 2 && type === 0) return v !== 0n;
    if (num === 3 && type === 0) return BigInt.asIntN(64, v).toString();
    if (num === 4 && type === 1) return Buffer.from(v).readDoubleLE(0);
  }
  return '';
}

/** KeyValue: key 1, value 2. */
function attributes(list) {
  const out = {};
  for (const kv of list) out[text(one(kv, 1))] = anyValue(one(kv, 2) ?? Buffer.alloc(0));
  return out;
}

/**
 * Span: trace_id 1, span_id 2, trace_state 3, parent_span_id 4, name 5,
 * kind 6, attributes 9, links 13 (trace_id 1, span_id 2), status 15 (code 3).
 */
function span(buf, resource) {
  const status = one(buf, 15);
  const statusCode = status ? fields(status).find(([n]) => n === 3)?.[2] ?? 0n : 0n;
  return {
    traceId: hex(one(buf, 1)),
    spanId: hex(one(buf, 2)),
    traceState: text(one(buf, 3)),
    parentSpanId: hex(one(buf, 4)),
    name: text(one(buf, 5)),
    kind: Number(fields(buf).find(([n]) => n === 6)?.[2] ?? 0n),
    attributes: attributes(each(buf, 9)),
    links: each(buf, 13).map((l) => ({ traceId: hex(one(l, 1)), spanId: hex(one(l, 2)) })),
    status: Number(statusCode),
    resource,
  };
}

/**
 * ExportTraceServiceRequest: resource_spans 1; ResourceSpans: resource 1
 * (attributes 1), scope_spans 2; ScopeSpans: spans 2.
 */
export function decodeTraces(buf) {
  const spans = [];
  for (const rs of each(buf, 1)) {
    const res = one(rs, 1);
    const resource = res ? attributes(each(res, 1)) : {};
    for (const ss of each(rs, 2)) {
      for (const s of each(ss, 2)) spans.push(span(s, resource));
    }
  }
  return spans;
}

/** Span kinds of opentelemetry-proto. */
export const KIND = { INTERNAL: 1, SERVER: 2, CLIENT: 3 };

/**
 * Starts a receiver on a loopback port (a free one by default); stopped
 * when the test ends. Resolves to {url, spans, requests, connections, waitFor(pred, ms)}.
 * @param {import('node:test').TestContext} t
 * @param {number} [port]
 */
export async function startReceiver(t, port = 0) {
  const spans = [];
  const waiters = new Set();
  let requests = 0;
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      requests++;
      let body = Buffer.concat(chunks);
      try {
        if (req.headers['content-encoding'] === 'gzip') body = zlib.gunzipSync(body);
        if (req.url === '/v1/traces') {
          if (req.headers['content-type'] !== 'application/x-protobuf') throw new Error(`content type ${req.headers['content-type']}`);
          spans.push(...decodeTraces(body));
          for (const w of waiters) w();
        }
        res.writeHead(200, { 'content-type': 'application/x-protobuf' });
        res.end();
      } catch (err) {
        res.writeHead(400);
        res.end(String(err));
      }
    });
  });
  // Connections, not requests: an exporter left at its defaults speaks TLS,
  // which this plain HTTP server never reads as a request.
  let connections = 0;
  server.on('connection', () => { connections++; });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  t.after(() => new Promise((resolve) => server.close(resolve)));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    spans,
    requests: () => requests,
    connections: () => connections,
    /** Resolves once pred(spans) holds; rejects after ms. */
    waitFor(pred, ms = 15000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (pred(spans)) {
            waiters.delete(check);
            clearTimeout(timer);
            resolve(spans);
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`spans not received within ${ms} ms; got: ${spans.map((s) => s.name).join(', ')}`));
        }, ms);
        waiters.add(check);
        check();
      });
    },
  };
}
