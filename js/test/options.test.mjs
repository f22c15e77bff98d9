// Options objects are checked: a misspelled option is an INVALID_CONFIG error naming it and
// the known ones, never ignored.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  createBloomDeduplicator,
  createLimiter,
  createRedisLimiter,
  createRedisSetDeduplicator,
  createRedisWindowDeduplicator,
  createWindowDeduplicator,
  tokenBucket,
} from '../dist/index.js';
import { startRedis } from './helpers.mjs';

// rejects asserts that fn throws (or rejects with) an INVALID_CONFIG error whose message is want.
async function rejects(fn, want) {
  await assert.rejects(async () => fn(), (e) => {
    assert.equal(e.code, 'INVALID_CONFIG');
    assert.equal(e.message, want);
    return true;
  });
}

test('in-process options', async () => {
  const l = await createLimiter(tokenBucket(5, 1));
  await rejects(() => l.allow('k', { cost: 0 }), 'redstream: allow: unknown option "cost" (known: n, now)');
  await rejects(() => l.allow('k', 3), 'redstream: allow: options must be an object, got number');
  assert.equal(l.allow('k', { n: 2 }).allowed, true);
  await rejects(() => createLimiter(tokenBucket(5, 1), { sweep: 10 }), 'redstream: memory options: unknown option "sweep" (known: clock, sweepThreshold)');
  await rejects(() => createWindowDeduplicator(1000, { clok: () => 0 }), 'redstream: memory options: unknown option "clok" (known: clock, sweepThreshold)');
  await rejects(() => createBloomDeduplicator({ fpr: 0.01 }), 'redstream: Bloom options: unknown option "fpr" (known: insertions, fpRate, shards)');
});

test('Redis options', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const client = r.client();
  await rejects(() => createRedisLimiter(client, tokenBucket(5, 1), { timeout: 100 }),
    'redstream: Redis limiter options: unknown option "timeout" (known: keyPrefix, expiryMarginMs, timeoutMs, failurePolicy, logger, previous, carry, quota)');
  const l = await createRedisLimiter(client, tokenBucket(5, 1));
  await rejects(() => l.allow('k', { cost: 2 }), 'redstream: allow: unknown option "cost" (known: n, now)');
  assert.equal((await l.allow('k', { n: 2 })).allowed, true);
  await rejects(() => createRedisSetDeduplicator(client, 'd', { ttlMs: 5 }),
    'redstream: Redis deduplicator options: unknown option "ttlMs" (known: keyPrefix, timeoutMs, setTtlMs)');
  await createRedisSetDeduplicator(client, 'd', { setTtlMs: 5 });
  await rejects(() => createRedisWindowDeduplicator(client, 'w', 1000, { setTtlMs: 5 }),
    'redstream: Redis deduplicator options: unknown option "setTtlMs" (known: keyPrefix, timeoutMs)');
});
