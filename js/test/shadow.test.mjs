// Shadow mode (Go's redstream.Shadow): the wrapped limiter decides and records as when it
// enforces; a denial is admitted, marked shadow and counted; errors pass unchanged.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  createLimiter,
  createMultiLimiter,
  createRedisLimiter,
  createRedisMultiLimiter,
  fixedWindow,
  shadow,
  ShadowLimiter,
  slidingWindow,
  tokenBucket,
} from '../dist/index.js';
import { startRedis } from './helpers.mjs';

const t0 = 1767225600000000;
const code = (c) => (e) => {
  assert.equal(e.code, c, e.message);
  return true;
};

// check runs the same requests through an enforcing twin and a shadow limiter of the same
// state kind and compares: every decision is the twin's, a denial admitted and marked.
async function check(name, enforcing, shadowed, sync) {
  const seen = [];
  const s = shadow(shadowed, { onShadowDenied: (key, d) => seen.push([key, d]) });
  assert.ok(s instanceof ShadowLimiter && s.shadow === true && s.inner === shadowed);
  let denials = 0;
  for (let i = 0; i < 12; i++) {
    const at = { now: t0 + i * 100_000, n: 1 + (i % 2) };
    const want = await enforcing.allow('k', at);
    const r = s.allow('k', at);
    assert.equal(r instanceof Promise, !sync, `${name}: allow of a ${sync ? 'memory' : 'Redis'} limiter in shadow mode`);
    const got = await r;
    if (want.allowed) {
      assert.deepEqual(got, want, `${name} request ${i}`);
      assert.equal('shadow' in got, false);
    } else {
      denials++;
      assert.deepEqual(got, { ...want, allowed: true, shadow: true }, `${name} request ${i}`);
      assert.deepEqual(seen.at(-1), ['k', got]);
    }
  }
  assert.ok(denials > 0, `${name}: no denials to shadow`);
  assert.equal(s.shadowDenied, denials);
  assert.equal(seen.length, denials);
  // Errors are the limiter's, unchanged.
  if (sync) {
    assert.throws(() => s.allow(''), code('EMPTY_KEY'));
  } else {
    await assert.rejects(s.allow(''), code('EMPTY_KEY'));
  }
}

test('shadow: memory limiters, single and multi-limit', async () => {
  for (const spec of [tokenBucket(3, 1), slidingWindow(1000, 4), fixedWindow(1000, 5)]) {
    await check(spec.algorithm, await createLimiter(spec), await createLimiter(spec), true);
  }
  const specs = [tokenBucket(5, 2), fixedWindow(1000, 4)];
  await check('multi', await createMultiLimiter(specs), await createMultiLimiter(specs), true);
});

test('shadow: Redis limiters, single, multi-limit and leased', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const c = r.client();
  for (const spec of [tokenBucket(3, 1), slidingWindow(1000, 4)]) {
    await check(spec.algorithm, await createLimiter(spec), await createRedisLimiter(c, spec, { keyPrefix: `sh:${spec.algorithm}` }), false);
  }
  const specs = [tokenBucket(5, 2), fixedWindow(1000, 4)];
  await check('multi', await createMultiLimiter(specs), await createRedisMultiLimiter(c, specs, { keyPrefix: 'sh:multi' }), false);
  // A leased limiter decides as without leases for a key this slow.
  await check('quota', await createLimiter(fixedWindow(1000, 5)), await createRedisLimiter(c, fixedWindow(1000, 5), { keyPrefix: 'sh:q', quota: { enabled: true } }), false);
  // A Redis failure is not admitted by shadow mode.
  const dead = r.client({ lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
  const s = shadow(await createRedisLimiter(dead, tokenBucket(1, 1), { logger: null }));
  await assert.rejects(s.allow('k'), code('REDIS'));
  assert.equal(s.shadowDenied, 0);
});

test('shadow: a shadow denial consumes nothing', async () => {
  const l = await createLimiter(tokenBucket(2, 1));
  const s = shadow(l);
  const ds = [0, 1, 2, 3].map(() => s.allow('k', { now: t0 }));
  assert.deepEqual(ds.map((d) => [d.allowed, d.shadow === true]), [[true, false], [true, false], [true, true], [true, true]]);
  // One second later exactly one token is back, as if the shadow denials never happened.
  assert.equal(l.allow('k', { now: t0 + 1_000_000 }).allowed, true);
  assert.equal(l.allow('k', { now: t0 + 1_000_000 }).allowed, false);
});

test('shadow: bad input is INVALID_CONFIG', async () => {
  const l = await createLimiter(tokenBucket(2, 1));
  assert.throws(() => shadow(null), code('INVALID_CONFIG'));
  assert.throws(() => shadow({}), code('INVALID_CONFIG'));
  assert.throws(() => shadow(l, { onShadowDenied: 5 }), code('INVALID_CONFIG'));
  assert.throws(() => shadow(l, { onDenied: () => {} }), code('INVALID_CONFIG'));
});
