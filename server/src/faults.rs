//! Fault rules of the test-control plane: a test says which commands (by
//! name glob), on which keys (glob on the command's keys) and from which
//! clients (name glob) go wrong, how often (after M matches, the next N
//! times, with a probability from a seeded generator), and how:
//!
//! - `Error(text)`: answer the error instead of running (`-READONLY ...`);
//! - `Drop`: close the connection before running (the request was lost);
//! - `LoseReply`: run, then close the connection without the reply (the
//!   "did my SET NX land?" case);
//! - `Hang`: hold the command, unanswered, until the rule is removed (then
//!   it runs) or the client gives up;
//! - `Delay { ms, jitter_ms }`: run, then hold the batch's replies `ms`
//!   of real time, plus up to `jitter_ms` drawn from the seeded generator;
//! - `Slice { bytes, pause_ms }`: run, then write the batch's replies in
//!   pieces of `bytes` with `pause_ms` between them (a client's parser must
//!   cope with a reply that arrives in parts).
//!
//! Rules are checked by [`crate::exec::admit`] for commands a connection
//! sends (not inside EXEC or scripts, not for coordis's own `COORDIS.*`
//! commands); with no rule set the check is one branch. Each rule counts its
//! matches and its fires; every fire is logged.

use bytes::Bytes;

use crate::cmd::CommandSpec;
use crate::net::clients::ClientState;
use crate::store::glob;

/// What a firing rule does to the command.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultAction {
    /// Answer this error (full text without the `-`, e.g. `READONLY ...`).
    Error(String),
    /// Close the connection before running the command.
    Drop,
    /// Run the command, then close the connection without its reply.
    LoseReply,
    /// Hold the command, unanswered, until the rule is removed.
    Hang,
    /// Run the command, then hold the replies `ms` (real time), plus up to
    /// `jitter_ms` more, drawn when the rule fires.
    Delay {
        /// The hold, ms.
        ms: u64,
        /// Most extra ms, drawn uniformly up to it.
        jitter_ms: u64,
    },
    /// Run the command, then write the replies `bytes` at a time with
    /// `pause_ms` (real time) between the pieces.
    Slice {
        /// Bytes per piece.
        bytes: usize,
        /// The pause between pieces, ms.
        pause_ms: u64,
    },
}

/// What fault rules did to one batch's replies (the connection applies it
/// when it writes them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplyFault {
    /// Hold the replies this long first, ms (0: no delay).
    pub delay_ms: u64,
    /// Write them in pieces of this many bytes, pausing this many ms.
    pub slice: Option<(usize, u64)>,
}

/// One rule: what it matches, when it fires, what it does.
#[derive(Debug, Clone)]
pub struct FaultRule {
    /// Command name glob, case-insensitive (`SET`, `EVAL*`); `None`: any.
    pub command: Option<String>,
    /// Glob one of the command's keys must match (`lock:*`); `None`: any
    /// command, with keys or not.
    pub key: Option<Bytes>,
    /// Glob the client's name (CLIENT SETNAME) must match.
    pub client: Option<Bytes>,
    /// Matches let through before the rule starts firing.
    pub after: u64,
    /// Fires left; `None`: always.
    pub times: Option<u64>,
    /// Chance of firing at a match, drawn from the seeded generator.
    pub probability: Option<f64>,
    /// What the rule does when it fires.
    pub action: FaultAction,
}

impl FaultRule {
    /// A rule that fires `action` on every command until told otherwise;
    /// narrow it with the builder methods.
    pub fn new(action: FaultAction) -> FaultRule {
        FaultRule {
            command: None,
            key: None,
            client: None,
            after: 0,
            times: None,
            probability: None,
            action,
        }
    }

    /// Only commands whose name matches `glob`, case-insensitively (a
    /// subcommand by its container's name).
    pub fn command(mut self, glob: &str) -> FaultRule {
        self.command = Some(glob.to_ascii_lowercase());
        self
    }

    /// Only commands with a key matching `glob` (case-sensitive).
    pub fn key(mut self, glob: &str) -> FaultRule {
        self.key = Some(Bytes::copy_from_slice(glob.as_bytes()));
        self
    }

    /// Only clients whose name (CLIENT SETNAME) matches `glob` (case-sensitive).
    pub fn client(mut self, glob: &str) -> FaultRule {
        self.client = Some(Bytes::copy_from_slice(glob.as_bytes()));
        self
    }

