// Test helpers: a real redis-server on a free loopback port.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';

import Redis from 'ioredis';

/** REDSTREAM_REQUIRE_REDIS=1 (CI) turns a missing redis-server into a failure. */
export const redisRequired = process.env.REDSTREAM_REQUIRE_REDIS === '1';

async function freePort() {
  const s = createServer();
  s.listen(0, '127.0.0.1');
  await once(s, 'listening');
  const { port } = s.address();
  s.close();
  await once(s, 'close');
  return port;
}

/**
 * Starts redis-server (REDSTREAM_REDIS_BIN/redis-server, or the one on PATH) and returns
 * { port, client(), stop() }, or undefined when there is none and it is not required.
 */
export async function startRedis(t) {
  const bin = process.env.REDSTREAM_REDIS_BIN ? `${process.env.REDSTREAM_REDIS_BIN}/redis-server` : 'redis-server';
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    const p = spawn(bin, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    p.stdout.on('data', (d) => (log += d));
    p.stderr.on('data', (d) => (log += d));
    const spawned = await Promise.race([once(p, 'spawn').then(() => true), once(p, 'error').then(() => false)]);
    if (!spawned) {
      const msg = `*** NO REDIS: ${bin} cannot be started; set REDSTREAM_REQUIRE_REDIS=1 to fail instead ***`;
      if (redisRequired) {
        throw new Error(msg);
      }
      t.skip(msg);
      return undefined;
    }
    const clients = [];
    const stop = () => {
      for (const c of clients) c.disconnect();
      try { process.kill(p.pid, 'SIGCONT'); } catch {}
      p.kill('SIGKILL');
    };
    const deadline = Date.now() + 10000;
    let ok = false;
    while (Date.now() < deadline && p.exitCode === null) {
      const c = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      c.on('error', () => {});
      try {
        await c.connect();
        await c.ping();
        ok = true;
        c.disconnect();
        break;
      } catch {
        c.disconnect();
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    if (!ok) {
      stop();
      if (attempt < 4 && /Address already in use/.test(log)) continue;
      throw new Error(`redis-server on port ${port} did not start:\n${log}`);
    }
    t.after(stop);
    return {
      port,
      pid: p.pid,
      client(opts = {}) {
        const c = new Redis({ port, host: '127.0.0.1', ...opts });
        c.on('error', () => {});
        clients.push(c);
        return c;
      },
      stop,
      /** Kills the server only (clients stay, reconnecting). */
      kill() {
        p.kill('SIGKILL');
      },
    };
  }
  throw new Error('no free port for redis-server');
}

/** A deterministic pseudo-random source (xorshift32). */
export function rng(seed) {
  let x = seed >>> 0 || 1;
  return (n) => {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    return x % n;
  };
}
