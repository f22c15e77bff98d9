// The Redis engine: the Go engine's Lua scripts (generated from package lua), key schema and
// arguments (generated from redisbackend), on an ioredis client or cluster. A limiter or
// deduplicator here shares its state with a Go one of the same spec, prefix and key.

import { carryOf, previousLimits, type Carry } from './carry.js';
import { RedstreamError } from './errors.js';
import { allowKeys, checkOptions, redisConcurrencyKeys, redisDedupKeys, redisLimiterKeys } from './options.js';
import { schema } from './generated/schema.js';
import { scripts, type ScriptSource } from './generated/scripts.js';
import { bloomRole, bloomShardKey, fingerprint, prefixOr, redisKey } from './keys.js';
import { issuable, leaseKeys, leaseLost, randomToken, type Lease, type LeaseOptions } from './lease.js';
import { bloomParams, windowMicros, type AllowOptions, type BloomOptions, type MemoryLimiter } from './memory.js';
import { MIN_DEADLINE_US, RedisReservation } from './reserve.js';
import { chargeOf, checkSettles, combine, resolve, type Algorithm, type Decision, type Limit, type Spec } from './spec.js';
import { giveBack, monoMicros, newQuotaTable, type QuotaOptions, type QuotaStats, type QuotaTable } from './quota.js';
import { checkCost, elementBytes, keyBytes, systemClock, tableKey, toMicros, wire, type Bytes, type Time } from './time.js';
import { loadCore, type BloomParams, type Core } from './wasm.js';

/**
 * An ioredis client: a `Redis` (one server) or a `Cluster`; the part of its API the engine
 * uses, so that the package's types do not need ioredis installed. The engine defines its
 * scripts on the client (`defineCommand`, commands named `redstream_<script>`) and never
 * closes it.
 */
export interface RedisClient {
  defineCommand(name: string, definition: { lua: string; numberOfKeys?: number; readOnly?: boolean }): void;
  del(...keys: Arg[]): Promise<number>;
  sismember(key: Arg, member: Arg): Promise<number>;
  srem(key: Arg, ...members: Arg[]): Promise<number>;
  scard(key: Arg): Promise<number>;
}

/** The default deadline of every call that reaches Redis, in milliseconds. */
export const DEFAULT_TIMEOUT_MS = 1000;

/** The generated tables keyed by algorithm, as lookups that may miss (checked where read). */
const singles: Readonly<Record<string, { prefix: string; script: string; ints: number; extra: readonly string[]; viaMulti: boolean } | undefined>> =
  schema.algorithms;
const multiCodes: Readonly<Record<string, string | undefined>> = schema.multi.codes;

/** Go's Default*Prefix of each algorithm (redisbackend), from the generated schema. */
export const defaultPrefixes: Readonly<Record<Algorithm, string>> = Object.fromEntries(
  Object.entries(schema.algorithms).map(([a, s]) => [a, s.prefix]),
) as Record<Algorithm, string>;

/** Go's redisbackend.DefaultDedupPrefix. */
export const DEFAULT_DEDUP_PREFIX: string = schema.dedupPrefix;

/**
 * What a decision does when Redis fails (an error reply, a lost connection, the deadline):
 * `'fail-closed'` (default) rejects with a REDIS or TIMEOUT error, `'fail-open'` admits,
 * and a {@link MemoryLimiter} decides in process instead. Bad input is never subject to it.
 */
export type FailurePolicy = 'fail-closed' | 'fail-open' | MemoryLimiter;

/** Options of a Redis limiter. Every field is optional. */
export interface RedisLimiterOptions {
  /** Starts every key: `<keyPrefix>:{<key>}`. Blank selects Go's default of the algorithm. No braces. */
  readonly keyPrefix?: string;
  /** How long a key outlives the moment its state is back to the initial one, ms (default 1000; rounded up to whole ms). */
  readonly expiryMarginMs?: number;
  /** The deadline of each call, ms (default {@link DEFAULT_TIMEOUT_MS}). */
  readonly timeoutMs?: number;
  /** What a decision does when Redis fails (default 'fail-closed'). */
  readonly failurePolicy?: FailurePolicy;
  /**
   * Receives the limiter's state changes, as Go's Options.Logger does: warn when Redis fails
   * after answering (or on the first call), with the error and what decisions do now; info
   * when it answers again. Once per change, however many calls fail meanwhile. Default
   * `console`; `null` logs nothing.
   */
  readonly logger?: Logger | null;
  /**
   * The specs this limiter replaces, one per limit of the limiter, index for index (null,
   * or the spec itself, for a limit that did not change): with {@link carry} 'as-is' or
   * 'proportional', the first decision or reservation on a key whose state under the new
   * spec does not exist yet seeds it from the key of the previous spec (same prefix and user
   * key, so the same hash tag), atomically in the request's script (carry.lua, or reserve.lua
   * in carry.lua's layout; Go's Options.Previous); the previous key is left to processes
   * still deciding with the previous spec. Each key is seeded once. A pair that cannot carry
   * (another algorithm, another window, a changed sliding log or concurrency limit) is
   * INVALID_CONFIG. Default none. Settlements and reset act on the new keys only.
   */
  readonly previous?: readonly (Spec | null | undefined)[];
  /** How {@link previous} keys carry over: 'reset' (default: nothing carries), 'as-is' or 'proportional' (see {@link Carry}). */
  readonly carry?: Carry;
  /**
   * Leased quota for hot keys under their limit (see {@link QuotaOptions}; Go's
   * Options.Quota): one quota.lua call takes a slice of the key's budget, which allow then
   * admits from in process. Default off. A multi-limit limiter, one with previous specs, and
   * the algorithms but the token bucket, the fixed window and the sliding counter refuse it
   * with INVALID_CONFIG.
   */
  readonly quota?: QuotaOptions;
}

/** Options of a Redis concurrency limiter ({@link createRedisConcurrencyLimiter}). Every field is optional. */
export interface RedisConcurrencyOptions {
  /** Starts every key: `<keyPrefix>:{<key>}`. Blank selects Go's default. No braces. */
  readonly keyPrefix?: string;
  /** How long a key outlives its last lease, ms (default 1000; rounded up to whole ms). */
  readonly expiryMarginMs?: number;
  /** The deadline of each call, ms (default {@link DEFAULT_TIMEOUT_MS}). */
  readonly timeoutMs?: number;
}