    /// Lets the first `matches` matches through before firing.
    pub fn after(mut self, matches: u64) -> FaultRule {
        self.after = matches;
        self
    }

    /// Fires at most `n` times.
    pub fn times(mut self, n: u64) -> FaultRule {
        self.times = Some(n);
        self
    }

    /// Fires at a match with probability `p` (0 to 1), drawn from the seeded generator.
    pub fn probability(mut self, p: f64) -> FaultRule {
        self.probability = Some(p);
        self
    }

    fn matches(&self, spec: &CommandSpec, args: &[Bytes], client: &ClientState) -> bool {
        let name = spec.name.split('|').next().unwrap_or(spec.name);
        if self
            .command
            .as_deref()
            .is_some_and(|g| !glob::matches(g.as_bytes(), name.as_bytes(), true))
        {
            return false;
        }
        if let Some(pattern) = &self.client {
            let name = client.name.as_deref().unwrap_or_default();
            if !glob::matches(pattern, name, false) {
                return false;
            }
        }
        if let Some(pattern) = &self.key {
            let keys = crate::cmd::keyspecs::command_keys(spec, args);
            if !keys.iter().any(|&k| glob::matches(pattern, &args[k], false)) {
                return false;
            }
        }
        true
    }
}

/// A rule as listed: its id and counts.
#[derive(Debug, Clone)]
pub struct FaultEntry {
    /// The id the rule was added under (for removing it).
    pub id: u64,
    /// The rule as added.
    pub rule: FaultRule,
    /// Commands it matched (those [`FaultRule::after`] let through included).
    pub matched: u64,
    /// Times it fired.
    pub fired: u64,
}

/// The server's rules and the generator their probabilities draw from.
#[derive(Debug)]
pub struct Faults {
    rules: Vec<FaultEntry>,
    next_id: u64,
    rng: fastrand::Rng,
}

impl Default for Faults {
    fn default() -> Faults {
        Faults {
            rules: Vec::new(),
            next_id: 1,
            rng: fastrand::Rng::with_seed(0),
        }
    }
}

impl Faults {
    /// Whether any rule is set (the hot path's one check).
    #[inline]
    pub fn any(&self) -> bool {
        !self.rules.is_empty()
    }

    pub fn add(&mut self, rule: FaultRule) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.rules.push(FaultEntry {
            id,
            rule,
            matched: 0,
            fired: 0,
        });
        id
    }

    /// Removes rule `id`; false if there is none.
    pub fn remove(&mut self, id: u64) -> bool {
        let before = self.rules.len();
        self.rules.retain(|r| r.id != id);
        self.rules.len() != before
    }

    pub fn clear(&mut self) {
        self.rules.clear();
    }

    pub fn list(&self) -> Vec<FaultEntry> {
        self.rules.clone()
    }

    /// Reseeds the generator probabilities draw from (a failing run replays).
    pub fn seed(&mut self, seed: u64) {
        self.rng = fastrand::Rng::with_seed(seed);
    }

    /// Whether a hang rule is still set (held clients wait for it to go).
    pub fn hangs(&self) -> bool {
        self.rules.iter().any(|r| r.rule.action == FaultAction::Hang)
    }

    /// The action of the first rule that fires for this command, counting
    /// matches and fires of every rule it reaches.
    pub fn check(&mut self, spec: &CommandSpec, args: &[Bytes], client: &ClientState) -> Option<FaultAction> {
        if spec.has(crate::cmd::flags::GUARD_TEST) {
            return None;
        }
        for entry in &mut self.rules {
            if !entry.rule.matches(spec, args, client) {
                continue;
            }
            entry.matched += 1;
            if entry.matched <= entry.rule.after || entry.rule.times == Some(0) {
                continue;
            }
            if entry.rule.probability.is_some_and(|p| self.rng.f64() >= p) {
                continue;
            }
            entry.fired += 1;
            if let Some(n) = entry.rule.times.as_mut() {
                *n -= 1;
            }
            tracing::info!(
                "fault rule {} fired on '{}' from client {}: {:?}",
                entry.id,
                spec.name,
                client.id,
                entry.rule.action
            );
            return Some(match entry.rule.action {
                FaultAction::Delay { ms, jitter_ms } if jitter_ms > 0 => FaultAction::Delay {
                    ms: ms.saturating_add(self.rng.u64(0..=jitter_ms)),
                    jitter_ms: 0,
                },
                ref action => action.clone(),
            });
        }
        None
    }
}
