// bloomeryd through node-redis (@redis/client) and its Bloom module
// (@redis/bloom): every BF, CF, CMS, TOPK and TDIGEST command the module
// has, in RESP2 and RESP3, with the client's own reply transforms, plus
// the errors a client sees for a missing key and a wrong type.
//
// The server is $BLOOMERYD (default: build/bloomeryd), started by this file
// on a free port with a temporary data directory.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createClient, RESP_TYPES } from '@redis/client';
import bloom from '@redis/bloom';
import { startServer, stopServer } from './server.mjs';

// The package is CommonJS: its default export arrives wrapped once more.
const RedisBloomModules = bloom.default ?? bloom;

let server, dir, port;
const clients = {};

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'bloomery-node-'));
  ({ server, port } = await startServer((p) => ['--port', String(p), '--dir',
                                                   path.join(dir, 'data'), '--save', '']));
  for (const resp of [2, 3]) {
    const c = createClient({ socket: { port, host: '127.0.0.1' }, RESP: resp,
                             modules: RedisBloomModules });
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

// SCANDUMP's chunks as the client gives them back, read as bytes (its
// default decodes bulk strings as UTF-8 text).
async function dump(c, key) {
  const family = key === 'cf' ? 'cf' : 'bf';
  const raw = c.withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer });
  const chunks = [];
  for (let iterator = 0; ;) {
    const r = await raw[family].scanDump(key, iterator);
    if (r.iterator === 0) return chunks;
    chunks.push(r);
    iterator = r.iterator;
  }
}

// Each test runs in both protocols on its own keys.
function both(name, fn) {
  for (const resp of [2, 3]) {
    test(`${name} (RESP${resp})`, async () => {
      const c = clients[resp];
      await c.flushAll();
      await fn(c, resp);
    });
  }
}

both('BF: reserve, add, exists, insert, info, card, scandump and loadchunk', async (c) => {
  assert.equal(await c.bf.reserve('bf', 0.01, 1000), 'OK');
  assert.equal(await c.bf.add('bf', 'a'), true);
  assert.equal(await c.bf.add('bf', 'a'), false);
  assert.deepEqual(await c.bf.mAdd('bf', ['b', 'c', 'a']), [true, true, false]);
  assert.equal(await c.bf.exists('bf', 'b'), true);
  assert.equal(await c.bf.exists('bf', 'zz'), false);
  assert.deepEqual(await c.bf.mExists('bf', ['a', 'zz']), [true, false]);
  assert.deepEqual(await c.bf.insert('bf2', ['x', 'y'], { CAPACITY: 100, ERROR: 0.001 }),
                   [true, true]);
  assert.equal(await c.bf.card('bf'), 3);
  const info = await c.bf.info('bf');
  assert.equal(Number(info['Capacity'] ?? info.get?.('Capacity')), 1000);
  assert.equal(Number(info['Number of items inserted'] ?? info.get?.('Number of items inserted')), 3);
  // SCANDUMP chunks restored into another key answer the same.
  const chunks = await dump(c, 'bf');
  assert.ok(chunks.length >= 1);
  for (const ch of chunks) assert.equal(await c.bf.loadChunk('copy', ch.iterator, ch.chunk), 'OK');
  assert.deepEqual(await c.bf.mExists('copy', ['a', 'b', 'c', 'zz']), [true, true, true, false]);
  await assert.rejects(c.bf.reserve('bf', 0.01, 1000), /item exists/);
});

