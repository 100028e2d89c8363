//! Client memory, compared with Redis 7.0.15 where it is deterministic:
//! CLIENT LIST's buffer and memory fields (present, in Redis's order and
//! units) for an idle client, one with a big query pending, one in MULTI
//! and a subscriber with a backlog; `client-output-buffer-limit` closing a
//! subscriber that does not read (hard limit, and a soft limit outlasting
//! its seconds, also on coordis's test clock) and a normal client with a
//! reply over its hard limit; `maxmemory-clients` evicting a client and
//! sparing one with CLIENT NO-EVICT, counted in INFO `evicted_clients`.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use coordis::testing::{RawClient, RedisServer};

/// A megabyte, the size of one published message in these tests.
const MB: usize = 1024 * 1024;

/// How long the tests wait for a server to act on bytes already sent.
const SETTLE: Duration = Duration::from_millis(300);

fn redis() -> Option<RedisServer> {
    let server = RedisServer::start(&[]).expect("redis-server starts when installed");
    if server.is_none() {
        eprintln!("SKIPPED against Redis: redis-server 7.0.15 is not installed");
    }
    server
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// CLIENT LIST's lines (from a bulk or verbatim reply) as field maps, by id.
fn client_list(control: &mut RawClient) -> HashMap<u64, Vec<(String, String)>> {
    let reply = text(&control.command(&["CLIENT", "LIST"]).unwrap());
    let body = reply.split_once("\r\n").map_or("", |(_, b)| b);
    body.lines()
        .filter(|l| l.starts_with("id="))
        .map(|line| {
            let fields: Vec<(String, String)> = line
                .split(' ')
                .filter_map(|f| f.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            (fields[0].1.parse().unwrap(), fields)
        })
        .collect()
}

fn field(fields: &[(String, String)], name: &str) -> u64 {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("no {name} in {fields:?}"))
        .1
        .parse()
        .unwrap_or_else(|_| panic!("{name} is not a number in {fields:?}"))
}

fn client_id(client: &mut RawClient) -> u64 {
    let reply = text(&client.command(&["CLIENT", "ID"]).unwrap());
    reply.trim_start_matches(':').trim().parse().unwrap()
}

/// The memory fields of each state, checked as properties both servers
/// hold; returns the field names in order, for comparing the two.
fn client_states(addr: SocketAddr) -> Vec<String> {
    let mut control = RawClient::connect(addr).unwrap();
    let mut idle = RawClient::connect(addr).unwrap();
    idle.command(&["PING"]).unwrap();
    let idle_id = client_id(&mut idle);
    // A SET whose 100,000-byte value has half arrived.
    let mut big = RawClient::connect(addr).unwrap();
    let big_id = client_id(&mut big);
    big.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100000\r\n").unwrap();
    big.send(&vec![b'x'; 50_000]).unwrap();
    let mut multi = RawClient::connect(addr).unwrap();
    let multi_id = client_id(&mut multi);
    multi.command(&["MULTI"]).unwrap();
    multi.command(&["SET", "key1", "value1"]).unwrap();
    multi.command(&["SET", "key2", &"v".repeat(1000)]).unwrap();
    let mut sub = RawClient::connect(addr).unwrap();
    let sub_id = client_id(&mut sub);
    sub.command(&["SUBSCRIBE", "firehose"]).unwrap();
    // 16 MB: more than the socket buffers hold, under the 32 MB limit.
    let payload = "m".repeat(MB);
    for _ in 0..16 {
        assert_eq!(control.command(&["PUBLISH", "firehose", &payload]).unwrap(), b":1\r\n");
    }
    std::thread::sleep(SETTLE);
    let list = client_list(&mut control);
    let names: Vec<String> = list[&idle_id].iter().map(|(k, _)| k.clone()).collect();
    let idle = &list[&idle_id];
    for name in ["qbuf", "argv-mem", "multi-mem", "obl", "oll", "omem"] {
        assert_eq!(field(idle, name), 0, "idle {name}: {idle:?}");
    }
    assert!(field(idle, "tot-mem") > 0, "{idle:?}");

    let big = &list[&big_id];
    assert_eq!(field(big, "qbuf"), 50_000, "{big:?}");
    assert_eq!(field(big, "argv-mem"), 4, "SET and k are read: {big:?}");
    assert!(field(big, "tot-mem") >= 50_000, "{big:?}");
    assert!(field(big, "tot-mem") > field(idle, "tot-mem"), "{big:?}");

    let multi = &list[&multi_id];
    assert_eq!(field(multi, "multi"), 2);
    // The queued arguments' bytes (3+4+6 and 3+4+1000) and a handle each.
    let queued = 1020;
    assert!(
        (queued..queued + 6 * 64).contains(&field(multi, "multi-mem")),
        "{multi:?}"
    );

    let sub = &list[&sub_id];
    assert!(field(sub, "oll") > 0, "{sub:?}");
    assert!(field(sub, "omem") > 4 * MB as u64, "{sub:?}");
    assert!(field(sub, "omem") <= 16 * MB as u64 + 16 * 1024, "{sub:?}");
    assert!(field(sub, "tot-mem") >= field(sub, "omem"), "{sub:?}");
    // INFO's recent peaks: the half-arrived SET's buffer, the subscriber's
    // queued messages.
    let input = recent_max(&mut control, "input");
    assert!((50_000..4 * MB as u64).contains(&input), "recent input {input}");
    let output = recent_max(&mut control, "output");
    assert!(output > 4 * MB as u64, "recent output {output}");
    names
}

/// INFO clients' `client_recent_max_{which}_buffer`.
fn recent_max(control: &mut RawClient, which: &str) -> u64 {
    let name = format!("client_recent_max_{which}_buffer");
    control.info_field("clients", &name).parse().unwrap()
}

/// The recent peaks cover the last eight seconds of the server clock: a
/// test clock moved past them forgets a big buffer that is gone.
#[test]
fn the_recent_buffer_peaks_age_out_on_the_server_clock() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let clock = server.clock().unwrap();
    clock.freeze();
    let mut control = RawClient::connect(server.addr()).unwrap();
    let mut big = RawClient::connect(server.addr()).unwrap();
    big.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100000\r\n").unwrap();
    big.send(&vec![b'x'; 50_000]).unwrap();
    std::thread::sleep(SETTLE);
    assert!(recent_max(&mut control, "input") >= 50_000);
    drop(big);
    // Gone before the clock moves: no later second samples it.
    std::thread::sleep(SETTLE);
    clock.advance(Duration::from_secs(3));
    std::thread::sleep(SETTLE);
    assert!(
        recent_max(&mut control, "input") >= 50_000,
        "three seconds on, still recent"
    );
    clock.advance(Duration::from_secs(6));
    std::thread::sleep(SETTLE);
    let input = recent_max(&mut control, "input");
    assert!(input < 50_000, "nine seconds on, forgotten: {input}");
}

