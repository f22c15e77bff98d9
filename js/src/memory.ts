// In-process engines on the core module: a limiter with a key table and deduplicators, the
// counterparts of Go's package memory.

import { carries, carryOf, checkCarry, type Carry } from './carry.js';
import { RedstreamError } from './errors.js';
import { issuable, leaseKeys, leaseLost, randomToken, type Lease, type LeaseOptions } from './lease.js';
import { allowKeys, bloomKeys, checkOptions, memoryKeys } from './options.js';
import { MIN_DEADLINE_US, MemoryReservation } from './reserve.js';
import { chargeOf, checkSettles, combine, decision, idle, resolve, settleState, step, type Decision, type KeyState, type Limit, type Spec } from './spec.js';
import { checkCost, elementBytes, keyBytes, systemClock, tableKey, toMicros, type Bytes, type Clock, type Time } from './time.js';
import { loadCore, type BloomParams, type Core } from './wasm.js';

/** The number of keys a table may hold before its first sweep (Go's memory.DefaultSweepThreshold). */
export const DEFAULT_SWEEP_THRESHOLD = 256;

/** Options of the in-process engines. Every field is optional. */
export interface MemoryOptions {
  /** The clock read when a call passes no time (default {@link systemClock}). */
  readonly clock?: Clock;
  /**
   * The number of keys the table may hold before it is first swept of keys whose state has
   * fully recovered (limiters) or expired (windowed deduplicator). The table is swept when a
   * new key arrives and it already holds its mark of keys; the mark starts at sweepThreshold
   * and after each sweep is max(sweepThreshold, 2 × keys left): Go's rule for one shard, so
   * the table never holds more than about twice its live keys. At least 1; default
   * {@link DEFAULT_SWEEP_THRESHOLD}.
   */
  readonly sweepThreshold?: number;
}

/** Options of one decision. */
export interface AllowOptions {
  /** The cost, an integer in [1, limit] (default 1). */
  readonly n?: number;
  /** The time of the request (default: the engine's clock; for Redis, the server's TIME). */
  readonly now?: Time;
}

function threshold(o: MemoryOptions): number {
  checkOptions('memory options', o, memoryKeys);
  const t = o.sweepThreshold ?? DEFAULT_SWEEP_THRESHOLD;
  if (!Number.isSafeInteger(t) || t < 1) {
    throw new RedstreamError('INVALID_CONFIG', `sweepThreshold = ${t}, want an integer of at least 1`);
  }
  return t;
}

function clockOf(o: MemoryOptions): Clock {
  if (o.clock !== undefined && typeof o.clock !== 'function') {
    throw new RedstreamError('INVALID_CONFIG', 'clock is not a function');
  }
  return o.clock ?? systemClock;
}

/**
 * A map whose inserts sweep it first when it holds its mark of keys: the entries for which
 * gone is true are dropped and the mark becomes max(threshold, 2 × entries left).
 */
class Table<V> {
  readonly map = new Map<string, V>();
  private mark: number;

  constructor(private readonly threshold: number) {
    this.mark = threshold;
  }

  insert(key: string, v: V, gone: (v: V) => boolean): void {
    if (this.map.size >= this.mark) {
      for (const [k, x] of this.map) {
        if (gone(x)) {
          this.map.delete(k);
        }
      }
      this.mark = Math.max(this.threshold, 2 * this.map.size);
    }
    this.map.set(key, v);
  }

  clear(): void {
    this.map.clear();
    this.mark = this.threshold;
  }
}

/**
 * An in-process rate limiter of one spec, or of several limits on each key all-or-nothing
 * ({@link createMultiLimiter}), on the core module: every decision is the Go core's, and the
 * per-key state lives in a key table swept as Go's memory engine sweeps its shards. Methods
 * are synchronous. Create one with {@link createLimiter}.
 */
export class MemoryLimiter {
  private readonly table: Table<KeyState[]>;
  private readonly clock: Clock;
  /** The largest admissible cost: the smallest limit's. */
  readonly max: number;
  /** A successor's previous limiter and strategy ({@link successor}); undefined for none. */
  private carrier?: { from: MemoryLimiter; carry: number };

