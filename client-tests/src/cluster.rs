//! Clusters for the cluster recipes and the cluster client matrix: a coordis
//! cluster in this process (`ServerSet::cluster`) or redis-server nodes
//! joined by `redis-cli --cluster create`, reached the same way, and a slot
//! moved step by step with the commands `redis-cli --cluster reshard` sends
//! (so one piece of code drives either kind).

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use coordis::testing::{RawClient, RedisServer};
use coordis::ServerSet;

/// Long enough for a loaded CI machine; a hang fails with a message.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A running cluster of either kind.
pub enum Cluster {
    Coordis(ServerSet),
    Redis(Vec<RedisServer>),
}

impl Cluster {
    /// Every node's address.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        match self {
            Cluster::Coordis(set) => (0..set.len()).map(|i| set.server(i).addr()).collect(),
            Cluster::Redis(servers) => servers.iter().map(RedisServer::addr).collect(),
        }
    }

    /// Every node's (host, port): the seeds of a cluster client.
    pub fn nodes(&self) -> Vec<(String, u16)> {
        self.addrs().iter().map(|a| (a.ip().to_string(), a.port())).collect()
    }

    /// Stops every node.
    pub async fn shutdown(self) {
        if let Cluster::Coordis(set) = self {
            set.shutdown().await;
        }
    }
}

/// `masters` redis-server cluster nodes (and `replicas` per master),
/// created by `redis-cli --cluster create` and `cluster_state:ok` on every
/// node; `None` (skipped loudly by RedisServer, refused under
/// COORDIS_REQUIRE_REDIS=1) without redis-server.
pub fn redis_cluster(masters: usize, replicas: usize) -> Option<Vec<RedisServer>> {
    let mut servers = vec![];
    for _ in 0..masters * (1 + replicas) {
        servers.push(RedisServer::start(&["--cluster-enabled", "yes"]).unwrap()?);
    }
    let hosts: Vec<String> = servers.iter().map(|s| s.addr().to_string()).collect();
    let out = Command::new("redis-cli")
        .args(["--cluster", "create"])
        .args(&hosts)
        .args(["--cluster-replicas", &replicas.to_string()])
        .arg("--cluster-yes")
        .output()
        .expect("redis-cli");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let deadline = Instant::now() + PATIENCE;
    for s in &servers {
        let mut c = RawClient::connect(s.addr()).unwrap();
        while !String::from_utf8_lossy(&c.command(&["CLUSTER", "INFO"]).unwrap()).contains("cluster_state:ok") {
            assert!(Instant::now() < deadline, "{} never reached cluster_state:ok", s.addr());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Some(servers)
}

/// Runs `case` on a coordis cluster of three primaries, then on a Redis
/// one (if redis-server is installed), each within [`PATIENCE`]: the
/// backend's name and the seed nodes.
pub async fn on_both<F, Fut>(case: F)
where
    F: Fn(String, Vec<(String, u16)>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let coordis = Cluster::Coordis(ServerSet::cluster(3, 0).await.unwrap());
    tokio::time::timeout(PATIENCE, case("coordis".into(), coordis.nodes()))
        .await
        .expect("coordis: no answer in time");
    coordis.shutdown().await;
    let Some(redis) = tokio::task::spawn_blocking(|| redis_cluster(3, 0)).await.unwrap() else {
        return;
    };
    let redis = Cluster::Redis(redis);
    tokio::time::timeout(PATIENCE, case("redis".into(), redis.nodes()))
        .await
        .expect("redis: no answer in time");
}

/// One line of CLUSTER NODES.
#[derive(Clone, Debug)]
pub struct Node {
    pub id: String,
    /// `ip:port` (the client port).
    pub addr: String,
    pub primary: bool,
    /// The slot ranges it serves, inclusive.
    pub slots: Vec<(u16, u16)>,
}

impl Node {
    pub fn serves(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(from, to)| (from..=to).contains(&slot))
    }

    /// A plain (not cluster-aware) connection to this node.
    pub async fn connect(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(format!("redis://{}", self.addr))
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    }
}

/// The cluster as the node at `(host, port)` sees it (CLUSTER NODES).
pub async fn topology(host: &str, port: u16) -> Vec<Node> {
    let mut conn = redis::Client::open(format!("redis://{host}:{port}"))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let text: String = redis::cmd("CLUSTER").arg("NODES").query_async(&mut conn).await.unwrap();
    text.lines()
        .map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let addr = fields[1].split('@').next().unwrap().to_string();
            let slots = fields[8..]
                .iter()
                .filter(|s| !s.starts_with('['))
                .map(|s| match s.split_once('-') {
                    Some((a, b)) => (a.parse().unwrap(), b.parse().unwrap()),
                    None => (s.parse().unwrap(), s.parse().unwrap()),
                })
                .collect();
            Node {
                id: fields[0].to_string(),
                addr,
                primary: fields[2].contains("master"),
                slots,
            }
        })
        .collect()
}

/// A slot moved from its owner to another primary one step at a time, as
/// `redis-cli --cluster reshard` moves it: clients meet `-ASK` for the
/// keys moved while the slot is in flight, and `-MOVED` once it is done.
pub struct SlotMove {
    pub slot: u16,
    pub source: Node,
    pub target: Node,
    /// Every primary, told the new owner at the end.
    primaries: Vec<Node>,
}

impl SlotMove {
    /// The move of `slot` from its owner to the next primary, in the
    /// cluster the node at `(host, port)` sees.
    pub async fn new(host: &str, port: u16, slot: u16) -> SlotMove {
        let primaries: Vec<Node> = topology(host, port).await.into_iter().filter(|n| n.primary).collect();
        let at = primaries
            .iter()
            .position(|n| n.serves(slot))
            .expect("the slot has an owner");
        SlotMove {
            slot,
            source: primaries[at].clone(),
            target: primaries[(at + 1) % primaries.len()].clone(),
            primaries,
        }
    }

    async fn setslot(node: &Node, slot: u16, state: &str, id: &str) {
        let mut conn = node.connect().await;
        let () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg(state)
            .arg(id)
            .query_async(&mut conn)
            .await
            .unwrap();
    }

    /// IMPORTING on the target, then MIGRATING on the source.
    pub async fn begin(&self) {
        Self::setslot(&self.target, self.slot, "IMPORTING", &self.source.id).await;
        Self::setslot(&self.source, self.slot, "MIGRATING", &self.target.id).await;
    }

    /// MIGRATEs `key` (its value and its time to live) to the target.
    pub async fn move_key(&self, key: &str) {
        let (host, port) = self.target.addr.rsplit_once(':').unwrap();
        let mut conn = self.source.connect().await;
        let reply: String = redis::cmd("MIGRATE")
            .arg(host)
            .arg(port)
            .arg(key)
            .arg(0)
            .arg(5000)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(reply, "OK", "MIGRATE {key}");
    }

    /// The target owns the slot: SETSLOT NODE on the target, the source,
    /// then every other primary.
    pub async fn finish(&self) {
        Self::setslot(&self.target, self.slot, "NODE", &self.target.id).await;
        Self::setslot(&self.source, self.slot, "NODE", &self.target.id).await;
        for other in &self.primaries {
            if other.id != self.target.id && other.id != self.source.id {
                Self::setslot(other, self.slot, "NODE", &self.target.id).await;
            }
        }
    }
}
