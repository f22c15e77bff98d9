// The in-process engines and the Redis engine (on a real redis-server) decide every request
// alike: random operation sequences (keys, costs, time steps including backwards steps and
// long gaps) for every algorithm and deduplicator, compared decision by decision. The
// in-process engine is the Go core itself (the module), so agreement is conformance.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

import Redis from 'ioredis';

import {
  algorithms,
  createBloomDeduplicator,
  createLimiter,
  createMultiLimiter,
  createRedisBloomDeduplicator,
  createRedisLimiter,
  createRedisMultiLimiter,
  createRedisSetDeduplicator,
  createRedisWindowDeduplicator,
  createSetDeduplicator,
  createWindowDeduplicator,
  RedstreamError,
  tokenBucket,
} from '../dist/index.js';
import { registry } from '../dist/generated/algorithms.js';
import { rng, startRedis } from './helpers.mjs';

// Two specs per algorithm, by its parameter shape (the registry's, src/generated/algorithms.ts),
// so that every algorithm of Go's registry is checked with no table of its own here.
const specsByShape = {
  bucket: [{ capacity: 5, rate: 2 }, { capacity: 2.5, rate: 0.7 }],
  window: [{ windowMs: 1000, limit: 5 }, { windowMs: 333.333, limit: 3 }],
};
const specsOf = Object.fromEntries(registry.map((r) => [r.name, specsByShape[r.shape].map((p) => ({ algorithm: r.name, ...p }))]));

const t0 = 1767225600000000;

test('Redis engine decides as the core, every algorithm', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const client = r.client();
  let decisions = 0;
  for (const a of algorithms) {
    for (const [si, spec] of specsOf[a].entries()) {
      const mem = await createLimiter(spec);
      const red = await createRedisLimiter(client, spec, { keyPrefix: `conf:${a}:${si}` });
      const rand = rng(1000 + si);
      let now = t0;
      for (let i = 0; i < 400; i++) {
        const step = rand(10);
        now += step < 6 ? rand(300_000) : step < 8 ? -rand(200_000) : step < 9 ? 0 : rand(5_000_000);
        now = Math.max(now, 0);
        const key = `k${rand(3)}`;
        const n = 1 + rand(Math.min(3, mem.limit.max));
        const want = mem.allow(key, { n, now });
        const got = await red.allow(key, { n, now });
        assert.deepEqual(got, want, `${a} spec ${si} step ${i}: key ${key} n ${n} now ${now}`);
        decisions++;
      }
    }
  }
  console.log(`engines agree on ${decisions} decisions`);
});

test('Redis multi-limit limiter decides as the in-process one', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const client = r.client();
  const specs = registry.map((r) => specsOf[r.name][0]); // one limit of every algorithm
  const mem = await createMultiLimiter(specs);
  const red = await createRedisMultiLimiter(client, specs, { keyPrefix: 'conf:multi' });
  const rand = rng(99);
  let now = t0;
  for (let i = 0; i < 400; i++) {
    now = Math.max(0, now + (rand(4) === 0 ? -rand(200_000) : rand(400_000)));
    const key = `k${rand(3)}`;
    const n = 1 + rand(2);
    assert.deepEqual(await red.allow(key, { n, now }), mem.allow(key, { n, now }), `step ${i}`);
  }
  await assert.rejects(red.allow('k', { n: 6 }), (e) => e.code === 'COST_TOO_LARGE');
});

test('Redis deduplicators decide as the in-process ones', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const client = r.client();
  const rand = rng(7);
  const win = await createWindowDeduplicator(2000);
  const rwin = await createRedisWindowDeduplicator(client, 'conf-win', 2000);
  const set = createSetDeduplicator();
  const rset = await createRedisSetDeduplicator(client, 'conf-set');
  const bloom = await createBloomDeduplicator({ insertions: 50, fpRate: 0.2, shards: 2 });
  const rbloom = await createRedisBloomDeduplicator(client, 'conf-bloom', { insertions: 50, fpRate: 0.2, shards: 2 });
  let now = t0;
  for (let i = 0; i < 500; i++) {
    now = Math.max(0, now + (rand(5) === 0 ? -rand(1_000_000) : rand(800_000)));
    const e = `e${rand(40)}`;
    const op = rand(3);
    if (op === 0) {
      assert.equal(await rwin.checkAndMark(e, now), win.checkAndMark(e, now), `window step ${i}`);
    } else if (op === 1) {
      assert.equal(await rwin.isDuplicate(e, now), win.isDuplicate(e, now), `window check ${i}`);
    } else {
      assert.equal(await rwin.uniqueCount(now), win.uniqueCount(now), `window count ${i}`);
    }
    assert.equal(await rset.checkAndMark(e), set.checkAndMark(e), `set step ${i}`);
    assert.equal(await rbloom.checkAndMark(e), bloom.checkAndMark(e), `bloom step ${i}`);
  }
  assert.equal(await rset.uniqueCount(), set.uniqueCount());
  assert.equal(await rbloom.count(), bloom.count());
  assert.equal(await rbloom.uniqueCount(), bloom.uniqueCount());
});

