// Leased quota for hot keys of a Redis limiter (Go's redisbackend QuotaOptions, quota.go): a
// slice of a key's budget taken in one quota.lua call and admitted from in process.

import { RedstreamError } from './errors.js';
import { checkOptions } from './options.js';
import type { Decision, Limit } from './spec.js';

/** The default of {@link QuotaOptions.durationMs} (Go's redisbackend.DefaultQuotaDuration). */
export const DEFAULT_QUOTA_DURATION_MS = 100;

/** The default of {@link QuotaOptions.maxShare} (Go's redisbackend.DefaultQuotaMaxShare). */
export const DEFAULT_QUOTA_MAX_SHARE = 0.1;

/** The longest lease, µs (Go's maxLeaseDuration). */
const MAX_LEASE_US = 60_000_000;

/** How many keys' leases one limiter holds; a full table forgets its oldest entry for a new one (its unused units stay spent). */
const LEASE_ENTRIES = 8192;

/**
 * Leased quota of a Redis limiter (its `quota` option; Go's redisbackend.QuotaOptions, with
 * the same defaults and refusals): the limiter takes a slice of a hot key's budget from
 * Redis in one script call (quota.lua) and admits requests from it in process until the
 * slice is spent or the lease ends, so a key under its limit costs one round trip per lease
 * instead of one per request. Across processes, Go's and Node.js's, the limit holds exactly:
 * a lease takes its units from the key's state as a request of that cost would, and what it
 * did not use is given back in the call that takes the next lease (or, if its process died,
 * stays spent). A token bucket's lease lasts at most the bucket's full refill time; a
 * window's ends with its window. Only the token bucket, the fixed window and the sliding
 * counter have leases; a multi-limit limiter and one with `previous` specs refuse them.
 * Every field is optional.
 */
export interface QuotaOptions {
  /** Turns leases on. Default false. */
  readonly enabled?: boolean;
  /** The longest a lease lasts, ms, in [0.001, 60000] (default {@link DEFAULT_QUOTA_DURATION_MS}). */
  readonly durationMs?: number;
  /**
   * The largest part of the limit one lease takes, in (0, 1] (default
   * {@link DEFAULT_QUOTA_MAX_SHARE}). A lease is sized by the rate the process admitted on
   * the key during its previous lease, times the duration: a cold key takes just the
   * request's cost, as without leases.
   */
  readonly maxShare?: number;
}

/** What a limiter's leases did so far (Go's metrics.LeasedQuotaCounters). */
export interface QuotaStats {
  /** quota.lua calls made. */
  readonly calls: number;
  /** Units the calls took (each lease's, the request that took it included). */
  readonly granted: number;
  /** Unused units given back. */
  readonly returned: number;
  /** Requests admitted in process from a lease, with no call. */
  readonly localAllowed: number;
}

/** The fields of QuotaOptions. */
const quotaKeys = ['enabled', 'durationMs', 'maxShare'] as const;

/**
 * The algorithms with leases, by their code in quota.lua; leaseRefused says why an algorithm
 * has none, where the reason is known (quota.test.mjs ranges over every algorithm).
 */
export const quotaCodes: Readonly<Record<string, string | undefined>> = {
  'token-bucket': 'tb',
  fixed: 'fw',
  'sliding-counter': 'sc',
};
const leaseRefused: Readonly<Record<string, string | undefined>> = {
  'leaky-bucket': 'its decisions carry a shaping delay, which a lease\'s admissions cannot',
  sliding: 'its log records the time of each admission, which a lease\'s admissions would not be',
};

/** One key's lease. */
export interface LeaseState {
  /** The lease serves requests at the server's TIME (t0 on the monotonic clock). */
  mono: boolean;
  /** µs: the taking request's explicit now, or its send time (monotonic). */
  t0: number;
  /** µs after t0 the lease admits (a quarter short of its end, for the give-back). */
  life: number;
  /** µs: the lease's end on the script's clock (the give-back's ARGV). */
  end: number;
  /** Units taken (0: no lease). */
  granted: number;
  /** Units not admitted yet. */
  left: number;
  /** The take's remaining. */
  rem: number;
  /** The take's resetAfter (µs). */
  reset: number;
  /** µs: the take's now on the script's clock. */
  at: number;
}

