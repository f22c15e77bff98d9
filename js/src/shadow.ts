// Shadow mode (Go's redstream.Shadow): a limiter's decisions, computed and recorded as when it
// enforces, with every denial admitted and marked.

import { RedstreamError } from './errors.js';
import type { AllowOptions } from './memory.js';
import { checkOptions } from './options.js';
import type { Decision } from './spec.js';
import type { Bytes } from './time.js';

/**
 * What {@link shadow} and {@link wait} need of a limiter: its allow. A {@link MemoryLimiter}
 * (synchronous) and a {@link RedisLimiter} (asynchronous), single or multi-limit, and a
 * {@link ShadowLimiter} are limiters.
 */
export interface Limiter {
  allow(key: Bytes, options?: AllowOptions): Decision | Promise<Decision>;
}

/** Options of {@link shadow}. Every field is optional. */
export interface ShadowOptions {
  /**
   * Called with the key and the shadow decision of each denial the shadow limiter admits,
   * before allow returns (to log what enforcing would have done). An exception it throws
   * is the caller's: allow throws it (rejects with it). Default none.
   */
  readonly onShadowDenied?: ((key: Bytes, decision: Decision) => void) | null;
}

/** The fields of ShadowOptions. */
const shadowKeys = ['onShadowDenied'] as const;

/**
 * A limiter in shadow mode ({@link shadow}): allow returns what the wrapped limiter's
 * returns, synchronously for a MemoryLimiter and as a promise for a RedisLimiter, with its
 * denials admitted and marked `shadow: true`.
 */
export class ShadowLimiter<L extends Limiter = Limiter> implements Limiter {
  /** The limiter in shadow mode. */
  readonly inner: L;
  private readonly onDenied: ((key: Bytes, decision: Decision) => void) | null;
  private denied = 0;

  /** Use {@link shadow}. */
  constructor(inner: L, options: ShadowOptions = {}) {
    checkOptions('shadow options', options, shadowKeys);
    if (inner === null || typeof inner !== 'object' || typeof (inner as Limiter).allow !== 'function') {
      throw new RedstreamError('INVALID_CONFIG', 'shadow: the limiter has no allow method');
    }
    const cb = options.onShadowDenied ?? null;
    if (cb !== null && typeof cb !== 'function') {
      throw new RedstreamError('INVALID_CONFIG', 'shadow: onShadowDenied is not a function');
    }
    this.inner = inner;
    this.onDenied = cb;
  }

  /** Always true: the limiter is in shadow mode (Go's Shadow() of the shadow limiter). */
  get shadow(): true {
    return true;
  }

  /**
   * The denials this limiter admitted so far (Go counts them in
   * redis_streaming_rl_shadow_denied_total).
   */
  get shadowDenied(): number {
    return this.denied;
  }

  /**
   * Decides with the wrapped limiter and admits what it denies: a denial comes back with
   * allowed true, `shadow: true` and the denial's limit, remaining, retryAfter and
   * resetAfter. Errors are the wrapped limiter's, unchanged (bad input and Redis failures
   * admit nothing here: a failure policy of the wrapped limiter decides those).
   */
  allow(key: Bytes, options?: AllowOptions): ReturnType<L['allow']> {
    const d = this.inner.allow(key, options);
    if (d instanceof Promise) {
      return d.then((x) => this.shadowed(key, x)) as ReturnType<L['allow']>;
    }
    return this.shadowed(key, d) as ReturnType<L['allow']>;
  }

  // shadowed turns a denial into a shadow denial, counted.
  private shadowed(key: Bytes, d: Decision): Decision {
    if (d.allowed) {
      return d;
    }
    const s: Decision = { ...d, allowed: true, shadow: true };
    this.denied++;
    this.onDenied?.(key, s);
    return s;
  }
}

/**
 * Returns limiter in shadow mode, to roll a new limit out safely (Go's redstream.Shadow):
 * every decision is the limiter's, computed and recorded exactly as when it enforces (an
 * admitted request consumes, a denied one consumes nothing), but the caller is always
 * admitted; a denial is returned with `shadow: true`, counted in
 * {@link ShadowLimiter.shadowDenied} and passed to options.onShadowDenied. Works for memory
 * and Redis limiters, single and multi-limit. Throws INVALID_CONFIG for what is not a
 * limiter or a bad option.
 */
export function shadow<L extends Limiter>(limiter: L, options: ShadowOptions = {}): ShadowLimiter<L> {
  return new ShadowLimiter(limiter, options);
}