test('byte keys and elements: the same decisions in both engines, and text is its UTF-8 bytes', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const client = r.client();
  const spec = specsOf['token-bucket'][0];
  const mem = await createLimiter(spec);
  const red = await createRedisLimiter(client, spec, { keyPrefix: 'bytes' });
  const keys = [Uint8Array.of(0xff, 0x00, 0x7b), Uint8Array.of(0xc3, 0xa9), 'é', Buffer.from('plain'), 'plain'];
  const rand = rng(5);
  for (let i = 0; i < 200; i++) {
    const key = keys[rand(keys.length)];
    const now = t0 + i * 50_000;
    assert.deepEqual(await red.allow(key, { now }), mem.allow(key, { now }), `step ${i} key ${Buffer.from(key).toString('hex')}`);
  }
  assert.equal(mem.trackedKeys, 3, "'é' and its UTF-8 bytes are one key; 'plain' and its bytes too");
  const bin = red.keys(Uint8Array.of(0xff, 0x00, 0x7b))[0];
  assert.ok(Buffer.isBuffer(bin) && (await client.exists(bin)) === 1, 'the byte key holds the state');
  assert.deepEqual(red.keys(Buffer.from('é')).map(String), red.keys('é'));

  const els = [Uint8Array.of(0x80), Uint8Array.of(0xc3, 0xa9), 'é', Uint8Array.of(), ''];
  const set = createSetDeduplicator();
  const rset = await createRedisSetDeduplicator(client, 'bytes-set');
  const win = await createWindowDeduplicator(1000);
  const rwin = await createRedisWindowDeduplicator(client, 'bytes-win', 1000);
  const bloom = await createBloomDeduplicator({ insertions: 100, fpRate: 0.01 });
  const rbloom = await createRedisBloomDeduplicator(client, 'bytes-bloom', { insertions: 100, fpRate: 0.01 });
  for (const [i, e] of els.entries()) {
    const now = t0 + i;
    assert.equal(await rset.checkAndMark(e), set.checkAndMark(e), `set ${i}`);
    assert.equal(await rwin.checkAndMark(e, now), win.checkAndMark(e, now), `window ${i}`);
    assert.equal(await rbloom.checkAndMark(e), bloom.checkAndMark(e), `bloom ${i}`);
  }
  assert.equal(set.checkAndMark('é'), true);
  assert.equal(await rset.uniqueCount(), 2);
  assert.deepEqual(await rset.checkAndMarkBatch([Uint8Array.of(0x80), '', 'new']), [true, false, false]);
});

test('a script flushed from the server is sent again', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const client = r.client();
  const l = await createRedisLimiter(client, tokenBucket(2, 1), { keyPrefix: 'flush' });
  assert.equal((await l.allow('a', { now: t0 })).allowed, true);
  await client.script('FLUSH');
  assert.equal((await l.allow('a', { now: t0 })).remaining, 0);
  assert.equal((await l.allow('a', { now: t0 })).allowed, false);
});