  /** Use {@link createLimiter} or {@link createMultiLimiter}. */
  constructor(
    private readonly core: Core,
    /** The validated specs in core units: one, unless built by createMultiLimiter. */
    readonly limits: readonly Limit[],
    private readonly options: MemoryOptions = {},
  ) {
    if (limits.length === 0) {
      throw new RedstreamError('INVALID_CONFIG', 'no limits');
    }
    this.table = new Table(threshold(options));
    this.clock = clockOf(options);
    this.max = Math.min(...limits.map((l) => l.max));
  }

  /**
   * Returns a limiter of specs (one per limit of this one, index for index, as
   * {@link createMultiLimiter} takes them) that replaces this one without losing its keys'
   * state (Go's memory.Limiter.Successor): the first decision or reservation
   * ({@link reserve}) on a key the successor does not hold reads the key's state here and
   * seeds it by carry (see {@link Carry}), once, in the core module; from then on the
   * successor holds the key. A limit that did not change keeps the key's state as it is. This
   * limiter keeps its state and still decides its own requests, which the successor no
   * longer sees: decide with the successor from the change on. The successor has this
   * limiter's options. Throws INVALID_CONFIG for a bad carry or spec, another number of
   * specs, or specs this limiter cannot carry into (Go's core.Limit.CheckCarry: another
   * algorithm, another window, a changed sliding log or concurrency limit; 'reset' and an
   * unchanged limit always can).
   */
  successor(carry: Carry, ...specs: Spec[]): MemoryLimiter {
    const c = carryOf(carry);
    if (specs.length !== this.limits.length) {
      throw new RedstreamError('INVALID_CONFIG', `successor of ${specs.length} specs for a limiter of ${this.limits.length}`);
    }
    const ls = specs.map((sp) => resolve(this.core, sp));
    ls.forEach((l, i) => checkCarry(l, this.limits[i]!, c));
    const s = new MemoryLimiter(this.core, ls, this.options);
    if (c !== 'reset') {
      s.carrier = { from: this, carry: carries.indexOf(c) };
    }
    return s;
  }

  // state returns the state of table key k at now: the one held, or for a successor a key
  // the previous limiter holds, seeded from it (and stored, whatever the decision), or undefined.
  private state(k: string, now: number): KeyState[] | undefined {
    const s = this.table.map.get(k);
    if (s !== undefined || this.carrier === undefined) {
      return s;
    }
    const { from, carry } = this.carrier;
    const old = from.table.map.get(k);
    if (old === undefined) {
      return undefined;
    }
    const seeded = this.limits.map((l, i): KeyState => {
      const o = old[i];
      const q = from.limits[i]!;
      const w = o !== undefined && 'words' in o ? o.words : ([0, 0, 0] as const);
      const r = this.core.limitSeed(l.alg, l.params, q.alg, q.params, w, now, carry);
      return r.kept && o !== undefined ? o : { words: r.words };
    });
    this.table.insert(k, seeded, (v) => v.every((st, i) => idle(this.core, this.limits[i]!, st, now)));
    return seeded;
  }

  /** The first (for a single limit, the only) limit. */
  get limit(): Limit {
    return this.limits[0]!;
  }

  /** The limiter's spec (the first, for a multi-limit limiter). */
  get spec(): Spec {
    return this.limit.spec;
  }

  /**
   * Decides a request for key: cost options.n (default 1) at options.now (default the
   * clock). With several limits the request is admitted only if every limit admits it, and
   * only then does every limit record it; the decisions are combined as Go's core.Combine.
   * Throws a RedstreamError for bad input: EMPTY_KEY, INVALID_KEY, INVALID_COST,
   * COST_TOO_LARGE (n above the limit), INVALID_TIME.
   */
  allow(key: Bytes, options: AllowOptions = {}): Decision {
    checkOptions('allow', options, allowKeys);
    const k = tableKey(key, keyBytes(key));
    const n = options.n ?? 1;
    checkCost(n, this.max);
    const now = toMicros(options.now ?? this.clock());
    const s = this.state(k, now);
    const steps = this.limits.map((l, i) => step(this.core, l, s?.[i], now, n));
    if (steps.every((x) => x.next)) {
      const next = steps.map((x) => x.next!);
      if (s) {
        this.table.map.set(k, next);
      } else {
        this.table.insert(k, next, (v) => v.every((st, i) => idle(this.core, this.limits[i]!, st, now)));
      }
    }
    return decision(steps.length === 1 ? steps[0]!.d : combine(steps.map((x) => x.d)));
  }

