//! A watchdog that keeps a held lock alive: every ttl/3 it extends the lease
//! with the owner-checked script. If an extension fails (the lease ran out
//! and someone else may hold the lock now), it stops and reports the loss
//! instead of carrying on silently. Dropping it stops the renewals.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::lock::Lock;

pub struct Watchdog {
    lost: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl Watchdog {
    /// Starts renewing `lock` (already held) to `ttl` every `ttl / 3`.
    pub fn start(client: redis::Client, lock: Lock, ttl: Duration) -> Watchdog {
        let lost = Arc::new(AtomicBool::new(false));
        let flag = lost.clone();
        let task = tokio::spawn(async move {
            let Ok(mut conn) = client.get_multiplexed_async_connection().await else {
                flag.store(true, Ordering::SeqCst);
                return;
            };
            let mut every = tokio::time::interval(ttl / 3);
            every.tick().await;
            loop {
                every.tick().await;
                match lock.extend(&mut conn, ttl).await {
                    Ok(true) => {}
                    // Not ours any more, or the server is unreachable: the
                    // holder must stop relying on the lock.
                    Ok(false) | Err(_) => {
                        flag.store(true, Ordering::SeqCst);
                        return;
                    }
                }
            }
        });
        Watchdog { lost, task }
    }

    /// True once a renewal failed: the lock may be held by someone else.
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Stops renewing (call before releasing the lock).
    pub fn stop(self) {
        self.task.abort();
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.task.abort();
    }
}