test('a hung server fails the call at its deadline; fail-open and a fallback decide instead', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const client = r.client({ maxRetriesPerRequest: 1 });
  const logged = [];
  const logger = { warn: (m) => logged.push(`warn ${m}`), info: (m) => logged.push(`info ${m}`) };
  const closed = await createRedisLimiter(client, tokenBucket(2, 1), { timeoutMs: 300, logger });
  const open = await createRedisLimiter(client, tokenBucket(2, 1), { timeoutMs: 300, failurePolicy: 'fail-open' });
  const fallback = await createLimiter(tokenBucket(1, 1));
  const fb = await createRedisLimiter(client, tokenBucket(2, 1), { timeoutMs: 300, failurePolicy: fallback });
  await closed.allow('warm');
  process.kill(r.pid, 'SIGSTOP');
  try {
    const start = Date.now();
    await assert.rejects(closed.allow('x'), (e) => e instanceof RedstreamError && e.code === 'TIMEOUT');
    const took = Date.now() - start;
    assert.ok(took >= 250 && took < 5000, `the call took ${took} ms, want about 300`);
    await assert.rejects(closed.allow('x2'), (e) => e.code === 'TIMEOUT');
    assert.deepEqual(closed.health, { failures: 2, failing: true });
    assert.equal((await open.allow('x')).allowed, true);
    assert.equal((await fb.allow('x', { now: t0 })).allowed, true);
    assert.equal((await fb.allow('x', { now: t0 })).allowed, false, 'the fallback keeps its own state');
  } finally {
    process.kill(r.pid, 'SIGCONT');
  }
  assert.equal((await closed.allow('y')).allowed, true, 'Redis answers again');
  assert.deepEqual(logged, [
    'warn redstream: Redis failed; decisions fail closed (rejected with the error)',
    'info redstream: Redis answers again; decisions are made in Redis',
  ], 'one line per state change, not per failure');
  assert.deepEqual(closed.health, { failures: 2, failing: false });
});

test('a killed server fails every call at its deadline, for limiters and deduplicators', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const client = r.client({ maxRetriesPerRequest: 0, retryStrategy: () => 50 });
  const l = await createRedisLimiter(client, tokenBucket(2, 1), { timeoutMs: 500, logger: null });
  const d = await createRedisWindowDeduplicator(client, 'killed', 1000, { timeoutMs: 500 });
  const s = await createRedisSetDeduplicator(client, 'killed', { timeoutMs: 500 });
  const b = await createRedisBloomDeduplicator(client, 'killed', { insertions: 10, fpRate: 0.1 }, { timeoutMs: 500 });
  assert.equal((await l.allow('k')).allowed, true);
  r.kill();
  await new Promise((res) => setTimeout(res, 100));
  const start = Date.now();
  for (const p of [l.allow('k'), d.checkAndMark('e'), s.checkAndMark('e'), b.checkAndMark('e'), s.uniqueCount(), b.count()]) {
    await assert.rejects(p, (e) => e instanceof RedstreamError && (e.code === 'REDIS' || e.code === 'TIMEOUT'));
  }
  assert.ok(Date.now() - start < 6 * 500 + 2000, 'each call ended by its deadline');
  assert.equal(l.health.failing, true);
});

test('bad input is a RedstreamError naming what is wrong, and sends nothing', async () => {
  const sent = [];
  const fake = { defineCommand(name) { this[name] = async (...a) => { sent.push(a); return [1, 1, 0, 0, 0, 0]; }; } };
  const l = await createRedisLimiter(fake, tokenBucket(3, 1));
  const m = await createLimiter(tokenBucket(3, 1));
  const cases = [
    ['', {}, 'EMPTY_KEY'],
    ['k', { n: 0 }, 'INVALID_COST'],
    ['k', { n: 1.5 }, 'INVALID_COST'],
    ['k', { n: 4 }, 'COST_TOO_LARGE'],
    ['k', { now: -1 }, 'INVALID_TIME'],
    ['k', { now: 2 ** 53 }, 'INVALID_TIME'],
    ['k', { now: 1.5 }, 'INVALID_TIME'],
    ['\ud800', {}, 'INVALID_KEY'],
  ];
  for (const [key, o, code] of cases) {
    await assert.rejects(l.allow(key, o), (e) => e instanceof RedstreamError && e.code === code, `redis ${JSON.stringify([key, o])}`);
    assert.throws(() => m.allow(key, o), (e) => e instanceof RedstreamError && e.code === code, `memory ${JSON.stringify([key, o])}`);
  }
  assert.equal(sent.length, 0);
  for (const spec of [
    tokenBucket(0, 1), tokenBucket(1, 0), tokenBucket(NaN, 1), tokenBucket(1, 2e6),
    { algorithm: 'sliding', windowMs: 0, limit: 1 }, { algorithm: 'sliding', windowMs: 1000, limit: 2 ** 21 },
    { algorithm: 'fixed', windowMs: 1000, limit: 0 }, { algorithm: 'nope' }, { algorithm: 'fixed', limit: 3 },
  ]) {
    await assert.rejects(createLimiter(spec), (e) => e instanceof RedstreamError && e.code === 'INVALID_CONFIG', JSON.stringify(spec));
  }
  await assert.rejects(createRedisLimiter(fake, tokenBucket(1, 1), { keyPrefix: 'a{b' }), (e) => e.code === 'INVALID_CONFIG');
  await assert.rejects(createRedisLimiter({}, tokenBucket(1, 1)), (e) => e.code === 'INVALID_CONFIG');
  const prefixed = new Redis({ lazyConnect: true, keyPrefix: 'app:' });
  await assert.rejects(createRedisLimiter(prefixed, tokenBucket(1, 1)), (e) => e.code === 'INVALID_CONFIG' && /keyPrefix/.test(e.message));
  await assert.rejects(createRedisSetDeduplicator(prefixed, 'n'), (e) => e.code === 'INVALID_CONFIG');
  prefixed.disconnect();
  await assert.rejects(createRedisSetDeduplicator(fake, ''), (e) => e.code === 'INVALID_CONFIG');
  await assert.rejects(createRedisWindowDeduplicator(fake, 'n', 0), (e) => e.code === 'INVALID_CONFIG');
  await assert.rejects(createRedisBloomDeduplicator(fake, 'n', { fpRate: 1 }), (e) => e.code === 'INVALID_CONFIG');
  await assert.rejects(createRedisBloomDeduplicator(fake, 'n', { insertions: 0 }), (e) => e.code === 'INVALID_CONFIG');
});

