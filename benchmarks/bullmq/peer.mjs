// peer.mjs: the BullMQ side of the interleaved stream benchmarks (../bullmq_test.go). It reads
// one JSON command per line on stdin and answers one JSON line on stdout when done:
//
//   {"op": "add" | "add-delayed" | "add-unique" | "add-priority", "queue": "<name>", "start": i, "n": n, "dup": bool, "inflight": f}
//     -> {"ok": true, "added": <jobs created>}  (n adds, f in flight at a time: 16 when f is
//        left out, as the Go side's 16 goroutines)
//   {"op": "add-bulk", "queue": "<name>", "start": i, "n": n, "bulk": m}
//     -> {"ok": true, "added": <jobs created>}  (n jobs as Queue.addBulk calls of m, one at a time)
//   {"op": "count", "queue": "<name>"} -> {"ok": true, "count": <jobs in the queue, any state>}
//   {"op": "consume", "queue": "<name>", "n": n, "concurrency": c, "max": m, "duration": ms}
//     -> {"ok": true, "ms": <wall time from the worker's start to its n-th completed job>}
//        (a Worker of c concurrent no-op jobs; with max > 0, its global rate limiter
//        {max, duration}: at most max jobs per duration ms across every worker of the queue)
//
// The Redis address is argv[2] ("host:port"). Errors answer {"ok": false, "error": "..."}.
import { Queue, Worker } from 'bullmq';
import IORedis from 'ioredis';
import readline from 'node:readline';

const [host, port] = process.argv[2].split(':');
const connection = new IORedis({ host, port: Number(port), maxRetriesPerRequest: null });
const queues = new Map();
const queue = (name) => {
  let q = queues.get(name);
  if (!q) {
    q = new Queue(name, { connection });
    queues.set(name, q);
  }
  return q;
};

const payload = { orderId: 1, status: 'CREATED' };

async function addBulk(cmd) {
  const q = queue(cmd.queue);
  let added = 0;
  for (let i = 0; i < cmd.n; i += cmd.bulk) {
    const jobs = [];
    for (let k = i; k < Math.min(cmd.n, i + cmd.bulk); k++) {
      jobs.push({ name: 'bench', data: payload });
    }
    added += (await q.addBulk(jobs)).length;
  }
  return { ok: true, added };
}

async function add(cmd) {
  const q = queue(cmd.queue);
  let next = 0;
  let added = 0;
  const one = async (i) => {
    const k = cmd.start + i;
    let opts = {};
    if (cmd.op === 'add-delayed') {
      opts = { delay: 3600_000 };
    } else if (cmd.op === 'add-priority') {
      // Three levels in turn, as the Go side sends them (BullMQ: 1 is the highest).
      opts = { priority: 3 - (k % 3) };
    } else if (cmd.op === 'add-unique') {
      // Deduplication in throttle mode (a TTL), the mode WithUnique's Throttle matches.
      opts = { deduplication: { id: cmd.dup ? 'job-0' : `job-${k + 1}`, ttl: 3600_000 } };
    }
    const job = await q.add('bench', payload, opts);
    if (job && job.id !== undefined && cmd.op === 'add-unique' && !cmd.dup) {
      added++;
    } else if (cmd.op !== 'add-unique') {
      added++;
    }
  };
  const worker = async () => {
    for (;;) {
      const i = next++;
      if (i >= cmd.n) return;
      await one(i);
    }
  };
  await Promise.all(Array.from({ length: cmd.inflight || 16 }, worker));
  return { ok: true, added };
}

async function count(cmd) {
  const c = await queue(cmd.queue).getJobCountByTypes('waiting', 'delayed', 'active', 'completed', 'failed', 'prioritized', 'paused');
  return { ok: true, count: c };
}

async function consume(cmd) {
  const opts = { connection: new IORedis({ host, port: Number(port), maxRetriesPerRequest: null }), concurrency: cmd.concurrency, autorun: false };
  if (cmd.max > 0) {
    opts.limiter = { max: cmd.max, duration: cmd.duration };
  }
  let done = 0;
  let resolve;
  const all = new Promise((r) => {
    resolve = r;
  });
  const worker = new Worker(cmd.queue, async () => {}, opts);
  worker.on('completed', () => {
    if (++done === cmd.n) resolve();
  });
  const start = performance.now();
  worker.run();
  await all;
  const ms = performance.now() - start;
  await worker.close();
  opts.connection.disconnect();
  return { ok: true, ms };
}

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  let out;
  try {
    const cmd = JSON.parse(line);
    out = cmd.op === 'count' ? await count(cmd) : cmd.op === 'consume' ? await consume(cmd) : cmd.op === 'add-bulk' ? await addBulk(cmd) : await add(cmd);
  } catch (e) {
    out = { ok: false, error: String(e && e.message ? e.message : e) };
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}
await Promise.all([...queues.values()].map((q) => q.close()));
connection.disconnect();
