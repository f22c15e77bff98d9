// Reservations: a request admitted at an estimated cost whose actual cost is settled later,
// the counterparts of Go's redstream.Reservation.

import { RedstreamError } from './errors.js';
import type { Decision } from './spec.js';

/** The least time a reservation stays open, µs (Go's internal/reservation.MinDeadline). */
export const MIN_DEADLINE_US = 60_000_000;

function checkActual(actual: number): void {
  if (!Number.isSafeInteger(actual) || actual < 0) {
    throw new RedstreamError('INVALID_COST', `settle ${actual}, want an integer of at least 0`);
  }
}

const done = (): RedstreamError =>
  new RedstreamError('RESERVATION_DONE', 'reservation already settled, denied or past its deadline');

/**
 * A reservation of an in-process limiter ({@link MemoryLimiter.reserve}): settle applies the
 * actual cost to every limit the reservation was charged to, as Go's core settles it (a
 * refund never gives back more than was taken; a charge never takes a key past full). It is
 * settled once; after its deadline it stays charged at its estimate.
 */
export class MemoryReservation {
  /** Use {@link MemoryLimiter.reserve}. */
  constructor(
    /** The decision at the estimate. A denied reservation took nothing. */
    readonly decision: Decision,
    /** µs since the Unix epoch, by the limiter's clock: the last moment settle may apply (0 when denied). */
    readonly deadline: number,
    private apply?: (actual: number) => void,
  ) {}

  /** Settles at the actual cost (an integer >= 0). Throws RESERVATION_DONE when denied, settled, or past the deadline. */
  settle(actual: number): void {
    checkActual(actual);
    const f = this.apply;
    if (f === undefined) throw done();
    this.apply = undefined;
    f(actual);
  }

  /** settle(0): the request did not happen; everything the reservation took is given back. */
  cancel(): void {
    this.settle(0);
  }
}

/**
 * A reservation of a Redis limiter ({@link RedisLimiter.reserve}), settled in one round trip
 * (settle.lua). A settlement that failed on Redis closes it all the same: the script may
 * have run (a timeout), and settling again could refund twice.
 */
export class RedisReservation {
  private busy = false;

  /** Use {@link RedisLimiter.reserve}. */
  constructor(
    /** The decision at the estimate. A denied reservation took nothing. */
    readonly decision: Decision,
    /** ms since the Unix epoch, by this process's clock: the last moment settle may apply (0 when denied). */
    readonly deadline: number,
    private apply?: (actual: number) => Promise<void>,
  ) {}

  /** Settles at the actual cost (an integer >= 0). Rejects with RESERVATION_DONE when denied, settled, or past the deadline. */
  async settle(actual: number): Promise<void> {
    checkActual(actual);
    const f = this.apply;
    if (f === undefined || this.busy) throw done();
    if (Date.now() > this.deadline) {
      this.apply = undefined;
      throw done();
    }
    this.busy = true;
    try {
      await f(actual);
    } finally {
      this.apply = undefined;
      this.busy = false;
    }
  }

  /** settle(0): the request did not happen; everything the reservation took is given back. */
  cancel(): Promise<void> {
    return this.settle(0);
  }
}