#[test]
fn client_list_reports_buffers_and_memory_in_redis_units() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let ours = client_states(server.addr());
    if let Some(redis) = redis() {
        assert_eq!(ours, client_states(redis.addr()), "CLIENT LIST's fields");
    }
}

#[test]
fn client_info_counts_the_running_command() {
    // Redis's `mem_clients_normal` waits for its client cron: coordis's
    // is checked alone.
    let check = |addr, ours: bool| {
        let mut c = RawClient::connect(addr).unwrap();
        let reply = text(&c.command(&["CLIENT", "INFO"]).unwrap());
        // CLIENT and INFO: 10 bytes.
        assert!(reply.contains(" argv-mem=10 "), "{reply}");
        // The request being run is still in the query buffer:
        // `*2\r\n$6\r\nCLIENT\r\n$4\r\nINFO\r\n`, and a pipelined one's
        // whole batch.
        assert!(reply.contains(" qbuf=26 "), "{reply}");
        let batch = b"*2\r\n$6\r\nCLIENT\r\n$4\r\nINFO\r\n*1\r\n$4\r\nPING\r\n";
        c.send(batch).unwrap();
        let replies = text(&c.read_reply().unwrap());
        assert_eq!(c.read_reply().unwrap(), b"+PONG\r\n");
        assert!(replies.contains(" qbuf=40 "), "{replies}");
        assert!(reply.contains(" omem=0 "), "{reply}");
        if !ours {
            return;
        }
        // INFO counts the clients' memory too.
        let info = text(&c.command(&["INFO", "memory"]).unwrap());
        let normal: u64 = info
            .lines()
            .find_map(|l| l.strip_prefix("mem_clients_normal:"))
            .expect("INFO memory has mem_clients_normal")
            .trim()
            .parse()
            .unwrap();
        assert!(normal > 0, "{info}");
    };
    let server = coordis::Server::builder().start_blocking().unwrap();
    check(server.addr(), true);
    if let Some(redis) = redis() {
        check(redis.addr(), false);
    }
}