  /**
   * Reserves a request of cost options.n (the estimate) at options.now, admitted or denied
   * exactly as {@link allow} would (Go's memory.Limiter.ReserveN): its settle later applies
   * the actual cost, at the same explicit time or, without one, at the limiter's clock then.
   * A successor's key it does not hold yet is seeded first, exactly as {@link allow} seeds it.
   * The deadline is the clock now plus the longest period of the limits, and at least a minute.
   */
  reserve(key: Bytes, options: AllowOptions = {}): MemoryReservation {
    checkOptions('reserve', options, allowKeys);
    checkSettles(this.limits);
    const k = tableKey(key, keyBytes(key));
    const n = options.n ?? 1;
    checkCost(n, this.max);
    const now = toMicros(options.now ?? this.clock());
    const s = this.state(k, now);
    const steps = this.limits.map((l, i) => step(this.core, l, s?.[i], now, n));
    const d = decision(steps.length === 1 ? steps[0]!.d : combine(steps.map((x) => x.d)));
    if (!steps.every((x) => x.next)) {
      return new MemoryReservation(d, 0);
    }
    const next = steps.map((x) => x.next!);
    if (s) {
      this.table.map.set(k, next);
    } else {
      this.table.insert(k, next, (v) => v.every((st, i) => idle(this.core, this.limits[i]!, st, now)));
    }
    const charges = steps.map((x, i) => chargeOf(this.core, this.limits[i]!, now, n, x.d));
    const longest = Math.max(...this.limits.map((l) => this.core.limitParams(l.alg, l.params, l.ints.length).period));
    const deadline = toMicros(this.clock()) + Math.max(longest, MIN_DEADLINE_US);
    return new MemoryReservation(d, deadline, (actual) => {
      const clock = toMicros(this.clock());
      if (clock > deadline) {
        throw new RedstreamError('RESERVATION_DONE', 'reservation past its deadline');
      }
      const at = options.now === undefined ? clock : now;
      const cur = this.table.map.get(k);
      const after = this.limits.map((l, i) => settleState(this.core, l, cur?.[i], charges[i]!, at, actual).next);
      if (cur) {
        this.table.map.set(k, after);
      } else if (!after.every((st, i) => idle(this.core, this.limits[i]!, st, at))) {
        this.table.insert(k, after, (v) => v.every((st, i) => idle(this.core, this.limits[i]!, st, at)));
      }
    });
  }

  /** Forgets key's state, so its next request sees a new key. */
  reset(key: Bytes): void {
    this.table.map.delete(tableKey(key, keyBytes(key)));
  }

  /** The number of keys whose state the table holds, counting recovered keys not swept yet (Go's TrackedKeys). */
  get trackedKeys(): number {
    return this.table.map.size;
  }
}

/** Returns an in-process limiter of spec. Rejects with INVALID_CONFIG for a bad spec or option. */
export async function createLimiter(spec: Spec, options: MemoryOptions = {}): Promise<MemoryLimiter> {
  const core = await loadCore();
  return new MemoryLimiter(core, [resolve(core, spec)], options);
}

/**
 * Returns an in-process limiter applying every spec to each key, all-or-nothing (e.g. 10/s
 * and 10,000/day), as Go's memory.NewMultiLimiter. A cost above the smallest limit is
 * COST_TOO_LARGE.
 */
export async function createMultiLimiter(specs: readonly Spec[], options: MemoryOptions = {}): Promise<MemoryLimiter> {
  const core = await loadCore();
  if (!Array.isArray(specs) || specs.length === 0) {
    throw new RedstreamError('INVALID_CONFIG', 'no limits');
  }
  return new MemoryLimiter(core, specs.map((s) => resolve(core, s)), options);
}

/** One key of an in-process concurrency limiter: a state per limit, and the leases held by token. */
interface LeaseKey {
  states: (KeyState | undefined)[];
  held: Map<number, { at: number; n: number }>;
}

