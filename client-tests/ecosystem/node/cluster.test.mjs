// ioredis's Cluster and bullmq with a `{queue}` prefix against a cluster:
// on coordis `coordis-server --cluster-local 3 --port 0` (its ready line
// names the nodes), on the redis-server leg (COORDIS_REDIS_URL set) three
// redis-server processes joined by `redis-cli --cluster create`. Lock,
// queue and pub/sub cases, the same assertions on both.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import Redis from "ioredis";
import { freePort, sleep } from "./ports.mjs";
import { Queue, QueueEvents, Worker } from "bullmq";

const real = Boolean(process.env.COORDIS_REDIS_URL);
const backend = real ? "redis" : "coordis";
// Longest wait for a cluster to form, ms.
const FORM_TIMEOUT_MS = 30000;
// Client ports below this leave room for the bus port (+10000).
const MAX_CLIENT_PORT = 55000;

const portFree = (port) =>
  new Promise((ok) => {
    const s = createServer();
    s.once("error", () => ok(false));
    s.listen(port, "127.0.0.1", () => s.close(() => ok(true)));
  });

async function clusterPorts(n) {
  const ports = [];
  while (ports.length < n) {
    const p = await freePort();
    if (p < MAX_CLIENT_PORT && !ports.includes(p) && (await portFree(p + 10000))) ports.push(p);
  }
  return ports;
}

async function coordisCluster() {
  const bin = process.env.COORDIS_SERVER_BIN ?? "coordis-server";
  const child = spawn(bin, ["--cluster-local", "3", "--port", "0"], { stdio: ["ignore", "pipe", "ignore"] });
  const line = await new Promise((ok, fail) => {
    createInterface({ input: child.stdout }).once("line", ok);
    child.once("exit", (code) => fail(new Error(`coordis-server exited with ${code}`)));
  });
  const ready = JSON.parse(line);
  assert.equal(ready.cluster_state, "ok");
  return { nodes: ready.nodes.map((n) => ({ host: "127.0.0.1", port: n.port })), stop: () => child.kill() };
}

async function redisCluster() {
  const work = mkdtempSync(join(tmpdir(), "redis-cluster-"));
  const ports = await clusterPorts(3);
  const children = ports.map((p) =>
    spawn("redis-server", ["--port", `${p}`, "--cluster-enabled", "yes", "--dir", work, "--cluster-config-file",
      `nodes-${p}.conf`, "--save", "", "--appendonly", "no", "--logfile", join(work, `${p}.log`)], { stdio: "ignore" }),
  );
  const cli = (...args) => spawnSync("redis-cli", args, { encoding: "utf8" }).stdout ?? "";
  const deadline = Date.now() + FORM_TIMEOUT_MS;
  for (const p of ports) {
    while (cli("-p", `${p}`, "ping").trim() !== "PONG") {
      assert.ok(Date.now() < deadline, `redis-server on ${p} did not start`);
      await sleep(50);
    }
  }
  const created = spawnSync("redis-cli", ["--cluster", "create", ...ports.map((p) => `127.0.0.1:${p}`), "--cluster-yes"]);
  assert.equal(created.status, 0, `redis-cli --cluster create: ${created.stdout}`);
  for (const p of ports) {
    while (!cli("-p", `${p}`, "cluster", "info").includes("cluster_state:ok")) {
      assert.ok(Date.now() < deadline, `redis-server on ${p} never reached cluster_state:ok`);
      await sleep(50);
    }
  }
  return {
    nodes: ports.map((port) => ({ host: "127.0.0.1", port })),
    // The directory goes once every server has exited: a server stopping
    // still writes its nodes.conf into it.
    stop: async () => {
      await Promise.all(children.map((c) => (c.exitCode === null && c.signalCode === null ? new Promise((ok) => {
        c.once("exit", ok);
        c.kill();
      }) : null)));
      rmSync(work, { recursive: true, force: true });
    },
  };
}

const cluster = real ? await redisCluster() : await coordisCluster();
// Every client the cases open: bullmq does not close a connection it was
// handed, and a Cluster client left open once the nodes stop keeps
// refreshing its slots cache, holding the test process open.
const clients = [];
after(async () => {
  clients.forEach((c) => c.disconnect());
  await cluster.stop();
});
const connect = () => {
  const c = new Redis.Cluster(cluster.nodes, { redisOptions: { maxRetriesPerRequest: null } });
  clients.push(c);
  return c;
};

test(`[${backend}] ioredis Cluster: a lock on keys of every shard, released by its token`, async () => {
  const r = connect();
  r.defineCommand("unlock", {
    numberOfKeys: 1,
    lua: "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0",
  });
  for (const key of ["lock:a", "lock:b", "lock:c", "lock:d"]) {
    assert.equal(await r.set(key, "pod-1", "PX", 30000, "NX"), "OK");
    assert.equal(await r.set(key, "pod-2", "PX", 30000, "NX"), null);
    assert.equal(await r.unlock(key, "pod-2"), 0);
    assert.equal(await r.unlock(key, "pod-1"), 1);
  }
  const slots = await r.cluster("SLOTS");
  assert.equal(slots.length, 3);
  r.disconnect();
});

test(`[${backend}] ioredis Cluster pub/sub across nodes`, async () => {
  const sub = connect();
  const pub = connect();
  await sub.subscribe("events");
  const got = new Promise((ok) => sub.on("message", (channel, message) => ok([channel, message])));
  await pub.publish("events", "done");
  assert.deepEqual(await got, ["events", "done"]);
  sub.disconnect();
  pub.disconnect();
});

test(`[${backend}] bullmq on the cluster with a {queue} prefix: jobs complete, a failure is retried`, async () => {
  const connection = connect();
  const prefix = "{queue}";
  const name = `jobs-${backend}`;
  const queue = new Queue(name, { connection, prefix });
  const events = new QueueEvents(name, { connection: connect(), prefix });
  await events.waitUntilReady();
  let attempts = 0;
  const worker = new Worker(
    name,
    async (job) => {
      if (job.name === "flaky" && ++attempts < 2) throw new Error("first try fails");
      return job.data.n * 2;
    },
    { connection: connect(), prefix },
  );
  const done = new Map();
  const all = new Promise((ok) =>
    events.on("completed", ({ jobId, returnvalue }) => {
      done.set(jobId, returnvalue);
      if (done.size === 3) ok();
    }),
  );
  const jobs = [
    await queue.add("double", { n: 1 }),
    await queue.add("double", { n: 2 }),
    await queue.add("flaky", { n: 5 }, { attempts: 3 }),
  ];
  await all;
  assert.deepEqual(jobs.map((j) => String(done.get(j.id))), ["2", "4", "10"]);
  assert.equal(attempts, 2);
  await worker.close();
  await events.close();
  await queue.obliterate({ force: true });
  await queue.close();
  connection.disconnect();
});
