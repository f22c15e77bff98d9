// Leased quota of the Redis limiter (Go's redisbackend Options.Quota, quota_test.go): the
// option's refusals and defaults, a hot key's script calls, the give-back, and processes
// (limiters) sharing a key admitting at most the limit of each window.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  algorithms,
  createLimiter,
  createRedisLimiter,
  createRedisMultiLimiter,
  DEFAULT_QUOTA_DURATION_MS,
  DEFAULT_QUOTA_MAX_SHARE,
  fixedWindow,
  slidingCounter,
  tokenBucket,
} from '../dist/index.js';
import { registry } from '../dist/generated/algorithms.js';
import { quotaCodes } from '../dist/quota.js';
import { startRedis } from './helpers.mjs';

const code = (c, field) => (e) => {
  assert.equal(e.code, c, e.message);
  if (field) assert.match(e.message, new RegExp(field.replace('.', '\\.')), e.message);
  return true;
};

// The algorithms with leases, with a budget a hot key stays under (Go's leaseSpecs).
const leaseSpecs = [tokenBucket(1e6, 1e5), fixedWindow(1000, 1e6), slidingCounter(1000, 1e6)];

// A client that is never connected: the constructors only define scripts on it.
function offline(t, r) {
  return r.client({ lazyConnect: true });
}

test('quota: the defaults are Go\'s', () => {
  assert.equal(DEFAULT_QUOTA_DURATION_MS, 100);
  assert.equal(DEFAULT_QUOTA_MAX_SHARE, 0.1);
});

test('quota: every algorithm has leases or refuses them, naming why', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const c = offline(t, r);
  const byShape = { bucket: { capacity: 10, rate: 1 }, window: { windowMs: 1000, limit: 10 } };
  for (const a of algorithms) {
    const shape = registry.find((x) => x.name === a).shape;
    const spec = { algorithm: a, ...byShape[shape] };
    if (quotaCodes[a] !== undefined) {
      const l = await createRedisLimiter(c, spec, { quota: { enabled: true } });
      assert.deepEqual(l.quotaStats, { calls: 0, granted: 0, returned: 0, localAllowed: 0 }, a);
      continue;
    }
    await assert.rejects(createRedisLimiter(c, spec, { quota: { enabled: true } }), code('INVALID_CONFIG', `algorithm ${a} has no leases`), a);
    // Off, the option changes nothing.
    assert.equal((await createRedisLimiter(c, spec, { quota: { enabled: false } })).quotaStats, undefined, a);
  }
  assert.deepEqual(Object.keys(quotaCodes).sort(), ['fixed', 'sliding-counter', 'token-bucket']);
});

test('quota: bad options are INVALID_CONFIG naming the field', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const c = offline(t, r);
  const spec = fixedWindow(1000, 10);
  for (const [name, quota, field] of [
    ['negative duration', { enabled: true, durationMs: -1000 }, 'quota.durationMs'],
    ['long duration', { enabled: true, durationMs: 3_600_000 }, 'quota.durationMs'],
    ['sub-µs duration', { enabled: true, durationMs: 0.0001 }, 'quota.durationMs'],
    ['duration not a number', { enabled: true, durationMs: '100' }, 'quota.durationMs'],
    ['negative share', { enabled: true, maxShare: -0.5 }, 'quota.maxShare'],
    ['share above 1', { enabled: true, maxShare: 1.5 }, 'quota.maxShare'],
    ['enabled not a boolean', { enabled: 'yes' }, 'quota.enabled'],
    ['unknown field', { enabled: true, duration: 100 }, 'duration'],
  ]) {
    await assert.rejects(createRedisLimiter(c, spec, { quota }), code('INVALID_CONFIG', field), name);
  }
  await assert.rejects(createRedisMultiLimiter(c, [spec], { quota: { enabled: true } }), code('INVALID_CONFIG', 'quota.enabled'));
  await assert.rejects(createRedisLimiter(c, spec, { quota: { enabled: true }, previous: [fixedWindow(1000, 5)], carry: 'as-is' }), code('INVALID_CONFIG', 'quota.enabled'));
  // The edges are accepted.
  await createRedisLimiter(c, spec, { quota: { enabled: true, durationMs: 60_000, maxShare: 1 } });
  await createRedisLimiter(c, spec, { quota: { enabled: true, durationMs: 0.001 } });
});

// evalCalls returns the script calls the server ran (INFO commandstats: eval, evalsha).
async function evalCalls(client) {
  let total = 0;
  for (const line of (await client.info('commandstats')).split('\n')) {
    const m = /^cmdstat_eval[a-z_]*:calls=(\d+),/.exec(line.trim());
    if (m) total += Number(m[1]);
  }
  return total;
}

