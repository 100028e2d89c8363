//! `repl-diskless-load` on a coordis replica, as Redis 7.0.15 applies it:
//!
//! - every mode ends with the primary's dataset (DEBUG DIGEST), from a
//!   coordis primary and from a redis-server one, the replica's own key
//!   gone;
//! - mid-transfer, with a primary played by the test that sends a real RDB
//!   in parts and holds: `-LOADING` under `on-empty-db` and a `swapdb`
//!   resync of another history, the old dataset served under `disabled`
//!   (the transfer in `dir/temp-*.rdb`, gone afterwards) and under a
//!   `swapdb` resync of the same history (`async_loading:1`); a transfer
//!   cut there keeps the old dataset; what came is parsed while the
//!   primary holds (a large string, a large set of small members);
//!
//! The redis-server leg is skipped loudly without it (a failure with
//! `COORDIS_REQUIRE_REDIS=1`).

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use coordis::testing::command_text as cmd;
use coordis::testing::{compare_digests, RawClient, RedisServer};
use coordis::{BlockingServer, DisklessLoad};

const PATIENCE: Duration = Duration::from_secs(20);

const MODES: [DisklessLoad; 3] = [DisklessLoad::Disabled, DisklessLoad::OnEmptyDb, DisklessLoad::Swapdb];

fn info(addr: SocketAddr, section: &str, field: &str) -> String {
    RawClient::connect(addr).unwrap().info_field(section, field)
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A coordis replica-to-be in `mode`, with its own `dir`, holding key `old`
/// unless `empty`.
fn replica(mode: DisklessLoad, dir: &std::path::Path, empty: bool) -> BlockingServer {
    let mut builder = coordis::Server::builder();
    let c = builder.config_mut();
    c.enable_debug_command = "yes".into();
    c.replica.diskless_load = mode;
    c.dir = dir.to_string_lossy().into_owned();
    let server = builder.start_blocking().unwrap();
    if !empty {
        assert_eq!(cmd(server.addr(), &["SET", "old", "1"]), "+OK\r\n");
    }
    server
}

/// A fresh directory under the system's temp dir, removed on drop.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "coordis-diskless-load-{name}-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Follows `primary` until caught up; the dataset must be the primary's.
fn sync_and_compare(replica: SocketAddr, primary: SocketAddr) {
    cmd(replica, &["REPLICAOF", "127.0.0.1", &primary.port().to_string()]);
    wait_for("the replica to catch up", || {
        info(replica, "replication", "master_link_status") == "up"
            && info(replica, "replication", "slave_repl_offset") == info(primary, "replication", "master_repl_offset")
    });
    let diff = compare_digests(replica, primary, &[0, 1]).unwrap();
    assert!(diff.is_empty(), "datasets differ:\n{}", diff.join("\n"));
    assert_eq!(cmd(replica, &["EXISTS", "old"]), ":0\r\n");
}

fn fill(primary: SocketAddr) {
    assert_eq!(cmd(primary, &["DEBUG", "POPULATE", "500"]), "+OK\r\n");
    cmd(primary, &["HSET", "h", "f", "v"]);
    cmd(primary, &["SELECT", "1"]);
    cmd(primary, &["RPUSH", "l", "a", "b"]);
}

#[test]
fn every_mode_ends_with_the_primarys_dataset() {
    let mut builder = coordis::Server::builder();
    builder.config_mut().enable_debug_command = "yes".into();
    builder.config_mut().repl.diskless_sync_delay = 0;
    let primary = builder.start_blocking().unwrap();
    fill(primary.addr());
    let redis = RedisServer::start(&["--enable-debug-command", "yes", "--repl-diskless-sync-delay", "0"]).unwrap();
    if let Some(redis) = &redis {
        fill(redis.addr());
    }
    for mode in MODES {
        for empty in [false, true] {
            let dir = TempDir::new("end");
            let r = replica(mode, &dir.0, empty);
            sync_and_compare(r.addr(), primary.addr());
            if let Some(redis) = &redis {
                let dir = TempDir::new("end-redis");
                let r = replica(mode, &dir.0, empty);
                sync_and_compare(r.addr(), redis.addr());
            }
        }
    }
}

/// A primary played by the test: it answers the handshake and each PSYNC
/// with `+FULLRESYNC <replid> 0`, then writes what [`Scripted::send`] hands
/// it and holds; [`Scripted::cut`] closes the link (the replica reconnects).
struct Scripted {
    addr: SocketAddr,
    steps: mpsc::Sender<Step>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

enum Step {
    Send(Vec<u8>),
    Cut,
}

/// How often the scripted primary looks for a step or its stop.
const POLL: Duration = Duration::from_millis(20);

impl Scripted {
    fn start(replid: &str) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let (steps, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let replid = replid.to_string();
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            while let Some(mut link) = accept(&listener, &stopped) {
                if !handshake(&mut link, &replid, &stopped) {
                    continue;
                }
                // Until cut: the steps written, anything the replica sends
                // (REPLCONF ACK) left unread.
                loop {
                    match rx.recv_timeout(POLL) {
                        Ok(Step::Send(bytes)) => {
                            if link.write_all(&bytes).is_err() {
                                break;
                            }
                        }
                        Ok(Step::Cut) => break,
                        Err(mpsc::RecvTimeoutError::Timeout) if !stopped.load(Ordering::Relaxed) => {}
                        Err(_) => return,
                    }
                }
            }
        });
        Scripted {
            addr,
            steps,
            stop,
            thread: Some(thread),
        }
    }

    fn send(&self, bytes: &[u8]) {
        self.steps.send(Step::Send(bytes.to_vec())).unwrap();
    }

    fn cut(&self) {
        self.steps.send(Step::Cut).unwrap();
    }
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The next replica to connect, or `None` once stopped.
fn accept(listener: &TcpListener, stop: &AtomicBool) -> Option<TcpStream> {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((link, _)) => {
                link.set_nonblocking(false).unwrap();
                link.set_read_timeout(Some(POLL)).unwrap();
                return Some(link);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(e) => panic!("accept: {e}"),
        }
    }
    None
}

