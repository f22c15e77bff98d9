import { RedstreamError } from './errors.js';

/** The latest time the core accepts: 2^52 µs since the Unix epoch (year 2112). */
export const MAX_TIME = 2 ** 52;

/**
 * A clock: the current time in whole microseconds since the Unix epoch. Inject one into the
 * in-process engines (tests, replays); the default is {@link systemClock}.
 */
export type Clock = () => number;

/** A time: microseconds since the Unix epoch (a number), or a Date. */
export type Time = number | Date;

const origin = performance.timeOrigin;

/**
 * The default clock: the wall clock at start-up plus the monotonic clock since, to the
 * microsecond (performance.timeOrigin + performance.now()). Like Go's memory engine it does
 * not jump when the system clock is stepped.
 */
export const systemClock: Clock = () => Math.floor((origin + performance.now()) * 1000);

/** Returns the microseconds since the Unix epoch of a Date. */
export function micros(d: Date): number {
  return d.getTime() * 1000;
}

/** Validates t and returns it in µs. */
export function toMicros(t: Time): number {
  const us = t instanceof Date ? micros(t) : t;
  if (typeof us !== 'number' || !Number.isSafeInteger(us) || us < 0 || us > MAX_TIME) {
    throw new RedstreamError('INVALID_TIME', `time ${String(t)} is not whole microseconds in [0, 2^52] since the Unix epoch`);
  }
  return us;
}

/** Validates a cost. */
export function checkCost(n: number, max: number): void {
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1) {
    throw new RedstreamError('INVALID_COST', `cost n = ${String(n)}, want an integer of at least 1`);
  }
  if (n > max) {
    throw new RedstreamError('COST_TOO_LARGE', `n = ${n}, limit = ${max}`);
  }
}

const encoder = new TextEncoder();

/**
 * A key or an element: text, sent to Redis and hashed as its UTF-8 bytes, or bytes (a
 * Uint8Array or Buffer), as Go's string keys hold any bytes. A text and bytes equal to its
 * UTF-8 form are the same key, in every engine.
 */
export type Bytes = string | Uint8Array;

/** Validates a key (non-empty; text must be well-formed Unicode) and returns its bytes. */
export function keyBytes(key: Bytes, what = 'key'): Uint8Array {
  if (key instanceof Uint8Array) {
    if (key.length === 0) {
      throw new RedstreamError('EMPTY_KEY', `empty ${what}`);
    }
    return key;
  }
  if (typeof key !== 'string') {
    throw new RedstreamError('INVALID_KEY', `${what} is ${typeof key}, want a string or a Uint8Array`);
  }
  if (key === '') {
    throw new RedstreamError('EMPTY_KEY', `empty ${what}`);
  }
  if (!key.isWellFormed()) {
    throw new RedstreamError('INVALID_KEY', `${what} has a lone surrogate, which has no UTF-8 encoding`);
  }
  return encoder.encode(key);
}

/** Validates an element (may be empty; text must be well-formed Unicode) and returns its bytes. */
export function elementBytes(e: Bytes): Uint8Array {
  if (e instanceof Uint8Array) {
    return e;
  }
  if (typeof e !== 'string') {
    throw new RedstreamError('INVALID_KEY', `element is ${typeof e}, want a string or a Uint8Array`);
  }
  if (!e.isWellFormed()) {
    throw new RedstreamError('INVALID_KEY', 'element has a lone surrogate, which has no UTF-8 encoding');
  }
  return encoder.encode(e);
}

const ascii = /^[\x00-\x7f]*$/;

/** The bytes read as Latin-1: one character per byte, so distinct bytes give distinct strings. */
export function latin1(b: Uint8Array): string {
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('latin1');
}

/**
 * The in-process table key of k (whose bytes are b): its bytes read as Latin-1, so that text
 * and bytes that are equal as bytes are one key, as in Go. ASCII text is its own table key.
 */
export function tableKey(k: Bytes, b: Uint8Array): string {
  return typeof k === 'string' && ascii.test(k) ? k : latin1(b);
}

/** What to send to Redis for k: the text, or a Buffer of the bytes. */
export function wire(k: Bytes): string | Buffer {
  return typeof k === 'string' ? k : Buffer.from(k.buffer, k.byteOffset, k.byteLength);
}