test('quota: a hot key under its limit takes at least 20 times fewer script calls', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const client = r.client();
  const requests = 20_000;
  for (const spec of leaseSpecs) {
    const calls = {};
    for (const leased of [false, true]) {
      const l = await createRedisLimiter(client, spec, { keyPrefix: `hot:${spec.algorithm}:${leased}`, quota: { enabled: leased } });
      const before = await evalCalls(client);
      for (let i = 0; i < requests; i++) {
        const d = await l.allow('k'); // at the server's TIME
        assert.ok(d.allowed, `${spec.algorithm} request ${i} (leases ${leased}): ${JSON.stringify(d)}`);
      }
      calls[leased] = (await evalCalls(client)) - before;
      if (leased) {
        const s = l.quotaStats;
        assert.equal(s.calls, calls[true], `${spec.algorithm}: quotaStats.calls ${s.calls}, the server ran ${calls[true]}`);
        assert.equal(s.localAllowed + s.calls, requests, JSON.stringify(s));
      }
    }
    const ratio = calls[false] / Math.max(calls[true], 1);
    t.diagnostic(`${spec.algorithm}: ${requests} requests, ${calls[false]} script calls without leases, ${calls[true]} with (${ratio.toFixed(0)}x fewer)`);
    assert.ok(calls[false] >= requests && ratio >= 20, `${spec.algorithm}: ${calls[false]} calls without leases, ${calls[true]} with`);
  }
});

test('quota: concurrent requests of one process share one renewal per lease', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const client = r.client();
  const l = await createRedisLimiter(client, fixedWindow(3_600_000, 100_000), { keyPrefix: 'conc', quota: { enabled: true, durationMs: 60_000, maxShare: 1 } });
  const now = 1_700_000_000_000_000 - (1_700_000_000_000_000 % 3_600_000_000) + 60_000_000;
  // Warm up: the first lease is of the request's cost, the second sized by the first's use.
  for (let i = 0; i < 10; i++) assert.ok((await l.allow('k', { now: now + i })).allowed);
  const before = l.quotaStats.calls;
  const ds = await Promise.all(Array.from({ length: 500 }, (_, i) => l.allow('k', { now: now + 10 + i })));
  assert.ok(ds.every((d) => d.allowed));
  const calls = l.quotaStats.calls - before;
  assert.ok(calls < 50, `500 concurrent requests made ${calls} calls`);
});

test('quota: what a lease did not use is given back in the next call', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const client = r.client();
  const W = 3_600_000_000; // µs
  const now = 1_700_000_000_000_000 - (1_700_000_000_000_000 % W) + 60_000_000;
  for (const spec of [fixedWindow(3_600_000, 1000), slidingCounter(3_600_000, 1000)]) {
    const p = `gb:${spec.algorithm}`;
    const l = await createRedisLimiter(client, spec, { keyPrefix: p, quota: { enabled: true, durationMs: 10, maxShare: 0.5 } });
    const plain = await createRedisLimiter(client, spec, { keyPrefix: p });
    // Requests 1 µs apart grow the lease to the share (500); one at now + 20 ms (past the
    // lease's life) renews it, giving back what was left.
    let used = 0;
    for (let i = 0; i < 20; i++) {
      assert.ok((await l.allow('k', { now: now + i })).allowed);
      used++;
    }
    const held = l.quotaStats.granted - used; // units the process holds unused
    assert.ok(held > 0, `no units held (${JSON.stringify(l.quotaStats)})`);
    assert.ok((await l.allow('k', { now: now + 20_000 })).allowed);
    used++;
    const s = l.quotaStats;
    assert.equal(s.returned, held, JSON.stringify(s));
    // The plain limiter on the same key sees every unit but those used and the new lease's.
    const d = await plain.allow('k', { now: now + 20_001 });
    const newLease = s.granted - held - (used - 1) - 1; // the last call's units beyond its request
    assert.equal(d.remaining, 1000 - used - newLease - 1, `${spec.algorithm}: ${JSON.stringify(d)} ${JSON.stringify(s)}`);
  }
});