/// Answers the replica's commands up to its PSYNC: false if the link or
/// the test ended first.
fn handshake(link: &mut TcpStream, replid: &str, stop: &AtomicBool) -> bool {
    let mut reader = BufReader::new(link.try_clone().unwrap());
    loop {
        let Some(args) = read_command(&mut reader, stop) else {
            return false;
        };
        let reply = match args[0].to_ascii_uppercase().as_str() {
            "PING" => "+PONG\r\n".to_string(),
            "PSYNC" => format!("+FULLRESYNC {replid} 0\r\n"),
            _ => "+OK\r\n".to_string(),
        };
        if link.write_all(reply.as_bytes()).is_err() {
            return false;
        }
        if args[0].eq_ignore_ascii_case("PSYNC") {
            return true;
        }
    }
}

/// One RESP command (an array of bulk strings).
fn read_command(reader: &mut BufReader<TcpStream>, stop: &AtomicBool) -> Option<Vec<String>> {
    let mut line = || -> Option<String> {
        let mut line = String::new();
        loop {
            match reader.read_line(&mut line) {
                Ok(0) => return None,
                Ok(_) if line.ends_with('\n') => return Some(line.trim_end().to_string()),
                Ok(_) => {}
                Err(_) if stop.load(Ordering::Relaxed) => return None,
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => return None,
            }
        }
    };
    let count: usize = line()?.strip_prefix('*')?.parse().ok()?;
    let mut args = vec![];
    for _ in 0..count {
        line()?;
        args.push(line()?);
    }
    Some(args)
}

/// A real RDB: the file a coordis server filled as [`fill`] saves, and
/// that server (to compare datasets with).
fn real_rdb(dir: &TempDir) -> (BlockingServer, Vec<u8>) {
    let (source, rdb, _) = real_rdb_with_big_value(dir);
    (source, rdb)
}

