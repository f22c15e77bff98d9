// Limit changes that keep state on a real redis-server (the previous and carry options,
// carry.lua, Go's redisbackend Options.Previous and Carry): each strategy on the token
// bucket, the fixed window and the sliding counter, seeding once, multi-limit limiters,
// and the changes that cannot carry.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  carries,
  concurrency,
  createRedisLimiter,
  createRedisMultiLimiter,
  fixedWindow,
  RedstreamError,
  slidingCounter,
  slidingWindow,
  tokenBucket,
} from '../dist/index.js';
import { startRedis } from './helpers.mjs';

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
  for (const [alg, spec] of Object.entries(shapes)) {
    for (const [change, c] of Object.entries(cases)) {
      for (const carry of carries) {
        const prefix = `carry:${alg}:${change}:${carry}`;
        const old = await createRedisLimiter(client, spec(c.from), { keyPrefix: prefix });
        assert.equal(await admitted(old, 'user:1', t0, 10), 10);
        const l = await createRedisLimiter(client, spec(c.to), { keyPrefix: prefix, previous: [spec(c.from)], carry });
        assert.equal(await admitted(l, 'user:1', t0, 30), c.want[carry], `${alg} ${c.from} -> ${c.to} after 10 admitted, ${carry}`);
        // Another key had no state under the previous spec: it starts afresh.
        assert.equal(await admitted(l, 'user:2', t0, 30), c.to, `${alg} ${carry}: a new key`);
        // The previous key is left as it was, to the processes still on the previous spec.
        assert.equal(await admitted(old, 'user:1', t0, 30), c.from - 10, `${alg} ${carry}: the previous key`);
      }
    }
  }
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

function leakyOf(capacity) {
  return { algorithm: 'leaky-bucket', capacity, rate: 1 };
}
