// The Node.js side of the cross-runtime test (internal/crossruntime): decides the tasks it
// is given on a real Redis (one server or a cluster) while Go decides the same tasks on the
// same keys, and prints one JSON line with what it admitted and which elements it saw first.
//
//	node test/crossruntime-worker.mjs '<config JSON>'
//
// It prints "ready" once connected and starts when a line arrives on stdin, so that both
// runtimes start together. A config with ops instead of tasks runs them in order at once (Go
// runs before and after it, on the same keys) and prints one JSON line: each op's result. A
// config with quota decides limiters with leased quota window by window (runQuota).
import { createInterface } from 'node:readline';

import Redis from 'ioredis';

import {
  createRedisBloomDeduplicator,
  createRedisConcurrencyLimiter,
  createRedisLimiter,
  createRedisMultiLimiter,
  createRedisSetDeduplicator,
  createRedisWindowDeduplicator,
} from '../dist/index.js';

const cfg = JSON.parse(process.argv[2]);
const nodes = cfg.addrs.map((a) => {
  const i = a.lastIndexOf(':');
  return { host: a.slice(0, i), port: Number(a.slice(i + 1)) };
});
const client = cfg.cluster ? new Redis.Cluster(nodes, { scaleReads: 'master' }) : new Redis(nodes[0]);
client.on('error', (e) => console.error(`ioredis: ${e.message}`));

// pool runs jobs with at most width at once.
async function pool(jobs, width) {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < jobs.length) {
      await jobs[next++]();
    }
  }));
}

// shuffle returns a copy of xs in a pseudo-random order (seeded, so runs repeat).
function shuffle(xs, seed) {
  const out = [...xs];
  let x = seed >>> 0 || 1;
  for (let i = out.length - 1; i > 0; i--) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    const j = x % (i + 1);
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

if (cfg.ops) {
  console.log(JSON.stringify(await runOps(cfg)));
  client.disconnect();
  process.exit(0);
}

if (cfg.quota) {
  await runQuota(cfg.quota);
  client.disconnect();
  process.exit(0);
}

// runQuota decides cfg's tasks (limiters with leased quota on one key) window by window, in
// step with Go: on each line "<w>" from stdin it makes each task's attempts at explicit
// times in window w (t0 + w*window + i*step + 1, width at a time) and prints one JSON line:
// each task's admissions in the window and its quotaStats.
async function runQuota(cfg) {
  const ls = {};
  for (const tk of cfg.tasks) {
    ls[tk.id] = await createRedisLimiter(client, tk.spec, { keyPrefix: tk.prefix, timeoutMs: 10000, quota: cfg.options });
  }
  await client.ping();
  console.log('ready');
  for await (const line of createInterface({ input: process.stdin })) {
    const w = Number(line);
    const out = {};
    await Promise.all(cfg.tasks.map(async (tk) => {
      let i = 0;
      let admitted = 0;
      await Promise.all(Array.from({ length: cfg.width }, async () => {
        while (i < cfg.attempts) {
          const now = cfg.t0 + w * tk.windowUs + (i++) * cfg.stepUs + 1;
          if ((await ls[tk.id].allow(cfg.key, { now })).allowed) admitted++;
        }
      }));
      out[tk.id] = { admitted, stats: ls[tk.id].quotaStats };
    }));
    console.log(JSON.stringify(out));
  }
}

// runOps builds cfg.limiters and runs cfg.ops in order: acquire (times leases of n at now),
// release and extend (each of leases at now), allow (times requests at now, counting the
// admitted), decide (a request per [now, n] of seq, in order); each op's result is the
// leases, the booleans, the leases or { lost: true }, the count, or the decisions.
async function runOps(cfg) {
  const ls = {};
  for (const [id, o] of Object.entries(cfg.limiters)) {
    const opts = { keyPrefix: o.prefix, timeoutMs: 10000 };
    if (o.concurrency) ls[id] = await createRedisConcurrencyLimiter(client, o.concurrency, opts);
    else if (o.multi) ls[id] = await createRedisMultiLimiter(client, o.multi, { ...opts, previous: o.previous, carry: o.carry });
    else ls[id] = await createRedisLimiter(client, o.spec, { ...opts, previous: o.previous, carry: o.carry, quota: o.quota });
  }
  const out = [];
  for (const op of cfg.ops) {
    const l = ls[op.limiter];
    const at = { now: op.now };
    if (op.op === 'acquire') {
      const got = [];
      for (let i = 0; i < op.times; i++) got.push(await l.acquire(op.key, { ...at, n: op.n ?? 1 }));
      out.push(got);
    } else if (op.op === 'release') {
      const got = [];
      for (const lease of op.leases) got.push(await l.release(lease, at));
      out.push(got);
    } else if (op.op === 'extend') {
      const got = [];
      for (const lease of op.leases) {
        try {
          got.push(await l.extend(lease, at));
        } catch (e) {
          if (e.code !== 'LEASE_LOST') throw e;
          got.push({ lost: true });
        }
      }
      out.push(got);
    } else if (op.op === 'decide') {
      const got = [];
      for (const [now, n] of op.seq) got.push(await l.allow(op.key, { now, n }));
      out.push(got);
    } else if (op.op === 'allow') {
      let n = 0;
      for (let i = 0; i < op.times; i++) if ((await l.allow(op.key, at)).allowed) n++;
      out.push(n);
    } else {
      throw new Error(`unknown op ${op.op}`);
    }
  }
  return out;
}

const prepared = [];
for (const task of cfg.tasks) {
  if (task.spec || task.multi) {
    const o = { keyPrefix: task.prefix, timeoutMs: 10000 };
    const l = task.multi ? await createRedisMultiLimiter(client, task.multi, o) : await createRedisLimiter(client, task.spec, o);
    prepared.push({ task, l });
  } else {
    let d;
    const o = { keyPrefix: task.prefix, timeoutMs: 10000 };
    if (task.strategy === 'set') d = await createRedisSetDeduplicator(client, task.name, o);
    if (task.strategy === 'windowed') d = await createRedisWindowDeduplicator(client, task.name, task.windowMs, o);
    if (task.strategy === 'bloom') d = await createRedisBloomDeduplicator(client, task.name, task.bloom, o);
    prepared.push({ task, d });
  }
}
await client.ping(); // a cluster client queues it until the slots are known
console.log('ready');
await new Promise((resolve) => createInterface({ input: process.stdin }).once('line', resolve));

const results = {};
await Promise.all(prepared.map(async ({ task, l, d }) => {
  if (l) {
    let admitted = 0;
    let denied = 0;
    let used = 0;
    const key = task.keyHex ? Buffer.from(task.keyHex, 'hex') : task.key;
    const at = task.now ? { now: task.now } : {};
    await pool(Array.from({ length: task.attempts }, (_, i) => async () => {
      if (task.reserve) {
        // A reservation of 3 settled at (i+1) % 4, as the Go side settles its attempts.
        const res = await l.reserve(key, { ...at, n: 3 });
        if (!res.decision.allowed) {
          denied++;
          return;
        }
        await res.settle((i + 1) % 4);
        admitted++;
        used += (i + 1) % 4;
        return;
      }
      const dec = await l.allow(key, at);
      if (dec.allowed) admitted++; else denied++;
    }), 8);
    results[task.id] = { admitted, denied, used };
  } else {
    const first = [];
    await pool(shuffle(task.elements, task.seed).map((e) => async () => {
      if (!(await d.checkAndMark(e))) first.push(e);
    }), 8);
    results[task.id] = { first };
  }
}));
console.log(JSON.stringify(results));
client.disconnect();
