// coordis for Node: `startCoordis(options)` runs the coordis-server the
// platform package carries on a free port (`--port 0`; its JSON ready line
// says which) and reaches its test clock, fault rules and server-wide
// faults over a RESP connection of its own (no client library needed, and
// no retry layer that could send RESTART twice).
"use strict";

const { spawn } = require("node:child_process");
const net = require("node:net");
const path = require("node:path");

/** The environment variable that names the binary to run, ahead of the platform package's. */
const BINARY_ENV = "COORDIS_SERVER_BIN";
/** How long `stop()` waits after SIGTERM (coordis drains for up to 5 s) before SIGKILL. */
const STOP_GRACE_MS = 10_000;
/** How much of the server's log a start failure quotes. */
const LOG_TAIL_CHARS = 4000;

/** The platform package that carries the binary for this machine, as npm's optionalDependencies install it. */
function platformPackage() {
  return `@coordis/${process.platform}-${process.arch}`;
}

/** The coordis-server to run: $COORDIS_SERVER_BIN, else the platform package's. */
function binaryPath() {
  const explicit = process.env[BINARY_ENV];
  if (explicit) return explicit;
  const pkg = platformPackage();
  let manifest;
  try {
    manifest = require.resolve(`${pkg}/package.json`);
  } catch {
    throw new Error(`coordis: ${pkg} is not installed (no coordis-server for this platform); set ${BINARY_ENV}`);
  }
  return path.join(path.dirname(manifest), "bin", process.platform === "win32" ? "coordis-server.exe" : "coordis-server");
}

/** One command over a fresh connection; resolves with the reply, rejects with an error reply. With `expectClose`, resolves when the server drops the connection without a reply. */
function call(host, port, password, args, { expectClose = false, timeoutMs = 10_000 } = {}) {
  return new Promise((resolve, reject) => {
    const socket = net.createConnection({ host, port });
    const commands = password === undefined ? [args] : [["AUTH", password], args];
    let buffer = Buffer.alloc(0);
    let answered = 0;
    let done = false;
    const finish = (fn, value) => {
      if (done) return;
      done = true;
      socket.destroy();
      fn(value);
    };
    socket.setTimeout(timeoutMs, () => finish(reject, new Error(`coordis: no reply to ${args[0]} in ${timeoutMs} ms`)));
    socket.on("connect", () => socket.write(Buffer.concat(commands.map(encode))));
    socket.on("error", (e) => (expectClose && answered === commands.length - 1 ? finish(resolve) : finish(reject, e)));
    socket.on("close", () =>
      expectClose && answered === commands.length - 1
        ? finish(resolve)
        : finish(reject, new Error("coordis: the server closed the connection")),
    );
    socket.on("data", (chunk) => {
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        const parsed = parse(buffer, 0);
        if (!parsed) return;
        buffer = buffer.subarray(parsed.end);
        answered += 1;
        if (parsed.value instanceof ReplyError) return finish(reject, parsed.value);
        if (answered === commands.length) {
          return expectClose
            ? finish(reject, new Error(`coordis: expected the server to drop the connection, got ${parsed.value}`))
            : finish(resolve, parsed.value);
        }
      }
    });
  });
}

/** An error reply from the server (`ERR ...`). */
class ReplyError extends Error {}

function encode(args) {
  const parts = [`*${args.length}\r\n`];
  for (const arg of args) {
    const data = Buffer.from(String(arg));
    parts.push(`$${data.length}\r\n`, data, "\r\n");
  }
  return Buffer.concat(parts.map((p) => (Buffer.isBuffer(p) ? p : Buffer.from(p))));
}

