// Limit changes that keep state, on a real redis-server (the previous and carry options,
// carry.lua, Go's redisbackend Options.Previous and Carry) and in process
// (MemoryLimiter.successor, Go's memory.Limiter.Successor, seeded by the core module): each
// strategy on the token bucket, the fixed window and the sliding counter, seeding once,
// multi-limit limiters, both engines deciding alike across a change, and the changes that
// cannot carry.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  carries,
  concurrency,
  createLimiter,
  createMultiLimiter,
  createRedisLimiter,
  createRedisMultiLimiter,
  fixedWindow,
  RedstreamError,
  slidingCounter,
  slidingWindow,
  tokenBucket,
} from '../dist/index.js';
import { rng, startRedis } from './helpers.mjs';

// Mid-hour, so that no window boundary (a minute) passes between the decisions.
const t0 = 1767225600000000 + 30 * 1_000_000;

async function admitted(l, key, now, attempts) {
  let n = 0;
  for (let i = 0; i < attempts; i++) {
    if ((await l.allow(key, { now })).allowed) n++;
  }
  return n;
}

// 10 per minute changed to 20 (raised) or 20 changed to 10 (lowered) after 10 admitted:
// what each strategy leaves to admit (core.Carry: as-is keeps the 10 consumed, proportional
// the fraction, reset nothing).
const cases = {
  raise: { from: 10, to: 20, want: { reset: 20, 'as-is': 10, proportional: 0 } },
  lower: { from: 20, to: 10, want: { reset: 10, 'as-is': 0, proportional: 5 } },
};
const shapes = {
  'token-bucket': (limit) => tokenBucket(limit, limit / 60),
  fixed: (limit) => fixedWindow(60_000, limit),
  'sliding-counter': (limit) => slidingCounter(60_000, limit),
};

test('carry: each strategy on the token bucket, the fixed window and the sliding counter', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const client = r.client();
  // Each engine's limiter of the previous spec, and of the new one carrying from it.
  const engines = {
    redis: (prefix) => ({
      old: (spec) => createRedisLimiter(client, spec, { keyPrefix: prefix }),
      next: (old, from, to, carry) => createRedisLimiter(client, to, { keyPrefix: prefix, previous: [from], carry }),
    }),
    memory: () => ({
      old: (spec) => createLimiter(spec),
      next: (old, from, to, carry) => old.successor(carry, to),
    }),
  };
  for (const [engine, make] of Object.entries(engines)) {
    for (const [alg, spec] of Object.entries(shapes)) {
      for (const [change, c] of Object.entries(cases)) {
        for (const carry of carries) {
          const e = make(`carry:${alg}:${change}:${carry}`);
          const what = `${engine}: ${alg} ${c.from} -> ${c.to} after 10 admitted, ${carry}`;
          const old = await e.old(spec(c.from));
          assert.equal(await admitted(old, 'user:1', t0, 10), 10);
          const l = await e.next(old, spec(c.from), spec(c.to), carry);
          assert.equal(await admitted(l, 'user:1', t0, 30), c.want[carry], what);
          // Another key had no state under the previous spec: it starts afresh.
          assert.equal(await admitted(l, 'user:2', t0, 30), c.to, `${what}: a new key`);
          // The previous key is left as it was, to the processes still on the previous spec.
          assert.equal(await admitted(old, 'user:1', t0, 30), c.from - 10, `${what}: the previous key`);
        }
      }
    }
  }
});

