// Example: at most 2 jobs of a tenant running at once, across every process, Go or Node.js:
// each job holds a lease that it releases when done, extends while it runs (a heartbeat), and
// that frees itself 30 s after its last extension if its process dies. A Go service with
// redisbackend.NewConcurrencyLimiter(client, []redstream.Spec{redstream.Concurrency(2, 30*time.Second)}, redisbackend.Options{})
// hands out and releases leases on the same key.
//
//	REDIS_URL=redis://127.0.0.1:6379 node examples/node/lease.mjs
// In a project of your own: import Redis from 'ioredis'; import { ... } from '@redstream-go/redstream';
import { createRequire } from 'node:module';

import { concurrency, createRedisConcurrencyLimiter } from '../../js/dist/index.js';

const Redis = createRequire(new URL('../../js/', import.meta.url))('ioredis'); // the package's own dev dependency

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const jobs = await createRedisConcurrencyLimiter(redis, [concurrency(2, 30_000)]);
const a = await jobs.acquire('tenant:1');
const b = await jobs.acquire('tenant:1');
const c = await jobs.acquire('tenant:1'); // a third job waits: c.retryAfter µs until a or b expires
console.log(`a=${a.allowed} b=${b.allowed} c=${c.allowed}`);
const renewed = await jobs.extend(a); // a's holder is alive: 30 s more from now
console.log(`released: ${await jobs.release(renewed)}, again: ${await jobs.release(renewed)}`);
console.log(`after a's release: ${(await jobs.acquire('tenant:1')).allowed}`);
await redis.del(...jobs.keys('tenant:1'));
redis.disconnect();
