import { RedstreamError } from './errors.js';

/**
 * Throws INVALID_CONFIG when o (an options object a caller passed as `what`) has a field
 * that is not one of known, or is not an object: a misspelled option (`{cost: 2}` for
 * `{n: 2}`) must not fall back to its default silently.
 */
export function checkOptions(what: string, o: unknown, known: readonly string[]): void {
  if (o === undefined) return;
  if (o === null || typeof o !== 'object' || Array.isArray(o)) {
    throw new RedstreamError('INVALID_CONFIG', `${what}: options must be an object, got ${o === null ? 'null' : Array.isArray(o) ? 'an array' : typeof o}`);
  }
  for (const k in o) {
    if (!known.includes(k)) {
      throw new RedstreamError('INVALID_CONFIG', `${what}: unknown option ${JSON.stringify(k)} (known: ${known.join(', ')})`);
    }
  }
}

/** The fields of AllowOptions. */
export const allowKeys = ['n', 'now'] as const;
/** The fields of MemoryOptions. */
export const memoryKeys = ['clock', 'sweepThreshold'] as const;
/** The fields of BloomOptions. */
export const bloomKeys = ['insertions', 'fpRate', 'shards'] as const;
/** The fields of RedisLimiterOptions. */
export const redisLimiterKeys = ['keyPrefix', 'expiryMarginMs', 'timeoutMs', 'failurePolicy', 'logger', 'previous', 'carry', 'quota'] as const;
/** The fields of RedisConcurrencyOptions. */
export const redisConcurrencyKeys = ['keyPrefix', 'expiryMarginMs', 'timeoutMs'] as const;
/** The fields of RedisDedupOptions. */
export const redisDedupKeys = ['keyPrefix', 'timeoutMs'] as const;