/**
 * An in-process concurrency limiter (Go's memory.ConcurrencyLimiter and
 * wasmcore.ConcurrencyLimiter, deciding as they do): leases on one concurrency limit
 * ({@link concurrency}), alone or all-or-nothing with rate limits on the same key, each
 * admission, release and extension computed by the core module. A lease is the units its
 * acquisition recorded in the concurrency limit's log, found again by its token; a release
 * after expiry, a second release, or a token this limiter never issued changes nothing.
 * Keys whose limits are all back to their initial state are swept as {@link MemoryLimiter}
 * sweeps. Methods are synchronous. Create one with {@link createConcurrencyLimiter}.
 */
export class MemoryConcurrencyLimiter {
  private readonly table: Table<LeaseKey>;
  private readonly clock: Clock;
  private readonly ci: number;
  private readonly ttl: number;
  /** The largest units one lease may hold: the smallest limit's. */
  readonly max: number;

  /** Use {@link createConcurrencyLimiter}. */
  constructor(
    private readonly core: Core,
    /** The validated specs in core units. */
    readonly limits: readonly Limit[],
    options: MemoryOptions = {},
  ) {
    if (limits.length === 0) {
      throw new RedstreamError('INVALID_CONFIG', 'no limits');
    }
    let ci = -1;
    limits.forEach((l, i) => {
      if (l.algorithm !== 'concurrency') {
        return;
      }
      if (ci >= 0) {
        throw new RedstreamError('INVALID_CONFIG', `specs[${ci}] and specs[${i}] are both concurrency limits, want one`);
      }
      ci = i;
    });
    if (ci < 0) {
      throw new RedstreamError('INVALID_CONFIG', 'no spec of algorithm "concurrency"');
    }
    this.ci = ci;
    const l = limits[ci]!;
    this.ttl = core.limitParams(l.alg, l.params, l.ints.length).period;
    this.table = new Table(threshold(options));
    this.clock = clockOf(options);
    this.max = Math.min(...limits.map((x) => x.max));
  }

  /**
   * Asks for options.n units (default 1) of key at options.now (default the clock): a
   * lease when every limit admits the request, else a denied lease (token, n and expiry 0)
   * whose retryAfter is core's. Rate limits are charged n as by allow; a denial by any limit
   * takes nothing. Throws for bad input as {@link MemoryLimiter.allow} does.
   */
  acquire(key: Bytes, options: AllowOptions = {}): Lease {
    checkOptions('acquire', options, allowKeys);
    const k = tableKey(key, keyBytes(key));
    const n = options.n ?? 1;
    checkCost(n, this.max);
    const now = toMicros(options.now ?? this.clock());
    let lk = this.table.map.get(k);
    const steps = this.limits.map((l, i) => step(this.core, l, lk?.states[i], now, n));
    const d = decision(steps.length === 1 ? steps[0]!.d : combine(steps.map((x) => x.d)));
    if (!steps.every((x) => x.next)) {
      return { ...d, key, n: 0, token: 0, expiry: 0 };
    }
    if (lk === undefined) {
      lk = { states: [], held: new Map() };
      this.table.insert(k, lk, (v) => this.idle(v, now));
    }
    lk.states = steps.map((x) => x.next!);
    const at = steps[this.ci]!.at!;
    forget(lk, logOf(lk.states[this.ci]));
    let token = randomToken();
    while (lk.held.has(token)) token = randomToken();
    lk.held.set(token, { at, n });
    return { ...d, key, n, token, expiry: at + this.ttl };
  }

  /**
   * Frees lease's units at options.now (default the clock) if it still holds them, and
   * reports whether it did: a lease that expired, was released already, or whose token this
   * limiter never issued for its key and n changes nothing (false).
   */
  release(lease: Lease, options: LeaseOptions = {}): boolean {
    const f = this.find('release', lease, options);
    if (f === undefined) {
      return false;
    }
    const { lk, h, now } = f;
    const l = this.limits[this.ci]!;
    const r = this.core.leaseRelease(l.alg, l.params, logOf(lk.states[this.ci]), h.at, now, h.n);
    if (!r.done) {
      return false;
    }
    lk.states[this.ci] = { log: r.log };
    lk.held.delete(lease.token);
    return true;
  }

