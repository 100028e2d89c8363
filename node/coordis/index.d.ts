// Type declarations for the coordis helper (index.js).

/** Options for `startCoordis`, mirroring the Rust `Builder`. */
export interface CoordisOptions {
  /** `requirepass`: the default user's password (the URL carries it). */
  password?: string;
  /** Number of databases (16 unless set). */
  databases?: number;
  /** Most clients at once. */
  maxclients?: number;
  /** Address to listen on; `127.0.0.1` unless set. */
  host?: string;
  /** `enable-test-commands`: `local` (loopback clients; the default), `yes` or `no`. */
  testCommands?: "local" | "yes" | "no";
  /** Any further redis.conf directives, passed as `--name value`. */
  directives?: Record<string, string | number>;
  /** The coordis-server to run; default `$COORDIS_SERVER_BIN`, else the platform package's. */
  binary?: string;
  /** How long to wait for the ready line; 10000 unless set. */
  startupTimeoutMs?: number;
}

/** `COORDIS.CLOCK GET`. */
export interface ClockState {
  /** The clock's time, unix ms. */
  nowMs: number;
  frozen: boolean;
  /** A running clock's offset from real time, ms. */
  offsetMs: number;
}

/**
 * The server's test clock. Every move settles the server before it resolves: keys due by the new
 * time have expired (with their keyspace events) and blocked clients past their timeout are
 * answered. Each move resolves with the clock's new time, unix ms.
 */
export interface Clock {
  get(): Promise<ClockState>;
  /** Stop the clock: time then moves only by advance, jump and set. */
  freeze(): Promise<number>;
  /** Forward by `ms`, frozen or running. */
  advance(ms: number): Promise<number>;
  /** A wall-clock step, forwards or (negative) backwards. */
  jump(ms: number): Promise<number>;
  set(unixMs: number): Promise<number>;
  /** Let a frozen clock run on from where it stands. */
  resume(): Promise<number>;
  /** Back to real time. */
  reset(): Promise<number>;
}

/** A fault rule to add: the match (all optional), then exactly one action. */
export interface FaultSpec {
  /** Command-name glob. */
  command?: string;
  /** Key glob. */
  key?: string;
  /** Client-name glob (`CLIENT SETNAME`). */
  client?: string;
  /** Fire only after this many matches. */
  after?: number;
  /** Fire this many times, then stop. */
  times?: number;
  /** 0..1, drawn from the generator `faults.seed` seeds. */
  probability?: number;
  /** Answer this error instead of running (`"LOADING Redis is loading the dataset in memory"`). */
  error?: string;
  /** Close the connection before running. */
  drop?: boolean;
  /** Run, then close without the reply. */
  loseReply?: boolean;
  /** No answer until the rule is removed; then it runs. */
  hang?: boolean;
  /** Delay the reply by this many ms ... */
  delay?: number;
  /** ... and up to this many more. */
  jitter?: number;
  /** Write the replies this many bytes at a time ... */
  slice?: number;
  /** ... with this many ms between pieces. */
  pause?: number;
}

/** A rule as `COORDIS.FAULT LIST` reports it. */
export interface FaultRule {
  id: number;
  command: string | null;
  key: string | null;
  client: string | null;
  after: number;
  timesLeft: number | null;
  probability: number | null;
  /** `"lose-reply"`, `"delay 200 jitter 100"`, `"error LOADING ..."`, ... */
  action: string;
  matched: number;
  fired: number;
}

/** The server's fault rules. */
export interface Faults {
  /** Adds a rule; resolves with its id. Throws a TypeError unless exactly one action is given. */
  add(rule: FaultSpec): Promise<number>;
  list(): Promise<FaultRule[]>;
  /** Removes one rule (commands a hang rule held then run); false if there was none. */
  delete(id: number): Promise<boolean>;
  clear(): Promise<void>;
  seed(n: number): Promise<void>;
}

/** A running coordis-server. */
export interface Coordis {
  /** `redis://[:password@]host:port/0`, for ioredis (`new Redis(url)`) and node-redis (`createClient({ url })`). */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  /**
   * The TLS port, when `directives` open one (`"tls-port": 0` lets the server choose, with
   * `tls-cert-file`, `tls-key-file`, `tls-ca-cert-file`): for ioredis `new Redis({ port: tlsPort, tls: {...} })`.
   */
  readonly tlsPort: number | undefined;
  readonly pid: number;
  readonly clock: Clock;
  readonly faults: Faults;
  /** A stop-the-world pause for `ms` of real time: no command runs, nothing expires. */
  pause(ms: number): Promise<void>;
  /** Play a dead server for `ms` of real time: connections dropped, new ones closed; data kept. */
  down(ms: number): Promise<void>;
  /** Drop every connection; with `loseData`, lose every key and script, as a crash without persistence. */
  restart(loseData?: boolean): Promise<void>;
  /** Seed every random choice (SPOP, SRANDMEMBER, ZRANDMEMBER, HRANDFIELD, RANDOMKEY). */
  seed(n: number): Promise<void>;
  /** Any command on a fresh connection of the helper's own; an error reply rejects with `ReplyError`. */
  command(...args: Array<string | number>): Promise<unknown>;
  /** SIGTERM, then SIGKILL after a grace period; resolves once the process is gone. */
  stop(): Promise<void>;
}

/** Starts coordis-server on a free port; resolves once it listens. */
export function startCoordis(options?: CoordisOptions): Promise<Coordis>;
/** The coordis-server binary `startCoordis` runs. */
export function binaryPath(): string;
/** The platform package for this machine, `@coordis/<platform>-<arch>`. */
export function platformPackage(): string;
/** `$COORDIS_REDIS_URL`: the real Redis a run targets instead of coordis, if set. */
export function realRedisUrl(): string | undefined;
/** An error reply from the server. */
export class ReplyError extends Error {}
export const BINARY_ENV: string;
