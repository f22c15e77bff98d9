import { RedstreamError } from './errors.js';
import type { Core, RawDecision } from './wasm.js';

/** A rate-limiting algorithm, named as in redstream's configuration files and Go's redstream.Algorithm. */
export type Algorithm = 'token-bucket' | 'leaky-bucket' | 'sliding' | 'sliding-counter' | 'fixed';

/** Every algorithm, in Go's order (redstream.Algorithms). */
export const algorithms: readonly Algorithm[] = ['token-bucket', 'leaky-bucket', 'sliding', 'sliding-counter', 'fixed'];

/**
 * A limiter in user-facing units, as Go's redstream.Spec. The buckets use `capacity` and
 * `rate`, the windows use `windowMs` and `limit`. The same spec decides the same way in Go
 * and here: the core module converts it to the integers both engines use.
 */
export interface Spec {
  readonly algorithm: Algorithm;
  /** The bucket size (burst), in [1, 2^40]. Buckets only. */
  readonly capacity?: number;
  /** Refill (token bucket) or leak (leaky bucket) rate per second, in (0, 1e6]. Buckets only. */
  readonly rate?: number;
  /** The window in milliseconds, rounded to whole microseconds, in [1 µs, 2^51 µs]. Windows only. */
  readonly windowMs?: number;
  /** The most cost admitted per window, in [1, 2^40] (2^20 for the sliding log). Windows only. */
  readonly limit?: number;
}

/** A token bucket of capacity tokens refilling ratePerSecond per second; a new key starts full. */
export function tokenBucket(capacity: number, ratePerSecond: number): Spec {
  return { algorithm: 'token-bucket', capacity, rate: ratePerSecond };
}

/** A leaky bucket of capacity draining leakRatePerSecond per second; a new key starts empty. Decisions carry `delay`. */
export function leakyBucket(capacity: number, leakRatePerSecond: number): Spec {
  return { algorithm: 'leaky-bucket', capacity, rate: leakRatePerSecond };
}

/** The exact sliding window log admitting limit per window of windowMs. */
export function slidingWindow(windowMs: number, limit: number): Spec {
  return { algorithm: 'sliding', windowMs, limit };
}

/** The sliding window counter (two weighted fixed windows) admitting about limit per window. */
export function slidingCounter(windowMs: number, limit: number): Spec {
  return { algorithm: 'sliding-counter', windowMs, limit };
}

/** The fixed window counter admitting limit per window aligned to multiples of windowMs since the epoch. */
export function fixedWindow(windowMs: number, limit: number): Spec {
  return { algorithm: 'fixed', windowMs, limit };
}

/**
 * The result of every limiter decision, the fields of Go's redstream.Decision. Durations are
 * microseconds (Go's are time.Duration of the same microseconds).
 */
export interface Decision {
  /** The request was admitted, and its cost consumed. A denied request consumes nothing. */
  readonly allowed: boolean;
  /** The most the key can hold: the bucket's burst, the window's limit. */
  readonly limit: number;
  /** How much more cost the key would admit right now, after this decision. */
  readonly remaining: number;
  /** µs: 0 when allowed; else the time until this request could pass with no other traffic. */
  readonly retryAfter: number;
  /** µs until the key is back to its initial state. */
  readonly resetAfter: number;
  /** µs an admitted leaky-bucket request should wait to leave evenly spaced; else 0. */
  readonly delay: number;
}

/** A validated spec in core units. */
export interface Limit {
  readonly spec: Spec;
  readonly algorithm: Algorithm;
  /** Go's core.Limit.Ints(): interval, tolerance and burst (µs, µs, count) for the buckets; window (µs) and limit for the windows. */
  readonly ints: readonly number[];
  /** The largest admissible cost. */
  readonly max: number;
  /** The window in µs (windows), or the interval (buckets). */
  readonly windowUs: number;
}

const P52 = 2 ** 52;

