import type { Decision } from './spec.js';

/**
 * What went wrong, as a stable string. The first six are the core module's status codes
 * (wasmcore/ABI.md) and Go's sentinel errors of the same meaning.
 *
 * - `INVALID_CONFIG`: a spec or option is out of range (Go: `redstream.ErrInvalidConfig`).
 * - `INVALID_COST`: the cost `n` is not an integer of at least 1 (`ErrInvalidCost`).
 * - `COST_TOO_LARGE`: `n` is above what the key can ever hold (`ErrCostTooLarge`).
 * - `INVALID_TIME`: a time is before the Unix epoch or after 2^52 µs (`ErrInvalidTime`).
 * - `INVALID_STATE`: stored state the algorithm cannot have produced.
 * - `EMPTY_KEY`: the key is the empty string (`ErrEmptyKey`).
 * - `INVALID_KEY`: a key or element is not well-formed Unicode (it has lone surrogates, which
 *   have no UTF-8 encoding: Go would see other bytes).
 * - `TOO_LARGE`: a key or element larger than Redis accepts in one argument.
 * - `TIMEOUT`: Redis did not answer within the call's deadline.
 * - `REDIS`: Redis answered with an error or the connection failed.
 * - `INTERNAL`: the core module failed (a bug); the module instance is replaced.
 * - `RESERVATION_DONE`: a reservation was denied, is settled already, or is past its
 *   deadline (`ErrReservationDone`).
 * - `LEASE_LOST`: a lease to extend no longer holds its units: it expired, was released,
 *   or its token is stale (`ErrLeaseLost`).
 * - `DEADLINE_EXCEEDED`: {@link wait}'s deadline comes before the key admits the request
 *   (Go: `context.DeadlineExceeded` from `redstream.Wait`); the error's decision is the denial.
 * - `ABORTED`: {@link wait}'s signal aborted it (Go: `context.Canceled`); the error's
 *   decision is the last denial and its cause the signal's reason.
 */
export type ErrorCode =
  | 'INVALID_CONFIG'
  | 'INVALID_COST'
  | 'COST_TOO_LARGE'
  | 'INVALID_TIME'
  | 'INVALID_STATE'
  | 'EMPTY_KEY'
  | 'INVALID_KEY'
  | 'TOO_LARGE'
  | 'TIMEOUT'
  | 'REDIS'
  | 'INTERNAL'
  | 'RESERVATION_DONE'
  | 'LEASE_LOST'
  | 'DEADLINE_EXCEEDED'
  | 'ABORTED';

/** The error every function of the package throws (or rejects with). */
export class RedstreamError extends Error {
  /** What went wrong. */
  readonly code: ErrorCode;
  /** The denial a DEADLINE_EXCEEDED or ABORTED error of {@link wait} gives up on; else absent. */
  declare readonly decision?: Decision;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown; decision?: Decision }) {
    super(`redstream: ${message}`, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'RedstreamError';
    this.code = code;
    if (options?.decision !== undefined) {
      this.decision = options.decision;
    }
  }
}

/** Maps the core module's status codes to error codes. */
export const statusCodes: readonly ErrorCode[] = [
  'INTERNAL', // 0 is OK, never an error
  'INVALID_CONFIG',
  'INVALID_COST',
  'COST_TOO_LARGE',
  'INVALID_TIME',
  'INVALID_STATE',
  'INTERNAL', // 6 BUFFER: the package sizes the buffer itself, so this is a bug
  'INTERNAL',
];
