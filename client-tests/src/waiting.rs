//! Recipes that wait instead of polling, on the blocking commands:
//!
//! - [`FairLock`]: [`SignalLock`] whose waiters block on its signal list
//!   (`BLPOP`) instead of polling it; the release script deletes the lock and
//!   pushes one token, so the longest-waiting waiter takes it: waiters are
//!   served in arrival order.
//! - [`ReliableQueue`]: workers `BLMOVE` a job from `pending` to `processing`,
//!   work, then `LREM` it; a job whose worker died stays in `processing` until
//!   a reaper moves it back, so every job is done (at least, and with the
//!   `done` set, exactly) once.
//! - [`DelayedQueue`]: a priority queue on a sorted set whose score is the
//!   time a job is due; workers `BZPOPMIN` the earliest and put back one that
//!   is not due yet.
//!
//! A blocking command holds its connection until it is answered, so each
//! waiter uses a connection of its own ([`waiting_connection`]).

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisResult};

use crate::queues::SignalLock;

/// A connection of its own for a waiter, with no client-side response
/// timeout (the crate sets none unless asked): a blocking command answers
/// when the server says so.
pub async fn waiting_connection(client: &redis::Client) -> RedisResult<MultiplexedConnection> {
    client
        .get_multiplexed_async_connection_with_config(&AsyncConnectionConfig::new())
        .await
}

/// Waits until the server shows client `id` blocked (CLIENT LIST `flags=b`):
/// a test uses it to know the order in which waiters arrived.
pub async fn until_blocked(conn: &mut MultiplexedConnection, id: i64) -> RedisResult<()> {
    let prefix = format!("id={id} ");
    for _ in 0..1000 {
        let list: String = redis::cmd("CLIENT").arg("LIST").query_async(conn).await?;
        let blocked = list.lines().filter(|l| l.starts_with(&prefix)).any(|l| {
            l.split(' ')
                .any(|f| f.strip_prefix("flags=").is_some_and(|f| f.contains('b')))
        });
        if blocked {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("client {id} never blocked");
}

/// Seconds for a blocking command's timeout argument.
fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// A lock with a queue: waiters block on `signal` in arrival order.
#[derive(Clone, Debug)]
pub struct FairLock {
    pub key: String,
    pub signal: String,
}

impl FairLock {
    /// The same lock as [`SignalLock`] takes and releases it.
    fn lock(&self) -> SignalLock {
        SignalLock {
            key: self.key.clone(),
            signal: self.signal.clone(),
        }
    }

    /// Takes the lock for `owner` with lease `ttl`, waiting up to `wait`
    /// for a release signal each time it is held. False if the wait ran out.
    pub async fn acquire(
        &self,
        conn: &mut MultiplexedConnection,
        owner: &str,
        ttl: Duration,
        wait: Duration,
    ) -> RedisResult<bool> {
        let lock = self.lock();
        loop {
            if lock.try_acquire(conn, owner, ttl).await? {
                return Ok(true);
            }
            let token: Option<(String, String)> = redis::cmd("BLPOP")
                .arg(&self.signal)
                .arg(secs(wait))
                .query_async(conn)
                .await?;
            if token.is_none() {
                return Ok(false);
            }
        }
    }

    /// Releases if `owner` holds it and wakes the first waiter.
    pub async fn release(&self, conn: &mut MultiplexedConnection, owner: &str) -> RedisResult<bool> {
        self.lock().release(conn, owner).await
    }
}

/// The reliable-queue pattern: `<name>:pending` → `<name>:processing`.
#[derive(Clone, Debug)]
pub struct ReliableQueue {
    pub name: String,
}

impl ReliableQueue {
    pub fn pending(&self) -> String {
        format!("{}:pending", self.name)
    }

    pub fn processing(&self) -> String {
        format!("{}:processing", self.name)
    }

    pub async fn push(&self, conn: &mut MultiplexedConnection, job: &str) -> RedisResult<()> {
        redis::cmd("LPUSH").arg(self.pending()).arg(job).query_async(conn).await
    }

    /// Waits up to `wait` for a job and moves it to processing in the same
    /// step, so a worker that dies after this leaves it there.
    pub async fn take(&self, conn: &mut MultiplexedConnection, wait: Duration) -> RedisResult<Option<String>> {
        redis::cmd("BLMOVE")
            .arg(self.pending())
            .arg(self.processing())
            .arg("RIGHT")
            .arg("LEFT")
            .arg(secs(wait))
            .query_async(conn)
            .await
    }

    /// The job is done: out of processing.
    pub async fn ack(&self, conn: &mut MultiplexedConnection, job: &str) -> RedisResult<()> {
        redis::cmd("LREM")
            .arg(self.processing())
            .arg(1)
            .arg(job)
            .query_async(conn)
            .await
    }

    /// Moves every job left in processing back to pending (run when no
    /// worker is alive, or with worker heartbeats in a real system).
    pub async fn reap(&self, conn: &mut MultiplexedConnection) -> RedisResult<usize> {
        let mut moved = 0;
        while redis::cmd("LMOVE")
            .arg(self.processing())
            .arg(self.pending())
            .arg("RIGHT")
            .arg("RIGHT")
            .query_async::<Option<String>>(conn)
            .await?
            .is_some()
        {
            moved += 1;
        }
        Ok(moved)
    }
}

/// A queue of jobs due at a time: a sorted set scored by due time (unix ms).
#[derive(Clone, Debug)]
pub struct DelayedQueue {
    pub key: String,
}

impl DelayedQueue {
    pub async fn schedule(&self, conn: &mut MultiplexedConnection, job: &str, due_ms: u64) -> RedisResult<()> {
        redis::cmd("ZADD")
            .arg(&self.key)
            .arg(due_ms)
            .arg(job)
            .query_async(conn)
            .await
    }

    /// Waits up to `wait` for the earliest job. A job not due at `now_ms`
    /// goes back (with its score) and `Ok(None)` says to come back later.
    pub async fn take_due(
        &self,
        conn: &mut MultiplexedConnection,
        now_ms: u64,
        wait: Duration,
    ) -> RedisResult<Option<String>> {
        let popped: Option<(String, String, f64)> = redis::cmd("BZPOPMIN")
            .arg(&self.key)
            .arg(secs(wait))
            .query_async(conn)
            .await?;
        match popped {
            Some((_, job, due)) if due as u64 <= now_ms => Ok(Some(job)),
            Some((_, job, due)) => {
                self.schedule(conn, &job, due as u64).await?;
                Ok(None)
            }
            None => Ok(None),
        }
    }
}
