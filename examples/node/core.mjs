// A minimal loader for redstream's core WebAssembly module (wasmcore/core.wasm), for
// Node.js 20 or later. It follows wasmcore/ABI.md: instantiate with WASI preview1 imports,
// call _initialize once (wasi.initialize does), then call the step exports. Every step
// returns a status (0 = OK) and leaves its results in 16 little-endian int64 slots at
// redstream_results(). Times and durations are int64 microseconds, passed as BigInt.
//
// An instance is single-threaded state: use one per worker thread.

import { readFile } from 'node:fs/promises';
import { WASI } from 'node:wasi';

export const ABI_VERSION = 1;

// Status codes of ABI.md.
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

const statusNames = Object.fromEntries(Object.entries(Status).map(([k, v]) => [v, k]));

// StatusError is thrown by the typed wrappers for a non-OK status.
export class StatusError extends Error {
  constructor(exportName, status) {
    super(`${exportName}: status ${status} (${statusNames[status] ?? 'UNKNOWN'})`);
    this.status = status;
  }
}

// load compiles and instantiates the module at path (a file path or URL).
export async function load(path) {
  const bytes = await readFile(path);
  const wasi = new WASI({ version: 'preview1', args: [], env: {} });
  const { instance } = await WebAssembly.instantiate(bytes, {
    wasi_snapshot_preview1: wasi.wasiImport,
  });
  wasi.initialize(instance); // calls the reactor's _initialize export
  return new Core(instance);
}

// Core wraps one instance.
export class Core {
  constructor(instance) {
    this.exports = instance.exports;
    const v = this.exports.redstream_abi_version();
    if (v !== ABI_VERSION) {
      throw new Error(`redstream core ABI version ${v}, want ${ABI_VERSION}`);
    }
    this.resultsAddr = this.exports.redstream_results();
  }

  // slot returns result slot i as a BigInt. Re-read memory.buffer on every access: it is
  // replaced when the module's memory grows.
  slot(i) {
    return new DataView(this.exports.memory.buffer).getBigInt64(this.resultsAddr + 8 * i, true);
  }

  // buffer returns a view of the scratch buffer with room for size bytes.
  buffer(size) {
    const addr = this.exports.redstream_buffer(size);
    if (addr === 0) {
      throw new Error(`redstream_buffer(${size}) failed`);
    }
    return new Uint8Array(this.exports.memory.buffer, addr, size);
  }

  // decision reads the decision of a limiter step (slots 0..5).
  decision() {
    return {
      allowed: this.slot(0) === 1n,
      limit: this.slot(1),
      remaining: this.slot(2),
      retryAfter: this.slot(3),
      resetAfter: this.slot(4),
      delay: this.slot(5),
    };
  }

  check(name, status) {
    if (status !== Status.OK) {
      throw new StatusError(name, status);
    }
  }

  // tokenBucketStep decides a request of cost n at now for a key whose stored TAT is tat
  // (0n for a new key); store the returned tat.
  tokenBucketStep(capacity, rate, tat, now, n = 1n) {
    this.check('redstream_token_bucket_step',
      this.exports.redstream_token_bucket_step(capacity, rate, tat, now, n));
    return { ...this.decision(), tat: this.slot(6) };
  }

  // slidingLogStep decides with the key's log (an array of BigInt timestamps, oldest first)
  // and returns the decision and the new log.
  slidingLogStep(window, limit, log, now, n = 1n) {
    const bytes = this.buffer(8 * log.length);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    log.forEach((ts, i) => view.setBigInt64(8 * i, ts, true));
    this.check('redstream_sliding_log_step',
      this.exports.redstream_sliding_log_step(window, limit, log.length, now, n));
    const d = this.decision();
    const next = log.slice(Number(this.slot(6)));
    for (let i = 0n; i < this.slot(7); i++) {
      next.push(this.slot(8));
    }
    return { ...d, log: next };
  }

  // bloomPositions returns the shard and the k bit positions of element (a Uint8Array).
  bloomPositions(k, shardBits, shards, element) {
    const bytes = this.buffer(Math.max(element.length, 8 * k));
    bytes.set(element);
    this.check('redstream_bloom_positions',
      this.exports.redstream_bloom_positions(k, shardBits, shards, element.length));
    const out = new DataView(this.exports.memory.buffer, bytes.byteOffset, 8 * k);
    const positions = [];
    for (let i = 0; i < k; i++) {
      positions.push(out.getBigUint64(8 * i, true));
    }
    return { shard: Number(this.slot(0)), positions };
  }
}
