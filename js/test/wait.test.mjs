// wait (Go's redstream.Wait): sleeps each denial's retryAfter (plus jitter) and asks again,
// never past the deadline. The limiters decide on the real clock, so what is asserted is
// what the limits imply: the order of admissions, that none comes before the limit lets it,
// and upper bounds far from what a loaded machine needs.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { createLimiter, createMultiLimiter, createRedisLimiter, fixedWindow, shadow, systemClock, tokenBucket, wait } from '../dist/index.js';
import { startRedis } from './helpers.mjs';

const code = (c) => (e) => {
  assert.equal(e.code, c, e.message);
  return true;
};

// waitsOut empties limiter (one token per 40 ms), waits for 5 admissions and checks each
// came no sooner than the limit allows, in order, and the whole well within bounds.
async function waitsOut(name, l) {
  const start = systemClock(); // no later than the emptying admission
  while ((await l.allow('k')).allowed);
  const at = [];
  for (let i = 0; i < 5; i++) {
    const d = await wait(l, 'k', { timeoutMs: 30_000 });
    assert.equal(d.allowed, true, name);
    at.push(systemClock() - start);
  }
  for (let i = 1; i < at.length; i++) assert.ok(at[i] >= at[i - 1], `${name}: ${at}`);
  // Admission i needs i + 1 tokens refilled at 40 ms each (a 1 ms rounding of the clock aside).
  at.forEach((t, i) => assert.ok(t >= (i + 1) * 40_000 - 1_000, `${name}: admission ${i} at ${t} µs, before the limit allows`));
  assert.ok(at.at(-1) < 20_000_000, `${name}: 5 waits took ${at.at(-1)} µs`);
}

test('wait: memory, multi-limit and Redis limiters wait out the limit', async (t) => {
  await waitsOut('memory', await createLimiter(tokenBucket(1, 25)));
  await waitsOut('multi', await createMultiLimiter([tokenBucket(1, 25), fixedWindow(3_600_000, 1000)]));
  const r = await startRedis(t);
  if (!r) return;
  const c = r.client();
  await waitsOut('redis', await createRedisLimiter(c, tokenBucket(1, 25), { keyPrefix: 'wait' }));
  await waitsOut('redis quota', await createRedisLimiter(c, tokenBucket(1, 25), { keyPrefix: 'waitq', quota: { enabled: true } }));
});

test('wait: an admitted request returns at once; a shadow limiter never waits', async () => {
  const l = await createLimiter(tokenBucket(2, 0.001));
  assert.equal((await wait(l, 'k', { n: 2 })).remaining, 0);
  const d = await wait(shadow(l), 'k');
  assert.equal(d.shadow, true);
});

test('wait: a next chance after the deadline rejects at once with the denial', async () => {
  const l = await createLimiter(tokenBucket(1, 0.1)); // a token per 10 s
  l.allow('k');
  const start = systemClock();
  for (const o of [{ timeoutMs: 5000 }, { deadline: new Date(Date.now() + 5000) }, { deadline: systemClock() + 5_000_000, timeoutMs: 60_000 }]) {
    const err = await wait(l, 'k', o).then(
      () => assert.fail('admitted'),
      (e) => e,
    );
    assert.equal(err.code, 'DEADLINE_EXCEEDED', err.message);
    assert.match(err.message, /admits cost 1 in \d+ µs, after the deadline/);
    assert.equal(err.decision.allowed, false);
    assert.ok(err.decision.retryAfter > 5_000_000);
  }
  assert.ok(systemClock() - start < 5_000_000, 'wait slept towards a deadline it could not make');
});

test('wait: sleeps are capped at the deadline', async () => {
  // A token per 200 ms and a deadline 60 ms later than that: the sleep (200 ms plus up to
  // 25 ms of jitter) ends by the deadline, and the request is admitted then.
  const l = await createLimiter(tokenBucket(1, 5));
  l.allow('k');
  const start = systemClock();
  const d = await wait(l, 'k', { deadline: start + 260_000 });
  assert.equal(d.allowed, true);
  assert.ok(systemClock() - start >= 199_000);
});

test('wait: an abort signal rejects with ABORTED and the last denial', async () => {
  const l = await createLimiter(tokenBucket(1, 0.1));
  l.allow('k');
  const ac = new AbortController();
  const start = systemClock();
  setTimeout(() => ac.abort(new Error('shutting down')), 20);
  const err = await wait(l, 'k', { signal: ac.signal }).then(() => assert.fail('admitted'), (e) => e);
  assert.equal(err.code, 'ABORTED', err.message);
  assert.equal(err.cause.message, 'shutting down');
  assert.equal(err.decision.allowed, false);
  assert.ok(systemClock() - start < 9_000_000, 'the abort did not end the sleep');
  // Aborted before it starts: no request is made.
  await assert.rejects(wait(l, 'other', { signal: AbortSignal.abort() }), code('ABORTED'));
  assert.equal(l.allow('other').allowed, true, 'the aborted wait took a token');
});

test('wait: bad input', async () => {
  const l = await createLimiter(tokenBucket(2, 1));
  await assert.rejects(wait(l, 'k', { n: 0 }), code('INVALID_COST'));
  await assert.rejects(wait(l, 'k', { n: 3 }), code('COST_TOO_LARGE'));
  await assert.rejects(wait(l, '', {}), code('EMPTY_KEY'));
  await assert.rejects(wait(l, 'k', { timeoutMs: -1 }), code('INVALID_CONFIG'));
  await assert.rejects(wait(l, 'k', { deadline: -1 }), code('INVALID_TIME'));
  await assert.rejects(wait(l, 'k', { signal: {} }), code('INVALID_CONFIG'));
  await assert.rejects(wait(l, 'k', { cost: 1 }), code('INVALID_CONFIG'));
  await assert.rejects(wait({}, 'k'), code('INVALID_CONFIG'));
});