/** Parses one RESP2 reply at `at`: `{ value, end }`, or undefined if incomplete. */
function parse(buf, at) {
  const eol = buf.indexOf("\r\n", at);
  if (eol < 0) return undefined;
  const kind = String.fromCharCode(buf[at]);
  const rest = buf.toString("utf8", at + 1, eol);
  const end = eol + 2;
  switch (kind) {
    case "+":
      return { value: rest, end };
    case "-":
      return { value: new ReplyError(rest), end };
    case ":":
      return { value: Number(rest), end };
    case "$": {
      const n = Number(rest);
      if (n < 0) return { value: null, end };
      if (buf.length < end + n + 2) return undefined;
      return { value: buf.toString("utf8", end, end + n), end: end + n + 2 };
    }
    case "*": {
      const n = Number(rest);
      if (n < 0) return { value: null, end };
      const items = [];
      let next = end;
      for (let i = 0; i < n; i++) {
        const item = parse(buf, next);
        if (!item) return undefined;
        items.push(item.value);
        next = item.end;
      }
      return { value: items, end: next };
    }
    default:
      throw new Error(`coordis: unexpected reply line ${JSON.stringify(buf.toString("utf8", at, eol))}`);
  }
}

function int(value) {
  if (typeof value !== "number") throw new Error(`coordis: expected an integer reply, got ${JSON.stringify(value)}`);
  return value;
}

/** The fault-rule words for a rule spec: the match, then exactly one action. */
function faultArgs(spec) {
  const args = [];
  for (const [word, name] of [["COMMAND", "command"], ["KEY", "key"], ["CLIENT", "client"], ["AFTER", "after"], ["TIMES", "times"], ["PROBABILITY", "probability"]]) {
    if (spec[name] !== undefined) args.push(word, spec[name]);
  }
  const actions = [];
  if (spec.error !== undefined) actions.push(["ERROR", spec.error]);
  if (spec.drop) actions.push(["DROP"]);
  if (spec.loseReply) actions.push(["LOSE-REPLY"]);
  if (spec.hang) actions.push(["HANG"]);
  if (spec.delay !== undefined) actions.push(["DELAY", spec.delay, ...(spec.jitter !== undefined ? ["JITTER", spec.jitter] : [])]);
  else if (spec.jitter !== undefined) throw new TypeError("coordis: jitter goes with delay");
  if (spec.slice !== undefined) actions.push(["SLICE", spec.slice, ...(spec.pause !== undefined ? ["PAUSE", spec.pause] : [])]);
  else if (spec.pause !== undefined) throw new TypeError("coordis: pause goes with slice");
  if (actions.length !== 1) {
    throw new TypeError("coordis: a fault rule takes exactly one action: error, drop, loseReply, hang, delay or slice");
  }
  return [...args, ...actions[0]];
}

function ruleFromReply(entry) {
  const f = {};
  for (let i = 0; i < entry.length; i += 2) f[entry[i]] = entry[i + 1];
  return {
    id: f.id,
    command: f.command,
    key: f.key,
    client: f.client,
    after: f.after,
    timesLeft: f["times-left"],
    probability: f.probability === null ? null : Number(f.probability),
    action: f.action,
    matched: f.matched,
    fired: f.fired,
  };
}