/// [`real_rdb`], and where its 300 KB value ends in it.
fn real_rdb_with_big_value(dir: &TempDir) -> (BlockingServer, Vec<u8>, usize) {
    let mut builder = coordis::Server::builder();
    builder.config_mut().enable_debug_command = "yes".into();
    builder.config_mut().dir = dir.0.to_string_lossy().into_owned();
    let source = builder.start_blocking().unwrap();
    fill(source.addr());
    // A value LZF cannot shrink, long enough that the halves cut it.
    let mut rng = fastrand::Rng::with_seed(1);
    let big: String = (0..300_000).map(|_| rng.alphanumeric()).collect();
    cmd(source.addr(), &["SET", "big", &big]);
    assert_eq!(cmd(source.addr(), &["SAVE"]), "+OK\r\n");
    let rdb = std::fs::read(dir.0.join("dump.rdb")).unwrap();
    let tail = &big.as_bytes()[big.len() - 64..];
    let end = rdb.windows(tail.len()).position(|w| w == tail).unwrap() + tail.len();
    (source, rdb, end)
}

/// A replica following a primary the test plays (bound as `Rig { dir,
/// primary, r }`, the replica stops first and its directory goes last).
struct Rig {
    r: BlockingServer,
    primary: Scripted,
    dir: TempDir,
}

/// A replica in `mode` ([`replica`]) following a new [`Scripted`] primary.
fn rig(mode: DisklessLoad, empty: bool, name: &str) -> Rig {
    let primary = Scripted::start(REPLID);
    let dir = TempDir::new(name);
    let r = replica(mode, &dir.0, empty);
    cmd(r.addr(), &["REPLICAOF", "127.0.0.1", &primary.addr.port().to_string()]);
    Rig { r, primary, dir }
}

/// Sends the RDB's first half (`$<len>` framing) and waits for the replica
/// to have it.
fn first_half(primary: &Scripted, replica: SocketAddr, rdb: &[u8]) {
    first_part(primary, replica, rdb, rdb.len() / 2);
}

/// Sends the RDB's bytes up to `cut` (`$<len>` framing) and waits for the
/// replica to have them.
fn first_part(primary: &Scripted, replica: SocketAddr, rdb: &[u8], cut: usize) {
    wait_for("the replica to ask for a sync", || {
        info(replica, "replication", "master_sync_in_progress") == "1"
    });
    let mut head = format!("${}\r\n", rdb.len()).into_bytes();
    head.extend_from_slice(&rdb[..cut]);
    primary.send(&head);
    wait_for("the first part to arrive", || {
        info(replica, "replication", "master_sync_read_bytes") == cut.to_string()
    });
}

fn second_half(primary: &Scripted, replica: SocketAddr, rdb: &[u8]) {
    rest(primary, replica, rdb, rdb.len() / 2);
}

/// Sends the RDB's bytes from `cut` on and waits for the link to be up.
fn rest(primary: &Scripted, replica: SocketAddr, rdb: &[u8], cut: usize) {
    primary.send(&rdb[cut..]);
    wait_for("the link to come up", || {
        info(replica, "replication", "master_link_status") == "up"
    });
}

/// The replica has the source's dataset (databases 0 and 1).
fn same_dataset(replica: SocketAddr, source: SocketAddr, what: &str) {
    let diff = compare_digests(replica, source, &[0, 1]).unwrap();
    assert!(diff.is_empty(), "{what}:\n{}", diff.join("\n"));
}

fn temp_files(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("temp-") && n.ends_with(".rdb"))
        .collect()
}

const REPLID: &str = "0123456789abcdef0123456789abcdef01234567";

