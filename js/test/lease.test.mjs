// Concurrency leases, in process (the core module) and on a real redis-server: acquisition
// up to the limit, denial until the earliest lease expires, release (once, by its own token,
// before expiry), extension, and composition with rate limits on the same key,
// all-or-nothing, as Go's memory, wasmcore and redisbackend ConcurrencyLimiters do; and
// both engines answering alike, call for call, on random sequences.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  concurrency,
  createConcurrencyLimiter,
  createRedisConcurrencyLimiter,
  fixedWindow,
  RedstreamError,
  tokenBucket,
} from '../dist/index.js';
import { rng, startRedis } from './helpers.mjs';

const t0 = 1767225600000000;
const S = 1_000_000;

const code = (c) => (e) => e instanceof RedstreamError && e.code === c;

// Each engine's limiter of specs under prefix (prefix: Redis only). The in-process
// engine's methods are synchronous; the tests await both alike.
const engines = {
  memory: async () => ({ make: (specs) => createConcurrencyLimiter(specs) }),
  redis: async (t) => {
    const r = await startRedis(t);
    if (!r) return undefined;
    const client = r.client();
    return { client, make: (specs, prefix) => createRedisConcurrencyLimiter(client, specs, { keyPrefix: prefix }) };
  },
};

// each runs body once per engine, as a subtest named after it.
function each(name, body) {
  test(name, async (t) => {
    for (const [engine, start] of Object.entries(engines)) {
      await t.test(engine, async (t) => {
        const e = await start(t);
        if (e) await body(e, engine);
      });
    }
  });
}

each('leases: acquire to the limit, deny until the earliest expiry, release once', async ({ make }, engine) => {
  const l = await make([concurrency(3, 10_000)], 'lease');
  if (engine === 'redis') assert.deepEqual(l.keys('job'), ['lease:{job}:m0.concurrency.10000000.3']);

  const held = [];
  for (let i = 0; i < 3; i++) {
    const now = t0 + i * S;
    const lease = await l.acquire('job', { now });
    assert.equal(lease.allowed, true, `lease ${i}`);
    assert.equal(lease.key, 'job');
    assert.equal(lease.n, 1);
    assert.ok(Number.isSafeInteger(lease.token) && lease.token >= 1, `token ${lease.token}`);
    assert.equal(lease.expiry, now + 10 * S);
    assert.equal(lease.remaining, 2 - i);
    held.push(lease);
  }
  assert.equal(new Set(held.map((x) => x.token)).size, 3, 'tokens differ');

  // Full: denied until the earliest lease (taken at t0) expires, 7 s after t0 + 3 s.
  const denied = await l.acquire('job', { now: t0 + 3 * S });
  assert.equal(denied.allowed, false);
  assert.equal(denied.retryAfter, 7 * S);
  assert.equal(denied.token, 0);
  assert.equal(denied.n, 0);
  assert.equal(denied.expiry, 0);
  assert.equal(denied.remaining, 0);

  // A stale token frees nothing; the lease's own token frees it, once.
  const stale = { ...held[1], token: held[1].token === 1 ? 2 : held[1].token - 1 };
  assert.equal(await l.release(stale, { now: t0 + 3 * S }), false, 'stale token');
  assert.equal(await l.release(held[1], { now: t0 + 3 * S }), true, 'release');
  assert.equal(await l.release(held[1], { now: t0 + 3 * S }), false, 'second release');
  const again = await l.acquire('job', { now: t0 + 3 * S });
  assert.equal(again.allowed, true, 'the released unit is free');
  assert.equal((await l.acquire('job', { now: t0 + 3 * S })).allowed, false, 'and only it');

  // A lease past its expiry is gone: its release changes nothing, and its unit is free.
  assert.equal(await l.release(held[0], { now: t0 + 10 * S }), false, 'release at expiry');
  const after = await l.acquire('job', { now: t0 + 10 * S });
  assert.equal(after.allowed, true, 'the expired unit is free');
  // held[2] (t0 + 2 s), again (t0 + 3 s) and after (t0 + 10 s) hold the three units.
  assert.equal((await l.acquire('job', { now: t0 + 10 * S })).allowed, false);
  assert.equal(await l.release(after, { now: t0 + 10 * S }), true);
});

