// Authorization through the binary: a JWT-protected server driven by the
// official TypeScript client (tokens signed here with node:crypto, keys
// served from a JWKS file), per-user namespaces, scopes, challenges, RFC 9728
// metadata, session binding, and a static token.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync, sign as cryptoSign } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';

import { dataDir } from './harness.mjs';
import {
  startHttpServer, connectSession, connectStateless, request, rpcHeaders, initializeBody, STATEFUL,
} from './http-harness.mjs';

const ISSUER = 'https://id.example.com/';
const AUDIENCE = 'memgate-e2e';

const b64url = (buf) => Buffer.from(buf).toString('base64url');

/** An identity service: a P-256 key, its JWKS in a file, and tokens it signs. */
async function identityService(dir) {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = { ...publicKey.export({ format: 'jwk' }), kid: 'e2e-1', alg: 'ES256', use: 'sig' };
  const jwksFile = path.join(dir, 'jwks.json');
  await writeFile(jwksFile, JSON.stringify({ keys: [jwk] }));
  const now = () => Math.floor(Date.now() / 1000);
  return {
    jwksFile,
    /** A signed token for sub with scope; claims override the defaults (undefined deletes). */
    token(sub, scope = 'memory:read memory:write', claims = {}, header = {}) {
      const body = { iss: ISSUER, aud: AUDIENCE, sub, scope, iat: now(), exp: now() + 3600, ...claims };
      for (const [k, v] of Object.entries(body)) if (v === undefined) delete body[k];
      const h = { alg: 'ES256', typ: 'JWT', kid: 'e2e-1', ...header };
      const input = `${b64url(JSON.stringify(h))}.${b64url(JSON.stringify(body))}`;
      const sig = cryptoSign('sha256', Buffer.from(input), { key: privateKey, dsaEncoding: 'ieee-p1363' });
      return `${input}.${b64url(sig)}`;
    },
  };
}

const bearer = (token) => ({ Authorization: `Bearer ${token}` });

/** A raw initialize with headers; resolves to {status, headers, ...}. */
const initialize = (url, headers = {}) =>
  request(url, { method: 'POST', headers: rpcHeaders(headers), body: initializeBody(STATEFUL) });

async function jwtServer(t, args = []) {
  const dir = await dataDir(t);
  const idp = await identityService(dir);
  const srv = await startHttpServer(t, dir, [
    '--jwt-issuer', ISSUER, '--jwt-audience', AUDIENCE, '--jwt-jwks-file', idp.jwksFile,
    '--namespace-strategy', 'token', '--namespace-from-subject', ...args,
  ]);
  return { srv, idp };
}

test('a JWT-protected server challenges, publishes its metadata, and refuses forged tokens', async (t) => {
  const { srv, idp } = await jwtServer(t);
  const metadataURL = srv.at('/.well-known/oauth-protected-resource/mcp');

  const none = await initialize(srv.url);
  assert.equal(none.status, 401);
  const challenge = none.headers['www-authenticate'];
  assert.match(challenge, /^Bearer /);
  assert.ok(challenge.includes(`resource_metadata="${metadataURL}"`), challenge);
  assert.ok(challenge.includes('scope="memory:read memory:write"'), challenge);
  assert.ok(!challenge.includes('error='), `no credential, no error code: ${challenge}`);

  const meta = await request(metadataURL);
  assert.equal(meta.status, 200);
  assert.equal(meta.json.resource, srv.url);
  assert.deepEqual(meta.json.authorization_servers, [ISSUER]);
  assert.deepEqual(meta.json.scopes_supported, ['memory:read', 'memory:write']);
  assert.deepEqual(meta.json.bearer_methods_supported, ['header']);

  const good = idp.token('alice');
  const [h, p] = good.split('.');
  const forged = {
    'alg none': `${b64url(JSON.stringify({ alg: 'none', kid: 'e2e-1' }))}.${p}.`,
    'a changed payload': `${h}.${b64url(JSON.stringify({ iss: ISSUER, aud: AUDIENCE, sub: 'admin', exp: 9999999999 }))}.${good.split('.')[2]}`,
    'another audience': idp.token('alice', undefined, { aud: 'someone-else' }),
    'another issuer': idp.token('alice', undefined, { iss: 'https://evil.example.com/' }),
    'an expired token': idp.token('alice', undefined, { exp: Math.floor(Date.now() / 1000) - 3600 }),
    'a token from the future': idp.token('alice', undefined, { nbf: Math.floor(Date.now() / 1000) + 3600 }),
    'no subject': idp.token(undefined),
    'an unknown key': idp.token('alice', undefined, {}, { kid: 'other' }),
    'garbage': 'not-a-jwt',
  };
  for (const [name, token] of Object.entries(forged)) {
    const res = await initialize(srv.url, bearer(token));
    assert.equal(res.status, 401, name);
    assert.match(res.headers['www-authenticate'], /error="invalid_token"/, name);
  }
  const malformed = await initialize(srv.url, { Authorization: 'Bearer a b' });
  assert.equal(malformed.status, 401);
  assert.match(malformed.headers['www-authenticate'], /error="invalid_request"/);
  const inQuery = await request(`${srv.url}?access_token=${good}`, {
    method: 'POST', headers: rpcHeaders(bearer(good)), body: initializeBody(STATEFUL),
  });
  assert.equal(inQuery.status, 401, 'a token in the query string is refused');

  const noRead = await initialize(srv.url, bearer(idp.token('carol', 'memory:write')));
  assert.equal(noRead.status, 403);
  assert.match(noRead.headers['www-authenticate'], /error="insufficient_scope"/);
  assert.match(noRead.headers['www-authenticate'], /scope="memory:read"/);

  assert.ok(!srv.stderr().includes(good), 'the log holds no token');
  assert.ok(!srv.stderr().includes('alice'), 'the log holds no subject');
});