  /**
   * Renews lease at options.now (default the clock) for another lease TTL and returns it
   * with its new expiry; a lease that no longer holds its units throws LEASE_LOST.
   */
  extend(lease: Lease, options: LeaseOptions = {}): Lease {
    const f = this.find('extend', lease, options);
    if (f === undefined) {
      throw leaseLost();
    }
    const { lk, h, now } = f;
    const l = this.limits[this.ci]!;
    const r = this.core.leaseExtend(l.alg, l.params, logOf(lk.states[this.ci]), h.at, now, h.n);
    if (!r.done) {
      throw leaseLost();
    }
    lk.states[this.ci] = { log: r.log };
    lk.held.set(lease.token, { at: r.at, n: h.n });
    return { ...lease, expiry: r.at + this.ttl };
  }

  // find validates a release or an extension and returns the lease's key, its record and
  // the time, or undefined when this limiter never issued the lease for its key and n.
  private find(op: string, lease: Lease, options: LeaseOptions): { lk: LeaseKey; h: { at: number; n: number }; now: number } | undefined {
    checkOptions(op, options, leaseKeys);
    const ok = issuable(lease, this.max);
    const k = tableKey(lease.key, keyBytes(lease.key));
    const now = toMicros(options.now ?? this.clock());
    const lk = ok ? this.table.map.get(k) : undefined;
    const h = lk?.held.get(lease.token);
    return lk !== undefined && h !== undefined && h.n === lease.n ? { lk, h, now } : undefined;
  }

  private idle(v: LeaseKey, now: number): boolean {
    return this.limits.every((l, i) => v.states[i] === undefined || idle(this.core, l, v.states[i]!, now));
  }

  /** The number of keys whose state the limiter holds, counting recovered keys not swept yet (Go's TrackedKeys). */
  get trackedKeys(): number {
    return this.table.map.size;
  }
}

// logOf returns the log of a concurrency limit's state (empty for none).
function logOf(s: KeyState | undefined): BigInt64Array {
  return s !== undefined && 'log' in s ? s.log : new BigInt64Array(0);
}

// forget drops the leases whose entries the concurrency limit's log lg no longer holds: the
// log prunes its oldest entries in order, so a lease taken before its oldest entry (or any,
// once it is empty) can never count again, even when time goes back and a new lease is
// taken at its old time (Go's engine.Leases does the same).
function forget(lk: LeaseKey, lg: BigInt64Array): void {
  for (const [token, h] of lk.held) {
    if (lg.length === 0 || BigInt(h.at) < lg[0]!) {
      lk.held.delete(token);
    }
  }
}

/**
 * Returns an in-process concurrency limiter handing out leases on the one spec of specs
 * whose algorithm is 'concurrency'; the other specs are rate limits charged by every
 * acquisition, all-or-nothing with it (Go's memory.NewConcurrencyLimiter). Rejects with
 * INVALID_CONFIG for a bad spec or option, or when specs holds no concurrency spec or more
 * than one.
 */
export async function createConcurrencyLimiter(specs: readonly Spec[], options: MemoryOptions = {}): Promise<MemoryConcurrencyLimiter> {
  const core = await loadCore();
  if (!Array.isArray(specs) || specs.length === 0) {
    throw new RedstreamError('INVALID_CONFIG', 'no limits');
  }
  return new MemoryConcurrencyLimiter(core, specs.map((s) => resolve(core, s)), options);
}

/** An in-process deduplicator. The empty element is never a duplicate and never recorded. */
export interface MemoryDeduplicator {
  /** Whether element was seen (at now, for the windowed one), without recording it. */
  isDuplicate(element: Bytes, now?: Time): boolean;
  /** Records element. */
  markSeen(element: Bytes, now?: Time): void;
  /** Records element and reports whether it was already seen. */
  checkAndMark(element: Bytes, now?: Time): boolean;
  /** Forgets every element. */
  clear(): void;
  /** The number of distinct elements held (within the window, for the windowed one; this filter's adds, for Bloom). */
  uniqueCount(now?: Time): number;
}

/** The exact in-process deduplicator: a Set of every element seen. */
export class MemorySetDeduplicator implements MemoryDeduplicator {
  private readonly set = new Set<string>();

