// bloomeryd over TLS through node-redis: a TLS-only server (port 0) that
// asks for client certificates (tls-auth-clients yes); BF commands and a
// pipeline of 10,000 BF.ADD, so many TLS records flow each way, in RESP2
// and RESP3; a client that does not trust the server's CA cannot connect.
//
// The certificates are made here with the openssl command in a temporary
// directory: a CA, a server certificate for 127.0.0.1 and a client one.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createClient } from '@redis/client';
import bloom from '@redis/bloom';
import { startServer, stopServer } from './server.mjs';

// The package is CommonJS: its default export arrives wrapped once more.
const RedisBloomModules = bloom.default ?? bloom;

let server, dir, port;
const clients = {};
const file = (name) => path.join(dir, name);
const openssl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });

function makeCerts() {
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '30',
          '-keyout', 'ca.key', '-out', 'ca.crt', '-subj', '/CN=ca');
  for (const [name, san] of [['server', true], ['client', false]]) {
    openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`,
            '-out', `${name}.csr`, '-subj', `/CN=bloomery-${name}`,
            ...(san ? ['-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1'] : []));
    openssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key',
            '-CAcreateserial', '-days', '30', '-copy_extensions', 'copy', '-out', `${name}.crt`);
  }
}

// A client's TLS socket options; without ca, Node's default roots only.
function socket({ ca = true, cert = true } = {}) {
  return {
    tls: true, host: '127.0.0.1', port, reconnectStrategy: false,
    ...(ca ? { ca: readFileSync(file('ca.crt')) } : {}),
    ...(cert ? { cert: readFileSync(file('client.crt')), key: readFileSync(file('client.key')) }
             : {}),
  };
}

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'bloomery-node-tls-'));
  makeCerts();
  ({ server, port } = await startServer((p) => [
    '--port', '0', '--tls-port', String(p), '--tls-cert-file', file('server.crt'),
    '--tls-key-file', file('server.key'), '--tls-ca-cert-file', file('ca.crt'),
    '--tls-auth-clients', 'yes', '--dir', path.join(dir, 'data'), '--save', '']));
  for (const resp of [2, 3]) {
    const c = createClient({ socket: socket(), RESP: resp, modules: RedisBloomModules });
    c.on('error', () => {});
    await c.connect();
    clients[resp] = c;
  }
});

after(async () => {
  for (const c of Object.values(clients)) await c.quit();
  if (server) assert.equal(await stopServer(server), 0, 'bloomeryd exits 0 on SIGTERM');
  rmSync(dir, { recursive: true, force: true });
});

for (const resp of [2, 3]) {
  test(`BF commands and a pipeline of 10,000 BF.ADD over TLS (RESP${resp})`, async () => {
    const c = clients[resp];
    await c.flushAll();
    assert.equal(await c.bf.reserve('bf', 0.001, 20000), 'OK');
    assert.equal(await c.bf.add('bf', 'a'), true);
    assert.equal(await c.bf.add('bf', 'a'), false);
    assert.deepEqual(await c.bf.mAdd('bf', ['b', 'c', 'a']), [true, true, false]);
    assert.equal(await c.bf.exists('bf', 'b'), true);
    assert.equal(await c.bf.exists('bf', 'zz'), false);
    // Sent together: node-redis writes them into the socket back to back.
    const items = Array.from({ length: 10000 }, (_, i) => `item-${i}`);
    const added = await Promise.all(items.map((it) => c.bf.add('bf', it)));
    assert.equal(added.length, items.length);
    assert.ok(added.filter(Boolean).length > items.length - 50);
    assert.ok((await c.bf.mExists('bf', items)).every(Boolean));
    const info = await c.bf.info('bf');
    assert.equal(Number(info['Capacity'] ?? info.get?.('Capacity')), 20000);
    const inserted = Number(info['Number of items inserted'] ??
                            info.get?.('Number of items inserted'));
    assert.equal(inserted, 3 + added.filter(Boolean).length);
  });
}

test('a client that does not trust the CA cannot connect', async () => {
  const c = createClient({ socket: socket({ ca: false }) });
  c.on('error', () => {});
  await assert.rejects(c.connect(), (e) => {
    assert.match(e.code ?? '', /UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT/);
    return true;
  });
});

test('a client without a certificate is refused', async () => {
  const c = createClient({ socket: socket({ cert: false }) });
  // The server's alert arrives as the client's error event: after the
  // handshake in TLS 1.3 (connect() has resolved by then), during it in 1.2.
  const refused = new Promise((resolve) => c.on('error', resolve));
  c.connect().catch(() => {});
  assert.match((await refused).message, /certificate required|handshake failure/);
  if (c.isOpen) c.destroy();
});
