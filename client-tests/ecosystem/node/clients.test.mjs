// Real Node client libraries, unmodified, on coordis-server and on
// redis-server 7.0.15 with the same assertions: ioredis (the ready check,
// defineCommand with its EVALSHA-then-EVAL fallback, pipelines and MULTI,
// pub/sub) and bullmq (Queue, Worker, QueueEvents: jobs complete, a delayed
// job runs when due, a failing job is retried).
import { test, after } from "node:test";
import assert from "node:assert/strict";
import Redis from "ioredis";
import { Queue, QueueEvents, Worker } from "bullmq";
// The coordis npm package's helper (run.sh links it from node/coordis; the
// server is $COORDIS_SERVER_BIN). run.sh runs this file once on coordis and
// once with COORDIS_REDIS_URL set to a redis-server it started.
import { startCoordis, realRedisUrl } from "coordis";

const real = realRedisUrl();
const backend = real ? "redis" : "coordis";
const server = real ? undefined : await startCoordis();
after(() => server?.stop());
const url = real ?? server.url;
const port = Number(new URL(url).port);

const connect = () => new Redis(url, { maxRetriesPerRequest: 1 });

test(`[${backend}] ioredis ready check, defineCommand with EVALSHA fallback, pipelines`, async () => {
  const r = connect();
  await new Promise((ok, fail) => {
    r.once("ready", ok);
    r.once("error", fail);
  });
  await r.flushall();
  r.defineCommand("unlock", {
    numberOfKeys: 1,
    lua: "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0",
  });
  await r.set("lock:job", "pod-1", "PX", 30000, "NX");
  assert.equal(await r.unlock("lock:job", "pod-2"), 0);
  await r.script("FLUSH");
  assert.equal(await r.unlock("lock:job", "pod-1"), 1, "EVALSHA fell back to EVAL after SCRIPT FLUSH");
  const results = await r.pipeline().set("a", 1).incr("a").hset("h", "f", "v").hgetall("h").exec();
  assert.deepEqual(results, [[null, "OK"], [null, 2], [null, 1], [null, { f: "v" }]]);
  const multi = await r.multi().lpush("q", "x", "y").rpop("q").exec();
  assert.deepEqual(multi, [[null, 2], [null, "x"]]);
  r.disconnect();
});

test(`[${backend}] ioredis pub/sub`, async () => {
  const sub = connect();
  const pub = connect();
  await sub.subscribe("events");
  const got = new Promise((ok) => sub.on("message", (channel, message) => ok([channel, message])));
  await pub.publish("events", "done");
  assert.deepEqual(await got, ["events", "done"]);
  sub.disconnect();
  pub.disconnect();
});

test(`[${backend}] bullmq: jobs complete, a delayed job runs when due, QueueEvents sees completed, a failure is retried`, async () => {
  const connection = { host: "127.0.0.1", port, maxRetriesPerRequest: null };
  const name = `jobs-${backend}`;
  const queue = new Queue(name, { connection });
  const events = new QueueEvents(name, { connection });
  let worker;
  try {
    await events.waitUntilReady();
    const attempts = new Map();
    const completed = new Map();
    const allDone = new Promise((ok, fail) => {
      worker = new Worker(
        name,
        async (job) => {
          attempts.set(job.name, (attempts.get(job.name) ?? 0) + 1);
          if (job.name === "flaky" && job.attemptsMade === 0) {
            throw new Error("first attempt fails");
          }
          return job.data.a + job.data.b;
        },
        { connection },
      );
      worker.on("completed", (job, result) => {
        completed.set(job.name, { result, at: Date.now() });
        if (completed.size === 4) ok();
      });
      worker.on("error", fail);
      setTimeout(() => fail(new Error(`only ${[...completed.keys()]} completed in 20 s`)), 20_000).unref();
    });
    const seenByEvents = new Promise((ok) => {
      const ids = new Set();
      events.on("completed", ({ jobId }) => {
        ids.add(jobId);
        if (ids.size === 4) ok(ids);
      });
    });
    const added = Date.now();
    const jobs = [
      await queue.add("sum", { a: 2, b: 3 }),
      await queue.add("sum2", { a: 10, b: 20 }),
      await queue.add("later", { a: 1, b: 1 }, { delay: 700 }),
      await queue.add("flaky", { a: 4, b: 4 }, { attempts: 2, backoff: { type: "fixed", delay: 50 } }),
    ];
    await allDone;
    assert.equal(completed.get("sum").result, 5);
    assert.equal(completed.get("sum2").result, 30);
    assert.equal(completed.get("later").result, 2);
    assert.ok(completed.get("later").at - added >= 650, "the delayed job ran when due, not before");
    assert.equal(completed.get("flaky").result, 8);
    assert.equal(attempts.get("flaky"), 2, "the failing job was retried once");
    assert.deepEqual([...(await seenByEvents)].sort(), jobs.map((j) => j.id).sort());
    assert.equal(await queue.getCompletedCount(), 4);
  } finally {
    await worker?.close(true).catch(() => {});
    await events.close().catch(() => {});
    await queue.close().catch(() => {});
  }
});