both('CF: reserve, add, addnx, insert, exists, count, del, info, scandump and loadchunk', async (c, resp) => {
  assert.equal(await c.cf.reserve('cf', 1000), 'OK');
  assert.equal(await c.cf.add('cf', 'a'), true);
  assert.equal(await c.cf.addNX('cf', 'a'), false);
  assert.equal(await c.cf.addNX('cf', 'b'), true);
  assert.deepEqual(await c.cf.insert('cf', ['c', 'a']), [true, true]);
  // CF.INSERTNX answers integers in RESP3 too, and the client passes them on.
  assert.deepEqual(await c.cf.insertNX('cf', ['d', 'a']), resp === 3 ? [1, 0] : [true, false]);
  assert.equal(await c.cf.exists('cf', 'a'), true);
  assert.equal(await c.cf.exists('cf', 'zz'), false);
  assert.equal(await c.cf.count('cf', 'a'), 2);
  assert.equal(await c.cf.del('cf', 'a'), true);
  assert.equal(await c.cf.count('cf', 'a'), 1);
  const info = await c.cf.info('cf');
  assert.equal(Number(info['Number of items inserted'] ?? info.get?.('Number of items inserted')), 4);
  const chunks = await dump(c, 'cf');
  assert.ok(chunks.length >= 1);
  for (const ch of chunks) assert.equal(await c.cf.loadChunk('copy', ch.iterator, ch.chunk), 'OK');
  for (const item of ['a', 'b', 'c', 'd']) assert.equal(await c.cf.exists('copy', item), true);
  assert.equal(await c.cf.exists('copy', 'zz'), false);
});

both('CMS: initbydim, initbyprob, incrby, query, merge with weights, info', async (c) => {
  assert.equal(await c.cms.initByDim('cms', 2000, 5), 'OK');
  assert.deepEqual(await c.cms.incrBy('cms', [{ item: 'a', incrementBy: 3 },
                                              { item: 'b', incrementBy: 1 }]), [3, 1]);
  assert.deepEqual(await c.cms.incrBy('cms', { item: 'a', incrementBy: 2 }), [5]);
  assert.deepEqual(await c.cms.query('cms', ['a', 'b', 'never']), [5, 1, 0]);
  const info = await c.cms.info('cms');
  assert.deepEqual([info.width, info.depth, info.count].map(Number), [2000, 5, 6]);
  assert.equal(await c.cms.initByProb('prob', 0.001, 0.01), 'OK');
  const pinfo = await c.cms.info('prob');
  // width = ceil(2 / error), depth = ceil(log(probability) / log(0.5))
  assert.deepEqual([pinfo.width, pinfo.depth].map(Number), [2000, 7]);
  assert.equal(await c.cms.initByDim('other', 2000, 5), 'OK');
  await c.cms.incrBy('other', { item: 'a', incrementBy: 10 });
  assert.equal(await c.cms.initByDim('dest', 2000, 5), 'OK');
  assert.equal(await c.cms.merge('dest', [{ name: 'cms', weight: 2 }, { name: 'other', weight: 1 }]),
               'OK');
  assert.deepEqual(await c.cms.query('dest', ['a', 'b']), [20, 2]);
  assert.equal(await c.cms.merge('dest', ['cms', 'other']), 'OK');
  assert.deepEqual(await c.cms.query('dest', ['a', 'b']), [15, 1]);
  await assert.rejects(c.cms.query('missing', ['a']), /does not exist/);
  await assert.rejects(c.cms.initByDim('cms', 10, 10), /already exists/);
  await assert.rejects(c.cms.merge('dest', ['cms', 'prob']), /width\/depth is not equal/);
  await c.bf.add('bloom', 'x');
  await assert.rejects(c.cms.query('bloom', ['a']), /WRONGTYPE/);
});

