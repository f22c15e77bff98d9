// peer.mjs: the BullMQ side of the interleaved stream benchmarks (../bullmq_test.go). It reads
// one JSON command per line on stdin and answers one JSON line on stdout when done:
//
//   {"op": "add" | "add-delayed" | "add-unique" | "add-priority", "queue": "<name>", "start": i, "n": n, "dup": bool}
//     -> {"ok": true, "added": <jobs created>}  (n adds, 16 in flight at a time, as the Go side)
//   {"op": "count", "queue": "<name>"} -> {"ok": true, "count": <jobs in the queue, any state>}
//
// The Redis address is argv[2] ("host:port"). Errors answer {"ok": false, "error": "..."}.
import { Queue } from 'bullmq';
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
  await Promise.all(Array.from({ length: 16 }, worker));
  return { ok: true, added };
}

async function count(cmd) {
  const c = await queue(cmd.queue).getJobCountByTypes('waiting', 'delayed', 'active', 'completed', 'failed', 'prioritized', 'paused');
  return { ok: true, count: c };
}

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  let out;
  try {
    const cmd = JSON.parse(line);
    out = cmd.op === 'count' ? await count(cmd) : await add(cmd);
  } catch (e) {
    out = { ok: false, error: String(e && e.message ? e.message : e) };
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}
await Promise.all([...queues.values()].map((q) => q.close()));
connection.disconnect();