test('each user of a JWT-protected server gets a store of their own; scopes decide writes', async (t) => {
  const { srv, idp } = await jwtServer(t);
  const alice = await connectSession(t, srv.url, bearer(idp.token('alice')));
  await alice.ok('remember', { id: 'a1', text: 'Alice keeps her notes in Obsidian.' });
  const aliceNS = (await alice.ok('stats')).namespace;
  assert.match(aliceNS, /^u-[0-9a-f]{32}$/);

  // Bob, on the stateless revision too, sees none of it.
  const bob = await connectStateless(t, srv.url, bearer(idp.token('bob')));
  const bobStats = await bob.ok('stats');
  assert.notEqual(bobStats.namespace, aliceNS);
  assert.equal(bobStats.count, 0);
  assert.equal((await bob.fail('get', { id: 'a1' })).code, 'not_found');

  // The same subject from a read-only token reads its store but cannot write.
  const reader = await connectSession(t, srv.url, bearer(idp.token('alice', 'memory:read')));
  assert.equal((await reader.ok('get', { id: 'a1' })).memory.text, 'Alice keeps her notes in Obsidian.');
  assert.equal((await reader.fail('remember', { text: 'nope' })).code, 'forbidden');
  assert.equal((await reader.fail('forget', { id: 'a1' })).code, 'forbidden');

  // A namespace claim picks the store, and confines the token to it.
  const team = await connectSession(t, srv.url, bearer(idp.token('dan', undefined, { memgate_namespace: 'team-a' })));
  assert.equal((await team.ok('stats')).namespace, 'team-a');
});

test('a session belongs to the user who opened it', async (t) => {
  const { srv, idp } = await jwtServer(t);
  const alice = await connectSession(t, srv.url, bearer(idp.token('alice')));
  const sessionId = alice.transport.sessionId;
  assert.ok(sessionId);
  const hijack = await request(srv.url, {
    method: 'POST',
    headers: rpcHeaders({ ...bearer(idp.token('mallory')), 'Mcp-Session-Id': sessionId, 'MCP-Protocol-Version': STATEFUL }),
    body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'stats', arguments: {} } }),
  });
  assert.equal(hijack.status, 403, `another user's token on alice's session: ${hijack.status} ${hijack.text}`);
  const noToken = await request(srv.url, {
    method: 'POST',
    headers: rpcHeaders({ 'Mcp-Session-Id': sessionId, 'MCP-Protocol-Version': STATEFUL }),
    body: JSON.stringify({ jsonrpc: '2.0', id: 10, method: 'tools/list', params: {} }),
  });
  assert.equal(noToken.status, 401, 'a session id is no credential');
  await alice.ok('stats');
});

test('MEMGATE_TOKEN guards a server with one static token', async (t) => {
  const token = 'e2e-static-token-0123456789';
  const srv = await startHttpServer(t, await dataDir(t), [], { MEMGATE_TOKEN: token });
  const s = await connectSession(t, srv.url, bearer(token));
  await s.ok('remember', { text: 'Static tokens work.' });
  assert.equal((await s.ok('stats')).count, 1);
  const wrong = await initialize(srv.url, bearer(`${token}x`));
  assert.equal(wrong.status, 401);
  assert.match(wrong.headers['www-authenticate'], /error="invalid_token"/);
  const missing = await initialize(srv.url);
  assert.equal(missing.status, 401);
  assert.ok(!missing.headers['www-authenticate'].includes('error='));
  assert.equal((await request(srv.at('/.well-known/oauth-protected-resource/mcp'))).status, 404,
    'static tokens publish no OAuth metadata');
  assert.ok(!srv.stderr().includes(token), 'the log holds no token');
});

test('a MEMGATE_TOKEN shorter than 16 characters stops the start', async (t) => {
  await assert.rejects(
    startHttpServer(t, await dataDir(t), [], { MEMGATE_TOKEN: '123456789012345' }),
    /MEMGATE_TOKEN must be at least 16 characters/,
  );
});
