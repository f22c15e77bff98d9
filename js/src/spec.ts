import { RedstreamError } from './errors.js';
import { registry } from './generated/algorithms.js';
import type { Core, LimitParams, RawDecision } from './wasm.js';

/** A rate-limiting algorithm, named as in redstream's configuration files and Go's redstream.Algorithm. */
export type Algorithm = (typeof registry)[number]['name'];

/** Every algorithm, in Go's order (redstream.Algorithms, the rows of core's registry). */
export const algorithms: readonly Algorithm[] = registry.map((r) => r.name);

/** The registry row of algorithm a and its index (the alg argument of the core module's limit exports), or undefined. */
function rowOf(a: unknown): { alg: number; shape: 'bucket' | 'window'; words: number } | undefined {
  const alg = registry.findIndex((r) => r.name === a);
  return alg < 0 ? undefined : { alg, shape: registry[alg]!.shape, words: registry[alg]!.words };
}

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
 * A concurrency limit: at most limit units (in [1, 65536]) held at once per key, each lease
 * freeing itself leaseTtlMs after it was taken or last extended, so a crashed holder's units
 * come back by themselves (Go's redstream.Concurrency). Its windowMs is the lease TTL. A
 * concurrency limiter (`createRedisConcurrencyLimiter`) hands out leases to release
 * and extend; as a plain limit an admission is a lease nobody releases.
 */
export function concurrency(limit: number, leaseTtlMs: number): Spec {
  return { algorithm: 'concurrency', windowMs: leaseTtlMs, limit };
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
  /**
   * A shadow denial: the limit denied the request and a limiter in shadow mode
   * ({@link shadow}) admitted it anyway, so allowed is true and nothing was consumed; the
   * other fields are the denial's (Go's Decision.Shadow). Absent on every other decision.
   */
  readonly shadow?: true;
}

/** A validated spec in core units. */
export interface Limit {
  readonly spec: Spec;
  readonly algorithm: Algorithm;
  /** The algorithm's index in Go's core.Algorithms (src/generated/algorithms.ts). */
  readonly alg: number;
  /** The state words the algorithm uses (Go's core.Algorithm.Words); 0: its state is a log. */
  readonly words: number;
  /** The parameters the core module's limit exports take. */
  readonly params: LimitParams;
  /** The limit's integer parameters (Go's internal coreops.Ints): interval, tolerance and burst (µs, µs, count) for the buckets; window (µs) and limit for the windows. */
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
  switch (rowOf(spec.algorithm)?.shape) {
    case 'bucket':
      return `${spec.algorithm}(capacity=${spec.capacity}, rate=${spec.rate}/s)`;
    case 'window':
      return `${spec.algorithm}(window=${spec.windowMs}ms, limit=${spec.limit})`;
  }
  return `${JSON.stringify(spec.algorithm)}(capacity=${spec.capacity}, rate=${spec.rate}/s, window=${spec.windowMs}ms, limit=${spec.limit})`;
}

/**
 * Validates spec with the core module and returns it in core units (Go's Spec.Core): the
 * fields of the algorithm's shape, converted by the module itself, so they are Go's bit for
 * bit. An algorithm of no row of the registry is INVALID_CONFIG.
 */
export function resolve(core: Core, spec: Spec): Limit {
  if (spec === null || typeof spec !== 'object') {
    throw new RedstreamError('INVALID_CONFIG', `spec is ${spec === null ? 'null' : typeof spec}, want an object`);
  }
  const a = spec.algorithm;
  const row = rowOf(a);
  if (row === undefined) {
    throw new RedstreamError('INVALID_CONFIG', `unknown algorithm ${JSON.stringify(a)}`);
  }
  try {
    let params: LimitParams;
    if (row.shape === 'bucket') {
      params = { capacity: need(spec, 'capacity'), rate: need(spec, 'rate'), windowUs: 0, limit: 0 };
    } else {
      const ms = need(spec, 'windowMs');
      const limit = need(spec, 'limit');
      const w = Math.round(ms * 1000);
      if (!Number.isFinite(ms) || !Number.isSafeInteger(w) || w < 1) {
        throw new RedstreamError('INVALID_CONFIG', `windowMs = ${ms}, want at least 0.001 (1 µs)`);
      }
      if (!Number.isSafeInteger(limit)) {
        throw new RedstreamError('INVALID_CONFIG', `limit = ${limit}, want an integer`);
      }
      params = { capacity: 0, rate: 0, windowUs: w, limit };
    }
    const { ints, max } = core.limitParams(row.alg, params, row.shape === 'bucket' ? 3 : 2);
    return { spec, algorithm: a, alg: row.alg, words: row.words, params, ints, max, windowUs: ints[0]! };
  } catch (e) {
    configError(spec, e);
  }
}

/** The state of one key of an in-process limiter: the state words, or a log (timestamps, oldest first). */
export type KeyState = { words: readonly [number, number, number] } | { log: BigInt64Array };

const noWords = [0, 0, 0] as const;
const noLog = new BigInt64Array(0);

function wordsOf(s: KeyState | undefined): readonly number[] {
  return s !== undefined && 'words' in s ? s.words : noWords;
}

function logOf(s: KeyState | undefined): BigInt64Array {
  return s !== undefined && 'log' in s ? s.log : noLog;
}

/**
 * Decides a request for a key in state s (undefined for a new key); returns the decision
 * and, when admitted, the new state and, for a log algorithm, the time its n entries were
 * recorded at (a lease's time, for the concurrency limit).
 */
export function step(core: Core, l: Limit, s: KeyState | undefined, now: number, n: number): { d: RawDecision; next?: KeyState; at?: number } {
  const log = logOf(s);
  const r = core.limitStep(l.alg, l.params, wordsOf(s), log, now, n);
  if (!r.allowed) {
    return { d: r };
  }
  if (l.words > 0) {
    return { d: r, next: { words: r.next } };
  }
  const [pruned, appended, at] = r.next;
  const kept = log.length - pruned;
  const next = new BigInt64Array(kept + appended);
  next.set(log.subarray(pruned));
  next.fill(BigInt(at), kept);
  return { d: r, next: { log: next }, at };
}

/** What a reservation took from one limit (Go's core.Charge): n units at the charge point at. */
export interface Charge {
  readonly at: number;
  readonly n: number;
}

/** Go's core.Limit.ChargeOf: the charge of a request of cost n admitted at now with the decision d. */
/**
 * Throws INVALID_CONFIG when a limit's algorithm does not settle reservations (Go's
 * core.Algorithm.Settles): a concurrency limit gives its units back by releasing a lease.
 */
export function checkSettles(limits: readonly Limit[]): void {
  for (const l of limits) {
    if (!registry[l.alg]!.settles) {
      throw new RedstreamError('INVALID_CONFIG', `algorithm ${JSON.stringify(l.algorithm)} does not settle reservations (a concurrency limit releases leases instead)`);
    }
  }
}

export function chargeOf(core: Core, l: Limit, now: number, n: number, d: RawDecision): Charge {
  return core.limitCharge(l.alg, l.params, now, n, d);
}

/** Go's core.Limit.SettleState: the state after settling charge c at now with the actual cost, and the change applied. */
export function settleState(core: Core, l: Limit, s: KeyState | undefined, c: Charge, now: number, actual: number): { change: number; next: KeyState } {
  const r = core.limitSettle(l.alg, l.params, l.max, l.words === 0, wordsOf(s), logOf(s), c.at, c.n, now, actual);
  return { change: r.change, next: l.words > 0 ? { words: r.words } : { log: r.log } };
}

/** Go's core IdleState: whether a key in state s is back to its initial state at now, so the table may forget it. */
export function idle(core: Core, l: Limit, s: KeyState, now: number): boolean {
  return core.limitIdle(l.alg, l.params, wordsOf(s), logOf(s), now);
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
