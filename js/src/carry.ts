// Limit changes that keep state: the strategies of Go's core.Carry and the rules of
// core.Limit.CheckCarry, for the engines' previous/carry options.

import { RedstreamError } from './errors.js';
import { registry } from './generated/algorithms.js';
import { resolve, type Limit, type Spec } from './spec.js';
import type { Core } from './wasm.js';

/**
 * How a key's state carries over when its limit changes (Go's core.Carry, by its names in
 * configuration files): the first decision on a key under the new limit seeds its state
 * from the state the key had under the previous limit, once.
 *
 * - `'reset'` (the default): every key starts afresh under the new limit (a full bucket, an
 *   empty window).
 * - `'as-is'`: keeps what was consumed: raising 10/min to 20/min after 10 admitted in the
 *   current window leaves 10 to admit; lowering 20 to 10 after 10 leaves none.
 * - `'proportional'`: keeps the fraction consumed: 10 of 20 consumed becomes 5 of 10.
 *
 * Buckets carry the cost still to be earned back (in whole units of the old interval,
 * rounded up); the fixed window and the sliding counter keep their window's start and scale
 * its counts, and need the same window; the sliding log and the concurrency limit carry
 * nothing. Rounding is always up: a carried key never has more allowance than promised.
 */
export type Carry = 'reset' | 'as-is' | 'proportional';

/** Every strategy, in Go's order (core.CarryReset, CarryAsIs, CarryProportional). */
export const carries: readonly Carry[] = ['reset', 'as-is', 'proportional'];

/** The most exact integer of the algorithms' products: 2^53 (Go's core maxExact). */
const MAX_EXACT = 2 ** 53;

/** Returns the strategy c (default 'reset'), or throws INVALID_CONFIG naming the known ones (Go's core.ParseCarry). */
export function carryOf(c: unknown): Carry {
  if (c === undefined) {
    return 'reset';
  }
  if (typeof c !== 'string' || !(carries as readonly string[]).includes(c)) {
    throw new RedstreamError('INVALID_CONFIG', `unknown carry strategy ${JSON.stringify(c)}, want reset, as-is or proportional`);
  }
  return c as Carry;
}

/**
 * How a limit change carries the algorithm's state words (Go's core.Algorithm.Seed): "d"
 * for a bucket (a TAT), "s" then a "c" per count for a window of words, "" for an
 * algorithm that carries nothing (the sliding log, the concurrency limit).
 */
export function seedRoles(l: Limit): string {
  const row = registry[l.alg]!;
  if (row.shape === 'bucket' && row.words === 1) return 'd';
  if (row.shape === 'window' && row.words === 2) return 'sc';
  if (row.shape === 'window' && row.words === 3) return 'scc';
  return '';
}

/** Whether a and b are the same limit: the same algorithm and core integers (Go's core.Limit.Same), so the same key. */
export function same(a: Limit, b: Limit): boolean {
  return a.algorithm === b.algorithm && a.ints.length === b.ints.length && a.ints.every((x, i) => x === b.ints[i]);
}

/**
 * Throws INVALID_CONFIG when a key's state under from cannot be carried into to by c, with
 * Go's core.Limit.CheckCarry reasons: another algorithm, an algorithm that carries no state,
 * another window, or (proportional) limits whose product is not exact. 'reset' always can,
 * and so can a limit that did not change ({@link same}), whatever its algorithm: its state
 * goes on as it is, so an unchanged sliding log or concurrency limit beside a changed limit
 * is no reason to refuse.
 */
export function checkCarry(to: Limit, from: Limit, c: Carry): void {
  if (c === 'reset' || same(to, from)) {
    return;
  }
  if (from.algorithm !== to.algorithm) {
    throw new RedstreamError(
      'INVALID_CONFIG',
      `carry ${c}: the previous limit is ${from.algorithm}, the new one ${to.algorithm}; a change of algorithm can only reset`,
    );
  }
  const roles = seedRoles(to);
  if (roles === '') {
    throw new RedstreamError('INVALID_CONFIG', `carry ${c}: the ${to.algorithm} algorithm carries no state; a change can only reset`);
  }
  if (roles[0] === 's' && from.ints[0] !== to.ints[0]) {
    throw new RedstreamError(
      'INVALID_CONFIG',
      `carry ${c}: the window changes from ${from.ints[0]}µs to ${to.ints[0]}µs; a change of window can only reset`,
    );
  }
  if (c === 'proportional' && from.max + 1 > Math.floor(MAX_EXACT / to.max)) {
    throw new RedstreamError('INVALID_CONFIG', `carry proportional: limits ${from.max} and ${to.max} are too large to scale exactly`);
  }
}

/**
 * Validates the previous specs of a limiter of limits (the engines' `previous` option, index
 * for index; null or undefined, or the spec itself, for a limit that did not change) and
 * returns, for each limit, the previous limit to carry from, or undefined when its state
 * goes on as it is. Nothing carries without previous specs or under 'reset'. Throws
 * INVALID_CONFIG naming the index for a bad spec or a pair {@link checkCarry} refuses.
 */
export function previousLimits(core: Core, limits: readonly Limit[], previous: unknown, c: Carry): (Limit | undefined)[] | undefined {
  if (previous === undefined) {
    return undefined;
  }
  if (!Array.isArray(previous)) {
    throw new RedstreamError('INVALID_CONFIG', `previous is ${previous === null ? 'null' : typeof previous}, want an array of specs`);
  }
  if (previous.length === 0 || c === 'reset') {
    return undefined;
  }
  if (previous.length !== limits.length) {
    throw new RedstreamError('INVALID_CONFIG', `previous has ${previous.length} specs for a limiter of ${limits.length}`);
  }
  return limits.map((l, i) => {
    const p = previous[i] as Spec | null | undefined;
    if (p === null || p === undefined) {
      return undefined;
    }
    let q: Limit;
    try {
      q = resolve(core, p);
      if (same(q, l)) {
        return undefined;
      }
      checkCarry(l, q, c);
    } catch (e) {
      if (e instanceof RedstreamError && e.code === 'INVALID_CONFIG') {
        throw new RedstreamError('INVALID_CONFIG', `${e.message.replace(/^redstream: /, '')} (previous[${i}])`, { cause: e });
      }
      throw e;
    }
    return q;
  });
}