/** A key's entry: its lease, and the renewal in flight (one call at a time per key). */
export interface LeaseEntry extends LeaseState {
  busy?: Promise<void>;
}

/** The monotonic clock, µs. */
export function monoMicros(): number {
  return Math.floor(performance.now() * 1000);
}

/** The lease table of a single-limit Redis limiter (one entry per key). */
export class QuotaTable {
  readonly limit: number;
  /** A window algorithm's window (µs); 0 for the token bucket. */
  readonly window: number;
  /** The largest slice. */
  readonly share: number;
  /** The lease duration, µs. */
  readonly dur: number;
  /** quota.lua's ARGV[4..9]. */
  readonly args: readonly string[];
  calls = 0;
  granted = 0;
  returnedUnits = 0;
  localAllowed = 0;
  private readonly entries = new Map<string, LeaseEntry>();

  constructor(l: Limit, padded: readonly string[], margin: string, durUs: number, share: number) {
    this.limit = l.max;
    this.window = quotaCodes[l.algorithm] === 'tb' ? 0 : l.ints[0]!;
    this.dur = durUs;
    this.share = Math.max(1, Math.floor(this.limit * share));
    this.args = [quotaCodes[l.algorithm]!, ...padded, margin, String(durUs)];
  }

  /** Returns key's entry (k: its table key), made on first use. */
  entry(k: string): LeaseEntry {
    let e = this.entries.get(k);
    if (e === undefined) {
      if (this.entries.size >= LEASE_ENTRIES) {
        this.entries.delete(this.entries.keys().next().value!);
      }
      e = { mono: false, t0: 0, life: 0, end: 0, granted: 0, left: 0, rem: 0, reset: 0, at: 0 };
      this.entries.set(k, e);
    }
    return e;
  }

  /** Drops key's entry (reset). */
  forget(k: string): void {
    this.entries.delete(k);
  }

  /** The number of entries (for tests). */
  get size(): number {
    return this.entries.size;
  }

  /** The stats of the table. */
  stats(): QuotaStats {
    return { calls: this.calls, granted: this.granted, returned: this.returnedUnits, localAllowed: this.localAllowed };
  }

  /**
   * Admits a request of cost n at at from e's lease, if it lasts and holds n units, and
   * returns the decision; undefined otherwise.
   */
  spend(e: LeaseState, at: number, mono: boolean, n: number): Decision | undefined {
    const el = elapsed(e, at, mono);
    if (e.granted === 0 || el < 0 || el >= e.life || e.left < n) {
      return undefined;
    }
    e.left -= n;
    this.localAllowed++;
    return { allowed: true, limit: this.limit, remaining: e.rem + e.left, retryAfter: 0, resetAfter: Math.max(0, e.reset - el), delay: 0 };
  }

  /**
   * The slice a request of cost n at at asks for: n plus what the key's previous lease
   * admitted per duration (0 for a key seen for the first time or cold), at most the larger
   * of n and the share.
   */
  want(e: LeaseState, at: number, mono: boolean, n: number): number {
    let w = n;
    const el = elapsed(e, at, mono);
    if (e.granted > 0 && el > 0) {
      const used = e.granted - e.left;
      w += Math.floor(Math.min((used * this.dur) / el, this.share));
    }
    return Math.min(w, Math.max(n, this.share));
  }

  /**
   * quota.lua's ARGV for a request of cost n at now ('' for the server's TIME) asking for
   * want units, giving back what e did not admit.
   */
  leaseArgs(e: LeaseState, now: string, n: number, want: number): string[] {
    const [back, used, end] = giveBack(e, now);
    return [now, String(n), String(want), ...this.args, String(back), String(used), String(end)];
  }