// Across a change of spec, a memory successor and a Redis limiter with previous give the
// same decisions, request for request, for every algorithm that carries state and both
// strategies, the previous limiters deciding their own keys alike before the change (Go's
// TestCarryMemoryEqualsLua, here with the core module seeding). The requests mix decisions,
// reservations (one may be the first request on a key after the change, and must seed it
// as a decision does) and settlements of earlier reservations, each settled by the limiter
// that made it.
test('carry: the in-process successor and Redis decide alike across a change', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const client = r.client();
  const rand = rng(4242);
  const pick = (xs) => xs[rand(xs.length)];
  let decisions = 0;
  let reservations = 0;
  for (let round = 0; round < 40; round++) {
    const alg = pick(['token-bucket', 'leaky-bucket', 'fixed', 'sliding-counter']);
    const pair = () =>
      alg.endsWith('bucket')
        ? { algorithm: alg, capacity: 1 + rand(12), rate: 1 + rand(20) }
        : { algorithm: alg, windowMs: 1000 * (1 + rand(5)), limit: 1 + rand(12) };
    const from = pair();
    const to = alg.endsWith('bucket') ? pair() : { ...pair(), windowMs: from.windowMs };
    const carry = pick(['as-is', 'proportional']);
    const prefix = `diff:${round}`;
    const memOld = await createLimiter(from);
    const redOld = await createRedisLimiter(client, from, { keyPrefix: prefix });
    let now = 1_900_000_000_000_000;
    const open = []; // admitted reservations not settled yet: [memory's, Redis's]
    const step = async (label, a, b) => {
      now += rand(800) * 1000;
      const key = pick(['a', 'b', 'c{x}']);
      const what = `round ${round} ${label} (${JSON.stringify(from)} -> ${JSON.stringify(to)}, ${carry}) at ${now} on ${key}`;
      const op = pick(['allow', 'allow', 'reserve', 'settle']);
      if (op === 'reserve') {
        const n = 1 + rand(2);
        let want;
        try {
          want = a.reserve(key, { now, n });
        } catch (e) {
          await assert.rejects(b.reserve(key, { now, n }), { code: e.code }, `${what}: reserve ${n}`);
          return;
        }
        const got = await b.reserve(key, { now, n });
        assert.deepEqual(got.decision, want.decision, `${what}: reserve ${n}`);
        if (want.decision.allowed) open.push([want, got]);
        reservations++;
        return;
      }
      if (op === 'settle' && open.length > 0) {
        const [m, red] = open.splice(rand(open.length), 1)[0];
        const actual = rand(5);
        m.settle(actual);
        await red.settle(actual);
        return;
      }
      const want = a.allow(key, { now });
      assert.deepEqual(await b.allow(key, { now }), want, what);
      decisions++;
    };
    for (let i = rand(21); i > 0; i--) await step(`before ${i}`, memOld, redOld);
    const memNew = memOld.successor(carry, to);
    const redNew = await createRedisLimiter(client, to, { keyPrefix: prefix, previous: [from], carry });
    for (let i = 1 + rand(30); i > 0; i--) await step(`after ${i}`, memNew, redNew);
  }
  console.log(`the engines agree on ${decisions} decisions and ${reservations} reservations across changes`);
  assert.ok(reservations > 40, `only ${reservations} reservations`);
});

test('carry: a key is seeded once, from the previous key as it is then', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const client = r.client();
  const before = fixedWindow(3_600_000, 10);
  const l10 = await createRedisLimiter(client, before, { keyPrefix: 'once' });
  assert.equal(await admitted(l10, 'user{1}', t0, 4), 4);
  const l20 = await createRedisLimiter(client, fixedWindow(3_600_000, 20), { keyPrefix: 'once', previous: [before], carry: 'as-is' });
  const c = l20.command('user{1}', { now: t0 });
  assert.equal(c.script, 'carry');
  assert.deepEqual(c.keys, [...l20.keys('user{1}'), ...l10.keys('user{1}')]);
  assert.deepEqual(l20.keys('user:1'), ['once:{user:1}:fixed.3600000000.20']);
  assert.equal(await admitted(l20, 'user{1}', t0, 1), 1);
  // The previous spec's key counts on: 6 more fill it.
  assert.equal(await admitted(l10, 'user{1}', t0, 10), 6);
  // The new key was seeded once (4 carried, 1 admitted): 15 left, whatever the previous key did since.
  assert.equal(await admitted(l20, 'user{1}', t0, 30), 15);
  // The same spec as previous has the same key: its state goes on as it is (10 of 10 used).
  const same = await createRedisLimiter(client, before, { keyPrefix: 'once', previous: [before], carry: 'as-is' });
  assert.deepEqual(same.keys('user{1}'), l10.keys('user{1}'));
  assert.equal(await admitted(same, 'user{1}', t0, 5), 0);
});