/// Most MB a subscriber with a small receive buffer holds before a 4 MB
/// hard limit closes it: the limit, the kernel's largest send buffer
/// (4 MB here) and a margin.
const SMALL_RECEIVER_MOST_MB: usize = 12;

/// A connection whose receive buffer is set small before it connects (the
/// kernel then does not grow it), so that unread output stays in the server.
fn small_receiver(addr: SocketAddr) -> TcpStream {
    const RECEIVE_BUFFER: usize = 64 * 1024;
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(RECEIVE_BUFFER).unwrap();
    socket.connect(&addr.into()).unwrap();
    let stream: TcpStream = socket.into();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream
}

/// Publishes 1 MB messages until none reaches the subscriber; returns how
/// many were published.
fn publish_until_dropped(publisher: &mut RawClient, most: usize) -> usize {
    let payload = "x".repeat(MB);
    let deadline = Instant::now() + Duration::from_secs(30);
    for published in 1..=most {
        if publisher.command(&["PUBLISH", "firehose", &payload]).unwrap() == b":0\r\n" {
            return published;
        }
        assert!(Instant::now() < deadline, "subscriber never disconnected");
    }
    panic!("subscriber still connected after {most} MB");
}

fn pubsub_hard_limit(addr: SocketAddr) {
    let mut publisher = RawClient::connect(addr).unwrap();
    assert_eq!(
        publisher
            .command(&["CONFIG", "SET", "client-output-buffer-limit", "pubsub 4mb 0 0"])
            .unwrap(),
        b"+OK\r\n"
    );
    let mut idle = small_receiver(addr);
    idle.write_all(&RawClient::encode(&[b"SUBSCRIBE", b"firehose"]))
        .unwrap();
    let expected = b"*3\r\n$9\r\nsubscribe\r\n$8\r\nfirehose\r\n:1\r\n";
    let mut confirmation = [0u8; 37];
    idle.read_exact(&mut confirmation).unwrap();
    assert_eq!(&confirmation, expected);
    let published = publish_until_dropped(&mut publisher, 64);
    // The kernel holds a few MB (the send buffer's most, a small receive
    // buffer); the server the rest: well under the default 32 MB.
    assert!(
        (5..=SMALL_RECEIVER_MOST_MB).contains(&published),
        "disconnected after {published} MB at a 4 MB hard limit"
    );
    assert_eq!(
        publisher.command(&["PUBSUB", "NUMSUB", "firehose"]).unwrap(),
        b"*2\r\n$8\r\nfirehose\r\n:0\r\n"
    );
}

#[test]
fn a_subscriber_past_the_pubsub_hard_limit_is_disconnected() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    pubsub_hard_limit(server.addr());
    if let Some(redis) = redis() {
        pubsub_hard_limit(redis.addr());
    }
}

/// Over a 1 MB soft limit of 1 second: still connected right after the
/// burst, gone once the limit has lasted more than its second.
fn pubsub_soft_limit(addr: SocketAddr) {
    let mut publisher = RawClient::connect(addr).unwrap();
    publisher
        .command(&["CONFIG", "SET", "client-output-buffer-limit", "pubsub 0 1mb 1"])
        .unwrap();
    let mut idle = RawClient::connect(addr).unwrap();
    idle.command(&["SUBSCRIBE", "firehose"]).unwrap();
    let payload = "x".repeat(MB);
    for _ in 0..16 {
        assert_eq!(
            publisher.command(&["PUBLISH", "firehose", &payload]).unwrap(),
            b":1\r\n"
        );
    }
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(
        publisher.command(&["PUBSUB", "NUMSUB", "firehose"]).unwrap(),
        b"*2\r\n$8\r\nfirehose\r\n:0\r\n"
    );
}

#[test]
fn a_subscriber_over_the_soft_limit_for_its_seconds_is_disconnected() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    pubsub_soft_limit(server.addr());
    if let Some(redis) = redis() {
        pubsub_soft_limit(redis.addr());
    }
}

