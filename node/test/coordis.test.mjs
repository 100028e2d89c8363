// The coordis npm package's own tests, run from a fresh install of its npm
// pack tarballs (node/run.sh): the helper with ioredis and node-redis on
// coordis, and, with COORDIS_REDIS_URL set (run.sh starts a redis-server),
// the same client tests on real Redis with the coordis-only ones skipped.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import Redis from "ioredis";
import { createClient } from "redis";
import * as coordis from "coordis";
import { startCoordis, realRedisUrl, binaryPath, ReplyError } from "coordis";

const real = realRedisUrl();
const onlyCoordis = real ? { skip: `needs coordis's test controls; this run is against the Redis at ${real}` } : {};
const packageCheck = real ? { skip: "checks the installed package, not the backend: the coordis run did" } : {};
const server = real ? undefined : await startCoordis();
after(() => server?.stop());
const url = real ?? server.url;
const expected = process.env.COORDIS_EXPECT_BACKEND;
console.log(`# backend: ${real ? `real Redis at ${real}` : `coordis-server at ${url}`}`);

const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));

async function ioredis() {
  const r = new Redis(url, { maxRetriesPerRequest: 1 });
  await r.flushdb();
  return r;
}

test("the backend is the one the run asked for", async () => {
  if (expected) assert.equal(real ? "redis" : "coordis", expected);
  const r = await ioredis();
  assert.equal((await r.info("server")).includes("coordis_version:"), !real);
  r.disconnect();
});

test("ioredis: a lock with a Lua release, pipelines", async () => {
  const r = await ioredis();
  r.defineCommand("unlock", {
    numberOfKeys: 1,
    lua: "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0",
  });
  assert.equal(await r.set("lock:job", "pod-1", "PX", 30000, "NX"), "OK");
  assert.equal(await r.set("lock:job", "pod-2", "PX", 30000, "NX"), null);
  assert.equal(await r.unlock("lock:job", "pod-2"), 0);
  assert.equal(await r.unlock("lock:job", "pod-1"), 1);
  assert.deepEqual(await r.pipeline().incr("n").incr("n").exec(), [[null, 1], [null, 2]]);
  r.disconnect();
});

test("node-redis: a lock, MULTI, pub/sub", async () => {
  const client = createClient({ url });
  const sub = client.duplicate();
  await Promise.all([client.connect(), sub.connect()]);
  try {
    await client.flushDb();
    assert.equal(await client.set("lock:job", "me", { NX: true, PX: 30000 }), "OK");
    assert.equal(await client.set("lock:job", "you", { NX: true, PX: 30000 }), null);
    assert.deepEqual(await client.multi().incr("n").get("n").exec(), [1, "1"]);
    const got = new Promise((ok) => sub.subscribe("events", ok));
    await sleep(50);
    await client.publish("events", "done");
    assert.equal(await got, "done");
  } finally {
    await Promise.all([client.quit(), sub.quit()]);
  }
});

test("the binary comes from the platform package, and the coordis-server shim runs it", packageCheck, () => {
  if (process.env.COORDIS_PACKAGE_TEST === "1") {
    assert.equal(process.env.COORDIS_SERVER_BIN, undefined);
    const require = createRequire(import.meta.url);
    const platformDir = path.dirname(require.resolve(`${coordis.platformPackage()}/package.json`));
    assert.equal(binaryPath(), path.join(platformDir, "bin", "coordis-server"));
    assert.match(platformDir, /node_modules\/@coordis\/linux-x64$/);
  }
  const shim = path.join(process.cwd(), "node_modules", ".bin", "coordis-server");
  const out = execFileSync(shim, ["--version"], { encoding: "utf8" });
  assert.match(out, /^Redis server v=7\.0\.15/);
});

test("index.d.ts declares what index.js exports", packageCheck, () => {
  const require = createRequire(import.meta.url);
  const dts = readFileSync(path.join(path.dirname(require.resolve("coordis")), "index.d.ts"), "utf8");
  const declared = [...dts.matchAll(/^export (?:function|class|const) (\w+)/gm)].map((m) => m[1]).sort();
  assert.deepEqual(declared, Object.keys(require("coordis")).sort());
});

test("clock: freeze, advance, jump, set, resume, reset (ioredis)", onlyCoordis, async () => {
  const r = await ioredis();
  const frozenAt = await server.clock.freeze();
  assert.deepEqual(await server.clock.get(), { nowMs: frozenAt, frozen: true, offsetMs: 0 });
  await r.set("lock", "me", "PX", 30000);
  assert.equal(await server.clock.advance(30_000), frozenAt + 30_000);
  assert.equal(await r.get("lock"), "me", "alive at its deadline, as in Redis");
  await server.clock.advance(1);
  assert.equal(await r.get("lock"), null, "expired 1 ms after it");
  assert.equal(await server.clock.jump(-5001), frozenAt + 25_000);
  assert.equal(await server.clock.set(2_000_000_000_000), 2_000_000_000_000);
  assert.equal((await r.time())[0], "2000000000");
  await server.clock.resume();
  const state = await server.clock.get();
  assert.ok(!state.frozen && state.offsetMs > 1e11, JSON.stringify(state));
  assert.ok(Math.abs((await server.clock.reset()) - Date.now()) < 5000);
  r.disconnect();
});

