//! Recipes on streams:
//!
//! - [`WorkQueue`]: a consumer group as a lease-based work queue. A consumer
//!   reads with XREADGROUP, the message stays pending until it XACKs, and a
//!   message whose consumer went quiet for longer than the lease is taken
//!   over with XAUTOCLAIM: the same lease-and-takeover idea as a lock's TTL.
//! - [`EventLog`]: an events stream capped with `XADD ... MAXLEN ~ n` (whole
//!   nodes trimmed, so at least `n` events are kept) and read by listeners
//!   with `XREAD BLOCK`, the shape job queues use for their job events.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::RedisResult;

/// One stream entry: its ID and its field-value pairs, flat.
pub type Message = (String, Vec<String>);

/// XREAD / XREADGROUP's reply: per stream, its name and entries.
type ReadReply = Option<Vec<(String, Vec<Message>)>>;

fn entries(reply: ReadReply) -> Vec<Message> {
    reply.into_iter().flatten().flat_map(|(_, entries)| entries).collect()
}

/// A consumer group on a stream, used as a work queue.
#[derive(Clone, Debug)]
pub struct WorkQueue {
    pub key: String,
    pub group: String,
}

impl WorkQueue {
    /// Creates the group (and the stream) if missing, reading from the start.
    pub async fn create(&self, conn: &mut MultiplexedConnection) -> RedisResult<()> {
        let created: RedisResult<()> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(&self.key)
            .arg(&self.group)
            .arg("0")
            .arg("MKSTREAM")
            .query_async(conn)
            .await;
        match created {
            Err(e) if e.code() == Some("BUSYGROUP") => Ok(()),
            other => other,
        }
    }

    /// Adds a message with one field, `job`; returns its ID.
    pub async fn push(&self, conn: &mut MultiplexedConnection, job: &str) -> RedisResult<String> {
        redis::cmd("XADD")
            .arg(&self.key)
            .arg("*")
            .arg("job")
            .arg(job)
            .query_async(conn)
            .await
    }

    /// Up to `count` new messages for `consumer`, waiting up to `block` for
    /// one; each stays pending until [`WorkQueue::ack`].
    pub async fn take(
        &self,
        conn: &mut MultiplexedConnection,
        consumer: &str,
        count: usize,
        block: Duration,
    ) -> RedisResult<Vec<Message>> {
        let reply: ReadReply = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(&self.group)
            .arg(consumer)
            .arg("COUNT")
            .arg(count)
            .arg("BLOCK")
            .arg(block.as_millis() as u64)
            .arg("STREAMS")
            .arg(&self.key)
            .arg(">")
            .query_async(conn)
            .await?;
        Ok(entries(reply))
    }

    /// Acknowledges one message: true if it was pending (so exactly one
    /// acknowledgement of a message ever answers true).
    pub async fn ack(&self, conn: &mut MultiplexedConnection, id: &str) -> RedisResult<bool> {
        let n: i64 = redis::cmd("XACK")
            .arg(&self.key)
            .arg(&self.group)
            .arg(id)
            .query_async(conn)
            .await?;
        Ok(n == 1)
    }

    /// Takes over, for `consumer`, every message pending for longer than
    /// `lease` (XAUTOCLAIM, following its cursor round the whole PEL).
    pub async fn reclaim(
        &self,
        conn: &mut MultiplexedConnection,
        consumer: &str,
        lease: Duration,
    ) -> RedisResult<Vec<Message>> {
        let mut cursor = "0-0".to_string();
        let mut claimed = vec![];
        loop {
            let (next, mut batch, _deleted): (String, Vec<Message>, Vec<String>) = redis::cmd("XAUTOCLAIM")
                .arg(&self.key)
                .arg(&self.group)
                .arg(consumer)
                .arg(lease.as_millis() as u64)
                .arg(&cursor)
                .arg("COUNT")
                .arg(4)
                .query_async(conn)
                .await?;
            claimed.append(&mut batch);
            if next == "0-0" {
                return Ok(claimed);
            }
            cursor = next;
        }
    }

    /// Messages delivered and not yet acknowledged (XPENDING's count).
    pub async fn pending(&self, conn: &mut MultiplexedConnection) -> RedisResult<i64> {
        // [count, first ID, last ID, [[consumer, count], ...]]
        let summary: Vec<redis::Value> = redis::cmd("XPENDING")
            .arg(&self.key)
            .arg(&self.group)
            .query_async(conn)
            .await?;
        redis::from_redis_value(&summary[0])
    }
}

/// An events stream capped at about `max_len` events.
#[derive(Clone, Debug)]
pub struct EventLog {
    pub key: String,
    pub max_len: usize,
}

impl EventLog {
    /// Appends an event (one field, `event`), trimming whole old nodes past
    /// `max_len`; returns its ID.
    pub async fn publish(&self, conn: &mut MultiplexedConnection, event: &str) -> RedisResult<String> {
        redis::cmd("XADD")
            .arg(&self.key)
            .arg("MAXLEN")
            .arg("~")
            .arg(self.max_len)
            .arg("*")
            .arg("event")
            .arg(event)
            .query_async(conn)
            .await
    }

    /// The events after `after`, waiting up to `block` for the first.
    pub async fn listen(
        &self,
        conn: &mut MultiplexedConnection,
        after: &str,
        block: Duration,
    ) -> RedisResult<Vec<Message>> {
        let reply: ReadReply = redis::cmd("XREAD")
            .arg("COUNT")
            .arg(500)
            .arg("BLOCK")
            .arg(block.as_millis() as u64)
            .arg("STREAMS")
            .arg(&self.key)
            .arg(after)
            .query_async(conn)
            .await?;
        Ok(entries(reply))
    }
}
