// The loader of redstream's core WebAssembly module (wasmcore/ABI.md): instantiated with
// WebAssembly.instantiate and the few WASI preview1 imports it declares, implemented here, so
// that no experimental Node.js feature (node:wasi) is on the path.

import { getRandomValues } from 'node:crypto';
import { writeSync } from 'node:fs';
import { readFile } from 'node:fs/promises';

import { RedstreamError, statusCodes } from './errors.js';

/** A compiled core module (a WebAssembly.Module). */
export interface CoreModule {
  readonly [Symbol.toStringTag]: string;
}

interface WasmMemory {
  readonly buffer: ArrayBuffer;
}

// Node.js has WebAssembly as a global; @types/node 20 does not declare it (lib.dom does), so
// the little this file uses is declared here, leaving the package's types free of lib.dom.
declare const WebAssembly: {
  compile(bytes: Uint8Array): Promise<CoreModule>;
  Module: { imports(m: CoreModule): { module: string; name: string; kind: string }[] };
  Instance: new (m: CoreModule, imports: object) => { exports: Record<string, unknown> };
};

/** The parameters of a limit as the limit exports take them (Go's core.Params): those of the other shape are 0. */
export interface LimitParams {
  readonly capacity: number;
  readonly rate: number;
  readonly windowUs: number;
  readonly limit: number;
}

/** The ABI version this package speaks. */
export const ABI_VERSION = 2;

/** The core module's status codes (wasmcore/ABI.md). */
export const Status = Object.freeze({
  OK: 0,
  INVALID_CONFIG: 1,
  INVALID_COST: 2,
  COST_TOO_LARGE: 3,
  INVALID_TIME: 4,
  INVALID_STATE: 5,
  BUFFER: 6,
  INTERNAL: 7,
});

const statusNames = ['OK', 'INVALID_CONFIG', 'INVALID_COST', 'COST_TOO_LARGE', 'INVALID_TIME', 'INVALID_STATE', 'BUFFER', 'INTERNAL'];

// WASI errno values used below.
const ESUCCESS = 0;
const EBADF = 8;
const EINVAL = 28;

/** Thrown inside the module when it calls proc_exit (the Go runtime does on a fatal error). */
class WasiExit extends Error {
  constructor(readonly exitCode: number) {
    super(`the core module exited with status ${exitCode}`);
  }
}

type Exports = Record<string, unknown> & {
  memory: WasmMemory;
  _initialize: () => void;
  redstream_abi_version: () => number;
  redstream_results: () => number;
  redstream_buffer: (size: number) => number;
};

// wasiImports returns the WASI preview1 functions the module may call, on memory().
// The module needs no arguments, environment or files; its answers never depend on the
// clock or the random source (ABI.md), which only the Go runtime's start-up reads.
function wasiImports(memory: () => WasmMemory): Record<string, (...args: never[]) => number | void> {
  const view = () => new DataView(memory().buffer);
  const zero2 = (a: number, b: number) => {
    const v = view();
    v.setUint32(a, 0, true);
    v.setUint32(b, 0, true);
    return ESUCCESS;
  };
  return {
    args_sizes_get: zero2,
    args_get: () => ESUCCESS,
    environ_sizes_get: zero2,
    environ_get: () => ESUCCESS,
    clock_time_get: (id: number, _precision: bigint, out: number) => {
      const ns = id === 0 ? BigInt(Date.now()) * 1_000_000n : process.hrtime.bigint();
      view().setBigUint64(out, ns, true);
      return ESUCCESS;
    },
    random_get: (ptr: number, len: number) => {
      for (let off = 0; off < len; off += 65536) {
        getRandomValues(new Uint8Array(memory().buffer, ptr + off, Math.min(65536, len - off)));
      }
      return ESUCCESS;
    },
    sched_yield: () => ESUCCESS,
    // Every subscription is reported as ready at once: the module never waits for anything
    // (a reactor's exports run to completion), so a timer that would fire later fires now.
    poll_oneoff: (inPtr: number, outPtr: number, nsubs: number, neventsPtr: number) => {
      const v = view();
      for (let i = 0; i < nsubs; i++) {
        const sub = inPtr + 48 * i;
        const ev = outPtr + 32 * i;
        v.setBigUint64(ev, v.getBigUint64(sub, true), true); // userdata
        v.setUint16(ev + 8, ESUCCESS, true); // error
        v.setUint8(ev + 10, v.getUint8(sub + 8)); // type
        v.setBigUint64(ev + 16, 0n, true);
        v.setUint16(ev + 24, 0, true);
      }
      v.setUint32(neventsPtr, nsubs, true);
      return ESUCCESS;
    },
    proc_exit: (code: number) => {
      throw new WasiExit(code);
    },
    // The Go runtime writes a fatal error's message to fd 2 before it exits.
    fd_write: (fd: number, iovs: number, iovsLen: number, nwritten: number) => {
      if (fd !== 1 && fd !== 2) {
        return EBADF;
      }
      const v = view();
      let total = 0;
      for (let i = 0; i < iovsLen; i++) {
        const ptr = v.getUint32(iovs + 8 * i, true);
        const len = v.getUint32(iovs + 8 * i + 4, true);
        if (len > 0) {
          writeSync(fd, new Uint8Array(memory().buffer, ptr, len));
        }
        total += len;
      }
      v.setUint32(nwritten, total, true);
      return ESUCCESS;
    },
    fd_close: (fd: number) => (fd <= 2 ? ESUCCESS : EBADF),
    fd_fdstat_get: (fd: number, out: number) => {
      if (fd > 2) {
        return EBADF;
      }
      const v = view();
      v.setUint8(out, 2); // character device
      v.setUint16(out + 2, 0, true);
      v.setBigUint64(out + 8, 0n, true);
      v.setBigUint64(out + 16, 0n, true);
      return ESUCCESS;
    },
    fd_fdstat_set_flags: (fd: number) => (fd <= 2 ? ESUCCESS : EBADF),
    fd_prestat_get: () => EBADF, // no preopened directories
    fd_prestat_dir_name: () => EINVAL,
  };
}