test("faults: add, list with counts, delete, clear; one action exactly (node-redis)", onlyCoordis, async () => {
  const client = createClient({ url });
  await client.connect();
  try {
    const id = await server.faults.add({ command: "get", key: "job:*", times: 1, error: "LOADING Redis is loading the dataset in memory" });
    await server.faults.add({ command: "set", probability: 0.5, delay: 5, jitter: 2 });
    await assert.rejects(client.get("job:1"), /^Error: LOADING/);
    assert.equal(await client.get("job:1"), null, "only once");
    const [first, second] = await server.faults.list();
    assert.deepEqual(
      [first.id, first.command, first.key, first.timesLeft, first.matched, first.fired, first.action],
      [id, "get", "job:*", 0, 2, 1, "error LOADING Redis is loading the dataset in memory"],
    );
    assert.deepEqual([second.probability, second.action], [0.5, "delay 5 jitter 2"]);
    assert.equal(await server.faults.delete(id), true);
    assert.equal(await server.faults.delete(id), false);
    await server.faults.clear();
    assert.deepEqual(await server.faults.list(), []);
    await assert.rejects(server.faults.add({ command: "get" }), TypeError);
    await assert.rejects(server.faults.add({ drop: true, hang: true }), TypeError);
    await assert.rejects(server.faults.add({ probability: 2, drop: true }), ReplyError);
  } finally {
    await client.quit();
  }
});

test("a lost reply: the SET ran, the client saw its connection close (ioredis)", onlyCoordis, async () => {
  const r = await ioredis();
  await server.faults.add({ command: "set", key: "lock:*", times: 1, loseReply: true });
  const victim = new Redis(url, { maxRetriesPerRequest: 0, retryStrategy: () => null });
  await assert.rejects(victim.set("lock:job", "me", "NX"));
  victim.disconnect();
  assert.equal(await r.get("lock:job"), "me");
  await server.faults.clear();
  r.disconnect();
});

test("pause, down, restart, seed", onlyCoordis, async () => {
  const r = await ioredis();
  await server.pause(300);
  let started = Date.now();
  assert.equal(await r.ping(), "PONG");
  assert.ok(Date.now() - started >= 200, "the pause held the PING");

  await r.set("kept", "1");
  await server.down(300);
  const probe = new Redis(url, { maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
  await assert.rejects(probe.connect().then(() => probe.ping()));
  probe.disconnect();
  started = Date.now();
  for (;;) {
    const fresh = new Redis(url, { maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
    try {
      await fresh.connect();
      assert.equal(await fresh.get("kept"), "1", "back with its data");
      fresh.disconnect();
      break;
    } catch (e) {
      fresh.disconnect();
      assert.ok(Date.now() - started < 5000, String(e));
      await sleep(50);
    }
  }

  r.disconnect();
  const s = await ioredis();
  await s.set("k", "v");
  await server.restart();
  assert.equal(await server.command("GET", "k"), "v");
  await server.restart(true);
  assert.equal(await server.command("GET", "k"), null);
  s.disconnect();

  await server.command("SADD", "s", ...Array.from({ length: 100 }, (_, i) => i));
  const draw = async () => {
    await server.seed(42);
    const picks = [];
    for (let i = 0; i < 10; i++) picks.push(await server.command("SRANDMEMBER", "s"));
    return picks;
  };
  assert.deepEqual(await draw(), await draw());
});

test("options: password, databases, directives; test commands off; a bad start says why", onlyCoordis, async () => {
  const secured = await startCoordis({ password: "s3 cret", databases: 2, directives: { "notify-keyspace-events": "KEA" } });
  try {
    assert.match(secured.url, /^redis:\/\/:s3%20cret@127\.0\.0\.1:\d+\/0$/);
    const anonymous = new Redis(secured.port, { maxRetriesPerRequest: 0, lazyConnect: true });
    await anonymous.connect().catch(() => {});
    await assert.rejects(anonymous.get("x"), /NOAUTH/);
    anonymous.disconnect();
    const r = new Redis(secured.url);
    assert.deepEqual(await r.config("GET", "databases"), ["databases", "2"]);
    await assert.rejects(r.select(2), /DB index is out of range/);
    r.disconnect();
    assert.ok((await secured.clock.freeze()) > 0, "the controls authenticate too");
  } finally {
    await secured.stop();
  }
  assert.throws(() => process.kill(secured.pid, 0), /ESRCH/, "stop() ended the process");

  const locked = await startCoordis({ testCommands: "no" });
  try {
    await assert.rejects(locked.clock.freeze(), /enable-test-commands/);
  } finally {
    await locked.stop();
  }
  await assert.rejects(startCoordis({ directives: { "no-such-directive": 1 } }), /did not start[\s\S]*no-such-directive/);
});
