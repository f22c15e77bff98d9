// Reservations: reserve then settle leaves the key as admitting the actual cost would have,
// in process (the Go core through the module) and on Redis (reserve.lua and settle.lua, the
// same scripts and keys as Go's redisbackend), for every algorithm and a multi-limit.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { createLimiter, createMultiLimiter, createRedisLimiter, createRedisMultiLimiter, RedstreamError } from '../dist/index.js';
import { registry } from '../dist/generated/algorithms.js';
import { rng, startRedis } from './helpers.mjs';

const specsByShape = {
  bucket: { capacity: 5, rate: 1000 },
  window: { windowMs: 7, limit: 6 },
};
// The algorithms that settle (every rate algorithm; a concurrency limit releases leases).
const settling = registry.filter((r) => r.settles);
const cases = Object.fromEntries(settling.map((r) => [r.name, [{ algorithm: r.name, ...specsByShape[r.shape] }]]));
cases.multi = settling.map((r) => ({ algorithm: r.name, ...specsByShape[r.shape] }));

const t0 = 1767225600000000;

// probes returns the decisions of a fixed sequence of requests at and after from: equal
// sequences on two limiters that had the same traffic mean the same state.
function probes(l, key, from, max) {
  const out = [];
  for (const dt of [0, 997, 3000, 7000, 12000]) {
    for (let n = 1; n <= max; n++) out.push(l.allow(key, { n, now: from + dt }));
  }
  return out;
}

test('a concurrency limit does not settle: reserve is INVALID_CONFIG, before any state changes', async () => {
  const l = await createMultiLimiter([{ algorithm: 'concurrency', windowMs: 1000, limit: 2 }]);
  assert.throws(() => l.reserve('k', { n: 1, now: t0 }), (e) => e.code === 'INVALID_CONFIG' && /does not settle/.test(e.message));
  assert.equal(l.allow('k', { n: 2, now: t0 }).allowed, true);
});

test('in process: reserve then settle(actual) = allow(actual), every algorithm and a multi-limit', async () => {
  for (const [name, specs] of Object.entries(cases)) {
    const rand = rng(7 + name.length);
    let compared = 0;
    for (let c = 0; c < 200; c++) {
      const a = await createMultiLimiter(specs);
      const b = await createMultiLimiter(specs);
      const max = a.max;
      let now = t0;
      for (let i = 0, k = rand(8); i < k; i++) {
        now += rand(4000);
        const n = 1 + rand(max);
        assert.deepEqual(a.allow('k', { n, now }), b.allow('k', { n, now }));
      }
      const at = now + rand(3000);
      const est = 1 + rand(max);
      const actual = rand(max + 1);
      const res = b.reserve('k', { n: est, now: at });
      if (!res.decision.allowed) {
        assert.throws(() => res.settle(actual), (e) => e instanceof RedstreamError && e.code === 'RESERVATION_DONE');
        assert.deepEqual(probes(a, 'k', at, max), probes(b, 'k', at, max), `${name} case ${c}: a denial took something`);
        continue;
      }
      if (actual > 0 && !a.allow('k', { n: actual, now: at }).allowed) continue;
      res.settle(actual);
      assert.throws(() => res.settle(actual), (e) => e.code === 'RESERVATION_DONE');
      assert.deepEqual(probes(b, 'k', at, max), probes(a, 'k', at, max), `${name} case ${c}: reserve ${est} settle ${actual} at ${at}`);
      compared++;
    }
    assert.ok(compared >= 30, `${name}: only ${compared} cases compared`);
  }
});

test('on Redis: reserve and settle decide as in process, every algorithm and a multi-limit', async (t) => {
  const r = await startRedis(t);
  if (!r) return;
  const client = r.client();
  for (const [name, specs] of Object.entries(cases)) {
    const rand = rng(11 + name.length);
    for (let c = 0; c < 60; c++) {
      const mem = await createMultiLimiter(specs);
      const o = { keyPrefix: `rsv:${name}:${c}` };
      const red = specs.length === 1 ? await createRedisLimiter(client, specs[0], o) : await createRedisMultiLimiter(client, specs, o);
      const max = mem.max;
      let now = t0 + c * 1_000_000;
      for (let i = 0, k = rand(8); i < k; i++) {
        now += rand(4000);
        const n = 1 + rand(max);
        assert.deepEqual(await red.allow('k', { n, now }), mem.allow('k', { n, now }));
      }
      const at = now + rand(3000);
      const est = 1 + rand(max);
      const actual = rand(max + 2);
      const rm = mem.reserve('k', { n: est, now: at });
      const rr = await red.reserve('k', { n: est, now: at });
      assert.deepEqual(rr.decision, rm.decision, `${name} case ${c}: reserve ${est}`);
      if (rm.decision.allowed) {
        rm.settle(actual);
        await rr.settle(actual);
        await assert.rejects(rr.settle(actual), (e) => e.code === 'RESERVATION_DONE');
      }
      for (const dt of [0, 997, 3000, 7000, 12000]) {
        for (let n = 1; n <= max; n++) {
          assert.deepEqual(await red.allow('k', { n, now: at + dt }), mem.allow('k', { n, now: at + dt }), `${name} case ${c}: reserve ${est} settle ${actual}, probe +${dt} n ${n}`);
        }
      }
    }
  }
});
