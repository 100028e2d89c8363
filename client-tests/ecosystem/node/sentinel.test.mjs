// ioredis with `sentinels` in the matrix: a lock and a queue (bullmq) case
// run through a Sentinel failover the test drives, the same assertions on
// both legs. On coordis the group is `coordis-server --replicas-local 1
// --sentinels-local 1 --port 0` (primary, replica and Sentinel on one test
// clock, named in its ready line) and the failover's timers run on that
// clock, which the test moves a second at a time (`COORDIS.CLOCK ADVANCE`
// on the replica); on the redis-server leg (COORDIS_REDIS_URL set) it is a
// redis-server primary and replica and a `redis-server --sentinel`
// (down-after-milliseconds 1000) on the wall clock.
import { test, afterEach } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import Redis from "ioredis";
import { freePort, sleep } from "./ports.mjs";
import { Queue, QueueEvents, Worker } from "bullmq";

const real = Boolean(process.env.COORDIS_REDIS_URL);
const backend = real ? "redis" : "coordis";
// Longest real-time wait for a group to start or a failover to end, ms.
const WAIT_MS = 60000;
// How far one step moves coordis's clock while a failover runs (Sentinel
// polls INFO every second of it during a failover).
const STEP_MS = 1000;

async function until(what, done, step = () => sleep(50)) {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const value = await done();
    if (value) return value;
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await step();
  }
}

