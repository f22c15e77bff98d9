// A consumer of the published declarations (dist/*.d.ts), compiled with --strict by
// test/types.test.mjs: the package's types are usable as an application would use them.
import type { Cluster, Redis } from 'ioredis';

import {
  concurrency,
  createConcurrencyLimiter,
  createLimiter,
  createRedisConcurrencyLimiter,
  createRedisLimiter,
  createRedisBloomDeduplicator,
  createWindowDeduplicator,
  RedstreamError,
  shadow,
  slidingWindow,
  tokenBucket,
  fixedWindow,
  wait,
  type Carry,
  type Decision,
  type ErrorCode,
  type Lease,
  type QuotaStats,
  type Spec,
} from '@redstream-go/redstream';

export async function use(redis: Redis, cluster: Cluster): Promise<number> {
  const spec: Spec = tokenBucket(10, 5);
  const mem = await createLimiter(spec, { clock: () => 1_767_225_600_000_000, sweepThreshold: 64 });
  const d: Decision = mem.allow('user:1', { n: 2, now: new Date() });
  const onRedis = await createRedisLimiter(redis, slidingWindow(60_000, 100), { keyPrefix: 'api', timeoutMs: 250, failurePolicy: mem });
  const d2: Decision = await onRedis.allow('user:1');
  const carry: Carry = 'proportional';
  const raised = await createRedisLimiter(redis, fixedWindow(60_000, 20), { previous: [fixedWindow(60_000, 10)], carry });
  await raised.allow('user:1');
  const leases = await createRedisConcurrencyLimiter(cluster, [concurrency(5, 30_000), tokenBucket(10, 1)], { timeoutMs: 250 });
  const lease: Lease = await leases.acquire('job', { n: 2 });
  if (lease.allowed) {
    const renewed: Lease = await leases.extend(lease);
    const freed: boolean = await leases.release(renewed, { now: renewed.expiry });
    void freed;
  }
  const local = await createConcurrencyLimiter([concurrency(2, 1000)]);
  const held: Lease = local.acquire('job');
  const ok: boolean = local.release(local.extend(held));
  const next = mem.successor('as-is', tokenBucket(20, 5));
  next.allow('user:1');
  void ok;
  const bloom = await createRedisBloomDeduplicator(cluster, 'orders', { insertions: 1e6, fpRate: 0.001 });
  const isNew: boolean = !(await bloom.checkAndMark('order-1'));
  const trial = shadow(mem, { onShadowDenied: (key, dec) => void [key, dec.shadow] });
  const sd: Decision = trial.allow('user:1'); // synchronous, as mem's
  const sr: Decision = await shadow(onRedis).allow('user:1');
  const waited: Decision = await wait(onRedis, 'user:1', { n: 1, timeoutMs: 500, signal: AbortSignal.timeout(1000) });
  const hot = await createRedisLimiter(redis, fixedWindow(1000, 1e6), { quota: { enabled: true, durationMs: 50, maxShare: 0.2 } });
  const stats: QuotaStats | undefined = hot.quotaStats;
  void [sd, sr, waited, stats, trial.shadowDenied];
  const win = await createWindowDeduplicator(3_600_000);
  win.checkAndMark('e');
  try {
    mem.allow('');
  } catch (e) {
    if (e instanceof RedstreamError) {
      const code: ErrorCode = e.code;
      void code;
    }
  }
  return d.retryAfter + d2.resetAfter + (isNew ? 1 : 0) + mem.trackedKeys;
}