// A client on which the engine's scripts are defined (defineCommand: EVALSHA, falling back
// to EVAL when the server does not know the script).
type Scripted = { [name: string]: (...args: (string | number | Buffer)[]) => Promise<unknown> };

const defined = new WeakMap<object, Set<string>>();

function commandName(s: ScriptSource): string {
  return `redstream_${s.name}`;
}

/** A key or an argument as sent: text, or a Buffer of bytes. */
export type Arg = string | Buffer;

/** One script call: the script's name, KEYS and ARGV. */
export interface ScriptCall {
  readonly script: string;
  readonly keys: Arg[];
  readonly args: Arg[];
}

type Run = (keys: Arg[], args: Arg[]) => Promise<unknown>;

// script returns the function that runs script name on client, defining it once.
function script(client: RedisClient, name: string): Run {
  const s = scripts[name];
  if (!s) {
    throw new RedstreamError('INTERNAL', `no script ${name}`);
  }
  checkClient(client);
  let set = defined.get(client);
  if (!set) {
    set = new Set();
    defined.set(client, set);
  }
  const cmd = commandName(s);
  if (!set.has(cmd)) {
    client.defineCommand(cmd, { lua: s.source, readOnly: s.readOnly });
    set.add(cmd);
  }
  return (keys, args) => (client as unknown as Scripted)[cmd]!(keys.length, ...keys, ...args);
}

// checkClient rejects what is not an ioredis client, and a client with ioredis's keyPrefix
// option: ioredis would prepend it to every key, so the keys would no longer be the Go
// engine's (use the engines' keyPrefix option instead).
function checkClient(client: RedisClient): void {
  const c = client as unknown as { defineCommand?: unknown; options?: { keyPrefix?: string; redisOptions?: { keyPrefix?: string } } };
  if (client === null || typeof client !== 'object' || typeof c.defineCommand !== 'function') {
    throw new RedstreamError('INVALID_CONFIG', 'client is not an ioredis Redis or Cluster');
  }
  const kp = c.options?.keyPrefix || c.options?.redisOptions?.keyPrefix;
  if (kp) {
    throw new RedstreamError(
      'INVALID_CONFIG',
      `the client has ioredis's keyPrefix ${JSON.stringify(kp)}, which would change every key so that Go would not share them; use the keyPrefix option of the limiter or deduplicator instead`,
    );
  }
}