#[test]
fn mid_transfer_on_empty_db_answers_loading_and_parses_what_came() {
    let source_dir = TempDir::new("source");
    let (source, rdb, big_end) = real_rdb_with_big_value(&source_dir);
    let Rig { dir, primary, r } = rig(DisklessLoad::OnEmptyDb, true, "on-empty");
    // The first part ends past the large value: it is parsed (the
    // progress passes it) while the primary holds the rest.
    let cut = big_end + (rdb.len() - big_end) / 2;
    first_part(&primary, r.addr(), &rdb, cut);
    assert_eq!(info(r.addr(), "persistence", "loading"), "1");
    assert!(cmd(r.addr(), &["GET", "big"]).starts_with("-LOADING"));
    assert!(temp_files(&dir.0).is_empty());
    wait_for("the parse to pass the large value", || {
        info(r.addr(), "persistence", "loading_loaded_bytes")
            .parse::<usize>()
            .unwrap()
            >= big_end
    });
    rest(&primary, r.addr(), &rdb, cut);
    assert_eq!(info(r.addr(), "persistence", "loading"), "0");
    same_dataset(r.addr(), source.addr(), "datasets differ");
}

#[test]
fn mid_transfer_disabled_serves_the_old_dataset_from_a_temp_file() {
    let source_dir = TempDir::new("source");
    let (source, rdb) = real_rdb(&source_dir);
    let Rig { dir, primary, r } = rig(DisklessLoad::Disabled, false, "disabled");
    first_half(&primary, r.addr(), &rdb);
    assert_eq!(info(r.addr(), "persistence", "loading"), "0");
    assert_eq!(cmd(r.addr(), &["GET", "old"]), "$1\r\n1\r\n");
    let temps = temp_files(&dir.0);
    assert_eq!(temps.len(), 1, "{temps:?}");
    let temp = dir.0.join(&temps[0]);
    wait_for("the first half in the temp file", || {
        std::fs::metadata(&temp).unwrap().len() == (rdb.len() / 2) as u64
    });
    second_half(&primary, r.addr(), &rdb);
    assert!(temp_files(&dir.0).is_empty(), "{:?}", temp_files(&dir.0));
    assert_eq!(std::fs::read(dir.0.join("dump.rdb")).unwrap(), rdb);
    same_dataset(r.addr(), source.addr(), "datasets differ");
    assert_eq!(cmd(r.addr(), &["EXISTS", "old"]), ":0\r\n");
}

#[test]
fn a_cut_transfer_under_disabled_removes_the_temp_file_and_keeps_the_old_dataset() {
    let source_dir = TempDir::new("source");
    let (_source, rdb) = real_rdb(&source_dir);
    let Rig { dir, primary, r } = rig(DisklessLoad::Disabled, false, "disabled-cut");
    first_half(&primary, r.addr(), &rdb);
    primary.cut();
    wait_for("the temp file to go", || temp_files(&dir.0).is_empty());
    assert_eq!(cmd(r.addr(), &["GET", "old"]), "$1\r\n1\r\n");
    cmd(r.addr(), &["REPLICAOF", "NO", "ONE"]);
}

#[test]
fn mid_transfer_swapdb_of_another_history_answers_loading_and_a_cut_keeps_the_old_dataset() {
    let source_dir = TempDir::new("source");
    let (source, rdb) = real_rdb(&source_dir);
    let Rig { dir, primary, r } = rig(DisklessLoad::Swapdb, false, "swapdb");
    first_half(&primary, r.addr(), &rdb);
    assert_eq!(info(r.addr(), "persistence", "loading"), "1");
    assert_eq!(info(r.addr(), "persistence", "async_loading"), "0");
    assert!(cmd(r.addr(), &["GET", "old"]).starts_with("-LOADING"));
    assert!(temp_files(&dir.0).is_empty());
    // Cut: the loading ends and the old dataset is still there.
    primary.cut();
    wait_for("the loading to end", || info(r.addr(), "persistence", "loading") == "0");
    assert_eq!(cmd(r.addr(), &["GET", "old"]), "$1\r\n1\r\n");
    assert_eq!(cmd(r.addr(), &["DBSIZE"]), ":1\r\n");
    // The replica reconnects: the whole transfer this time.
    first_half(&primary, r.addr(), &rdb);
    second_half(&primary, r.addr(), &rdb);
    same_dataset(r.addr(), source.addr(), "datasets differ");
    assert_eq!(cmd(r.addr(), &["EXISTS", "old"]), ":0\r\n");
}