#[test]
fn the_soft_limit_counts_seconds_on_the_server_clock() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let clock = server.clock().expect("the default clock is virtual");
    clock.freeze();
    let mut publisher = RawClient::connect(server.addr()).unwrap();
    publisher
        .command(&["CONFIG", "SET", "client-output-buffer-limit", "pubsub 0 1mb 60"])
        .unwrap();
    let mut idle = RawClient::connect(server.addr()).unwrap();
    idle.command(&["SUBSCRIBE", "firehose"]).unwrap();
    let payload = "x".repeat(MB);
    for _ in 0..16 {
        assert_eq!(
            publisher.command(&["PUBLISH", "firehose", &payload]).unwrap(),
            b":1\r\n"
        );
    }
    let numsub = |p: &mut RawClient| text(&p.command(&["PUBSUB", "NUMSUB", "firehose"]).unwrap());
    clock.advance(Duration::from_secs(60));
    std::thread::sleep(SETTLE);
    assert!(
        numsub(&mut publisher).ends_with(":1\r\n"),
        "60 s over is not more than 60"
    );
    clock.advance(Duration::from_secs(1));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !numsub(&mut publisher).ends_with(":0\r\n") {
        assert!(Instant::now() < deadline, "still subscribed 61 s over the soft limit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A normal client whose reply passes `normal 1mb 0 0` is closed without it.
fn normal_hard_limit(addr: SocketAddr) {
    let mut control = RawClient::connect(addr).unwrap();
    let value = "v".repeat(2 * MB);
    assert_eq!(control.command(&["SET", "big", &value]).unwrap(), b"+OK\r\n");
    control
        .command(&["CONFIG", "SET", "client-output-buffer-limit", "normal 1mb 0 0"])
        .unwrap();
    // The small reply is under the limit.
    let mut reader = RawClient::connect(addr).unwrap();
    assert_eq!(reader.command(&["STRLEN", "big"]).unwrap(), b":2097152\r\n");
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(&RawClient::encode(&[b"GET", b"big"])).unwrap();
    let mut got = Vec::new();
    stream.read_to_end(&mut got).expect("the server closes the connection");
    assert!(got.len() < 2 * MB, "the whole reply arrived ({} bytes)", got.len());
    assert_eq!(control.command(&["PING"]).unwrap(), b"+PONG\r\n");
}

/// Under `normal 1kb 0 0`, a reply of 10 KB fits the static reply buffer
/// the limit does not count and arrives whole; one of 20 KB does not, and
/// the client is closed.
fn static_reply_buffer(addr: SocketAddr) -> (Vec<u8>, Vec<u8>) {
    let mut control = RawClient::connect(addr).unwrap();
    control.command(&["SET", "ten", &"t".repeat(10_000)]).unwrap();
    control.command(&["SET", "twenty", &"t".repeat(20_000)]).unwrap();
    control
        .command(&["CONFIG", "SET", "client-output-buffer-limit", "normal 1kb 0 0"])
        .unwrap();
    let get = |key: &str| {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        stream.write_all(&RawClient::encode(&[b"GET", key.as_bytes()])).unwrap();
        stream.write_all(&RawClient::encode(&[b"QUIT"])).unwrap();
        let mut got = Vec::new();
        stream.read_to_end(&mut got).expect("the server closes the connection");
        got
    };
    let replies = (get("ten"), get("twenty"));
    control
        .command(&["CONFIG", "SET", "client-output-buffer-limit", "normal 0 0 0"])
        .unwrap();
    replies
}

#[test]
fn a_reply_that_fits_the_static_reply_buffer_passes_a_smaller_normal_limit() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let ours = static_reply_buffer(server.addr());
    let ten = format!("$10000\r\n{}\r\n+OK\r\n", "t".repeat(10_000));
    assert_eq!(text(&ours.0), ten);
    assert!(
        ours.1.len() < 20_000,
        "the 20 KB reply arrived ({} bytes)",
        ours.1.len()
    );
    if let Some(redis) = redis() {
        let theirs = static_reply_buffer(redis.addr());
        assert_eq!(text(&theirs.0), ten);
        assert_eq!(ours.1.len(), theirs.1.len());
    }
}

#[test]
fn a_reply_over_the_normal_hard_limit_closes_the_client() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    normal_hard_limit(server.addr());
    if let Some(redis) = redis() {
        normal_hard_limit(redis.addr());
    }
}

/// Whether `stream`'s peer closed it within `wait` (sending nothing).
fn closed_within(stream: &mut TcpStream, wait: Duration) -> bool {
    use std::io::ErrorKind::{TimedOut, WouldBlock};
    stream.set_read_timeout(Some(wait)).unwrap();
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(e.kind(), WouldBlock | TimedOut),
    }
}

/// Sends a SET of a 4 MB value but its last bytes: 4 MB in the query
/// buffer. The server may close the connection on the way (eviction).
fn start_big_set(stream: &mut TcpStream) {
    let _ = stream.write_all(b"*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$4194304\r\n");
    let _ = stream.write_all(&vec![b'x'; 4 * MB - 10]);
}