/** Receives a limiter's state changes (never one line per request); `console` fits. */
export interface Logger {
  warn(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
}

// deadline runs p with a timeout of ms.
async function deadline<T>(what: string, ms: number, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new RedstreamError('TIMEOUT', `${what}: no answer from Redis within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, t]);
  } catch (e) {
    if (e instanceof RedstreamError) {
      throw e;
    }
    throw new RedstreamError('REDIS', `${what}: ${(e as Error).message}`, { cause: e });
  } finally {
    clearTimeout(timer);
  }
}

// padded returns l's core integers as script parameters, padded with '0' to the three of
// each limit of multi.lua (and carry.lua, reserve.lua).
function padded(l: Limit): string[] {
  const ps = l.ints.map(String);
  while (ps.length < schema.multi.params) ps.push('0');
  return ps;
}

// marginOf validates an expiry margin option (ms) and returns the scripts' margin in whole ms.
function marginOf(v: number | undefined): number {
  const margin = v ?? schema.defaultMarginUs / 1000;
  if (typeof margin !== 'number' || !(margin >= 0) || margin > 365 * 24 * 3600 * 1000) {
    throw new RedstreamError('INVALID_CONFIG', `expiryMarginMs = ${margin}, want a number in [0, one year]`);
  }
  return margin === 0 ? schema.defaultMarginUs / 1000 : Math.ceil(margin);
}

function timeoutOf(ms: number | undefined): number {
  const t = ms ?? DEFAULT_TIMEOUT_MS;
  if (typeof t !== 'number' || !(t > 0) || !Number.isFinite(t)) {
    throw new RedstreamError('INVALID_CONFIG', `timeoutMs = ${t}, want a positive number`);
  }
  return t;
}

function ints(what: string, r: unknown, n: number): number[] {
  if (!Array.isArray(r) || r.length !== n || r.some((x) => typeof x !== 'number')) {
    throw new RedstreamError('REDIS', `${what}: unexpected reply ${JSON.stringify(r)}`);
  }
  return r as number[];
}

/** The largest string Redis accepts in one argument, less the room the schema adds. */
const MAX_ARG = 512 * 1024 * 1024 - 64 - 4096;

function checkSize(what: string, bytes: number): void {
  if (bytes > MAX_ARG) {
    throw new RedstreamError('TOO_LARGE', `${what} of ${bytes} bytes exceeds what Redis accepts in one argument`);
  }
}

/**
 * A rate limiter whose state lives in Redis, running the Go engine's script for its
 * algorithm: a Go redisbackend.Limiter and this one with the same spec and prefix decide on
 * the same keys, atomically, in one round trip each. Create one with {@link createRedisLimiter},
 * or {@link createRedisMultiLimiter} for several limits on each key.
 */
export class RedisLimiter {
  /** The prefix of the limiter's keys. */
  readonly keyPrefix: string;
  private readonly run: Run;
  private readonly params: string[];
  private readonly timeout: number;
  private readonly policy: FailurePolicy;
  private readonly roles: string[];
  private readonly script: string;
  /** The key roles of the previous limits (options.previous), '' for a limit that did not change; undefined when nothing carries. */
  private readonly oldRoles?: string[];
  /** The largest admissible cost: the smallest limit's. */
  readonly max: number;
  private readonly log: Logger | null;
  /** ARGV of reserve.lua after now and n: the margin, then each limit's code and parameters. */
  private readonly reserveParams: string[];
  private readonly longestUs: number;
  private failing = false;
  private failureCount = 0;
  /** The leases (options.quota); undefined when off. */
  private readonly quota?: QuotaTable;
  private readonly quotaRun?: Run;

  /** Use {@link createRedisLimiter} or {@link createRedisMultiLimiter}. */
  constructor(
    private readonly core: Core,
    private readonly client: RedisClient,
    /** The validated specs in core units: one, unless built by createRedisMultiLimiter. */
    readonly limits: readonly Limit[],
    options: RedisLimiterOptions = {},
    /** The limiter is a multi-limit one (even of one limit): Go's NewMultiLimiter keys and script. */
    readonly multi = false,
  ) {
    checkOptions('Redis limiter options', options, redisLimiterKeys);
    if (limits.length === 0 || (!multi && limits.length !== 1)) {
      throw new RedstreamError('INVALID_CONFIG', multi ? 'no limits' : 'one limit, or a multi-limit limiter');
    }
    for (const l of limits) {
      // The generated tables are checked where they are read: an algorithm of the registry
      // they lack (a stale generation) is refused here, never an undefined row later.
      if (singles[l.algorithm] === undefined || multiCodes[l.algorithm] === undefined) {
        throw new RedstreamError('INVALID_CONFIG', `${l.algorithm}: no Redis layout for this algorithm (regenerate js/src/generated)`);
      }
    }
    const single = singles[limits[0]!.algorithm]!;
    this.keyPrefix = prefixOr(options.keyPrefix, multi ? schema.multi.prefix : single.prefix);
    this.max = Math.min(...limits.map((l) => l.max));
    const ms = marginOf(options.expiryMarginMs);
    for (const l of limits) {
      if (l.ints.length !== singles[l.algorithm]!.ints || l.ints.length > schema.multi.params) {
        throw new RedstreamError('INTERNAL', `${l.algorithm}: ${l.ints.length} parameters, the schema has ${singles[l.algorithm]!.ints}`);
      }
    }
    if (multi) {
      this.params = [String(ms)];
      for (const l of limits) {
        const ps = l.ints.map(String);
        while (ps.length < schema.multi.params) ps.push('0');
        this.params.push(multiCodes[l.algorithm]!, ...ps);
      }
      this.roles = limits.map((l, i) => `m${i}.${fingerprint(l)}`);
      this.script = schema.multi.script;
    } else if (single.viaMulti) {
      // An algorithm without a single-limit script of its own: multi.lua with one limit.
      const ps = limits[0]!.ints.map(String);
      while (ps.length < schema.multi.params) ps.push('0');
      this.params = [String(ms), multiCodes[limits[0]!.algorithm]!, ...ps];
      this.roles = [fingerprint(limits[0]!)];
      this.script = single.script;
    } else {
      this.params = [...limits[0]!.ints.map(String), String(ms), ...single.extra];
      this.roles = [fingerprint(limits[0]!)];
      this.script = single.script;
    }
    const carry = carryOf(options.carry);
    const prev = previousLimits(core, limits, options.previous, carry);
    if (prev !== undefined) {
      // carry.lua: the margin and each limit, the strategy, then each previous limit ('' and
      // three '0' for a limit that did not change); the previous keys follow the keys.
      const params = [String(ms)];
      const old: string[] = [];
      this.oldRoles = [];
      limits.forEach((l, i) => {
        params.push(multiCodes[l.algorithm]!, ...padded(l));
        const q = prev[i];
        if (q === undefined) {
          old.push('', '0', '0', '0');
          this.oldRoles!.push('');
          return;
        }
        old.push(multiCodes[q.algorithm]!, ...padded(q));
        this.oldRoles!.push(multi ? `m${i}.${fingerprint(q)}` : fingerprint(q));
      });
      this.params = [...params, carry, ...old];
      this.script = 'carry';
    }
    this.run = script(client, this.script);
    this.reserveParams = [String(ms)];
    for (const l of limits) {
      const ps = l.ints.map(String);
      while (ps.length < schema.multi.params) ps.push('0');
      this.reserveParams.push(multiCodes[l.algorithm]!, ...ps);
    }
    const q = newQuotaTable(options.quota, limits, multi, (options.previous?.length ?? 0) > 0, padded(limits[0]!), String(ms));
    if (q !== undefined) {
      this.quota = q;
      this.quotaRun = script(client, 'quota');
    }
    this.longestUs = Math.max(...limits.map((l) => core.limitParams(l.alg, l.params, l.ints.length).period));
    this.timeout = timeoutOf(options.timeoutMs);
    this.policy = options.failurePolicy ?? 'fail-closed';
    this.log = options.logger === undefined ? console : options.logger;
    if (this.policy !== 'fail-closed' && this.policy !== 'fail-open' && typeof (this.policy as MemoryLimiter).allow !== 'function') {
      throw new RedstreamError('INVALID_CONFIG', 'failurePolicy is not fail-closed, fail-open or a MemoryLimiter');
    }
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
   * The Redis keys holding key's state, one per limit (Go's Limiter.Keys):
   * `<prefix>:{<key>}:<fingerprint>`, or `<prefix>:{<key>}:m<i>.<fingerprint>` for limit i of
   * a multi-limit limiter.
   */
  keys(key: Bytes): Arg[] {
    return this.roles.map((r) => redisKey(this.core, this.keyPrefix, key, r));
  }

  // callKeys returns the keys of one decision's script call: keys(key), and when the limiter
  // carries state, the keys of the previous limits after them (a limit that did not change
  // gets its own key there, which the script never reads).
  private callKeys(key: Bytes): Arg[] {
    const ks = this.keys(key);
    if (this.oldRoles === undefined) {
      return ks;
    }
    return [...ks, ...this.oldRoles.map((r, i) => redisKey(this.core, this.keyPrefix, key, r === '' ? this.roles[i]! : r))];
  }

  /** The script, keys and ARGV of one decision (what {@link allow} sends). */
  command(key: Bytes, options: AllowOptions = {}): ScriptCall {
    checkOptions('allow', options, allowKeys);
    const kb = keyBytes(key);
    const n = options.n ?? 1;
    checkCost(n, this.max);
    const now = options.now === undefined ? '' : String(toMicros(options.now));
    checkSize('key', kb.length + this.keyPrefix.length);
    return { script: this.script, keys: this.callKeys(key), args: [now, String(n), ...this.params] };
  }

  /**
   * Decides a request for key: cost options.n (default 1) at options.now (default: the
   * Redis server's TIME, read inside the script, so clients' clocks do not matter). Bad input
   * rejects with EMPTY_KEY, INVALID_KEY, INVALID_COST, COST_TOO_LARGE, INVALID_TIME or
   * TOO_LARGE and sends nothing. A Redis failure follows the failure policy.
   */
  async allow(key: Bytes, options: AllowOptions = {}): Promise<Decision> {
    if (this.quota !== undefined) {
      return this.allowLeased(this.quota, key, options);
    }
    const c = this.command(key, options);
    let r: number[];
    try {
      r = ints(c.script, await deadline(c.script, this.timeout, this.run(c.keys, c.args)), 6 * this.limits.length);
    } catch (e) {
      return this.fallback(e, key, options);
    }
    this.answered();
    const ds = this.limits.map((_, i) => ({
      allowed: r[6 * i] === 1,
      limit: r[6 * i + 1]!,
      remaining: Math.max(r[6 * i + 2]!, 0),
      retryAfter: r[6 * i + 3]!,
      resetAfter: r[6 * i + 4]!,
      delay: r[6 * i + 5]!,
    }));
    return ds.length === 1 ? ds[0]! : combine(ds);
  }

  // fallback is the decision of a request whose call failed with e, by the failure policy.
  private fallback(e: unknown, key: Bytes, options: AllowOptions): Decision {
    this.failed(e);
    if (this.policy === 'fail-open') {
      return { allowed: true, limit: 0, remaining: 0, retryAfter: 0, resetAfter: 0, delay: 0 };
    }
    if (this.policy !== 'fail-closed') {
      return this.policy.allow(key, options);
    }
    throw e;
  }

  // allowLeased decides a request from key's lease (Go's Limiter.allowLeased), renewing the
  // lease in one quota.lua call when it has ended or cannot cover the cost: the call gives
  // back what the previous lease did not admit and takes the next. Requests for the key
  // while a renewal is in flight wait for it, then spend from the new lease.
  private async allowLeased(t: QuotaTable, key: Bytes, options: AllowOptions): Promise<Decision> {
    checkOptions('allow', options, allowKeys);
    const kb = keyBytes(key);
    const n = options.n ?? 1;
    checkCost(n, this.max);
    const now = options.now === undefined ? '' : String(toMicros(options.now));
    checkSize('key', kb.length + this.keyPrefix.length);
    const e = t.entry(tableKey(key, kb));
    while (e.busy !== undefined) {
      await e.busy;
    }
    const mono = now === '';
    let at = mono ? monoMicros() : Number(now);
    const spent = t.spend(e, at, mono, n);
    if (spent !== undefined) {
      return spent;
    }
    const args = t.leaseArgs(e, now, n, t.want(e, at, mono, n));
    if (mono) {
      at = monoMicros(); // the moment the call is sent: the lease's time starts no later
    }
    const prev = { ...e };
    const [back] = giveBack(prev, now);
    // Whatever the call's outcome, the previous lease is over: its give-back is sent (a call
    // that failed may have run it), so it must never be sent again.
    e.granted = 0;
    e.left = 0;
    t.calls++;
    let release = (): void => {};
    e.busy = new Promise<void>((r) => (release = r));
    let vs: number[];
    try {
      vs = ints('quota', await deadline('quota', this.timeout, this.quotaRun!(this.keys(key), args)), 9);
    } catch (err) {
      return this.fallback(err, key, options);
    } finally {
      e.busy = undefined;
      release();
    }
    this.answered();
    t.returnedUnits += t.returned(prev, back, vs[7]!);
    const d = { allowed: vs[0] === 1, limit: vs[1]!, remaining: Math.max(vs[2]!, 0), retryAfter: vs[3]!, resetAfter: vs[4]!, delay: vs[5]! };
    e.at = vs[7]!;
    const granted = vs[6]!;
    if (d.allowed && granted >= n) {
      t.granted += granted;
      const life = vs[8]! - vs[7]!;
      Object.assign(e, { mono, t0: at, life: life - Math.floor(life / 4), end: vs[8]!, granted, left: granted - n, rem: d.remaining, reset: d.resetAfter, at: vs[7]! });
      d.remaining += e.left;
    } else {
      d.allowed = false;
    }
    return d;
  }

  /**
   * What the limiter's leased quota ({@link RedisLimiterOptions.quota}) did so far: calls,
   * units granted and given back, requests admitted in process; undefined when it is off.
   */
  get quotaStats(): QuotaStats | undefined {
    return this.quota?.stats();
  }

  /**
   * Reserves a request of cost options.n (the estimate) for key at options.now (default: the
   * server's TIME), admitted or denied exactly as {@link allow} would, in one round trip
   * (reserve.lua; Go's redisbackend.Limiter.ReserveN, on the same keys): its settle later
   * applies the actual cost in one more (settle.lua), at the same explicit time or at the
   * server's TIME then. A limiter with {@link RedisLimiterOptions.previous} seeds a key that
   * does not exist yet from its previous spec's key in the same call, exactly as allow does.
   * The deadline is this process's clock now plus the longest period of
   * the limits, and at least a minute. No failure policy applies: a Redis failure rejects.
   */
  async reserve(key: Bytes, options: AllowOptions = {}): Promise<RedisReservation> {
    checkOptions('reserve', options, allowKeys);
    checkSettles(this.limits);
    const kb = keyBytes(key);
    const n = options.n ?? 1;
    checkCost(n, this.max);
    checkSize('key', kb.length + this.keyPrefix.length);
    const now = options.now === undefined ? '' : String(toMicros(options.now));
    const keys = this.keys(key);
    const k = this.limits.length;
    // A carrying limiter reserves in carry.lua's layout (the previous keys after the keys,
    // the strategy and previous limits after the limits): reserve.lua seeds a new key first.
    const call =
      this.oldRoles === undefined
        ? { keys, args: [now, String(n), ...this.reserveParams] }
        : { keys: this.callKeys(key), args: [now, String(n), ...this.reserveParams, ...this.params.slice(1 + 4 * k)] };
    const start = Date.now();
    const r = ints('reserve', await deadline('reserve', this.timeout, script(this.client, 'reserve')(call.keys, call.args)), 6 * k + 1);
    const at = r[6 * k]!;
    const ds = this.limits.map((_, i) => ({
      allowed: r[6 * i] === 1,
      limit: r[6 * i + 1]!,
      remaining: Math.max(r[6 * i + 2]!, 0),
      retryAfter: r[6 * i + 3]!,
      resetAfter: r[6 * i + 4]!,
      delay: r[6 * i + 5]!,
    }));
    const d = ds.length === 1 ? ds[0]! : combine(ds);
    if (!d.allowed) {
      return new RedisReservation(d, 0);
    }
    const charges = this.limits.map((l, i) => chargeOf(this.core, l, at, n, ds[i]!));
    return new RedisReservation(d, start + Math.max(this.longestUs, MIN_DEADLINE_US) / 1000, async (actual) => {
      const args = [now, String(actual), this.reserveParams[0]!];
      for (let i = 0; i < k; i++) {
        args.push(...this.reserveParams.slice(1 + 4 * i, 5 + 4 * i), String(charges[i]!.at), String(charges[i]!.n));
      }
      ints('settle', await deadline('settle', this.timeout, script(this.client, 'settle')(keys, args)), k);
    });
  }

  /** Redis failures of decisions so far, and whether the last decision that reached Redis failed. */
  get health(): { failures: number; failing: boolean } {
    return { failures: this.failureCount, failing: this.failing };
  }

  private failed(e: unknown): void {
    this.failureCount++;
    if (!this.failing) {
      this.failing = true;
      const then =
        this.policy === 'fail-open'
          ? 'decisions fail open (admitted)'
          : this.policy === 'fail-closed'
            ? 'decisions fail closed (rejected with the error)'
            : 'decisions fall back to the in-process limiter';
      this.log?.warn(`redstream: Redis failed; ${then}`, { prefix: this.keyPrefix, error: (e as Error).message });
    }
  }

  private answered(): void {
    if (this.failing) {
      this.failing = false;
      this.log?.info('redstream: Redis answers again; decisions are made in Redis', { prefix: this.keyPrefix });
    }
  }

  /** Deletes key's state, so its next request sees a new key. */
  async reset(key: Bytes): Promise<void> {
    const kb = keyBytes(key);
    this.quota?.forget(tableKey(key, kb));
    await deadline('reset', this.timeout, this.client.del(...this.keys(key)));
  }
}

/** Returns a limiter of spec whose state lives in Redis. The client stays the caller's. */
export async function createRedisLimiter(client: RedisClient, spec: Spec, options: RedisLimiterOptions = {}): Promise<RedisLimiter> {
  const core = await loadCore();
  return new RedisLimiter(core, client, [resolve(core, spec)], options);
}

/**
 * Returns a limiter applying every spec to each key, all-or-nothing, in one script call (Go's
 * redisbackend.NewMultiLimiter, with its keys: a Go multi-limiter of the same specs and
 * prefix shares the state). The client stays the caller's.
 */
export async function createRedisMultiLimiter(client: RedisClient, specs: readonly Spec[], options: RedisLimiterOptions = {}): Promise<RedisLimiter> {
  const core = await loadCore();
  if (!Array.isArray(specs) || specs.length === 0) {
    throw new RedstreamError('INVALID_CONFIG', 'no limits');
  }
  return new RedisLimiter(core, client, specs.map((s) => resolve(core, s)), options, true);
}

/**
 * A concurrency limiter whose leases live in Redis (Go's redisbackend.ConcurrencyLimiter, on
 * the same keys and scripts): one concurrency limit ({@link concurrency}), alone or
 * all-or-nothing with rate limits on the same key. An acquisition is one multi.lua call
 * over the key's limits, as a multi-limit limiter of the same specs decides, with the
 * lease's token for the concurrency limit; a release or an extension is one lease.lua call
 * on the concurrency limit's key alone. Any number of processes, in Go or Node.js, may share
 * the keys and hand leases to each other; a process that dies holding leases frees their
 * units when they expire. A release after expiry, a second release, or a stale token
 * changes nothing. No failure policy applies: a Redis failure rejects. Create one with
 * {@link createRedisConcurrencyLimiter}.
 */
export class RedisConcurrencyLimiter {
  private readonly inner: RedisLimiter;
  private readonly ci: number;
  private readonly ttl: string;
  private readonly margin: string;
  private readonly timeout: number;
  private readonly acquireRun: Run;
  private readonly leaseRun: Run;

  /** Use {@link createRedisConcurrencyLimiter}. */
  constructor(core: Core, client: RedisClient, limits: readonly Limit[], options: RedisConcurrencyOptions = {}) {
    checkOptions('Redis concurrency limiter options', options, redisConcurrencyKeys);
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
    const ms = marginOf(options.expiryMarginMs);
    this.margin = String(ms);
    this.timeout = timeoutOf(options.timeoutMs);
    this.inner = new RedisLimiter(core, client, limits, { keyPrefix: options.keyPrefix, expiryMarginMs: ms, timeoutMs: this.timeout, logger: null }, true);
    const l = limits[ci]!;
    this.ttl = String(core.limitParams(l.alg, l.params, l.ints.length).period);
    this.acquireRun = script(client, schema.multi.script);
    this.leaseRun = script(client, 'lease');
  }

  /** The prefix of the limiter's keys. */
  get keyPrefix(): string {
    return this.inner.keyPrefix;
  }

  /** The validated specs in core units. */
  get limits(): readonly Limit[] {
    return this.inner.limits;
  }

  /** The largest units one lease may hold: the smallest limit's. */
  get max(): number {
    return this.inner.max;
  }

  /** The Redis keys holding key's state, one per spec (Go's ConcurrencyLimiter.Keys): `<prefix>:{<key>}:m<i>.<fingerprint>`. */
  keys(key: Bytes): Arg[] {
    return this.inner.keys(key);
  }

  /**
   * Asks for options.n units (default 1) of key at options.now (default: the server's
   * TIME) in one round trip: a lease when every limit admits the request, else a denied
   * lease whose retryAfter is the time until enough leases expire (or a rate limit admits).
   * Rate limits are charged n as by allow; a denial by any limit takes nothing. Bad input
   * rejects as {@link RedisLimiter.allow} does and sends nothing; a Redis failure rejects
   * with REDIS or TIMEOUT and takes no lease.
   */
  async acquire(key: Bytes, options: AllowOptions = {}): Promise<Lease> {
    const c = this.inner.command(key, options);
    const token = randomToken();
    const args = [...c.args];
    args[4 * this.ci + 6] = String(token);
    const r = ints(c.script, await deadline(c.script, this.timeout, this.acquireRun(c.keys, args)), 6 * this.limits.length);
    const ds = this.limits.map((_, i) => ({
      allowed: r[6 * i] === 1,
      limit: r[6 * i + 1]!,
      remaining: Math.max(r[6 * i + 2]!, 0),
      retryAfter: r[6 * i + 3]!,
      resetAfter: r[6 * i + 4]!,
      delay: r[6 * i + 5]!,
    }));
    const d = ds.length === 1 ? ds[0]! : combine(ds);
    if (!d.allowed) {
      return { ...d, key, n: 0, token: 0, expiry: 0 };
    }
    return { ...d, key, n: options.n ?? 1, token, expiry: clientNow(options.now) + r[6 * this.ci + 4]! };
  }

  /**
   * Frees lease's units at options.now (default: the server's TIME) if they are still
   * held, in one round trip, and resolves whether it did: a lease that expired, was
   * released already, or carries a stale token changes nothing (false). Rate limits keep
   * what the acquisition was charged.
   */
  async release(lease: Lease, options: LeaseOptions = {}): Promise<boolean> {
    const r = await this.lease('release', lease, options);
    return r === 1;
  }

  /**
   * Renews lease at options.now (default: the server's TIME) for another lease TTL, in one
   * round trip (a heartbeat), and resolves the lease with its new expiry; a lease that no
   * longer holds its units rejects with LEASE_LOST. After a REDIS or TIMEOUT error the
   * lease is as it was or extended: extend again or release it.
   */
  async extend(lease: Lease, options: LeaseOptions = {}): Promise<Lease> {
    const left = await this.lease('extend', lease, options);
    if (left === undefined || left < 0) {
      throw leaseLost();
    }
    return { ...lease, expiry: clientNow(options.now) + left };
  }

  // lease runs lease.lua's op on lease and returns its reply, or undefined, with no call,
  // for a lease no acquisition of this limiter can have issued.
  private async lease(op: 'release' | 'extend', lease: Lease, options: LeaseOptions): Promise<number | undefined> {
    checkOptions(op, options, leaseKeys);
    const ok = issuable(lease, this.max);
    const c = this.inner.command(lease.key, { now: options.now }); // validates the key and the time
    if (!ok) {
      return undefined;
    }
    const args = [c.args[0]!, op, String(lease.token), String(lease.n), this.ttl, this.margin];
    const r = await deadline('lease', this.timeout, this.leaseRun([c.keys[this.ci]!], args));
    if (typeof r !== 'number') {
      throw new RedstreamError('REDIS', `lease: unexpected reply ${JSON.stringify(r)}`);
    }
    return r;
  }
}

// clientNow is the time of a call (µs), or this process's clock without one.
function clientNow(now: Time | undefined): number {
  return now === undefined ? systemClock() : toMicros(now);
}

/**
 * Returns a concurrency limiter handing out leases on the one spec of specs whose algorithm
 * is 'concurrency'; the other specs are rate limits charged by every acquisition,
 * all-or-nothing with it (Go's redisbackend.NewConcurrencyLimiter, with its keys: a Go
 * limiter of the same specs and prefix shares the leases). Rejects with INVALID_CONFIG for
 * a bad spec or option, or when specs holds no concurrency spec or more than one. The
 * client stays the caller's.
 */
export async function createRedisConcurrencyLimiter(
  client: RedisClient,
  specs: readonly Spec[],
  options: RedisConcurrencyOptions = {},
): Promise<RedisConcurrencyLimiter> {
  const core = await loadCore();
  if (!Array.isArray(specs) || specs.length === 0) {
    throw new RedstreamError('INVALID_CONFIG', 'no limits');
  }
  return new RedisConcurrencyLimiter(core, client, specs.map((s) => resolve(core, s)), options);
}

/** Options of a Redis deduplicator. */
export interface RedisDedupOptions {
  /** Starts every key: `<keyPrefix>:{<name>}:<role>`. Blank selects Go's DefaultDedupPrefix. No braces. */
  readonly keyPrefix?: string;
  /** The deadline of each call, ms (default {@link DEFAULT_TIMEOUT_MS}). */
  readonly timeoutMs?: number;
}

abstract class RedisDedupBase {
  readonly keyPrefix: string;
  protected readonly timeout: number;

  constructor(
    protected readonly core: Core,
    protected readonly client: RedisClient,
    /** The deduplicator's name: deduplicators of one name, prefix and strategy share their state, in Go too. */
    readonly name: string,
    options: RedisDedupOptions,
  ) {
    checkOptions('Redis deduplicator options', options, extraDedupKeys(new.target));
    if (typeof name !== 'string' || name === '') {
      throw new RedstreamError('INVALID_CONFIG', 'empty deduplicator name');
    }
    if (!name.isWellFormed()) {
      throw new RedstreamError('INVALID_CONFIG', 'deduplicator name has a lone surrogate');
    }
    checkClient(client);
    this.keyPrefix = prefixOr(options.keyPrefix, schema.dedupPrefix);
    this.timeout = timeoutOf(options.timeoutMs);
  }

  // element validates e and reports whether it is not empty.
  protected element(e: Bytes): boolean {
    const b = elementBytes(e);
    checkSize('element', b.length);
    return b.length > 0;
  }
}

// extraDedupKeys returns the option names a deduplicator class takes.
function extraDedupKeys(cls: unknown): readonly string[] {
  return cls === RedisSetDeduplicator ? [...redisDedupKeys, 'setTtlMs'] : redisDedupKeys;
}

/** The exact deduplicator on a Redis set (Go's redisbackend.SetDeduplicator). */
export class RedisSetDeduplicator extends RedisDedupBase {
  /** The Redis key of the set. */
  readonly key: string;
  private readonly ttl: string;
  private readonly run: Run;

  /** Use {@link createRedisSetDeduplicator}. */
  constructor(core: Core, client: RedisClient, name: string, options: RedisDedupOptions & { setTtlMs?: number } = {}) {
    super(core, client, name, options);
    const ttl = options.setTtlMs ?? 0;
    if (typeof ttl !== 'number' || !(ttl >= 0) || !Number.isFinite(ttl)) {
      throw new RedstreamError('INVALID_CONFIG', `setTtlMs = ${ttl}, want >= 0`);
    }
    this.ttl = String(Math.ceil(ttl));
    this.key = redisKey(core, this.keyPrefix, name, schema.roleSet);
    this.run = script(client, schema.dedupScripts.set);
  }

  /** The script call of checkAndMarkBatch (undefined when every element is empty). */
  /** The script call of checkAndMarkBatch (undefined when every element is empty) and the indexes it decides. */
  command(elements: Bytes[]): (ScriptCall & { idx: number[] }) | undefined {
    const args: Arg[] = [this.ttl];
    const idx: number[] = [];
    elements.forEach((e, i) => {
      if (this.element(e)) {
        args.push(wire(e));
        idx.push(i);
      }
    });
    return idx.length === 0 ? undefined : { script: schema.dedupScripts.set, keys: [this.key], args, idx };
  }

  /** Records every element in order, in one script call; result i is whether elements[i] was already recorded. */
  async checkAndMarkBatch(elements: Bytes[]): Promise<boolean[]> {
    const c = this.command(elements);
    const out = elements.map(() => false);
    if (!c) {
      return out;
    }
    const r = ints(c.script, await deadline(c.script, this.timeout, this.run(c.keys, c.args)), c.idx.length);
    c.idx.forEach((i, j) => {
      out[i] = r[j] === 1;
    });
    return out;
  }

  /** Records element and reports whether it was already recorded; across processes and runtimes exactly one caller sees it as new. */
  async checkAndMark(element: Bytes): Promise<boolean> {
    return (await this.checkAndMarkBatch([element]))[0]!;
  }

  /** Records element. */
  async markSeen(element: Bytes): Promise<void> {
    await this.checkAndMark(element);
  }

  /** Whether element was recorded (SISMEMBER). */
  async isDuplicate(element: Bytes): Promise<boolean> {
    if (!this.element(element)) {
      return false;
    }
    return (await deadline('set dedup', this.timeout, this.client.sismember(this.key, wire(element)))) === 1;
  }

  /** Forgets element. */
  async remove(element: Bytes): Promise<void> {
    if (this.element(element)) {
      await deadline('set dedup', this.timeout, this.client.srem(this.key, wire(element)));
    }
  }

  /** Forgets every element. */
  async clear(): Promise<void> {
    await deadline('set dedup', this.timeout, this.client.del(this.key));
  }

  /** The exact number of distinct elements recorded (SCARD). */
  async uniqueCount(): Promise<number> {
    return deadline('set dedup', this.timeout, this.client.scard(this.key));
  }
}

/** The windowed deduplicator on a sorted set and a high-water mark (Go's redisbackend.WindowDeduplicator). */
export class RedisWindowDeduplicator extends RedisDedupBase {
  /** The sorted set and the high-water mark. */
  readonly keys: readonly string[];
  /** The window in µs. */
  readonly windowUs: number;
  private readonly mark: Run;
  private readonly check: Run;

  /** Use {@link createRedisWindowDeduplicator}. */
  constructor(core: Core, client: RedisClient, name: string, windowMs: number | undefined, options: RedisDedupOptions = {}) {
    super(core, client, name, options);
    this.windowUs = windowMicros(windowMs);
    this.keys = [redisKey(core, this.keyPrefix, name, schema.roleWindow), redisKey(core, this.keyPrefix, name, schema.roleWindowMark)];
    this.mark = script(client, schema.dedupScripts.window);
    this.check = script(client, schema.dedupScripts.windowCheck);
  }

  /** The script call of an operation ('' element for uniqueCount). */
  command(op: 'checkAndMark' | 'isDuplicate' | 'uniqueCount', element: Bytes, now?: Time): ScriptCall {
    const t = now === undefined ? '' : String(toMicros(now));
    const s = op === 'checkAndMark' ? schema.dedupScripts.window : schema.dedupScripts.windowCheck;
    return { script: s, keys: [...this.keys], args: [t, String(this.windowUs), op === 'uniqueCount' ? '' : wire(element)] };
  }

  private async one(op: 'checkAndMark' | 'isDuplicate' | 'uniqueCount', element: Bytes, now?: Time): Promise<number> {
    const c = this.command(op, element, now);
    const r = await deadline(c.script, this.timeout, (op === 'checkAndMark' ? this.mark : this.check)(c.keys, c.args));
    if (typeof r !== 'number') {
      throw new RedstreamError('REDIS', `${c.script}: unexpected reply ${JSON.stringify(r)}`);
    }
    return r;
  }

  /** Records a sighting at now (default the server's TIME) and reports whether it was a duplicate, atomically. */
  async checkAndMark(element: Bytes, now?: Time): Promise<boolean> {
    return this.element(element) ? (await this.one('checkAndMark', element, now)) === 1 : false;
  }

  /** Records a sighting. */
  async markSeen(element: Bytes, now?: Time): Promise<void> {
    await this.checkAndMark(element, now);
  }

  /** Whether element is a duplicate at now, without recording it. */
  async isDuplicate(element: Bytes, now?: Time): Promise<boolean> {
    return this.element(element) ? (await this.one('isDuplicate', element, now)) === 1 : false;
  }

  /** The number of elements still within the window at now. */
  async uniqueCount(now?: Time): Promise<number> {
    return this.one('uniqueCount', '', now);
  }

  /** Forgets every element and the high-water mark. */
  async clear(): Promise<void> {
    await deadline('window dedup', this.timeout, this.client.del(...this.keys));
  }
}

/** The Bloom filter on plain Redis strings (Go's redisbackend.BloomDeduplicator): positions computed here, bits set by a script. */
export class RedisBloomDeduplicator extends RedisDedupBase {
  /** The filter's sizing. */
  readonly params: BloomParams;
  /** The Redis keys of the shards, in shard order. */
  readonly keys: readonly string[];
  private unique = 0;

  /** Use {@link createRedisBloomDeduplicator}. */
  constructor(core: Core, client: RedisClient, name: string, bloom: BloomOptions = {}, options: RedisDedupOptions = {}) {
    super(core, client, name, options);
    this.params = bloomParams(core, bloom);
    const role = bloomRole(this.params.k, this.params.shardBits, this.params.shards);
    this.keys = Array.from({ length: this.params.shards }, (_, i) => bloomShardKey(core, this.keyPrefix, name, role, this.params.shards, i));
    script(client, schema.dedupScripts.bloomAdd);
    script(client, schema.dedupScripts.bloomExists);
    script(client, schema.dedupScripts.bloomCount);
  }

  /** The script calls of a batch, one per shard touched, in order of first touch, and each element's call. */
  commands(elements: Bytes[], add: boolean): { calls: (ScriptCall & { idx: number[] })[] } {
    const s = add ? schema.dedupScripts.bloomAdd : schema.dedupScripts.bloomExists;
    const groups = new Map<number, { script: string; keys: Arg[]; args: Arg[]; idx: number[] }>();
    elements.forEach((e, i) => {
      const b = elementBytes(e);
      checkSize('element', b.length);
      if (b.length === 0) {
        return;
      }
      const { shard, positions } = this.core.bloomPositions(this.params, b);
      let g = groups.get(shard);
      if (!g) {
        g = { script: s, keys: [this.keys[shard]!], args: [String(this.params.k)], idx: [] };
        groups.set(shard, g);
      }
      g.idx.push(i);
      for (const p of positions) {
        g.args.push(String(p));
      }
    });
    return { calls: [...groups.values()] };
  }

  private async run(elements: Bytes[], add: boolean): Promise<{ out: boolean[]; decided: number[] }> {
    const out = elements.map(() => false);
    const decided: number[] = [];
    const { calls } = this.commands(elements, add);
    const replies = await deadline(
      'bloom',
      this.timeout,
      Promise.all(calls.map((c) => script(this.client, c.script)(c.keys, c.args))),
    );
    calls.forEach((c, j) => {
      const r = ints(c.script, replies[j], c.idx.length);
      c.idx.forEach((i, k) => {
        out[i] = r[k] === 1;
        decided.push(i);
      });
    });
    return { out, decided };
  }

  /** Adds every element and reports, for each, whether it was already present (every bit set), atomically per element. */
  async checkAndMarkBatch(elements: Bytes[]): Promise<boolean[]> {
    const { out, decided } = await this.run(elements, true);
    for (const i of decided) {
      if (!out[i]) {
        this.unique++;
      }
    }
    return out;
  }

  /** Adds element and reports whether it was already present: of two clients (in any runtime) racing on a new element exactly one sees it as new. */
  async checkAndMark(element: Bytes): Promise<boolean> {
    return (await this.checkAndMarkBatch([element]))[0]!;
  }

  /** Adds element. */
  async markSeen(element: Bytes): Promise<void> {
    await this.checkAndMarkBatch([element]);
  }

  /** Whether every bit of element is set (false: certainly never added). */
  async isDuplicate(element: Bytes): Promise<boolean> {
    return (await this.run([element], false)).out[0]!;
  }

  /** Whether each element is present. */
  async isDuplicateBatch(elements: Bytes[]): Promise<boolean[]> {
    return (await this.run(elements, false)).out;
  }

  /** The adds by this deduplicator that set at least one bit (this process only). */
  async uniqueCount(): Promise<number> {
    return this.unique;
  }

  /** The filter's estimate of its distinct elements from its set bits, whoever added them. */
  async count(): Promise<number> {
    const run = script(this.client, schema.dedupScripts.bloomCount);
    const replies = await deadline('bloom', this.timeout, Promise.all(this.keys.map((k) => run([k], []))));
    let total = 0;
    for (const r of replies) {
      total += this.core.bloomEstimateCount(this.params, ints(schema.dedupScripts.bloomCount, r, 2)[0]!);
    }
    return Math.min(total, 2 ** 40);
  }

  /** Deletes every shard and resets uniqueCount. */
  async clear(): Promise<void> {
    await deadline('bloom', this.timeout, Promise.all(this.keys.map((k) => this.client.del(k))));
    this.unique = 0;
  }
}

/** Returns the exact deduplicator named name on Redis. The client stays the caller's. */
export async function createRedisSetDeduplicator(
  client: RedisClient,
  name: string,
  options: RedisDedupOptions & { setTtlMs?: number } = {},
): Promise<RedisSetDeduplicator> {
  return new RedisSetDeduplicator(await loadCore(), client, name, options);
}

/** Returns the windowed deduplicator named name on Redis (window default one hour). */
export async function createRedisWindowDeduplicator(
  client: RedisClient,
  name: string,
  windowMs?: number,
  options: RedisDedupOptions = {},
): Promise<RedisWindowDeduplicator> {
  return new RedisWindowDeduplicator(await loadCore(), client, name, windowMs, options);
}

/** Returns the Bloom deduplicator named name on Redis. */
export async function createRedisBloomDeduplicator(
  client: RedisClient,
  name: string,
  bloom: BloomOptions = {},
  options: RedisDedupOptions = {},
): Promise<RedisBloomDeduplicator> {
  return new RedisBloomDeduplicator(await loadCore(), client, name, bloom, options);
}