/// One command on a fresh connection to `port`, or null if it fails.
async function once(port, ...args) {
  const c = new Redis({ port, host: "127.0.0.1", lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
  c.on("error", () => {});
  try {
    await c.connect();
    return await c.call(...args);
  } catch {
    return null;
  } finally {
    c.disconnect();
  }
}

async function coordisGroup() {
  const bin = process.env.COORDIS_SERVER_BIN ?? "coordis-server";
  const child = spawn(
    bin,
    ["--replicas-local", "1", "--sentinels-local", "1", "--port", "0", "--enable-test-commands", "yes"],
    { stdio: ["ignore", "pipe", "ignore"] },
  );
  const line = await new Promise((ok, fail) => {
    createInterface({ input: child.stdout }).once("line", ok);
    child.once("exit", (code) => fail(new Error(`coordis-server exited with ${code}`)));
  });
  const ready = JSON.parse(line);
  return {
    name: ready.master_name,
    primary: ready.primary.port,
    replica: ready.replicas[0].port,
    sentinel: ready.sentinels[0].port,
    // The primary dies now: every connection dropped, new ones closed.
    killPrimary: () => once(ready.primary.port, "COORDIS.REPLICATION", "DIE"),
    step: async () => {
      await once(ready.replicas[0].port, "COORDIS.CLOCK", "ADVANCE", STEP_MS);
      await sleep(50);
    },
    stop: () => new Promise((ok) => {
      if (child.exitCode !== null) return ok();
      child.once("exit", ok);
      child.kill();
    }),
  };
}

async function redisGroup() {
  const work = mkdtempSync(join(tmpdir(), "redis-sentinel-"));
  const name = "mymaster";
  const [primary, replica, sentinel] = [await freePort(), await freePort(), await freePort()];
  const children = {};
  const start = async (role, port, args) => {
    const dir = join(work, role);
    mkdirSync(dir);
    children[role] = spawn(
      "redis-server",
      [...args, "--port", `${port}`, "--bind", "127.0.0.1", "--dir", dir, "--logfile", join(dir, "log")],
      { stdio: "ignore" },
    );
    await until(`redis-server (${role}) on ${port}`, async () => (await once(port, "PING")) === "PONG");
  };
  const group = {
    name,
    primary,
    replica,
    sentinel,
    killPrimary: async () => {
      const p = children.primary;
      await new Promise((ok) => {
        p.once("exit", ok);
        p.kill("SIGKILL");
      });
    },
    step: () => sleep(100),
    stop: async () => {
      await Promise.all(Object.values(children).map((c) => (c.exitCode === null && c.signalCode === null
        ? new Promise((ok) => {
          c.once("exit", ok);
          c.kill();
        })
        : null)));
      rmSync(work, { recursive: true, force: true });
    },
  };
  try {
    await start("primary", primary, ["--save", "", "--appendonly", "no"]);
    await start("replica", replica, ["--save", "", "--appendonly", "no", "--replicaof", "127.0.0.1", `${primary}`,
      "--repl-diskless-sync-delay", "0"]);
    await until("the replica's link", async () => ((await once(replica, "INFO", "replication")) ?? "").includes(
      "master_link_status:up"));
    const conf = join(work, "sentinel.conf");
    writeFileSync(conf, `sentinel monitor ${name} 127.0.0.1 ${primary} 1\n`
      + `sentinel down-after-milliseconds ${name} 1000\nsentinel failover-timeout ${name} 10000\n`);
    await start("sentinel", sentinel, [conf, "--sentinel"]);
    await until("the Sentinel to see the replica", async () => {
      const replicas = (await once(sentinel, "SENTINEL", "REPLICAS", name)) ?? [];
      return replicas.some((fields) => fields.join(" ").includes("master-link-status ok"));
    });
  } catch (e) {
    await group.stop();
    throw e;
  }
  return group;
}

const masterPort = async (group) => {
  const addr = await once(group.sentinel, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", group.name);
  return addr ? Number(addr[1]) : null;
};

// Moves the failover on (coordis: the clock; Redis: real time) until the
// Sentinel names the replica as the primary.
const failedOver = (group) =>
  until("the Sentinel to fail over", async () => (await masterPort(group)) === group.replica, group.step);

const tcpPort = async (r) => Number(/tcp_port:(\d+)/.exec(await r.info("server"))[1]);

// `call()` once the client reaches a primary: writes on the failed-over
// connection error (closed, READONLY) until ioredis has asked the Sentinel again.
async function retried(call) {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    try {
      return await call();
    } catch (e) {
      assert.ok(Date.now() < deadline, `the client never reached the new primary: ${e}`);
      await sleep(100);
    }
  }
}

let group;
const clients = [];
afterEach(async () => {
  clients.splice(0).forEach((c) => c.disconnect());
  await group?.stop();
  group = undefined;
});

const viaSentinel = (g, extra = {}) => {
  const options = { sentinels: [{ host: "127.0.0.1", port: g.sentinel }], name: g.name, ...extra };
  const c = new Redis({ ...options, maxRetriesPerRequest: null });
  // Refused connections to the dead primary are expected until the switch.
  c.on("error", () => {});
  clients.push(c);
  return { client: c, options };
};

test(`[${backend}] ioredis sentinels: a lock survives the primary dying`, async () => {
  group = real ? await redisGroup() : await coordisGroup();
  const { client: r } = viaSentinel(group);
  r.defineCommand("unlock", {
    numberOfKeys: 1,
    lua: "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0",
  });
  assert.equal(await tcpPort(r), group.primary);
  assert.equal(await r.set("lock:job", "pod-1", "PX", 300000, "NX"), "OK");
  // The mitigation: the lock counts once the replica acknowledged it.
  assert.equal(await r.call("WAIT", 1, 5000), 1);
  assert.equal(await once(group.replica, "GET", "lock:job"), "pod-1");
  await group.killPrimary();
  await failedOver(group);
  // The same client, through the Sentinel, on the promoted replica.
  assert.equal(await retried(() => r.set("lock:job", "pod-2", "PX", 300000, "NX")), null);
  assert.equal(await tcpPort(r), group.replica);
  assert.equal(await r.get("lock:job"), "pod-1");
  assert.equal(await r.unlock("lock:job", "pod-2"), 0);
  assert.equal(await r.unlock("lock:job", "pod-1"), 1);
  assert.equal(await r.set("lock:job", "pod-2", "PX", 300000, "NX"), "OK");
});

test(`[${backend}] ioredis sentinels: a bullmq queue through SENTINEL FAILOVER`, async () => {
  group = real ? await redisGroup() : await coordisGroup();
  const { client: admin } = viaSentinel(group);
  const connection = viaSentinel(group).client;
  const name = `failover-${backend}`;
  const queue = new Queue(name, { connection });
  const before = [await queue.add("double", { n: 1 }), await queue.add("double", { n: 2 })];
  assert.equal(await admin.call("WAIT", 1, 5000), 1);
  // The operator's failover: the old primary lives on as a replica.
  assert.equal(await once(group.sentinel, "SENTINEL", "FAILOVER", group.name), "OK");
  await failedOver(group);
  // Until the Sentinel turns the old primary into a replica (it waits to
  // see it still claim the role), it takes writes, on Redis too: clients
  // connected to it write there. Its CLIENT KILL then sends them on.
  await until("the old primary to become a replica", async () =>
    ((await once(group.primary, "ROLE")) ?? [])[0] === "slave", group.step);
  await retried(() => admin.set("probe", "after"));
  assert.equal(await tcpPort(admin), group.replica);
  const after = await retried(() => queue.add("double", { n: 50 }));
  const events = new QueueEvents(name, { connection: viaSentinel(group).client });
  await events.waitUntilReady();
  const done = new Map();
  const all = new Promise((ok) =>
    events.on("completed", ({ jobId, returnvalue }) => {
      done.set(jobId, returnvalue);
      if (done.size === 3) ok();
    }),
  );
  const worker = new Worker(name, async (job) => job.data.n * 2, { connection: viaSentinel(group).client });
  await all;
  assert.deepEqual([...before, after].map((j) => String(done.get(j.id))), ["2", "4", "100"]);
  await worker.close();
  await events.close();
  await queue.close();
});