  /**
   * How many of the units back that a call gave back from e (a lease ending at e.end on the
   * script's clock) quota.lua returned, by the reply's now: a token bucket's while now <
   * end, a window's while now is in the lease's window.
   */
  returned(e: LeaseState, back: number, now: number): number {
    if (back === 0) {
      return 0;
    }
    if (this.window === 0) {
      return now < e.end ? back : 0;
    }
    const start = e.end - 1 - ((e.end - 1) % this.window);
    return now >= start && now < start + this.window ? back : 0;
  }
}

/**
 * How long after e's take a request at at is, counted on the monotonic clock 1 µs more and
 * 1/1024 longer (so a slow local clock still ends the lease first); -1 for a request on the
 * other axis or before the take.
 */
function elapsed(e: LeaseState, at: number, mono: boolean): number {
  if (e.mono !== mono || at < e.t0) {
    return -1;
  }
  let el = at - e.t0;
  if (mono) {
    el += 1 + Math.floor(el / 1024);
  }
  return el;
}

/**
 * What a call at now gives back of e: its unused and used units and its end, or zeros when
 * it has nothing unused or served the other clock (its end is not on the script's clock of
 * now).
 */
export function giveBack(e: LeaseState, now: string): [number, number, number] {
  if (e.granted > 0 && e.left > 0 && e.mono === (now === '')) {
    return [e.left, e.granted - e.left, e.end];
  }
  return [0, 0, 0];
}

/**
 * Validates the quota option of a limiter of limits and returns its lease table, or
 * undefined when leases are off. Refusals are INVALID_CONFIG naming the field.
 */
export function newQuotaTable(
  o: QuotaOptions | undefined,
  limits: readonly Limit[],
  multi: boolean,
  carries: boolean,
  padded: readonly string[],
  margin: string,
): QuotaTable | undefined {
  if (o === undefined) {
    return undefined;
  }
  checkOptions('quota', o, quotaKeys);
  if (o.enabled !== undefined && typeof o.enabled !== 'boolean') {
    throw new RedstreamError('INVALID_CONFIG', `quota.enabled = ${String(o.enabled)}, want a boolean`);
  }
  if (!o.enabled) {
    return undefined;
  }
  if (multi) {
    throw new RedstreamError('INVALID_CONFIG', 'quota.enabled: a multi-limit limiter has no leased quota');
  }
  if (carries) {
    throw new RedstreamError('INVALID_CONFIG', 'quota.enabled: a limiter carrying state from previous specs has no leased quota (quota.lua does not seed)');
  }
  const l = limits[0]!;
  if (quotaCodes[l.algorithm] === undefined) {
    const why = leaseRefused[l.algorithm] ?? 'quota.lua does not decide it';
    throw new RedstreamError('INVALID_CONFIG', `quota.enabled: algorithm ${l.algorithm} has no leases: ${why}`);
  }
  let dur = DEFAULT_QUOTA_DURATION_MS * 1000;
  if (o.durationMs !== undefined && o.durationMs !== 0) {
    const us = typeof o.durationMs === 'number' ? o.durationMs * 1000 : NaN;
    if (!(us >= 1 && us <= MAX_LEASE_US)) {
      throw new RedstreamError('INVALID_CONFIG', `quota.durationMs = ${String(o.durationMs)}, want in [0.001, ${MAX_LEASE_US / 1000}]`);
    }
    dur = Math.floor(us); // whole µs, as Go's Duration.Microseconds
  }
  let share = DEFAULT_QUOTA_MAX_SHARE;
  if (o.maxShare !== undefined && o.maxShare !== 0) {
    if (typeof o.maxShare !== 'number' || !(o.maxShare > 0 && o.maxShare <= 1)) {
      throw new RedstreamError('INVALID_CONFIG', `quota.maxShare = ${String(o.maxShare)}, want in (0, 1]`);
    }
    share = o.maxShare;
  }
  return new QuotaTable(l, padded, margin, dur, share);
}
