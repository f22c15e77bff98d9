// Concurrency leases: the counterparts of Go's redstream.Lease and ConcurrencyLimiter.

import { RedstreamError } from './errors.js';
import type { Decision } from './spec.js';
import type { Bytes, Time } from './time.js';

/**
 * What a concurrency limiter's acquire returns (Go's redstream.Lease): the admission's
 * decision and, when it is allowed, the lease of n units of key, named by token, held until
 * expiry unless released or extended first. A denied acquire returns a lease whose token,
 * n and expiry are 0 and whose retryAfter is the time until the earliest lease that must go
 * expires. A lease is a plain value (JSON-safe for a text key): it may be handed to another
 * process, even one in Go, which can release or extend it on the same keys.
 */
export interface Lease extends Decision {
  /** The key the lease holds units of. */
  readonly key: Bytes;
  /** The units the lease holds (0 when denied). */
  readonly n: number;
  /** Names the lease: an integer in [1, 2^53) when allowed, 0 when denied. Release and extend act only on the lease this token was issued for. */
  readonly token: number;
  /**
   * When the lease frees itself, µs since the Unix epoch (0 when denied): the acquisition
   * (or extension) time plus the lease TTL, in the caller's clock (on Redis: the call's
   * `now`, or this process's clock, plus the time left Redis reported).
   */
  readonly expiry: number;
}

/** Options of a release or an extension. */
export interface LeaseOptions {
  /** The time of the call (default: the engine's clock; for Redis, the server's TIME). */
  readonly now?: Time;
}

/** The fields of LeaseOptions. */
export const leaseKeys = ['now'] as const;

/** A random lease token, uniform in [1, 2^53) (Go's rand.Uint64N(1<<53-1) + 1). */
export function randomToken(): number {
  const w = new Uint32Array(2);
  for (;;) {
    globalThis.crypto.getRandomValues(w);
    const t = (w[0]! & 0x1fffff) * 2 ** 32 + w[1]!;
    if (t !== 0) {
      return t;
    }
  }
}

/**
 * Whether lease can be one an acquisition of a limiter whose largest cost is max issued:
 * a token in [1, 2^53) and n in [1, max]. Release and extend treat any other lease as lost,
 * without a call. Throws INVALID_CONFIG when lease is not an object.
 */
export function issuable(lease: Lease, max: number): boolean {
  if (lease === null || typeof lease !== 'object') {
    throw new RedstreamError('INVALID_CONFIG', `lease is ${lease === null ? 'null' : typeof lease}, want a Lease`);
  }
  const { token, n } = lease;
  return Number.isSafeInteger(token) && token >= 1 && Number.isSafeInteger(n) && n >= 1 && n <= max;
}

/** The error of extending a lease that no longer holds its units (Go's redstream.ErrLeaseLost). */
export function leaseLost(): RedstreamError {
  return new RedstreamError('LEASE_LOST', 'lease lost: it expired, was released, or its token is stale');
}