function need(spec: Spec, field: 'capacity' | 'rate' | 'windowMs' | 'limit'): number {
  const v = spec[field];
  if (typeof v !== 'number') {
    throw new RedstreamError('INVALID_CONFIG', `${spec.algorithm}: ${field} is ${v === undefined ? 'missing' : typeof v}, want a number`);
  }
  return v;
}

function configError(spec: Spec, e: unknown): never {
  if (e instanceof RedstreamError && e.code === 'INVALID_CONFIG') {
    throw new RedstreamError('INVALID_CONFIG', `invalid spec ${describe(spec)}`, { cause: e });
  }
  throw e;
}

/** describe returns the spec as Go's Spec.String does, e.g. "token-bucket(capacity=10, rate=5/s)". */
export function describe(spec: Spec): string {
  if (spec.algorithm === 'token-bucket' || spec.algorithm === 'leaky-bucket') {
    return `${spec.algorithm}(capacity=${spec.capacity}, rate=${spec.rate}/s)`;
  }
  return `${spec.algorithm}(window=${spec.windowMs}ms, limit=${spec.limit})`;
}

/**
 * Validates spec with the core module and returns it in core units (Go's Spec.Core). The
 * bucket integers are read off the module's own conversion, so they are Go's bit for bit.
 */
export function resolve(core: Core, spec: Spec): Limit {
  if (spec === null || typeof spec !== 'object') {
    throw new RedstreamError('INVALID_CONFIG', `spec is ${spec === null ? 'null' : typeof spec}, want an object`);
  }
  const a = spec.algorithm;
  try {
    switch (a) {
      case 'token-bucket':
      case 'leaky-bucket': {
        const capacity = need(spec, 'capacity');
        const rate = need(spec, 'rate');
        // A new key at time 0 admits one token and stores TAT = interval; a key whose TAT is
        // 2^52 is denied at time 0 with retry-after 2^52 + interval - tolerance.
        const first = core.tokenBucketStep(capacity, rate, 0, 0, 1);
        const interval = first.tat;
        const denied = core.tokenBucketStep(capacity, rate, P52, 0, 1);
        const tolerance = P52 + interval - denied.retryAfter;
        const burst = first.limit;
        return { spec, algorithm: a, ints: [interval, tolerance, burst], max: burst, windowUs: interval };
      }
      case 'sliding':
      case 'sliding-counter':
      case 'fixed': {
        const ms = need(spec, 'windowMs');
        const limit = need(spec, 'limit');
        const w = Math.round(ms * 1000);
        if (!Number.isFinite(ms) || !Number.isSafeInteger(w) || w < 1) {
          throw new RedstreamError('INVALID_CONFIG', `windowMs = ${ms}, want at least 0.001 (1 µs)`);
        }
        if (!Number.isSafeInteger(limit)) {
          throw new RedstreamError('INVALID_CONFIG', `limit = ${limit}, want an integer`);
        }
        if (a === 'sliding') {
          core.slidingLogStep(w, limit, new BigInt64Array(0), 0, 1);
        } else if (a === 'sliding-counter') {
          core.slidingCounterStep(w, limit, 0, 0, 0, 0, 1);
        } else {
          core.fixedWindowStep(w, limit, 0, 0, 0, 1);
        }
        return { spec, algorithm: a, ints: [w, limit], max: limit, windowUs: w };
      }
    }
  } catch (e) {
    configError(spec, e);
  }
  throw new RedstreamError('INVALID_CONFIG', `unknown algorithm ${JSON.stringify(a)}`);
}

/** The state of one key of an in-process limiter. */
export type KeyState = { tat: number } | { start: number; count: number; prev: number } | { log: BigInt64Array };