test('the key table sweeps recovered keys as Go does', async () => {
  let now = t0;
  const l = await createLimiter(tokenBucket(1, 1000), { clock: () => now, sweepThreshold: 8 });
  for (let i = 0; i < 8; i++) l.allow(`k${i}`);
  assert.equal(l.trackedKeys, 8);
  now += 10_000; // every key is back to full
  l.allow('new');
  assert.equal(l.trackedKeys, 1, 'the 9th key swept the 8 recovered ones');
  for (let i = 0; i < 10_000; i++) {
    now += 1;
    l.allow(`many${i}`);
  }
  assert.ok(l.trackedKeys <= 2 * 1000 + 16, `${l.trackedKeys} keys held; live keys are at most 1000 (1 ms of traffic)`);
  const d = await createWindowDeduplicator(1, { clock: () => now, sweepThreshold: 4 });
  for (let i = 0; i < 1000; i++) {
    now += 10;
    d.checkAndMark(`e${i}`);
  }
  assert.ok(d.trackedKeys <= 2 * 100 + 8, `${d.trackedKeys} elements held; at most 100 are live (1 ms window, one per 10 µs)`);
  assert.equal(d.uniqueCount(), 100);
});

test('loading the module prints no warning (no experimental feature)', () => {
  const r = spawnSync(process.execPath, ['-e', "const m = await import('./dist/index.js'); const l = await m.createLimiter(m.tokenBucket(1, 1)); l.allow('k');", '--input-type=module'], {
    cwd: new URL('..', import.meta.url),
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, '', 'stderr must be empty');
});

test('an algorithm of the registry that a generated table lacks is refused at construction', async () => {
  const { schema } = await import('../dist/generated/schema.js');
  const fake = { defineCommand(name) { this[name] = async () => [1, 1, 0, 0, 0, 0]; } };
  const spec = { algorithm: 'fixed', windowMs: 1000, limit: 3 };
  for (const a of algorithms) {
    assert.ok(schema.algorithms[a] && schema.multi.codes[a], `the generated schema has ${a}`);
  }
  for (const table of [schema.algorithms, schema.multi.codes]) {
    const row = table.fixed;
    delete table.fixed;
    try {
      await assert.rejects(createRedisLimiter(fake, spec), (e) => e instanceof RedstreamError && e.code === 'INVALID_CONFIG' && /no Redis layout/.test(e.message));
      await assert.rejects(createRedisMultiLimiter(fake, [spec, tokenBucket(3, 1)]), (e) => e instanceof RedstreamError && e.code === 'INVALID_CONFIG');
    } finally {
      table.fixed = row;
    }
  }
  await createRedisLimiter(fake, spec);
});