fn evicted_clients(control: &mut RawClient) -> u64 {
    let info = text(&control.command(&["INFO", "stats"]).unwrap());
    let line = info
        .lines()
        .find(|l| l.starts_with("evicted_clients:"))
        .expect("INFO stats has evicted_clients");
    line["evicted_clients:".len()..].trim().parse().unwrap()
}

fn client_eviction(addr: SocketAddr) {
    let mut control = RawClient::connect(addr).unwrap();
    // The controlling client stays whatever the others use.
    assert_eq!(control.command(&["CLIENT", "NO-EVICT", "on"]).unwrap(), b"+OK\r\n");
    assert_eq!(
        control.command(&["CONFIG", "SET", "maxmemory-clients", "1mb"]).unwrap(),
        b"+OK\r\n"
    );
    assert_eq!(evicted_clients(&mut control), 0);
    let mut bystander = RawClient::connect(addr).unwrap();
    bystander.command(&["PING"]).unwrap();

    let mut evicted = TcpStream::connect(addr).unwrap();
    start_big_set(&mut evicted);
    assert!(
        closed_within(&mut evicted, Duration::from_secs(5)),
        "a client over maxmemory-clients is evicted"
    );
    assert_eq!(evicted_clients(&mut control), 1);
    // The largest client went; the small one stays.
    assert_eq!(bystander.command(&["PING"]).unwrap(), b"+PONG\r\n");

    // CLIENT NO-EVICT spares a client: its SET completes.
    let mut spared = TcpStream::connect(addr).unwrap();
    spared
        .write_all(&RawClient::encode(&[b"CLIENT", b"NO-EVICT", b"on"]))
        .unwrap();
    let mut ok = [0u8; 5];
    spared.read_exact(&mut ok).unwrap();
    assert_eq!(&ok, b"+OK\r\n");
    start_big_set(&mut spared);
    std::thread::sleep(SETTLE);
    let list = text(&control.command(&["CLIENT", "LIST"]).unwrap());
    assert!(list.contains("flags=e"), "{list}");
    spared.write_all(b"xxxxxxxxxx\r\n").unwrap();
    spared.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    spared.read_exact(&mut ok).unwrap();
    assert_eq!(&ok, b"+OK\r\n", "the NO-EVICT client's SET ran");
    assert_eq!(control.command(&["STRLEN", "big"]).unwrap(), b":4194304\r\n");
    // The bystander was the only evictable client left while the spared
    // one was over the limit: Redis evicts it too, as does coordis.
    assert_eq!(evicted_clients(&mut control), 2);
    control.command(&["CONFIG", "SET", "maxmemory-clients", "0"]).unwrap();
}

#[test]
fn maxmemory_clients_evicts_the_largest_and_no_evict_spares() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    client_eviction(server.addr());
    if let Some(redis) = redis() {
        client_eviction(redis.addr());
    }
}

/// The read buffer of a client that has sent nothing for more than 2 s is
/// given back (Redis's `clientsCronResizeQueryBuffer`): CLIENT LIST shows
/// `qbuf=0 qbuf-free=0` for it, on Redis after 3 s of real time and on
/// coordis's test clock; a busy client's buffer stays. `wait` lets the
/// server's time pass.
fn idle_query_buffer(addr: SocketAddr, wait: impl Fn(&mut RawClient)) -> (u64, u64) {
    let mut control = RawClient::connect(addr).unwrap();
    let mut idle = RawClient::connect(addr).unwrap();
    let idle_id = client_id(&mut idle);
    let before = client_list(&mut control)[&idle_id].clone();
    let before = field(&before, "qbuf") + field(&before, "qbuf-free");
    wait(&mut control);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let fields = client_list(&mut control)[&idle_id].clone();
        let after = field(&fields, "qbuf") + field(&fields, "qbuf-free");
        if after == 0 || Instant::now() > deadline {
            // It still serves, with room again.
            assert_eq!(idle.command(&["PING"]).unwrap(), b"+PONG\r\n");
            return (before, after);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_idle_clients_read_buffer_is_given_back_as_in_redis() {
    let coordis_server = coordis::Server::builder().start_blocking().unwrap();
    let (before, after) = idle_query_buffer(coordis_server.addr(), |c| {
        c.command(&["COORDIS.CLOCK", "ADVANCE", "3500"]).unwrap();
    });
    assert!(before > 4096 && after == 0, "coordis: {before} bytes, then {after}");
    if let Some(redis) = redis() {
        let (before, after) = idle_query_buffer(redis.addr(), |_| std::thread::sleep(Duration::from_millis(3500)));
        assert!(before > 4096 && after == 0, "redis: {before} bytes, then {after}");
    }
}
