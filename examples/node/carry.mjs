// Example: a limit raised from 10 to 20 per minute without forgetting what each key used: the
// first decision on a key under the new spec seeds it once from its key under the previous
// one (Go's redisbackend Options.Previous and Carry, on the same keys), here keeping the
// fraction consumed: 6 of 10 becomes 12 of 20.
//
//	REDIS_URL=redis://127.0.0.1:6379 node examples/node/carry.mjs
// In a project of your own: import Redis from 'ioredis'; import { ... } from '@redstream-go/redstream';
import { createRequire } from 'node:module';

import { createRedisLimiter, fixedWindow } from '../../js/dist/index.js';

const Redis = createRequire(new URL('../../js/', import.meta.url))('ioredis'); // the package's own dev dependency

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const now = 1893456000000000; // 2030-01-01T00:00:00Z in µs
const before = fixedWindow(60_000, 10);
const old = await createRedisLimiter(redis, before, { keyPrefix: 'api' }); // yesterday's deploy
for (let i = 0; i < 6; i++) await old.allow('user:1', { now });
const limiter = await createRedisLimiter(redis, fixedWindow(60_000, 20), { keyPrefix: 'api', previous: [before], carry: 'proportional' });
const d = await limiter.allow('user:1', { now });
console.log(`allowed=${d.allowed} remaining=${d.remaining}`);
await old.reset('user:1');
await limiter.reset('user:1');
redis.disconnect();