  isDuplicate(element: Bytes): boolean {
    const b = elementBytes(element);
    return b.length > 0 && this.set.has(tableKey(element, b));
  }

  markSeen(element: Bytes): void {
    this.checkAndMark(element);
  }

  checkAndMark(element: Bytes): boolean {
    const b = elementBytes(element);
    if (b.length === 0) {
      return false;
    }
    const k = tableKey(element, b);
    if (this.set.has(k)) {
      return true;
    }
    this.set.add(k);
    return false;
  }

  /** Forgets element. */
  remove(element: Bytes): void {
    this.set.delete(tableKey(element, elementBytes(element)));
  }

  clear(): void {
    this.set.clear();
  }

  uniqueCount(): number {
    return this.set.size;
  }
}

/**
 * The windowed in-process deduplicator (Go's core.WindowDedup): an element is a duplicate iff
 * seen less than the window ago; check-and-mark refreshes a duplicate's last-seen time; every
 * operation runs at max(high-water mark, now), so time going backwards is defined. Expired
 * elements are swept by the table's rule.
 */
export class MemoryWindowDeduplicator implements MemoryDeduplicator {
  private readonly table: Table<number>;
  private readonly clock: Clock;
  private high = 0;

  /** Use {@link createWindowDeduplicator}. */
  constructor(
    private readonly core: Core,
    /** The window in µs. */
    readonly windowUs: number,
    options: MemoryOptions = {},
  ) {
    this.table = new Table(threshold(options));
    this.clock = clockOf(options);
  }

  isDuplicate(element: Bytes, now?: Time): boolean {
    const b = elementBytes(element);
    if (b.length === 0) {
      return false;
    }
    const t = toMicros(now ?? this.clock());
    return this.core.windowDedupCheck(this.windowUs, this.high, this.table.map.get(tableKey(element, b)), t).duplicate;
  }

  markSeen(element: Bytes, now?: Time): void {
    this.checkAndMark(element, now);
  }

  checkAndMark(element: Bytes, now?: Time): boolean {
    const b = elementBytes(element);
    if (b.length === 0) {
      return false;
    }
    const k = tableKey(element, b);
    const at = toMicros(now ?? this.clock());
    const last = this.table.map.get(k);
    const { duplicate, t } = this.core.windowDedupCheck(this.windowUs, this.high, last, at);
    if (last !== undefined) {
      this.table.map.set(k, t);
    } else {
      this.table.insert(k, t, (v) => this.core.windowDedupExpired(this.windowUs, v, t));
    }
    this.high = Math.max(this.high, t);
    return duplicate;
  }

  /** Forgets every element; the high-water mark stays. */
  clear(): void {
    this.table.clear();
  }

  /** The elements still within the window at max(high-water mark, now), pruning the expired ones. */
  uniqueCount(now?: Time): number {
    const t = Math.max(this.high, toMicros(now ?? this.clock()));
    let n = 0;
    for (const [k, last] of this.table.map) {
      if (this.core.windowDedupExpired(this.windowUs, last, this.high)) {
        this.table.map.delete(k);
      } else if (!this.core.windowDedupExpired(this.windowUs, last, t)) {
        n++;
      }
    }
    return n;
  }

  /** The number of elements held, counting expired ones not swept yet. */
  get trackedKeys(): number {
    return this.table.map.size;
  }
}

/**
 * The in-process Bloom filter, with the bit positions every runtime computes (MurmurHash3 x64
 * 128 double hashing in the core module), laid out as Redis's SETBIT lays them out.
 */
export class MemoryBloomDeduplicator implements MemoryDeduplicator {
  private readonly shards: Uint8Array[];
  private unique = 0;

  /** Use {@link createBloomDeduplicator}. */
  constructor(
    private readonly core: Core,
    /** The filter's sizing. */
    readonly params: BloomParams,
  ) {
    this.shards = Array.from({ length: params.shards }, () => new Uint8Array(Math.ceil(params.shardBits / 8)));
  }

