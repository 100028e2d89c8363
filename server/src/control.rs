//! The test-control plane, Rust side: a server's handle on its test clock
//! ([`ServerClock`]), and the server-wide faults [`crate::Server`] exposes
//! (a stop-the-world pause, a restart that may lose the data). Moving the clock through it settles the server before
//! the call returns: every key due by the new time has expired, in deadline
//! order, with its `expired` event, and every blocked client whose timeout
//! passed has its reply. A test never sleeps after it. (The same controls
//! over the wire are `COORDIS.CLOCK`, `cmd/control.rs`.)

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::engine::Engine;
use crate::store::{Clock, VirtualClock};

/// The engine as the embedding API holds it.
pub(crate) type EngineRef = Arc<Mutex<Engine>>;

/// A handle on a running server's test controls (from
/// [`crate::Server::control`]): cheap to clone and to move into a task, for
/// the faults a test injects while its clients run.
#[derive(Clone)]
pub struct ServerControl {
    pub(crate) engine: EngineRef,
    pub(crate) clock: Option<Arc<VirtualClock>>,
}

impl std::fmt::Debug for ServerControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerControl")
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl ServerControl {
    /// See [`crate::Server::pause`].
    pub fn pause(&self) {
        self.engine.lock().shared().set_frozen(true);
    }

    /// See [`crate::Server::resume`].
    pub fn resume(&self) {
        self.engine.lock().shared().set_frozen(false);
    }

    /// See [`crate::Server::restart`].
    pub fn restart(&self, lose_data: bool) {
        self.engine.lock().restart(lose_data);
    }

    /// Adds a fault rule ([`crate::FaultRule`]); returns its id.
    pub fn add_fault(&self, rule: crate::FaultRule) -> u64 {
        self.engine.lock().add_fault(rule)
    }

    /// Removes fault rule `id`; false if there was none. Clients a hang
    /// rule held go on once no hang rule is left.
    pub fn remove_fault(&self, id: u64) -> bool {
        self.engine.lock().remove_faults(Some(id))
    }

    /// Removes every fault rule.
    pub fn clear_faults(&self) {
        self.engine.lock().remove_faults(None);
    }

    /// The rules with their match and fire counts.
    pub fn faults(&self) -> Vec<crate::FaultEntry> {
        self.engine.lock().fault_list()
    }

    /// Seeds the generator fault probabilities draw from.
    pub fn seed_faults(&self, seed: u64) {
        self.engine.lock().seed_faults(seed);
    }

    /// Seeds every random choice the server makes (SPOP, SRANDMEMBER,
    /// ZRANDMEMBER, HRANDFIELD, RANDOMKEY): the same seed and the same
    /// commands give the same answers, so a test using them replays.
    pub fn seed_random(&self, seed: u64) {
        self.engine.lock().seed_random(seed);
    }

    /// See [`crate::Server::clock`].
    pub fn clock(&self) -> Option<ServerClock> {
        Some(ServerClock {
            clock: self.clock.clone()?,
            engine: self.engine.clone(),
        })
    }
}

/// A server's test clock ([`crate::Server::clock`]). Each move settles the
/// server at once (see the module docs); a clock shared by several servers
/// ([`crate::Builder::virtual_clock`]) settles the others on their own timer
/// shortly after, or on their next access to a key.
///
/// ```
/// use std::time::Duration;
/// let server = coordis::Server::builder().start_blocking()?;
/// let clock = server.clock().expect("the default clock is virtual");
/// clock.freeze();
/// // ... SET lock owner PX 30000 ...
/// clock.advance(Duration::from_secs(31)); // the lock has expired, its event is out
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone)]
pub struct ServerClock {
    clock: Arc<VirtualClock>,
    engine: EngineRef,
}

impl std::fmt::Debug for ServerClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerClock")
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl ServerClock {
    /// The server's time, unix ms.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Moves the clock forward by `by` (frozen or running) and settles.
    pub fn advance(&self, by: Duration) {
        self.clock.advance_ms(by.as_millis().min(u64::MAX as u128) as u64);
        self.settle();
    }

    /// Steps the clock by `ms`, forwards or backwards (a wall-clock jump),
    /// and settles.
    pub fn jump_ms(&self, ms: i64) {
        self.clock.jump_ms(ms);
        self.settle();
    }

    /// Sets the clock to `unix_ms` and settles.
    pub fn set_ms(&self, unix_ms: u64) {
        self.clock.set_ms(unix_ms);
        self.settle();
    }

    /// Stops the clock where it stands: nothing expires until it moves.
    pub fn freeze(&self) {
        self.clock.freeze();
    }

    /// Lets a frozen clock run on from where it stands.
    pub fn resume(&self) {
        self.clock.resume();
        self.settle();
    }

    /// Back to real time, and settles.
    pub fn reset(&self) {
        self.clock.reset();
        self.settle();
    }

    /// The clock itself (to share it with another server's builder).
    pub fn virtual_clock(&self) -> Arc<VirtualClock> {
        self.clock.clone()
    }

    /// Brings the server up to its clock (see the module docs).
    pub fn settle(&self) {
        self.engine.lock().settle();
    }
}