/** The decision fields of a limiter step, as the module returns them (µs for durations). */
export interface RawDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  retryAfter: number;
  resetAfter: number;
  delay: number;
}

/** Bloom filter sizing (core.Bloom). */
export interface BloomParams {
  /** Hash functions: bits set per element. */
  k: number;
  /** Total bits m. */
  bits: number;
  /** Number of blocks. */
  shards: number;
  /** Bits per block. */
  shardBits: number;
}

/** Converts a safe integer to the i64 the module takes. */
function i64(x: number): bigint {
  if (!Number.isSafeInteger(x)) {
    throw new RedstreamError('INVALID_CONFIG', `${x} is not a safe integer`);
  }
  return BigInt(x);
}

/**
 * One instance of the core module. It is synchronous single-threaded state: JavaScript
 * calls never interleave, so one instance serves a whole thread. {@link loadCore} returns
 * the shared one. If a call traps (a bug in the module; ABI.md says to discard the instance)
 * the call throws an `INTERNAL` error and the instance is replaced by a fresh one.
 */
export class Core {
  private x!: Exports;
  private results = 0;
  /** Instances replaced after a trap. */
  replaced = 0;

  /** Instantiates module (synchronously) and calls its _initialize export. */
  constructor(private readonly module: CoreModule) {
    this.reset();
  }

  private reset(): void {
    this.x = instantiateModule(this.module);
    const v = this.x.redstream_abi_version();
    if (v !== ABI_VERSION) {
      throw new RedstreamError('INTERNAL', `core module ABI version ${v}, want ${ABI_VERSION}`);
    }
    this.results = this.x.redstream_results();
  }

  /** Result slot i (0..15) of the last call, as a signed 64-bit BigInt. */
  slot(i: number): bigint {
    return new DataView(this.x.memory.buffer).getBigInt64(this.results + 8 * i, true);
  }

  /** Result slot i as a Number (the ABI guarantees it is exact, except hashes). */
  num(i: number): number {
    return Number(this.slot(i));
  }

  /** A view of the scratch buffer with room for size bytes; valid until the next call. */
  buffer(size: number): Uint8Array {
    const addr = this.x.redstream_buffer(size);
    if (addr === 0) {
      throw new RedstreamError('TOO_LARGE', `scratch buffer of ${size} bytes refused`);
    }
    return new Uint8Array(this.x.memory.buffer, addr, size);
  }