  private run(element: Bytes, add: boolean): boolean {
    const bytes = elementBytes(element);
    if (bytes.length === 0) {
      return false;
    }
    const { shard, positions } = this.core.bloomPositions(this.params, bytes);
    const bits = this.shards[shard]!;
    let all = true;
    for (const p of positions) {
      const mask = 0x80 >> (p & 7);
      const i = Math.floor(p / 8);
      if ((bits[i]! & mask) === 0) {
        all = false;
        if (add) {
          bits[i]! |= mask;
        }
      }
    }
    if (add && !all) {
      this.unique++;
    }
    return all;
  }

  isDuplicate(element: Bytes): boolean {
    return this.run(element, false);
  }

  markSeen(element: Bytes): void {
    this.run(element, true);
  }

  checkAndMark(element: Bytes): boolean {
    return this.run(element, true);
  }

  clear(): void {
    for (const s of this.shards) {
      s.fill(0);
    }
    this.unique = 0;
  }

  /** The adds that set at least one bit since creation or the last clear. */
  uniqueCount(): number {
    return this.unique;
  }

  /** The filter's own estimate of its distinct elements, from its set bits. */
  count(): number {
    let total = 0;
    for (const s of this.shards) {
      let ones = 0;
      for (const b of s) {
        ones += popcount(b);
      }
      total += this.core.bloomEstimateCount(this.params, ones);
    }
    return Math.min(total, 2 ** 40);
  }
}

function popcount(b: number): number {
  b = b - ((b >> 1) & 0x55);
  b = (b & 0x33) + ((b >> 2) & 0x33);
  return (b + (b >> 4)) & 0x0f;
}

/** Options of a Bloom filter, as Go's redstream.DedupSpec. */
export interface BloomOptions {
  /** Expected distinct elements n, in [1, 2^40] (default 1,000,000). */
  readonly insertions?: number;
  /** Target false-positive rate p, in [1e-12, 1) (default 0.03). */
  readonly fpRate?: number;
  /** Blocks the filter is split into (default 1; raised until a block holds at most 2^32 bits). */
  readonly shards?: number;
}

/** Go's redstream.DefaultBloomInsertions, DefaultBloomFPRate and DefaultDedupWindow. */
export const DEFAULT_BLOOM_INSERTIONS = 1_000_000;
/** The default false-positive rate. */
export const DEFAULT_BLOOM_FP_RATE = 0.03;
/** The default window of the windowed deduplicator: one hour, in ms. */
export const DEFAULT_DEDUP_WINDOW_MS = 3_600_000;

/** Validates Bloom options with the core and returns the sizing. */
export function bloomParams(core: Core, o: BloomOptions = {}): BloomParams {
  checkOptions('Bloom options', o, bloomKeys);
  const fp = o.fpRate ?? DEFAULT_BLOOM_FP_RATE;
  if (Number.isNaN(fp)) {
    throw new RedstreamError('INVALID_CONFIG', 'fpRate is NaN');
  }
  return core.bloomParams(o.insertions ?? DEFAULT_BLOOM_INSERTIONS, fp, o.shards ?? 0);
}

/** Validates a window in ms and returns it in µs. */
export function windowMicros(windowMs: number = DEFAULT_DEDUP_WINDOW_MS): number {
  const w = Math.round(windowMs * 1000);
  if (typeof windowMs !== 'number' || !Number.isSafeInteger(w) || w < 1 || w > 2 ** 51) {
    throw new RedstreamError('INVALID_CONFIG', `windowMs = ${windowMs}, want a window in [1 µs, 2^51 µs]`);
  }
  return w;
}

/** Returns an in-process exact deduplicator. */
export function createSetDeduplicator(): MemorySetDeduplicator {
  return new MemorySetDeduplicator();
}

/** Returns an in-process windowed deduplicator forgetting an element windowMs (default one hour) after it was last seen. */
export async function createWindowDeduplicator(windowMs?: number, options: MemoryOptions = {}): Promise<MemoryWindowDeduplicator> {
  return new MemoryWindowDeduplicator(await loadCore(), windowMicros(windowMs), options);
}

/** Returns an in-process Bloom filter deduplicator. */
export async function createBloomDeduplicator(options: BloomOptions = {}): Promise<MemoryBloomDeduplicator> {
  const core = await loadCore();
  return new MemoryBloomDeduplicator(core, bloomParams(core, options));
}