each('leases: extend renews a live lease; a lost one fails with LEASE_LOST', async ({ make }) => {
  const l = await make([concurrency(2, 10_000)], 'ext');
  const a = await l.acquire('k', { now: t0, n: 2 });
  assert.equal(a.allowed, true);
  assert.equal(a.n, 2);
  const b = await l.extend(a, { now: t0 + 8 * S });
  assert.equal(b.expiry, t0 + 18 * S);
  assert.equal(b.token, a.token);
  // Past the first expiry the renewed lease still holds both units.
  const d = await l.acquire('k', { now: t0 + 15 * S });
  assert.equal(d.allowed, false, 'the extended lease holds its units');
  assert.equal(d.retryAfter, 3 * S);
  assert.equal(await l.release(b, { now: t0 + 15 * S }), true);
  // Released: extending it is lost, and so is a lease past its expiry or never admitted.
  await assert.rejects(async () => l.extend(b, { now: t0 + 15 * S }), code('LEASE_LOST'));
  const c = await l.acquire('k', { now: t0 + 20 * S });
  await assert.rejects(async () => l.extend(c, { now: t0 + 30 * S }), code('LEASE_LOST'));
  await assert.rejects(async () => l.extend(d, { now: t0 + 15 * S }), code('LEASE_LOST'));
  assert.equal(await l.release(d, { now: t0 + 15 * S }), false, 'a denied lease releases nothing');
  // A stale token does not renew another holder's lease.
  const e = await l.acquire('k', { now: t0 + 40 * S });
  await assert.rejects(async () => l.extend({ ...e, token: e.token === 1 ? 2 : e.token - 1 }, { now: t0 + 41 * S }), code('LEASE_LOST'));
  assert.equal((await l.extend(e, { now: t0 + 41 * S })).expiry, t0 + 51 * S);
});

each('leases: at the engine\'s clock (Redis: the server\'s TIME)', async ({ make }) => {
  const l = await make([concurrency(1, 60_000)], 'now');
  const a = await l.acquire('k');
  assert.equal(a.allowed, true);
  assert.equal((await l.acquire('k')).allowed, false);
  const b = await l.extend(a);
  assert.ok(b.expiry >= a.expiry, `extended expiry ${b.expiry} before ${a.expiry}`);
  assert.equal(await l.release(b), true);
  assert.equal(await l.release(b), false);
  assert.equal((await l.acquire('k')).allowed, true);
});

each('leases with rate limits on the same key: all or nothing', async ({ make, client }, engine) => {
  // At most one held at once, at most 3 per hour.
  const l = await make([fixedWindow(3_600_000, 3), concurrency(1, 10_000)], 'comp');
  if (engine === 'redis') assert.deepEqual(l.keys('k'), ['comp:{k}:m0.fixed.3600000000.3', 'comp:{k}:m1.concurrency.10000000.1']);
  let admitted = 0;
  for (let i = 0; i < 6; i++) {
    const now = t0 + i * S;
    const a = await l.acquire('k', { now });
    // The concurrency limit denies while a is held; its denial charges the window nothing.
    const b = await l.acquire('k', { now });
    assert.equal(b.allowed, false, `attempt ${i}: a second holder`);
    if (a.allowed) {
      admitted++;
      assert.equal(await l.release(a, { now }), true);
    } else {
      assert.equal(a.retryAfter > 0, true);
    }
  }
  assert.equal(admitted, 3, 'the window admits 3 leases; releases give back no rate');
  // A rate limit denies when the concurrency limit would admit: nothing is held then.
  const m = await make([concurrency(5, 10_000), tokenBucket(2, 0.001)], 'comp2');
  const held = await m.acquire('k', { now: t0, n: 2 });
  assert.equal(held.allowed, true);
  const d = await m.acquire('k', { now: t0 });
  assert.equal(d.allowed, false);
  if (engine === 'redis') assert.equal(await client.zcard('comp2:{k}:m0.concurrency.10000000.5'), 2, 'the denied acquisition holds nothing');
  // Released, the units are free but the bucket still denies: nothing is held by the denial.
  assert.equal(await m.release(held, { now: t0 }), true);
  assert.equal((await m.acquire('k', { now: t0 })).allowed, false);
});

each('leases: bad options and input', async ({ make }, engine) => {
  await assert.rejects(async () => make([tokenBucket(2, 1)]), (e) => code('INVALID_CONFIG')(e) && /no spec of algorithm "concurrency"/.test(e.message));
  await assert.rejects(async () => make([concurrency(1, 1000), concurrency(2, 1000)]), (e) => code('INVALID_CONFIG')(e) && /specs\[0\] and specs\[1\] are both concurrency limits/.test(e.message));
  await assert.rejects(async () => make([]), code('INVALID_CONFIG'));
  await assert.rejects(async () => make([concurrency(70_000, 1000)]), code('INVALID_CONFIG'));
  const l = await make([concurrency(2, 1000)], 'bad');
  await assert.rejects(async () => l.acquire('k', { n: 3 }), code('COST_TOO_LARGE'));
  await assert.rejects(async () => l.acquire('', {}), code('EMPTY_KEY'));
  await assert.rejects(async () => l.acquire('k', { n: 0 }), code('INVALID_COST'));
  await assert.rejects(async () => l.acquire('k', { now: -1 }), code('INVALID_TIME'));
  await assert.rejects(async () => l.acquire('k', { cost: 1 }), code('INVALID_CONFIG'));
  await assert.rejects(async () => l.release(null), code('INVALID_CONFIG'));
  await assert.rejects(async () => l.release({ key: '', token: 5, n: 1 }), code('EMPTY_KEY'));
  await assert.rejects(async () => l.release({ key: 'k', token: 5, n: 1 }, { at: 1 }), code('INVALID_CONFIG'));
  // Leases no acquisition of this limiter can have issued release nothing and are lost (on Redis, with no call).
  for (const bad of [{ token: 0, n: 1 }, { token: 2 ** 53, n: 1 }, { token: 1.5, n: 1 }, { token: 7, n: 3 }, { token: 7, n: 0 }, { token: 7, n: 1 }]) {
    assert.equal(await l.release({ key: 'k', ...bad }), false, JSON.stringify(bad));
    await assert.rejects(async () => l.extend({ key: 'k', ...bad }), code('LEASE_LOST'), JSON.stringify(bad));
  }
  // A lease of another n than its acquisition's is not that lease.
  const a = await l.acquire('k', { now: t0 });
  assert.equal(await l.release({ ...a, n: 2 }, { now: t0 }), false);
  assert.equal(await l.release(a, { now: t0 }), true);
});