  /** Calls an export by name with raw arguments (BigInt for i64) and returns its status. */
  call(name: string, ...args: (number | bigint)[]): number {
    const fn = this.x[name];
    if (typeof fn !== 'function') {
      throw new RedstreamError('INTERNAL', `the core module has no export ${name}`);
    }
    try {
      return (fn as (...a: (number | bigint)[]) => number)(...args);
    } catch (e) {
      this.replaced++;
      this.reset();
      throw new RedstreamError('INTERNAL', `${name} trapped (${(e as Error).message}); the module instance was replaced`, { cause: e });
    }
  }

  private run(name: string, ...args: (number | bigint)[]): void {
    const status = this.call(name, ...args);
    if (status !== Status.OK) {
      if (status === Status.INTERNAL || status < 0 || status > Status.INTERNAL) {
        this.replaced++;
        this.reset();
      }
      throw new RedstreamError(statusCodes[status] ?? 'INTERNAL', `${name}: status ${status} (${statusNames[status] ?? 'UNKNOWN'})`);
    }
  }

  private decision(): RawDecision {
    return {
      allowed: this.slot(0) === 1n,
      limit: this.num(1),
      remaining: this.num(2),
      retryAfter: this.num(3),
      resetAfter: this.num(4),
      delay: this.num(5),
    };
  }

  /**
   * redstream_limit_params: the limit of algorithm alg (its index in Go's core.Algorithms,
   * src/generated/algorithms.ts) with parameters p, validated by the module as Go's
   * core.Algorithm.New does: its Ints (as many as its shape has), Max and Period.
   */
  limitParams(alg: number, p: LimitParams, nInts: number): { ints: number[]; max: number; period: number } {
    this.run('redstream_limit_params', alg, p.capacity, p.rate, i64(p.windowUs), i64(p.limit));
    const ints = [this.num(0), this.num(1), this.num(2)].slice(0, nInts);
    return { ints, max: this.num(3), period: this.num(4) };
  }

  /**
   * redstream_limit_step: Go's core.Limit.CheckState for a key whose state is words (or, for
   * a log algorithm, log: timestamps, oldest first): the decision and the three words of
   * what to store when admitted (a log algorithm's: entries to drop, to append, and at).
   */
  limitStep(alg: number, p: LimitParams, words: readonly number[], log: BigInt64Array, now: number, n: number): RawDecision & { next: [number, number, number] } {
    this.putLog(log);
    this.run('redstream_limit_step', alg, p.capacity, p.rate, i64(p.windowUs), i64(p.limit), i64(words[0]!), i64(words[1]!), i64(words[2]!), log.length, i64(now), i64(n));
    return { ...this.decision(), next: [this.num(6), this.num(7), this.num(8)] };
  }

  /** redstream_limit_idle: Go's core.Limit.IdleState, whether the key's state is back to its initial one at now. */
  limitIdle(alg: number, p: LimitParams, words: readonly number[], log: BigInt64Array, now: number): boolean {
    this.putLog(log);
    this.run('redstream_limit_idle', alg, p.capacity, p.rate, i64(p.windowUs), i64(p.limit), i64(words[0]!), i64(words[1]!), i64(words[2]!), log.length, i64(now));
    return this.slot(0) === 1n;
  }

  /**
   * redstream_limit_charge: Go's core.Limit.ChargeOf, what a request of cost n admitted at
   * now with the decision d took from the limit: the charge point at and n (0, 0 when denied).
   */
  limitCharge(alg: number, p: LimitParams, now: number, n: number, d: RawDecision): { at: number; n: number } {
    this.run('redstream_limit_charge', alg, p.capacity, p.rate, i64(p.windowUs), i64(p.limit), i64(now), i64(n), d.allowed ? 1 : 0,
      i64(d.limit), i64(d.remaining), i64(d.retryAfter), i64(d.resetAfter), i64(d.delay));
    return { at: this.num(0), n: this.num(1) };
  }