test('quota: two limiters on one key never admit more than the limit of a window', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const client = r.client();
  const other = r.client();
  const W = 1_000_000; // µs
  const limit = 500;
  for (const spec of [fixedWindow(W / 1000, limit), slidingCounter(W / 1000, limit)]) {
    const p = `two:${spec.algorithm}`;
    const ls = [
      await createRedisLimiter(client, spec, { keyPrefix: p, quota: { enabled: true, durationMs: 50, maxShare: 0.25 } }),
      await createRedisLimiter(other, spec, { keyPrefix: p, quota: { enabled: true, durationMs: 50, maxShare: 0.25 } }),
    ];
    const t0 = 1_700_000_000_000_000 - (1_700_000_000_000_000 % W);
    const totals = [0, 0];
    for (let w = 0; w < 4; w++) {
      const counts = [0, 0];
      // Each limiter requests 600 times across the window, 4 at a time.
      await Promise.all(ls.map(async (l, j) => {
        let i = 0;
        await Promise.all(Array.from({ length: 4 }, async () => {
          while (i < 600) {
            const at = t0 + w * W + (i++) * 1500 + j;
            if ((await l.allow('k', { now: at })).allowed) counts[j]++;
          }
        }));
      }));
      const total = counts[0] + counts[1];
      totals[0] += counts[0];
      totals[1] += counts[1];
      assert.ok(total <= limit, `${spec.algorithm} window ${w}: admitted ${total} (${counts}), limit ${limit}`);
      // No more than the lease each limiter holds at the window's end stays spent unused; the
      // sliding counter admits less by the previous window's weight (a tenth of it at the
      // last request, 0.9 s into the window).
      const low = limit - 2 * limit * 0.25 - (spec.algorithm === 'sliding-counter' && w > 0 ? limit / 5 : 0);
      assert.ok(total >= low, `${spec.algorithm} window ${w}: admitted ${total} (${counts}) of ${limit}, want at least ${low}`);
    }
    assert.ok(totals[0] > 0 && totals[1] > 0, `${spec.algorithm}: admitted ${totals} over the windows`);
    const local = ls[0].quotaStats.localAllowed + ls[1].quotaStats.localAllowed;
    // (The sliding counter's budget comes back a little at a time as the previous window's
    // weight falls, so many of its leases are small: the hot-key test counts the calls saved.)
    assert.ok(local > 0, `${spec.algorithm}: none of ${totals} admitted in process`);
  }
});

test('quota: reset forgets the lease; a Redis failure follows the failure policy', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const client = r.client();
  const W = 3_600_000_000;
  const now = 1_700_000_000_000_000 - (1_700_000_000_000_000 % W) + 60_000_000;
  const spec = fixedWindow(3_600_000, 100);
  const l = await createRedisLimiter(client, spec, { keyPrefix: 'rst', quota: { enabled: true, durationMs: 60_000, maxShare: 1 } });
  for (let i = 0; i < 5; i++) await l.allow('k', { now: now + i });
  await l.reset('k');
  const calls = l.quotaStats.calls;
  const d = await l.allow('k', { now: now + 10 });
  assert.equal(l.quotaStats.calls, calls + 1, 'a request after reset asks Redis');
  assert.equal(d.remaining, 99, JSON.stringify(d));
  // A server that is gone: fail-closed rejects, the in-process fallback decides.
  const dead = r.client({ lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
  const closed = await createRedisLimiter(dead, spec, { keyPrefix: 'dead', logger: null, quota: { enabled: true } });
  await assert.rejects(closed.allow('k', { now }), code('REDIS'));
  const mem = await createLimiter(spec);
  const fb = await createRedisLimiter(dead, spec, { keyPrefix: 'dead', logger: null, failurePolicy: mem, quota: { enabled: true } });
  assert.deepEqual(await fb.allow('k', { now }), mem.allow('other', { now }));
  assert.equal(fb.health.failures, 1);
});

test('quota: while Redis hangs a live lease admits in process; the call that times out ends it, and nothing is given back twice', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const client = r.client({ maxRetriesPerRequest: 1 });
  const spec = fixedWindow(3_600_000, 1000);
  const l = await createRedisLimiter(client, spec, { keyPrefix: 'hung', timeoutMs: 200, logger: null, quota: { enabled: true, durationMs: 1000, maxShare: 0.1 } });
  const plain = await createRedisLimiter(client, spec, { keyPrefix: 'hung' });
  const W = 3_600_000_000;
  let at = 1_700_000_000_000_000 - (1_700_000_000_000_000 % W);
  let admitted = 0;
  const allow = async () => {
    at += 100;
    const d = await l.allow('k', { now: at });
    if (d.allowed) admitted++;
    return d;
  };
  for (let i = 0; i < 20; i++) assert.ok((await allow()).allowed, `warm-up ${i}`);
  const e = l.quota.entry('k'); // the lease (the table's key of 'k' is 'k')
  assert.ok(e.left >= 10, `the lease holds ${e.left} units, want at least 10`);
  process.kill(r.pid, 'SIGSTOP');
  try {
    for (let i = 0; i < 5; i++) assert.ok((await allow()).allowed, 'from the lease while Redis hangs');
    at += e.life; // past the lease's life
    await assert.rejects(allow(), code('TIMEOUT'));
  } finally {
    process.kill(r.pid, 'SIGCONT');
  }
  for (let i = 0; i < 50; i++) await allow();
  at += 2 * e.life; // the last lease ends; this call gives back what it did not use
  await allow();
  const d = await plain.allow('k', { now: at });
  const left = d.allowed ? d.remaining + 1 : d.remaining;
  t.diagnostic(`admitted ${admitted}, ${left} left in Redis (the units the call that timed out took stay spent)`);
  assert.ok(admitted + left <= 1000, `admitted ${admitted}, Redis has ${left} left: more than the limit 1000`);
  assert.ok(admitted >= 76, `admitted ${admitted}`);
});
