// Concurrency leases on a real redis-server: acquisition up to the limit, denial until the
// earliest lease expires, release (once, by its own token, before expiry), extension, and
// composition with rate limits on the same key, all-or-nothing, as Go's
// redisbackend.ConcurrencyLimiter does on the same keys.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  concurrency,
  createRedisConcurrencyLimiter,
  fixedWindow,
  RedstreamError,
  tokenBucket,
} from '../dist/index.js';
import { startRedis } from './helpers.mjs';

const t0 = 1767225600000000;
const S = 1_000_000;

const code = (c) => (e) => e instanceof RedstreamError && e.code === c;

test('leases: acquire to the limit, deny until the earliest expiry, release once', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const l = await createRedisConcurrencyLimiter(r.client(), [concurrency(3, 10_000)], { keyPrefix: 'lease' });
  assert.deepEqual(l.keys('job'), ['lease:{job}:m0.concurrency.10000000.3']);

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

test('leases: extend renews a live lease; a lost one fails with LEASE_LOST', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const l = await createRedisConcurrencyLimiter(r.client(), [concurrency(2, 10_000)], { keyPrefix: 'ext' });
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
  await assert.rejects(l.extend(b, { now: t0 + 15 * S }), code('LEASE_LOST'));
  const c = await l.acquire('k', { now: t0 + 20 * S });
  await assert.rejects(l.extend(c, { now: t0 + 30 * S }), code('LEASE_LOST'));
  await assert.rejects(l.extend(d, { now: t0 + 15 * S }), code('LEASE_LOST'));
  assert.equal(await l.release(d, { now: t0 + 15 * S }), false, 'a denied lease releases nothing');
  // A stale token does not renew another holder's lease.
  const e = await l.acquire('k', { now: t0 + 40 * S });
  await assert.rejects(l.extend({ ...e, token: e.token === 1 ? 2 : e.token - 1 }, { now: t0 + 41 * S }), code('LEASE_LOST'));
  assert.equal((await l.extend(e, { now: t0 + 41 * S })).expiry, t0 + 51 * S);
});

test('leases: at the server\'s TIME', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const l = await createRedisConcurrencyLimiter(r.client(), [concurrency(1, 60_000)], { keyPrefix: 'now' });
  const a = await l.acquire('k');
  assert.equal(a.allowed, true);
  assert.equal((await l.acquire('k')).allowed, false);
  const b = await l.extend(a);
  assert.ok(b.expiry >= a.expiry, `extended expiry ${b.expiry} before ${a.expiry}`);
  assert.equal(await l.release(b), true);
  assert.equal(await l.release(b), false);
  assert.equal((await l.acquire('k')).allowed, true);
});

test('leases with rate limits on the same key: all or nothing', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const client = r.client();
  // At most one held at once, at most 3 per hour.
  const l = await createRedisConcurrencyLimiter(client, [fixedWindow(3_600_000, 3), concurrency(1, 10_000)], { keyPrefix: 'comp' });
  assert.deepEqual(l.keys('k'), ['comp:{k}:m0.fixed.3600000000.3', 'comp:{k}:m1.concurrency.10000000.1']);
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
  const m = await createRedisConcurrencyLimiter(client, [concurrency(5, 10_000), tokenBucket(2, 0.001)], { keyPrefix: 'comp2' });
  assert.equal((await m.acquire('k', { now: t0, n: 2 })).allowed, true);
  const d = await m.acquire('k', { now: t0 });
  assert.equal(d.allowed, false);
  assert.equal(await client.zcard('comp2:{k}:m0.concurrency.10000000.5'), 2, 'the denied acquisition holds nothing');
});

test('leases: bad options and input', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const client = r.client();
  await assert.rejects(createRedisConcurrencyLimiter(client, [tokenBucket(2, 1)]), (e) => code('INVALID_CONFIG')(e) && /no spec of algorithm "concurrency"/.test(e.message));
  await assert.rejects(createRedisConcurrencyLimiter(client, [concurrency(1, 1000), concurrency(2, 1000)]), (e) => code('INVALID_CONFIG')(e) && /specs\[0\] and specs\[1\] are both concurrency limits/.test(e.message));
  await assert.rejects(createRedisConcurrencyLimiter(client, []), code('INVALID_CONFIG'));
  await assert.rejects(createRedisConcurrencyLimiter(client, [concurrency(70_000, 1000)]), code('INVALID_CONFIG'));
  await assert.rejects(createRedisConcurrencyLimiter(client, [concurrency(1, 1000)], { failurePolicy: 'fail-open' }), (e) => code('INVALID_CONFIG')(e) && /unknown option "failurePolicy"/.test(e.message));
  await assert.rejects(createRedisConcurrencyLimiter(client, [concurrency(1, 1000)], { timeoutMs: 0 }), code('INVALID_CONFIG'));
  const l = await createRedisConcurrencyLimiter(client, [concurrency(2, 1000)], { keyPrefix: 'bad' });
  await assert.rejects(l.acquire('k', { n: 3 }), code('COST_TOO_LARGE'));
  await assert.rejects(l.acquire('', {}), code('EMPTY_KEY'));
  await assert.rejects(l.acquire('k', { n: 0 }), code('INVALID_COST'));
  await assert.rejects(l.acquire('k', { now: -1 }), code('INVALID_TIME'));
  await assert.rejects(l.release(null), code('INVALID_CONFIG'));
  await assert.rejects(l.release({ key: '', token: 5, n: 1 }), code('EMPTY_KEY'));
  await assert.rejects(l.release({ key: 'k', token: 5, n: 1 }, { at: 1 }), code('INVALID_CONFIG'));
  // Leases no acquisition of this limiter can have issued release nothing and are lost, with no call.
  for (const bad of [{ token: 0, n: 1 }, { token: 2 ** 53, n: 1 }, { token: 1.5, n: 1 }, { token: 7, n: 3 }, { token: 7, n: 0 }]) {
    assert.equal(await l.release({ key: 'k', ...bad }), false, JSON.stringify(bad));
    await assert.rejects(l.extend({ key: 'k', ...bad }), code('LEASE_LOST'), JSON.stringify(bad));
  }
});