  /**
   * redstream_limit_settle: Go's core.Limit.SettleState of the charge (at, charged) at now
   * with the actual cost, on a key whose state is words (or log, for a log algorithm, whose
   * limit admits max): the change applied (units; negative a refund) and the state to store.
   */
  limitSettle(alg: number, p: LimitParams, max: number, isLog: boolean, words: readonly number[], log: BigInt64Array,
    at: number, charged: number, now: number, actual: number): { change: number; words: [number, number, number]; log: BigInt64Array } {
    const room = isLog ? Math.max(log.length, max) : log.length;
    if (room > 0) {
      const b = this.buffer(8 * room);
      b.fill(0);
      b.set(new Uint8Array(log.buffer, log.byteOffset, 8 * log.length));
    }
    this.run('redstream_limit_settle', alg, p.capacity, p.rate, i64(p.windowUs), i64(p.limit), i64(words[0]!), i64(words[1]!), i64(words[2]!),
      log.length, i64(at), i64(charged), i64(now), i64(actual));
    const n = this.num(4);
    const out = new BigInt64Array(n);
    if (isLog && n > 0) {
      const b = this.buffer(8 * room);
      out.set(new BigInt64Array(b.slice(0, 8 * n).buffer));
    }
    return { change: this.num(0), words: [this.num(1), this.num(2), this.num(3)], log: out };
  }

  /**
   * redstream_lease_release: Go's core.ReleaseLease on a concurrency limit's log (oldest
   * first): whether the lease of n units taken (or last extended) at at still held them at
   * now, and then the log without them.
   */
  leaseRelease(alg: number, p: LimitParams, log: BigInt64Array, at: number, now: number, n: number): { done: boolean; log: BigInt64Array } {
    this.putLog(log);
    this.run('redstream_lease_release', alg, p.capacity, p.rate, i64(p.windowUs), i64(p.limit), log.length, i64(at), i64(now), i64(n));
    const done = this.slot(0) === 1n;
    return { done, log: done ? this.getLog(this.num(1), log.length) : log };
  }

  /**
   * redstream_lease_extend: Go's core.ExtendLease on a concurrency limit's log: whether the
   * lease of n units taken (or last extended) at at still held them at now, and then its new
   * time at (it expires at at + the lease TTL) and the log with its units moved there.
   */
  leaseExtend(alg: number, p: LimitParams, log: BigInt64Array, at: number, now: number, n: number): { done: boolean; at: number; log: BigInt64Array } {
    this.putLog(log);
    this.run('redstream_lease_extend', alg, p.capacity, p.rate, i64(p.windowUs), i64(p.limit), log.length, i64(at), i64(now), i64(n));
    const done = this.slot(0) === 1n;
    return done ? { done, at: this.num(1), log: this.getLog(this.num(2), log.length) } : { done, at, log };
  }

  /**
   * redstream_limit_seed: Go's core.Limit.SeedState, the state of a key under the limit
   * (alg, p) seeded at now from its state words under the previous limit (fromAlg, from)
   * by carry (0 reset, 1 as-is, 2 proportional): kept when the two limits are the same (the
   * key keeps its state as it is), else the seeded words (all 0: a new key).
   */
  limitSeed(alg: number, p: LimitParams, fromAlg: number, from: LimitParams, words: readonly number[], now: number, carry: number): { kept: boolean; words: [number, number, number] } {
    this.run('redstream_limit_seed', alg, p.capacity, p.rate, i64(p.windowUs), i64(p.limit), fromAlg, from.capacity, from.rate, i64(from.windowUs), i64(from.limit),
      i64(words[0]!), i64(words[1]!), i64(words[2]!), i64(now), carry);
    return { kept: this.slot(0) === 1n, words: [this.num(1), this.num(2), this.num(3)] };
  }

  // getLog returns the n entries a lease export left in the scratch buffer, which held room entries before it.
  private getLog(n: number, room: number): BigInt64Array {
    const out = new BigInt64Array(n);
    if (n > 0) {
      out.set(new BigInt64Array(this.buffer(8 * room).slice(0, 8 * n).buffer));
    }
    return out;
  }

  private putLog(log: BigInt64Array): void {
    if (log.length > 0) {
      this.buffer(8 * log.length).set(new Uint8Array(log.buffer, log.byteOffset, 8 * log.length));
    }
  }

  /** Windowed dedup check at max(high, now): whether a duplicate, and the effective time. */
  windowDedupCheck(window: number, high: number, last: number | undefined, now: number): { duplicate: boolean; t: number } {
    this.run('redstream_window_dedup_check', i64(window), i64(high), i64(last ?? 0), last === undefined ? 0 : 1, i64(now));
    return { duplicate: this.slot(0) === 1n, t: this.num(1) };
  }

  /** Whether an entry last seen at last may be pruned at effective time t. */
  windowDedupExpired(window: number, last: number, t: number): boolean {
    this.run('redstream_window_dedup_expired', i64(window), i64(last), i64(t));
    return this.slot(0) === 1n;
  }