// A reservation as the first request on a key after a change sees the carried state (Go's
// TestCarryReserve and TestSuccessorReserveSeeds): in Redis, reserve.lua seeds in carry.lua's
// layout; in process, reserve seeds as allow does.
test('carry: a reservation as the first request after a change seeds the key', async (t) => {
  const check = async (what, l10, l20, m1, m2) => {
    assert.equal(await admitted(l10, 'user{1}', t0, 4), 4, what);
    const r = await l20.reserve('user{1}', { now: t0, n: 3 });
    assert.equal(r.decision.allowed, true, what);
    assert.equal(r.decision.remaining, 13, `${what}: 10 -> 20 per hour after 4 admitted, as-is: a reservation of 3 leaves 13`);
    await r.settle(1);
    assert.equal(await admitted(l20, 'user{1}', t0, 30), 15, `${what}: 4 carried and 1 used, seeded once`);
    assert.equal(await admitted(m1, 'k', t0, 4), 4, what);
    const d = await m2.reserve('k', { now: t0 });
    assert.equal(d.decision.allowed, false, `${what}: bucket 4 -> 8 after 4 admitted, proportional: all of it consumed`);
  };
  const before = fixedWindow(3_600_000, 10);
  const mo = [tokenBucket(4, 0.001), fixedWindow(3_600_000, 100)];
  const mn = [tokenBucket(8, 0.001), mo[1]];
  const p10 = await createLimiter(before);
  const pm = await createMultiLimiter(mo);
  await check('in process', p10, p10.successor('as-is', fixedWindow(3_600_000, 20)), pm, pm.successor('proportional', ...mn));
  const r = await startRedis(t);
  if (!r) return;
  const client = r.client();
  await check(
    'redis',
    await createRedisLimiter(client, before, { keyPrefix: 'reserve' }),
    await createRedisLimiter(client, fixedWindow(3_600_000, 20), { keyPrefix: 'reserve', previous: [before], carry: 'as-is' }),
    await createRedisMultiLimiter(client, mo, { keyPrefix: 'reserve' }),
    await createRedisMultiLimiter(client, mn, { keyPrefix: 'reserve', previous: [mo[0], null], carry: 'proportional' }),
  );
});

test('carry: a multi-limit limiter carries the limits that changed', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const client = r.client();
  const mo = [tokenBucket(4, 0.001), fixedWindow(3_600_000, 100)];
  const m1 = await createRedisMultiLimiter(client, mo, { keyPrefix: 'm' });
  assert.equal(await admitted(m1, 'k', t0, 4), 4);
  const mn = [tokenBucket(8, 0.001), mo[1]];
  const m2 = await createRedisMultiLimiter(client, mn, { keyPrefix: 'm', previous: [mo[0], null], carry: 'proportional' });
  // The previous keys follow the keys; the unchanged limit's own key stands in for its previous one.
  assert.deepEqual(m2.command('k', { now: t0 }).keys, [...m2.keys('k'), m1.keys('k')[0], m2.keys('k')[1]]);
  assert.notEqual(m2.keys('k')[0], m1.keys('k')[0]);
  assert.equal(m2.keys('k')[1], m1.keys('k')[1]);
  assert.equal(await admitted(m2, 'k', t0, 20), 0, 'bucket 4 -> 8 after 4 admitted, proportional: all of it consumed');
  // The unchanged fixed window kept its key: the 4 of the previous limiter count there.
  const m3 = await createRedisMultiLimiter(client, [tokenBucket(100, 1000), mo[1]], { keyPrefix: 'm' });
  assert.equal(m3.keys('k')[1], 'm:{k}:m1.fixed.3600000000.100');
  assert.equal(await admitted(m3, 'k', t0, 100), 96);

  // In process: the same change of a multi-limit successor, the fixed window kept as it is.
  const p1 = await createMultiLimiter(mo);
  assert.equal(await admitted(p1, 'k', t0, 4), 4);
  const p2 = p1.successor('proportional', ...mn);
  assert.equal(await admitted(p2, 'k', t0, 20), 0, 'in process: bucket 4 -> 8 after 4 admitted, proportional');
  const p3 = p2.successor('as-is', tokenBucket(200, 1000), mo[1]); // the bucket's 8 carried: 192 left, more than the window's
  assert.equal(await admitted(p3, 'k', t0, 100), 96, 'in process: the fixed window kept its 4');
});