#[test]
fn mid_transfer_swapdb_of_the_same_history_serves_reads_and_a_cut_keeps_them() {
    let source_dir = TempDir::new("source");
    let (source, rdb) = real_rdb(&source_dir);
    let Rig { dir: _dir, primary, r } = rig(DisklessLoad::Swapdb, true, "swapdb-async");
    // A first full sync gives the replica the primary's history.
    first_half(&primary, r.addr(), &rdb);
    second_half(&primary, r.addr(), &rdb);
    // The next one (same replication ID) loads beside the dataset.
    primary.cut();
    first_half(&primary, r.addr(), &rdb);
    assert_eq!(info(r.addr(), "persistence", "loading"), "0");
    assert_eq!(info(r.addr(), "persistence", "async_loading"), "1");
    assert_eq!(cmd(r.addr(), &["HGET", "h", "f"]), "$1\r\nv\r\n");
    same_dataset(r.addr(), source.addr(), "the old dataset while loading");
    primary.cut();
    wait_for("the loading to end", || {
        info(r.addr(), "persistence", "async_loading") == "0"
    });
    same_dataset(r.addr(), source.addr(), "the old dataset after the cut");
    cmd(r.addr(), &["REPLICAOF", "NO", "ONE"]);
}

#[test]
fn mid_transfer_with_the_diskless_framing() {
    let source_dir = TempDir::new("source");
    let (source, rdb) = real_rdb(&source_dir);
    for (mode, empty) in [(DisklessLoad::OnEmptyDb, true), (DisklessLoad::Swapdb, false)] {
        let Rig { dir: _dir, primary, r } = rig(mode, empty, "eof");
        wait_for("the replica to ask for a sync", || {
            info(r.addr(), "replication", "master_sync_in_progress") == "1"
        });
        let mark = "m".repeat(40);
        let mut head = format!("$EOF:{mark}\r\n").into_bytes();
        head.extend_from_slice(&rdb[..rdb.len() / 2]);
        primary.send(&head);
        wait_for("the first half to arrive", || {
            info(r.addr(), "replication", "master_sync_read_bytes") == (rdb.len() / 2).to_string()
        });
        assert_eq!(info(r.addr(), "persistence", "loading"), "1", "{mode:?}");
        assert!(cmd(r.addr(), &["GET", "h"]).starts_with("-LOADING"));
        let mut tail = rdb[rdb.len() / 2..].to_vec();
        tail.extend_from_slice(mark.as_bytes());
        primary.send(&tail);
        wait_for("the link to come up", || {
            info(r.addr(), "replication", "master_link_status") == "up"
        });
        same_dataset(r.addr(), source.addr(), &format!("{mode:?}: datasets differ"));
    }
}

#[test]
fn a_pause_after_a_large_value_of_small_fields_leaves_it_parsed() {
    let dir = TempDir::new("source-set");
    let mut builder = coordis::Server::builder();
    builder.config_mut().enable_debug_command = "yes".into();
    builder.config_mut().dir = dir.0.to_string_lossy().into_owned();
    let source = builder.start_blocking().unwrap();
    let mut sadd = vec!["SADD".to_string(), "set".into()];
    sadd.extend((0..20_000).map(|i| format!("member-{i}")));
    let args: Vec<&str> = sadd.iter().map(String::as_str).collect();
    assert_eq!(cmd(source.addr(), &args), ":20000\r\n");
    assert_eq!(cmd(source.addr(), &["SAVE"]), "+OK\r\n");
    let rdb = std::fs::read(dir.0.join("dump.rdb")).unwrap();
    let Rig { dir: _dir, primary, r } = rig(DisklessLoad::OnEmptyDb, true, "pause");
    // All but the checksum's last bytes: the set (the last key) is
    // complete, and parsed while the primary holds the rest.
    let cut = rdb.len() - 4;
    first_part(&primary, r.addr(), &rdb, cut);
    let eof = rdb.len() - 9;
    wait_for("the parse to reach the end", || {
        info(r.addr(), "persistence", "loading_loaded_bytes") == eof.to_string()
    });
    rest(&primary, r.addr(), &rdb, cut);
    same_dataset(r.addr(), source.addr(), "datasets differ");
}