  /** Bloom filter sizing. */
  bloomParams(insertions: number, fpRate: number, shards: number): BloomParams {
    if (!Number.isInteger(shards) || shards < 0 || shards > 65536) {
      throw new RedstreamError('INVALID_CONFIG', `shards = ${shards}, want an integer in [0, 65536]`);
    }
    this.run('redstream_bloom_params', i64(insertions), fpRate, shards);
    return { k: this.num(0), bits: this.num(1), shards: this.num(2), shardBits: this.num(3) };
  }

  /** The shard and bit positions of element. */
  bloomPositions(p: BloomParams, element: Uint8Array): { shard: number; positions: number[] } {
    const buf = this.buffer(Math.max(element.length, 8 * p.k));
    buf.set(element);
    this.run('redstream_bloom_positions', p.k, i64(p.shardBits), p.shards, element.length);
    const out = new DataView(this.x.memory.buffer, buf.byteOffset, 8 * p.k);
    const positions = new Array<number>(p.k);
    for (let i = 0; i < p.k; i++) {
      positions[i] = Number(out.getBigUint64(8 * i, true)); // < 2^32
    }
    return { shard: this.num(0), positions };
  }

  /** Estimated distinct elements of a shard with ones bits set. */
  bloomEstimateCount(p: BloomParams, ones: number): number {
    this.run('redstream_bloom_estimate_count', p.k, i64(p.shardBits), i64(ones));
    return this.num(0);
  }

  /** MurmurHash3 x64 128 of data: h1 and h2 as unsigned 64-bit BigInts. */
  murmur3(data: Uint8Array, seed = 0): [bigint, bigint] {
    this.buffer(data.length).set(data);
    this.run('redstream_murmur3_x64_128', data.length, seed | 0);
    return [BigInt.asUintN(64, this.slot(0)), BigInt.asUintN(64, this.slot(1))];
  }

  /** Retry backoff before jitter: min(initial × multiplier^(attempt-1), max) µs. */
  backoffBase(initial: number, max: number, multiplier: number, attempt: number): number {
    this.run('redstream_backoff_base', i64(initial), i64(max), multiplier, i64(attempt));
    return this.num(0);
  }

  /** Retry delay with jitter mode 0 none, 1 full, 2 equal, 3 decorrelated; random is 64 random bits. */
  backoffDelay(initial: number, max: number, multiplier: number, jitter: number, attempt: number, prev: number, random: bigint): number {
    this.run('redstream_backoff_delay', i64(initial), i64(max), multiplier, jitter, i64(attempt), i64(prev), BigInt.asIntN(64, random));
    return this.num(0);
  }
}

/** Where the package's copy of the module is. */
export const defaultModuleURL = new URL('../core.wasm', import.meta.url);

/** Compiles the module at source (a path, URL or the bytes) and returns a ready instance. */
export async function instantiate(source: string | URL | Uint8Array = defaultModuleURL): Promise<Core> {
  const bytes = source instanceof Uint8Array ? source : await readFile(source);
  return new Core(await WebAssembly.compile(bytes));
}

// instantiateModule instantiates module with the WASI imports it declares and initializes it.
function instantiateModule(module: CoreModule): Exports {
  let memory: WasmMemory | undefined;
  const wasi = wasiImports(() => memory!);
  const imports: Record<string, Record<string, unknown>> = {};
  for (const imp of WebAssembly.Module.imports(module)) {
    const fn = imp.module === 'wasi_snapshot_preview1' ? wasi[imp.name] : undefined;
    if (imp.kind !== 'function' || !fn) {
      throw new RedstreamError('INTERNAL', `the core module imports ${imp.module}.${imp.name} (${imp.kind}), which this loader does not provide`);
    }
    (imports[imp.module] ??= {})[imp.name] = fn;
  }
  const instance = new WebAssembly.Instance(module, imports);
  const x = instance.exports as Exports;
  memory = x.memory;
  x._initialize();
  return x;
}

let shared: Promise<Core> | undefined;

/**
 * Returns the package's shared core instance, compiling the module (about 2.7 MB) on first
 * use. Every limiter and deduplicator of the package uses it.
 */
export function loadCore(): Promise<Core> {
  shared ??= instantiate().catch((e: unknown) => {
    shared = undefined;
    throw e;
  });
  return shared;
}