/** Starts coordis-server; resolves once it listens. See index.d.ts for the options and the handle. */
async function startCoordis(options = {}) {
  const host = options.host ?? "127.0.0.1";
  // A test server keeps no files unless `directives` ask for them (save,
  // appendonly, dir): coordis-server, like redis-server, would otherwise
  // save dump.rdb into the working directory.
  const settings = { "enable-test-commands": options.testCommands ?? "local", save: "" };
  if (options.password !== undefined) settings.requirepass = options.password;
  if (options.databases !== undefined) settings.databases = options.databases;
  if (options.maxclients !== undefined) settings.maxclients = options.maxclients;
  Object.assign(settings, options.directives ?? {});
  const argv = ["--port", "0", "--bind", host];
  for (const [name, value] of Object.entries(settings)) argv.push(`--${name}`, String(value));
  const binary = options.binary ?? binaryPath();

  const child = spawn(binary, argv, { stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (text) => {
    log = (log + text).slice(-LOG_TAIL_CHARS);
  });
  const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  const killOnExit = () => child.kill("SIGKILL");
  process.once("exit", killOnExit);

  let ready;
  try {
    ready = await new Promise((resolve, reject) => {
      let line = "";
      const timer = setTimeout(() => reject(new Error("no ready line in time")), options.startupTimeoutMs ?? 10_000);
      child.once("error", (e) => (clearTimeout(timer), reject(e)));
      exited.then(() => (clearTimeout(timer), reject(new Error("exited before it was ready"))));
      child.stdout.setEncoding("utf8");
      child.stdout.on("data", function onData(text) {
        line += text;
        const nl = line.indexOf("\n");
        if (nl >= 0) {
          clearTimeout(timer);
          child.stdout.off("data", onData);
          child.stdout.resume(); // anything after the ready line is drained
          try {
            resolve(JSON.parse(line.slice(0, nl)));
          } catch (e) {
            reject(e);
          }
        }
      });
    });
  } catch (e) {
    child.kill("SIGKILL");
    await exited;
    process.off("exit", killOnExit);
    // Give the stderr pipe its last bytes.
    await new Promise((resolve) => setImmediate(resolve));
    throw new Error(`coordis: ${binary} did not start: ${e.message}\n${log}`);
  }
  // A test that forgets stop() does not keep node alive; the exit hook still kills it.
  child.unref();
  child.stdout.unref?.();
  child.stderr.unref?.();

  const port = ready.port;
  const password = options.password;
  const command = (...args) => call(host, port, password, args);
  const dropped = (...args) => call(host, port, password, args, { expectClose: true }).then(() => undefined);
  const auth = password === undefined ? "" : `:${encodeURIComponent(password)}@`;
  let stopped;

  return {
    url: `redis://${auth}${host}:${port}/0`,
    host,
    port,
    // Named by the ready line when `directives` open a TLS port (`"tls-port": 0`).
    tlsPort: ready.tls_port,
    pid: child.pid,
    command,
    clock: {
      get: async () => {
        const [nowMs, mode, offsetMs] = await command("COORDIS.CLOCK", "GET");
        return { nowMs, frozen: mode === "frozen", offsetMs };
      },
      freeze: async () => int(await command("COORDIS.CLOCK", "FREEZE")),
      advance: async (ms) => int(await command("COORDIS.CLOCK", "ADVANCE", Math.trunc(ms))),
      jump: async (ms) => int(await command("COORDIS.CLOCK", "JUMP", Math.trunc(ms))),
      set: async (unixMs) => int(await command("COORDIS.CLOCK", "SET", Math.trunc(unixMs))),
      resume: async () => int(await command("COORDIS.CLOCK", "RESUME")),
      reset: async () => int(await command("COORDIS.CLOCK", "RESET")),
    },
    faults: {
      add: async (spec) => int(await command("COORDIS.FAULT", "ADD", ...faultArgs(spec))),
      list: async () => (await command("COORDIS.FAULT", "LIST")).map(ruleFromReply),
      delete: async (id) => int(await command("COORDIS.FAULT", "DEL", id)) === 1,
      clear: async () => void (await command("COORDIS.FAULT", "CLEAR")),
      seed: async (n) => void (await command("COORDIS.FAULT", "SEED", n)),
    },
    pause: async (ms) => void (await command("COORDIS.SERVER", "PAUSE", Math.trunc(ms))),
    down: (ms) => dropped("COORDIS.SERVER", "DOWN", Math.trunc(ms)),
    restart: (loseData = false) => dropped("COORDIS.SERVER", "RESTART", loseData ? "FLUSH" : "KEEPDATA"),
    seed: async (n) => void (await command("COORDIS.SERVER", "SEED", n)),
    stop() {
      stopped ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill("SIGTERM");
          const timer = setTimeout(() => child.kill("SIGKILL"), STOP_GRACE_MS);
          await exited;
          clearTimeout(timer);
        }
        process.off("exit", killOnExit);
      })();
      return stopped;
    },
  };
}

/** The real Redis a run targets instead of coordis ($COORDIS_REDIS_URL), if any. */
function realRedisUrl() {
  return process.env.COORDIS_REDIS_URL || undefined;
}

module.exports = { startCoordis, binaryPath, platformPackage, realRedisUrl, ReplyError, BINARY_ENV };