test('leases: Redis options', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const client = r.client();
  await assert.rejects(createRedisConcurrencyLimiter(client, [concurrency(1, 1000)], { failurePolicy: 'fail-open' }), (e) => code('INVALID_CONFIG')(e) && /unknown option "failurePolicy"/.test(e.message));
  await assert.rejects(createRedisConcurrencyLimiter(client, [concurrency(1, 1000)], { previous: [] }), (e) => code('INVALID_CONFIG')(e) && /unknown option "previous"/.test(e.message));
  await assert.rejects(createRedisConcurrencyLimiter(client, [concurrency(1, 1000)], { timeoutMs: 0 }), code('INVALID_CONFIG'));
  await assert.rejects(createConcurrencyLimiter([concurrency(1, 1000)], { sweepThreshold: 0 }), code('INVALID_CONFIG'));
});

// The in-process engine and Redis answer alike, call for call: random acquisitions,
// releases (live, expired, released and stale leases) and extensions on two keys, with time
// stepping forwards, standing still and going back, alone and behind a rate limit.
test('leases: the in-process engine and Redis answer alike', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const client = r.client();
  let calls = 0;
  const seen = { admitted: 0, denied: 0, released: 0, notReleased: 0, extended: 0, lost: 0 };
  for (const [si, specs] of [[concurrency(3, 1000)], [fixedWindow(2000, 6), concurrency(4, 700)]].entries()) {
    const mem = await createConcurrencyLimiter(specs);
    const red = await createRedisConcurrencyLimiter(client, specs, { keyPrefix: `diff${si}` });
    const rand = rng(7 + si);
    const pairs = []; // [memory lease, Redis lease] of each admitted acquisition
    let now = t0;
    for (let i = 0; i < 400; i++) {
      const step = rand(10);
      now = Math.max(0, now + (step < 6 ? rand(150_000) : step < 8 ? 0 : step < 9 ? -rand(100_000) : rand(1_500_000)));
      const at = { now };
      const what = `specs ${si} step ${i} at ${now}`;
      const op = pairs.length === 0 ? 0 : rand(3);
      if (op === 0) {
        const key = `k${rand(2)}`;
        const n = 1 + rand(2);
        const a = mem.acquire(key, { ...at, n });
        const b = await red.acquire(key, { ...at, n });
        assert.deepEqual({ ...b, token: 0 }, { ...a, token: 0 }, `${what}: acquire`);
        if (a.allowed) pairs.push([a, b]);
        seen[a.allowed ? 'admitted' : 'denied']++;
      } else {
        const j = rand(2) === 0 ? pairs.length - 1 - rand(Math.min(pairs.length, 3)) : rand(pairs.length); // recent ones often: live
        const [a, b] = pairs[j];
        if (op === 1) {
          const ok = mem.release(a, at);
          assert.equal(await red.release(b, at), ok, `${what}: release`);
          seen[ok ? 'released' : 'notReleased']++;
        } else {
          let x;
          let y;
          try { x = mem.extend(a, at); } catch (e) { x = e.code; }
          try { y = await red.extend(b, at); } catch (e) { y = e.code; }
          assert.deepEqual(typeof y === 'string' ? y : { ...y, token: 0 }, typeof x === 'string' ? x : { ...x, token: 0 }, `${what}: extend`);
          if (typeof x !== 'string') pairs[j] = [x, y];
          seen[typeof x === 'string' ? 'lost' : 'extended']++;
        }
      }
      calls++;
    }
  }
  console.log(`the engines agree on ${calls} lease calls: ${JSON.stringify(seen)}`);
  for (const [k, v] of Object.entries(seen)) assert.ok(v > 0, `no ${k} call: the sequences miss a case`);
});
