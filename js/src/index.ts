/**
 * redstream for Node.js: the rate limiters and deduplicators of the Go library redstream,
 * deciding exactly as Go does.
 *
 * - In process ({@link createLimiter}, {@link createWindowDeduplicator}, ...): every decision
 *   is made by redstream's Go core compiled to WebAssembly, loaded with
 *   WebAssembly.compile and a few WASI imports of this package (no experimental Node.js
 *   feature); the per-key state lives in a key table swept as Go's memory engine sweeps.
 *   {@link createMultiLimiter} applies several limits to each key, all-or-nothing.
 * - Concurrency leases ({@link createConcurrencyLimiter} in process,
 *   {@link createRedisConcurrencyLimiter} on Redis): at most N units held at once per key,
 *   each lease released, extended, or freeing itself after its TTL.
 * - Any limiter in shadow mode ({@link shadow}: denials admitted and marked) or waited on
 *   ({@link wait}: sleeps retryAfter and asks again, within a deadline); a Redis limiter's
 *   hot keys on leased quota (its `quota` option).
 * - On Redis ({@link createRedisLimiter}, ...): the Go engine's Lua scripts, key schema and
 *   arguments, generated from the Go code, on an ioredis client or cluster, so a Node.js
 *   service and a Go service share one limit on the same keys.
 *
 * Times are microseconds since the Unix epoch (or Dates); durations in decisions are
 * microseconds.
 *
 * @module
 */
export { RedstreamError, type ErrorCode } from './errors.js';
export {
  algorithms,
  combine,
  concurrency,
  describe,
  fixedWindow,
  leakyBucket,
  slidingCounter,
  slidingWindow,
  tokenBucket,
  type Algorithm,
  type Decision,
  type Limit,
  type Spec,
} from './spec.js';
export { MAX_TIME, micros, systemClock, type Bytes, type Clock, type Time } from './time.js';
export {
  DEFAULT_BLOOM_FP_RATE,
  DEFAULT_BLOOM_INSERTIONS,
  DEFAULT_DEDUP_WINDOW_MS,
  DEFAULT_SWEEP_THRESHOLD,
  MemoryBloomDeduplicator,
  MemoryConcurrencyLimiter,
  MemoryLimiter,
  MemorySetDeduplicator,
  MemoryWindowDeduplicator,
  createBloomDeduplicator,
  createConcurrencyLimiter,
  createLimiter,
  createMultiLimiter,
  createSetDeduplicator,
  createWindowDeduplicator,
  type AllowOptions,
  type BloomOptions,
  type MemoryDeduplicator,
  type MemoryOptions,
} from './memory.js';
export {
  DEFAULT_DEDUP_PREFIX,
  DEFAULT_TIMEOUT_MS,
  RedisBloomDeduplicator,
  RedisConcurrencyLimiter,
  RedisLimiter,
  RedisSetDeduplicator,
  RedisWindowDeduplicator,
  createRedisBloomDeduplicator,
  createRedisConcurrencyLimiter,
  createRedisLimiter,
  createRedisMultiLimiter,
  createRedisSetDeduplicator,
  createRedisWindowDeduplicator,
  defaultPrefixes,
  type Arg,
  type FailurePolicy,
  type ScriptCall,
  type Logger,
  type RedisClient,
  type RedisConcurrencyOptions,
  type RedisDedupOptions,
  type RedisLimiterOptions,
} from './redis.js';
export { fingerprint, redisKey } from './keys.js';
export { carries, type Carry } from './carry.js';
export { type Lease, type LeaseOptions } from './lease.js';
export { MemoryReservation, RedisReservation } from './reserve.js';
export { ShadowLimiter, shadow, type Limiter, type ShadowOptions } from './shadow.js';
export { wait, type WaitOptions } from './wait.js';
export { DEFAULT_QUOTA_DURATION_MS, DEFAULT_QUOTA_MAX_SHARE, type QuotaOptions, type QuotaStats } from './quota.js';
export { ABI_VERSION, Core, Status, instantiate, loadCore, type BloomParams, type RawDecision } from './wasm.js';
export { scripts, type ScriptSource } from './generated/scripts.js';
export { schema } from './generated/schema.js';