both('TOPK: reserve, add, incrby, query, count, list, list with counts, info', async (c) => {
  assert.equal(await c.topK.reserve('tk', 2, { width: 50, depth: 4, decay: 0.9 }), 'OK');
  assert.deepEqual(await c.topK.add('tk', ['a', 'b']), [null, null]);
  assert.deepEqual(await c.topK.incrBy('tk', [{ item: 'a', incrementBy: 10 },
                                              { item: 'c', incrementBy: 20 }]), [null, 'b']);
  assert.deepEqual(await c.topK.query('tk', ['a', 'b', 'c']), [true, false, true]);
  assert.deepEqual(await c.topK.count('tk', ['a', 'c', 'never']), [11, 20, 0]);
  assert.deepEqual((await c.topK.list('tk')).sort(), ['a', 'c']);
  assert.deepEqual(await c.topK.listWithCount('tk'),
                   [{ item: 'c', count: 20 }, { item: 'a', count: 11 }]);
  const info = await c.topK.info('tk');
  assert.deepEqual([info.k, info.width, info.depth].map(Number), [2, 50, 4]);
  assert.equal(Number(info.decay), 0.9);
  assert.equal(await c.topK.reserve('dflt', 5), 'OK');
  const dinfo = await c.topK.info('dflt');
  assert.deepEqual([dinfo.k, dinfo.width, dinfo.depth].map(Number), [5, 8, 7]);
  await assert.rejects(c.topK.add('missing', ['a']), /does not exist/);
  await assert.rejects(c.topK.reserve('tk', 3), /already exists/);
  await c.bf.add('bloom', 'x');
  await assert.rejects(c.topK.list('bloom'), /WRONGTYPE/);
});

both('TDIGEST: create, add, min, max, quantile, cdf, ranks, trimmed mean, merge, reset, info',
     async (c) => {
  assert.equal(await c.tDigest.create('td', { COMPRESSION: 100 }), 'OK');
  assert.equal(await c.tDigest.add('td', [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]), 'OK');
  assert.equal(await c.tDigest.min('td'), 1);
  assert.equal(await c.tDigest.max('td'), 10);
  assert.deepEqual(await c.tDigest.quantile('td', [0, 1]), [1, 10]);
  const [median] = await c.tDigest.quantile('td', [0.5]);
  assert.ok(median >= 5 && median <= 6, `median ${median}`);
  const [below, above] = await c.tDigest.cdf('td', [0, 11]);
  assert.deepEqual([below, above], [0, 1]);
  assert.deepEqual(await c.tDigest.rank('td', [0, 11]), [-1, 10]);
  assert.deepEqual(await c.tDigest.revRank('td', [11, 0]), [-1, 10]);
  // Read as text: node-redis turns RESP2's "inf" into NaN (its parser
  // falls through from the "inf" case), whichever server answers.
  const text = c.withTypeMapping({ [RESP_TYPES.DOUBLE]: String });
  assert.deepEqual((await text.tDigest.byRank('td', [0, 9, 10])).map(String), ['1', '10', 'inf']);
  assert.deepEqual((await text.tDigest.byRevRank('td', [0, 9, 10])).map(String),
                   ['10', '1', '-inf']);
  const mean = await c.tDigest.trimmedMean('td', 0, 1);
  assert.ok(Math.abs(mean - 5.5) < 1e-9, `mean ${mean}`);
  const info = await c.tDigest.info('td');
  const get = (k) => Number(info[k] ?? info.get?.(k));
  assert.equal(get('Compression'), 100);
  assert.equal(get('Observations'), 10);
  assert.equal(await c.tDigest.create('other'), 'OK');
  assert.equal(await c.tDigest.add('other', [100]), 'OK');
  assert.equal(await c.tDigest.merge('merged', ['td', 'other']), 'OK');
  assert.equal(await c.tDigest.max('merged'), 100);
  assert.equal(Number((await c.tDigest.info('merged'))['Observations'] ??
                      (await c.tDigest.info('merged')).get?.('Observations')), 11);
  assert.equal(await c.tDigest.reset('td'), 'OK');
  assert.ok(Number.isNaN(await c.tDigest.min('td')));
  assert.deepEqual((await c.tDigest.quantile('td', [0.5])).map(Number.isNaN), [true]);
  await assert.rejects(c.tDigest.add('missing', [1]), /does not exist/);
  await assert.rejects(c.tDigest.create('other'), /already exists/);
  await assert.rejects(c.tDigest.quantile('other', [2]), /quantile should be in \[0,1\]/);
  await c.bf.add('bloom', 'x');
  await assert.rejects(c.tDigest.min('bloom'), /WRONGTYPE/);
});
