// Waiting for a limit (Go's redstream.Wait): sleep the exact retryAfter plus a jitter, ask
// again, never past the deadline.

import { RedstreamError } from './errors.js';
import { checkOptions } from './options.js';
import type { Limiter } from './shadow.js';
import type { Decision } from './spec.js';
import { checkCost, systemClock, toMicros, type Bytes, type Time } from './time.js';

/** The fraction of retryAfter by which wait's sleeps are spread (1/WAIT_JITTER). */
const WAIT_JITTER = 8;
/** The sleep (µs) after a denial that names no wait. */
const WAIT_FLOOR_US = 1000;

/** Options of {@link wait}. Every field is optional. */
export interface WaitOptions {
  /** The cost, an integer in [1, limit] (default 1). */
  readonly n?: number;
  /** The latest time to be admitted (µs since the Unix epoch, or a Date, on this process's clock). Default none. */
  readonly deadline?: Time;
  /** The longest wait from now, ms: a deadline of now plus timeoutMs (the earlier of the two with deadline). Default none. */
  readonly timeoutMs?: number;
  /** Aborts the wait: it rejects with ABORTED (the reason as cause) at once or while sleeping. Default none. */
  readonly signal?: AbortSignal;
}

/** The fields of WaitOptions. */
const waitKeys = ['n', 'deadline', 'timeoutMs', 'signal'] as const;

/**
 * Resolves once limiter admits a request of cost options.n (default 1) for key at the
 * engine's clock (the Redis server's TIME for a Redis limiter), with the admitting decision
 * (Go's redstream.Wait). After each denial it sleeps the decision's retryAfter (the exact
 * time after which the same request could pass) plus a random jitter of up to an eighth of
 * it, then asks again: one allow per attempt and nothing else.
 *
 * The deadline (options.deadline, or now plus options.timeoutMs) bounds the wait: wait never
 * sleeps past it. When a denial's retryAfter ends after the deadline, wait rejects at once
 * with DEADLINE_EXCEEDED, saying how long the key asked to wait, the denial as the error's
 * decision; when options.signal aborts, it rejects with ABORTED, the last denial (if any)
 * as decision. Errors of allow (bad input, a Redis failure) reject as they come.
 *
 * Fairness: waiters are not queued. The jitter keeps waiters denied together from asking
 * again at the same instant, and a waiter asks again no sooner than its request could
 * pass; but a request that arrives meanwhile may be admitted first, so under sustained
 * contention a waiter can be overtaken repeatedly: bound it with a deadline.
 */
export async function wait(limiter: Limiter, key: Bytes, options: WaitOptions = {}): Promise<Decision> {
  checkOptions('wait', options, waitKeys);
  if (limiter === null || typeof limiter !== 'object' || typeof limiter.allow !== 'function') {
    throw new RedstreamError('INVALID_CONFIG', 'wait: the limiter has no allow method');
  }
  const n = options.n ?? 1;
  checkCost(n, Number.MAX_SAFE_INTEGER); // the limiter checks the limit
  let deadline = options.deadline === undefined ? Infinity : toMicros(options.deadline);
  if (options.timeoutMs !== undefined) {
    const t = options.timeoutMs;
    if (typeof t !== 'number' || !(t >= 0) || !Number.isFinite(t)) {
      throw new RedstreamError('INVALID_CONFIG', `wait: timeoutMs = ${String(t)}, want a finite number >= 0`);
    }
    deadline = Math.min(deadline, systemClock() + Math.round(t * 1000));
  }
  const signal = options.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new RedstreamError('INVALID_CONFIG', 'wait: signal is not an AbortSignal');
  }
  let last: Decision | undefined;
  for (;;) {
    if (signal?.aborted) {
      throw aborted(key, signal, last);
    }
    const d = await limiter.allow(key, { n });
    if (d.allowed) {
      return d;
    }
    last = d;
    let sleep = d.retryAfter > 0 ? d.retryAfter : WAIT_FLOOR_US;
    const j = Math.floor(sleep / WAIT_JITTER);
    if (j > 0) {
      sleep += Math.floor(Math.random() * (j + 1));
    }
    if (deadline !== Infinity) {
      const left = deadline - systemClock();
      if (left < d.retryAfter) {
        throw new RedstreamError(
          'DEADLINE_EXCEEDED',
          `wait: key ${keyName(key)} admits cost ${n} in ${d.retryAfter} µs, after the deadline (in ${Math.max(left, 0)} µs)`,
          { decision: d },
        );
      }
      sleep = Math.min(sleep, left);
    }
    await pause(sleep, signal);
  }
}

// pause resolves after us µs (setTimeout's whole ms, rounded up), or on signal's abort.
function pause(us: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, Math.ceil(us / 1000));
    signal?.addEventListener('abort', done, { once: true });
  });
}

// keyName is key for a message: quoted text, or its bytes in hex.
function keyName(key: Bytes): string {
  return typeof key === 'string' ? JSON.stringify(key) : `0x${Buffer.from(key).toString('hex')}`;
}

// aborted is the error of a wait that signal aborted, after the denial last.
function aborted(key: Bytes, signal: AbortSignal, last: Decision | undefined): RedstreamError {
  return new RedstreamError('ABORTED', `wait: for key ${keyName(key)} aborted`, last === undefined ? { cause: signal.reason } : { cause: signal.reason, decision: last });
}
