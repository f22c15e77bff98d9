// The Redis key schema of redstream's Go engine (redisbackend/keys.go), with its constants
// from the generated table. schema-vectors.json (generated from the Go functions) checks
// every function here against Go's.

import { RedstreamError } from './errors.js';
import { schema } from './generated/schema.js';
import { latin1, type Bytes } from './time.js';
import type { Core } from './wasm.js';

const encoder = new TextEncoder();

/** Whether the user key (its UTF-8 bytes) can be its own hash tag. */
export function plain(u: Uint8Array): boolean {
  if (u.length === 0 || u.length > schema.maxPlainTag || u[0] === 0x23 /* '#' */) {
    return false;
  }
  for (const c of u) {
    if (c <= 0x20 || c > 0x7e || c === 0x7b || c === 0x7d) {
      return false;
    }
  }
  return true;
}

/** The tag of a non-plain user key: '#' and 16 hex digits of the first half of MurmurHash3 x64 128. */
export function hashTag(core: Core, u: Uint8Array): string {
  const [h1] = core.murmur3(u, 0);
  return '#' + h1.toString(16).padStart(16, '0');
}

/**
 * The Redis key of role for user key u under prefix, exactly as Go's redisKey builds it: a
 * string for a text key, and for a byte key that is not plain a Buffer (its bytes follow the '|').
 */
export function redisKey(core: Core, prefix: string, u: string, role?: string): string;
export function redisKey(core: Core, prefix: string, u: Bytes, role?: string): string | Buffer;
export function redisKey(core: Core, prefix: string, u: Bytes, role = ''): string | Buffer {
  const b = typeof u === 'string' ? encoder.encode(u) : u;
  const r = role === '' ? '' : ':' + role;
  if (plain(b)) {
    return `${prefix}:{${typeof u === 'string' ? u : latin1(b)}}${r}`;
  }
  const head = `${prefix}:{${hashTag(core, b)}}${r}|`;
  return typeof u === 'string' ? head + u : Buffer.concat([Buffer.from(head), b]);
}

/** Validates a key prefix (no braces, at most 4096 bytes). */
export function checkPrefix(p: string): string {
  if (typeof p !== 'string' || /[{}]/.test(p)) {
    throw new RedstreamError('INVALID_CONFIG', `key prefix ${JSON.stringify(p)} contains a brace, which would break the hash tag`);
  }
  if (encoder.encode(p).length > 4096) {
    throw new RedstreamError('INVALID_CONFIG', `key prefix of ${p.length} characters is longer than 4096 bytes`);
  }
  return p;
}

/** The prefix to use: the given one unless blank (Go's isBlank), else the default. */
export function prefixOr(p: string | undefined, def: string): string {
  return checkPrefix(p === undefined || /^[ \t\n\r\v\f]*$/.test(p) ? def : p);
}

/**
 * The canonical form of a limit's parameters (the fingerprint of Go's redisbackend): the algorithm's
 * name and its core integers joined by '.', e.g. "token-bucket.200000.2000000.10". Every
 * limiter key carries it as its role, so limiters of different specs never share state.
 */
export function fingerprint(l: { algorithm: string; ints: readonly number[] }): string {
  return [l.algorithm, ...l.ints.map(String)].join('.');
}

/** The role of a Bloom filter's shard keys, carrying its sizing. */
export function bloomRole(k: number, shardBits: number, shards: number): string {
  return schema.bloomRole.replace('{k}', String(k)).replace('{shardBits}', String(shardBits)).replace('{shards}', String(shards));
}

/** The key of Bloom shard i: with several shards each has its own tag (name/i). */
export function bloomShardKey(core: Core, prefix: string, name: string, role: string, shards: number, i: number): string {
  return shards === 1 ? redisKey(core, prefix, name, role) : redisKey(core, prefix, `${name}/${i}`, role);
}
