//! Heartbeat leader election: every `interval` each pod runs one [`Elector::tick`]:
//! `SET key pod NX EX ttl` makes it leader; otherwise, if it already is the
//! leader, it renews its lease with an owner-checked script (atomic, so it
//! never renews a lease another pod took over); otherwise it follows.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{RedisResult, Script};

const EXTEND: &str = include_str!("../../scripts/lua/extend.lua");

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Leader,
    Follower,
}

/// One pod's elector; `is_leader` is readable from anywhere.
#[derive(Clone, Debug)]
pub struct Elector {
    pub key: String,
    pub pod: String,
    pub ttl: Duration,
    pub is_leader: Arc<AtomicBool>,
}

impl Elector {
    pub fn new(key: impl Into<String>, pod: impl Into<String>, ttl: Duration) -> Elector {
        Elector {
            key: key.into(),
            pod: pod.into(),
            ttl,
            is_leader: Arc::new(AtomicBool::new(false)),
        }
    }

    /// One heartbeat.
    pub async fn tick(&self, conn: &mut MultiplexedConnection) -> RedisResult<Role> {
        let took: Option<String> = redis::cmd("SET")
            .arg(&self.key)
            .arg(&self.pod)
            .arg("NX")
            .arg("PX")
            .arg(self.ttl.as_millis() as u64)
            .query_async(conn)
            .await?;
        let leader = if took.is_some() {
            true
        } else {
            let renewed: i64 = Script::new(EXTEND)
                .key(&self.key)
                .arg(&self.pod)
                .arg(self.ttl.as_millis() as u64)
                .invoke_async(conn)
                .await?;
            renewed == 1
        };
        self.is_leader.store(leader, Ordering::SeqCst);
        Ok(if leader { Role::Leader } else { Role::Follower })
    }

    /// One heartbeat that must answer within `limit`: a leader whose
    /// renewal fails or does not answer in time steps down at once (it can
    /// no longer know it holds the lease), and says so.
    pub async fn tick_within(&self, conn: &mut MultiplexedConnection, limit: Duration) -> Role {
        match tokio::time::timeout(limit, self.tick(conn)).await {
            Ok(Ok(role)) => role,
            Ok(Err(_)) | Err(_) => {
                self.is_leader.store(false, Ordering::SeqCst);
                Role::Follower
            }
        }
    }

    pub fn role(&self) -> Role {
        if self.is_leader.load(Ordering::SeqCst) {
            Role::Leader
        } else {
            Role::Follower
        }
    }
}
