// ioredis over TLS (`tls: {...}`), run by node/run.sh after coordis.test.mjs:
// the lock recipe with a client certificate; a client without one refused
// under `tls-auth-clients yes` and served under `tls-auth-clients optional`.
// On the coordis run the servers are coordis-servers (startCoordis with the
// tls-* directives); with COORDIS_REDIS_URL set they are redis-servers
// started here with the same directives and certificate files, so the same
// assertions hold for both. The certificates are throw-away ones the
// openssl CLI makes: a CA, a server certificate for 127.0.0.1 and a client
// certificate, both signed by the CA.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import Redis from "ioredis";
import { startCoordis, realRedisUrl } from "coordis";

const HOST = "127.0.0.1";
// How long a server may take to listen, and a client to connect.
const WAIT_MS = 10_000;
// Days the throw-away certificates are valid.
const CERT_DAYS = "2";
// The lock's lease: long enough for the test, never reached.
const LEASE_MS = 30_000;
const required = process.env.COORDIS_REQUIRE_REDIS === "1" || process.env.CI === "true";
const real = realRedisUrl();
const dir = mkdtempSync(path.join(os.tmpdir(), "coordis-node-tls-"));
const file = (name) => path.join(dir, name);
const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));

// Whether `program` runs (`args`: a harmless way to ask it its version).
function has(program, args) {
  try {
    execFileSync(program, args, { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

const missing = !has("openssl", ["version"])
  ? "the openssl CLI is not on PATH (it makes the test certificates)"
  : real && !has("redis-server", ["--version"])
    ? "redis-server is not on PATH"
    : undefined;
if (missing && required) throw new Error(`${missing} (required under COORDIS_REQUIRE_REDIS=1 / CI=true)`);
if (missing) console.log(`*** SKIPPED: ${missing}; the TLS tests did not run ***`);
const skip = missing ? { skip: missing } : {};

function makeCertificates() {
  const openssl = (...args) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
  openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", CERT_DAYS,
    "-subj", "/CN=coordis-test-ca", "-addext", "basicConstraints=critical,CA:TRUE",
    "-addext", "keyUsage=critical,keyCertSign,cRLSign");
  const extensions = {
    server: "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
    client: "extendedKeyUsage=clientAuth\n",
  };
  for (const [who, ext] of Object.entries(extensions)) {
    writeFileSync(file(`${who}.ext`), ext);
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", `${who}.key`, "-out", `${who}.csr`,
      "-subj", `/CN=coordis-test-${who}`);
    openssl("x509", "-req", "-in", `${who}.csr`, "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
      "-out", `${who}.crt`, "-days", CERT_DAYS, "-extfile", `${who}.ext`);
  }
}

const tlsDirectives = (authClients) => ({
  "tls-cert-file": file("server.crt"),
  "tls-key-file": file("server.key"),
  "tls-ca-cert-file": file("ca.crt"),
  "tls-auth-clients": authClients,
});

function freePort() {
  return new Promise((ok, fail) => {
    const s = net.createServer();
    s.once("error", fail);
    s.listen(0, HOST, () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

function accepts(port) {
  return new Promise((ok) => {
    const socket = net.connect({ host: HOST, port }, () => (socket.destroy(), ok(true)));
    socket.once("error", () => ok(false));
  });
}

// A redis-server with a TLS port only (`port 0`), stopped by the returned function.
async function startRedis(authClients) {
  const port = await freePort();
  const data = mkdtempSync(path.join(dir, `redis-${authClients}-`));
  const argv = ["--port", "0", "--tls-port", String(port), "--bind", HOST, "--save", "", "--appendonly", "no",
    "--dir", data, "--logfile", path.join(data, "redis.log")];
  for (const [name, value] of Object.entries(tlsDirectives(authClients))) argv.push(`--${name}`, value);
  const child = spawn("redis-server", argv, { stdio: "ignore" });
  const exited = new Promise((ok) => child.once("exit", ok));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), WAIT_MS);
      await exited;
      clearTimeout(timer);
    }
  };
  const deadline = Date.now() + WAIT_MS;
  while (!(await accepts(port))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      const log = path.join(data, "redis.log");
      throw new Error(`redis-server did not listen on ${port}: ${existsSync(log) ? readFileSync(log, "utf8") : ""}`);
    }
    await sleep(50);
  }
  return { port, stop };
}

// The TLS port of a server per tls-auth-clients setting, of the run's backend.
const ports = {};
const stops = [];
before(async () => {
  if (missing) return;
  makeCertificates();
  for (const authClients of ["yes", "optional"]) {
    if (real) {
      const { port, stop } = await startRedis(authClients);
      stops.push(stop);
      ports[authClients] = port;
    } else {
      const server = await startCoordis({ directives: { "tls-port": 0, ...tlsDirectives(authClients) } });
      stops.push(() => server.stop());
      assert.equal(typeof server.tlsPort, "number", "the ready line names the TLS port");
      ports[authClients] = server.tlsPort;
    }
  }
});
after(async () => {
  await Promise.all(stops.map((stop) => stop()));
  rmSync(dir, { recursive: true, force: true });
});

function client(port, withCertificate) {
  const tls = { ca: readFileSync(file("ca.crt")) };
  if (withCertificate) Object.assign(tls, { cert: readFileSync(file("client.crt")), key: readFileSync(file("client.key")) });
  return new Redis({
    host: HOST,
    port,
    tls,
    connectTimeout: WAIT_MS,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
}

test("ioredis: the lock recipe over TLS with a client certificate", skip, async () => {
  const r = client(ports.yes, true);
  try {
    assert.equal((await r.info("server")).includes("coordis_version:"), !real);
    r.defineCommand("unlock", {
      numberOfKeys: 1,
      lua: "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0",
    });
    r.defineCommand("extend", {
      numberOfKeys: 1,
      lua: "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0",
    });
    await r.del("lock:tls");
    assert.equal(await r.set("lock:tls", "holder-a", "PX", LEASE_MS, "NX"), "OK");
    assert.equal(await r.set("lock:tls", "holder-b", "PX", LEASE_MS, "NX"), null, "the lock is taken");
    assert.equal(await r.unlock("lock:tls", "holder-b"), 0, "only the holder releases");
    assert.equal(await r.extend("lock:tls", "holder-a", LEASE_MS), 1);
    const ttl = await r.pttl("lock:tls");
    assert.ok(ttl > 0 && ttl <= LEASE_MS, String(ttl));
    assert.equal(await r.unlock("lock:tls", "holder-a"), 1);
    assert.equal(await r.set("lock:tls", "holder-b", "PX", LEASE_MS, "NX"), "OK", "free again");
    assert.equal(await r.unlock("lock:tls", "holder-b"), 1);
    assert.deepEqual(await r.pipeline().incr("tls:n").incr("tls:n").del("tls:n").exec(), [[null, 1], [null, 2], [null, 1]]);
  } finally {
    r.disconnect();
  }
});

test("ioredis: a client without a certificate is refused under tls-auth-clients yes", skip, async () => {
  const r = client(ports.yes, false);
  r.on("error", () => {}); // the refusal, also reported as an event
  try {
    await assert.rejects(r.ping());
  } finally {
    r.disconnect();
  }
});

test("ioredis: a client without a certificate is served under tls-auth-clients optional", skip, async () => {
  for (const withCertificate of [false, true]) {
    const r = client(ports.optional, withCertificate);
    try {
      assert.equal(await r.set("tls:optional", "v", "PX", LEASE_MS), "OK");
      assert.equal(await r.get("tls:optional"), "v");
      assert.equal(await r.del("tls:optional"), 1);
    } finally {
      r.disconnect();
    }
  }
});

test("ioredis: a client that does not trust the CA is refused", skip, async () => {
  const r = new Redis({ host: HOST, port: ports.optional, tls: {}, connectTimeout: WAIT_MS, maxRetriesPerRequest: 0, retryStrategy: () => null });
  const errors = [];
  r.on("error", (e) => errors.push(String(e)));
  try {
    await assert.rejects(r.ping());
    assert.ok(errors.some((e) => /certificate/i.test(e)), errors.join("\n"));
  } finally {
    r.disconnect();
  }
});