/** Decides a request for a key in state s (undefined for a new key); returns the decision and, when admitted, the new state. */
export function step(core: Core, l: Limit, s: KeyState | undefined, now: number, n: number): { d: RawDecision; next?: KeyState } {
  const [a, b] = l.ints as [number, number];
  switch (l.algorithm) {
    case 'token-bucket':
    case 'leaky-bucket': {
      const tat = s ? (s as { tat: number }).tat : 0;
      const { capacity, rate } = l.spec as { capacity: number; rate: number };
      const r = l.algorithm === 'token-bucket' ? core.tokenBucketStep(capacity, rate, tat, now, n) : core.leakyBucketStep(capacity, rate, tat, now, n);
      return { d: r, next: r.allowed ? { tat: r.tat } : undefined };
    }
    case 'fixed':
    case 'sliding-counter': {
      const w = (s as { start: number; count: number; prev: number } | undefined) ?? { start: 0, count: 0, prev: 0 };
      if (l.algorithm === 'fixed') {
        const r = core.fixedWindowStep(a, b, w.start, w.count, now, n);
        return { d: r, next: r.allowed ? { start: r.start, count: r.count, prev: 0 } : undefined };
      }
      const r = core.slidingCounterStep(a, b, w.start, w.count, w.prev, now, n);
      return { d: r, next: r.allowed ? { start: r.start, count: r.count, prev: r.prev } : undefined };
    }
    case 'sliding': {
      const log = s ? (s as { log: BigInt64Array }).log : new BigInt64Array(0);
      const r = core.slidingLogStep(a, b, log, now, n);
      if (!r.allowed) {
        return { d: r };
      }
      const kept = log.length - r.pruned;
      const next = new BigInt64Array(kept + r.appended);
      next.set(log.subarray(r.pruned));
      next.fill(BigInt(r.at), kept);
      return { d: r, next: { log: next } };
    }
  }
}

/** Go's core IdleState: whether a key in state s is back to its initial state at now, so the table may forget it. */
export function idle(l: Limit, s: KeyState, now: number): boolean {
  const w = l.ints[0]!;
  switch (l.algorithm) {
    case 'token-bucket':
    case 'leaky-bucket':
      return (s as { tat: number }).tat <= now;
    case 'fixed': {
      const x = s as { start: number; count: number };
      return x.count === 0 || x.start + w <= now;
    }
    case 'sliding-counter': {
      const x = s as { start: number; count: number; prev: number };
      const resetAt = x.count > 0 ? x.start + 2 * w : x.prev > 0 ? x.start + w : x.start;
      return resetAt <= now;
    }
    case 'sliding': {
      const log = (s as { log: BigInt64Array }).log;
      return log.length === 0 || Number(log[log.length - 1]) <= now - w;
    }
  }
}

/** Returns the public decision of a raw one. */
export function decision(d: RawDecision): Decision {
  return { allowed: d.allowed, limit: d.limit, remaining: d.remaining, retryAfter: d.retryAfter, resetAfter: d.resetAfter, delay: d.delay };
}

/**
 * Go's core.Combine: the decision of several limits applied to one request all-or-nothing.
 * Allowed only if every limit allows; the smallest remaining (with that limit's limit); the
 * largest retryAfter, resetAfter and delay (delay 0 when denied).
 */
export function combine(ds: readonly RawDecision[]): RawDecision {
  if (ds.length === 0) {
    return { allowed: true, limit: 0, remaining: 0, retryAfter: 0, resetAfter: 0, delay: 0 };
  }
  const out = { ...ds[0]! };
  for (const d of ds.slice(1)) {
    out.allowed = out.allowed && d.allowed;
    if (d.remaining < out.remaining) {
      out.remaining = d.remaining;
      out.limit = d.limit;
    }
    out.retryAfter = Math.max(out.retryAfter, d.retryAfter);
    out.resetAfter = Math.max(out.resetAfter, d.resetAfter);
    out.delay = Math.max(out.delay, d.delay);
  }
  if (!out.allowed) {
    out.delay = 0;
  }
  return out;
}