test('carry: the changes that cannot carry are INVALID_CONFIG, naming previous', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const client = r.client();
  const fw = fixedWindow(60_000, 10);
  const bad = (re) => (e) => e instanceof RedstreamError && e.code === 'INVALID_CONFIG' && re.test(e.message);
  for (const [name, spec, options, re] of [
    ['algorithm', fw, { previous: [tokenBucket(10, 1)], carry: 'as-is' }, /carry as-is: the previous limit is token-bucket, the new one fixed; a change of algorithm can only reset \(previous\[0\]\)$/],
    ['window', fw, { previous: [fixedWindow(3_600_000, 10)], carry: 'proportional' }, /carry proportional: the window changes from 3600000000µs to 60000000µs; a change of window can only reset \(previous\[0\]\)$/],
    ['sliding log', slidingWindow(60_000, 5), { previous: [slidingWindow(60_000, 10)], carry: 'as-is' }, /carry as-is: the sliding algorithm carries no state; a change can only reset/],
    ['concurrency', concurrency(5, 60_000), { previous: [concurrency(10, 60_000)], carry: 'as-is' }, /the concurrency algorithm carries no state/],
    ['count', fw, { previous: [fw, fw], carry: 'as-is' }, /previous has 2 specs for a limiter of 1/],
    ['strategy', fw, { previous: [fw], carry: 'keep' }, /unknown carry strategy "keep", want reset, as-is or proportional/],
    ['not an array', fw, { previous: fw, carry: 'as-is' }, /previous is object, want an array of specs/],
    ['bad spec', fw, { previous: [fixedWindow(60_000, 0)], carry: 'as-is' }, /invalid spec .*\(previous\[0\]\)$/],
    ['too large', fixedWindow(60_000, 2 ** 40), { previous: [fixedWindow(60_000, 2 ** 40 - 1)], carry: 'proportional' }, /carry proportional: limits 1099511627775 and 1099511627776 are too large to scale exactly/],
  ]) {
    await assert.rejects(createRedisLimiter(client, spec, options), bad(re), name);
  }
  await assert.rejects(createRedisMultiLimiter(client, [fw, tokenBucket(5, 1)], { previous: [null, leakyOf(5)], carry: 'as-is' }), bad(/a change of algorithm can only reset \(previous\[1\]\)/));
  // Reset carries nothing, so it checks nothing, as Go's (a previous spec of any kind is fine).
  const l = await createRedisLimiter(client, fw, { previous: [tokenBucket(10, 1), fw], carry: 'reset' });
  assert.equal(l.command('k').script, 'fixed_window');
  // As-is within the limits of proportional is fine.
  await createRedisLimiter(client, fixedWindow(60_000, 2 ** 40), { previous: [fixedWindow(60_000, 2 ** 40 - 1)], carry: 'as-is' });
});

test('carry: the in-process successor refuses what cannot carry', async () => {
  const bad = (re) => (e) => e instanceof RedstreamError && e.code === 'INVALID_CONFIG' && re.test(e.message);
  const fw = await createLimiter(fixedWindow(60_000, 10));
  assert.throws(() => fw.successor('as-is', tokenBucket(10, 1)), bad(/carry as-is: the previous limit is fixed, the new one token-bucket; a change of algorithm can only reset/));
  assert.throws(() => fw.successor('proportional', fixedWindow(3_600_000, 10)), bad(/a change of window can only reset/));
  assert.throws(() => fw.successor('as-is'), bad(/successor of 0 specs for a limiter of 1/));
  assert.throws(() => fw.successor('keep', fw.spec), bad(/unknown carry strategy "keep"/));
  assert.throws(() => fw.successor(fixedWindow(60_000, 20)), bad(/unknown carry strategy/));
  assert.throws(() => fw.successor('as-is', fixedWindow(60_000, 0)), bad(/invalid spec/));
  const log = await createLimiter(slidingWindow(60_000, 5));
  assert.throws(() => log.successor('as-is', slidingWindow(60_000, 10)), bad(/the sliding algorithm carries no state/));
  // A limit that did not change carries whatever its algorithm (Go's core.Limit.CheckCarry):
  // its state goes on as it is, beside a changed limit.
  for (const unchanged of [slidingWindow(60_000, 5), concurrency(5, 60_000)]) {
    const m = await createMultiLimiter([unchanged, fixedWindow(60_000, 10)]);
    assert.equal(await admitted(m, 'k', t0, 3), 3);
    for (const c of ['as-is', 'proportional']) {
      const next = m.successor(c, unchanged, fixedWindow(60_000, 20));
      assert.equal(await admitted(next, 'k', t0, 10), 2, `${unchanged.algorithm}, ${c}: the unchanged log's 2 left`);
    }
    assert.equal(await admitted(m, 'k', t0, 10), 2, `${unchanged.algorithm}: the previous limiter's own log`);
  }
  // Reset always can, and starts every key afresh.
  for (let i = 0; i < 10; i++) fw.allow('k', { now: t0 });
  const reset = fw.successor('reset', tokenBucket(3, 0.001));
  assert.equal(await admitted(reset, 'k', t0, 5), 3);
  assert.equal(log.successor('reset', slidingWindow(60_000, 10)).limit.ints[1], 10);
});

function leakyOf(capacity) {
  return { algorithm: 'leaky-bucket', capacity, rate: 1 };
}
