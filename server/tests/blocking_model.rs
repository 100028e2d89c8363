//! Model-based test of blocked clients: random sequences of BLPOP / BRPOP
//! from three waiting clients (one or two keys, with and without timeouts)
//! interleaved with a producer's pushes, pops, deletes, type changes, a
//! MULTI that creates and deletes a key, CLIENT UNBLOCK, and moves of the
//! clock. They run on coordis's engine (several clients, no socket) and on a
//! small model of Redis's rules: waiters are served first come first served
//! from the end they asked for, a key is ready only after the command that
//! stored it, a string serves nobody, a timeout answers a null array once
//! the clock is past the deadline. Every client's replies must match.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use coordis::testing::LocalEngine;
use coordis::ManualClock;
use proptest::prelude::*;

const KEYS: &[&str] = &["a", "b"];
const WAITERS: usize = 3;
const PRODUCER: u64 = 1;
/// Client ids of the waiters (the producer is 1).
fn waiter_id(w: usize) -> u64 {
    w as u64 + 2
}

#[derive(Debug, Clone)]
enum Op {
    /// BLPOP (`left`) or BRPOP on `keys` with a timeout of `ms` (0: none;
    /// the others are exact in binary, so seconds × 1000 has no rounding).
    Block {
        who: usize,
        keys: Vec<usize>,
        left: bool,
        ms: u64,
    },
    /// LPUSH / RPUSH of `n` fresh values.
    Push {
        key: usize,
        left: bool,
        n: usize,
    },
    Pop {
        key: usize,
        left: bool,
    },
    Del(usize),
    /// SET key to a string: stored, but serves nobody.
    SetString(usize),
    /// MULTI; RPUSH key x; DEL key; EXEC: wakes nobody.
    PushThenDelete(usize),
    Unblock {
        who: usize,
        error: bool,
    },
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0..KEYS.len();
    let who = 0..WAITERS;
    let keys = prop_oneof![
        key.clone().prop_map(|k| vec![k]),
        Just(vec![0, 1]),
        Just(vec![1, 0]),
        Just(vec![0, 0]),
    ];
    prop_oneof![
        3 => (who.clone(), keys, any::<bool>(), prop::sample::select(vec![0u64, 0, 125, 250, 500]))
            .prop_map(|(who, keys, left, ms)| Op::Block { who, keys, left, ms }),
        3 => (key.clone(), any::<bool>(), 1usize..4).prop_map(|(key, left, n)| Op::Push { key, left, n }),
        1 => (key.clone(), any::<bool>()).prop_map(|(key, left)| Op::Pop { key, left }),
        1 => key.clone().prop_map(Op::Del),
        1 => key.clone().prop_map(Op::SetString),
        1 => key.prop_map(Op::PushThenDelete),
        1 => (who, any::<bool>()).prop_map(|(who, error)| Op::Unblock { who, error }),
        2 => prop::sample::select(vec![1u64, 100, 124, 125, 126, 250]).prop_map(Op::Advance),
    ]
}

#[derive(Debug, Clone)]
enum Value {
    List(VecDeque<String>),
    Str,
}

#[derive(Debug, Clone)]
struct Waiter {
    left: bool,
    /// Unix ms; 0: never.
    deadline: u64,
}

#[derive(Default)]
struct Model {
    now: u64,
    keys: HashMap<usize, Value>,
    blocked: [Option<Waiter>; WAITERS],
    /// Per key, the waiters in arrival order.
    queues: HashMap<usize, VecDeque<usize>>,
    /// What each waiter should have received since the last look.
    expected: [Vec<u8>; WAITERS],
    values: usize,
}

const WRONGTYPE: &[u8] = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

fn pair(key: usize, value: &str) -> Vec<u8> {
    format!("*2\r\n{}{}", bulk(KEYS[key]), bulk(value)).into_bytes()
}

impl Model {
    fn pop(&mut self, key: usize, left: bool) -> Option<String> {
        let Some(Value::List(list)) = self.keys.get_mut(&key) else {
            return None;
        };
        let v = if left { list.pop_front() } else { list.pop_back() };
        if list.is_empty() {
            self.keys.remove(&key);
        }
        v
    }

    fn unblock(&mut self, who: usize) -> Option<Waiter> {
        let waiter = self.blocked[who].take()?;
        for q in self.queues.values_mut() {
            q.retain(|&w| w != who);
        }
        Some(waiter)
    }

    /// Serves the waiters of `key`, which a command just stored.
    fn serve(&mut self, key: usize) {
        while matches!(self.keys.get(&key), Some(Value::List(_))) {
            let Some(&who) = self.queues.get(&key).and_then(|q| q.front()) else {
                return;
            };
            let waiter = self.unblock(who).expect("queued waiters are blocked");
            let value = self.pop(key, waiter.left).expect("a non-empty list");
            self.expected[who].extend(pair(key, &value));
        }
    }

    /// Applies `op`; returns the producer's expected reply, and for a Block
    /// op the waiter's immediate reply (None: it blocks).
    fn apply(&mut self, op: &Op) -> Vec<u8> {
        match op {
            Op::Block { who, keys, left, ms } => {
                for &key in keys {
                    match self.keys.get(&key) {
                        Some(Value::Str) => return WRONGTYPE.to_vec(),
                        Some(Value::List(_)) => {
                            let value = self.pop(key, *left).expect("a non-empty list");
                            return pair(key, &value);
                        }
                        None => {}
                    }
                }
                let mut unique = keys.clone();
                unique.dedup();
                for &key in &unique {
                    self.queues.entry(key).or_default().push_back(*who);
                }
                self.blocked[*who] = Some(Waiter {
                    left: *left,
                    deadline: if *ms == 0 { 0 } else { self.now + ms },
                });
                vec![]
            }
            Op::Push { key, left, n } => {
                if matches!(self.keys.get(key), Some(Value::Str)) {
                    return WRONGTYPE.to_vec();
                }
                let list = match self.keys.entry(*key).or_insert_with(|| Value::List(VecDeque::new())) {
                    Value::List(l) => l,
                    Value::Str => unreachable!(),
                };
                for _ in 0..*n {
                    self.values += 1;
                    let v = format!("v{}", self.values);
                    if *left {
                        list.push_front(v);
                    } else {
                        list.push_back(v);
                    }
                }
                let len = list.len();
                self.serve(*key);
                format!(":{len}\r\n").into_bytes()
            }
            Op::Pop { key, left } => match self.keys.get(key) {
                Some(Value::Str) => WRONGTYPE.to_vec(),
                _ => self
                    .pop(*key, *left)
                    .map_or(b"$-1\r\n".to_vec(), |v| bulk(&v).into_bytes()),
            },
            Op::Del(key) => format!(":{}\r\n", self.keys.remove(key).is_some() as i64).into_bytes(),
            Op::SetString(key) => {
                self.keys.insert(*key, Value::Str);
                b"+OK\r\n".to_vec()
            }
            Op::PushThenDelete(key) => {
                let push = match self.keys.get(key) {
                    Some(Value::Str) => WRONGTYPE.to_vec(),
                    Some(Value::List(l)) => format!(":{}\r\n", l.len() + 1).into_bytes(),
                    None => b":1\r\n".to_vec(),
                };
                // The key exists when DEL runs: pushed to, or a string.
                self.keys.remove(key);
                let mut reply = b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n".to_vec();
                reply.extend(push);
                reply.extend(b":1\r\n");
                reply
            }
            Op::Unblock { who, error } => match self.unblock(*who) {
                Some(_) => {
                    self.expected[*who].extend_from_slice(if *error {
                        b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
                    } else {
                        b"*-1\r\n"
                    });
                    b":1\r\n".to_vec()
                }
                None => b":0\r\n".to_vec(),
            },
            Op::Advance(ms) => {
                self.now += ms;
                let mut due: Vec<(u64, usize)> = self
                    .blocked
                    .iter()
                    .enumerate()
                    .filter_map(|(who, w)| w.as_ref().map(|w| (w.deadline, who)))
                    .filter(|&(deadline, _)| deadline != 0 && deadline < self.now)
                    .collect();
                due.sort();
                for (_, who) in due {
                    self.unblock(who);
                    self.expected[who].extend_from_slice(b"*-1\r\n");
                }
                vec![]
            }
        }
    }
}

fn args(parts: &[&str]) -> Vec<Bytes> {
    parts.iter().map(|p| Bytes::copy_from_slice(p.as_bytes())).collect()
}

/// Runs `op` on the engine; returns what the model's `apply` returns.
fn run(engine: &mut LocalEngine, clock: &ManualClock, model: &Model, op: &Op) -> Vec<u8> {
    match op {
        Op::Block { who, keys, left, ms } => {
            if model.blocked[*who].is_some() {
                return vec![];
            }
            let mut cmd = vec![if *left { "BLPOP" } else { "BRPOP" }];
            cmd.extend(keys.iter().map(|&k| KEYS[k]));
            let timeout = format!("{}", *ms as f64 / 1000.0);
            cmd.push(&timeout);
            engine.run_as(waiter_id(*who), vec![args(&cmd)]).0
        }
        Op::Push { key, left, n } => {
            let values: Vec<String> = (1..=*n).map(|i| format!("v{}", model.values + i)).collect();
            let mut cmd = vec![if *left { "LPUSH" } else { "RPUSH" }, KEYS[*key]];
            cmd.extend(values.iter().map(String::as_str));
            engine.run_as(PRODUCER, vec![args(&cmd)]).0
        }
        Op::Pop { key, left } => {
            let cmd = [if *left { "LPOP" } else { "RPOP" }, KEYS[*key]];
            engine.run_as(PRODUCER, vec![args(&cmd)]).0
        }
        Op::Del(key) => engine.run_as(PRODUCER, vec![args(&["DEL", KEYS[*key]])]).0,
        Op::SetString(key) => engine.run_as(PRODUCER, vec![args(&["SET", KEYS[*key], "s"])]).0,
        Op::PushThenDelete(key) => {
            let batch = vec![
                args(&["MULTI"]),
                args(&["RPUSH", KEYS[*key], "x"]),
                args(&["DEL", KEYS[*key]]),
                args(&["EXEC"]),
            ];
            engine.run_as(PRODUCER, batch).0
        }
        Op::Unblock { who, error } => {
            let id = waiter_id(*who).to_string();
            let reason = if *error { "ERROR" } else { "TIMEOUT" };
            engine
                .run_as(PRODUCER, vec![args(&["CLIENT", "UNBLOCK", &id, reason])])
                .0
        }
        Op::Advance(ms) => {
            clock.advance_ms(*ms);
            engine.expire_blocked();
            vec![]
        }
    }
}

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).replace("\r\n", "\\r\\n")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn blocked_clients_follow_the_model(ops in prop::collection::vec(op(), 1..60)) {
        let clock = Arc::new(ManualClock::at_ms(1_700_000_000_000));
        let mut engine = LocalEngine::new(coordis::Config::default(), clock.clone());
        for _ in 0..WAITERS {
            engine.connect();
        }
        let mut model = Model { now: 1_700_000_000_000, ..Model::default() };
        for (i, op) in ops.iter().enumerate() {
            if let Op::Block { who, .. } = op {
                if model.blocked[*who].is_some() {
                    continue;
                }
            }
            let got = run(&mut engine, &clock, &model, op);
            let want = model.apply(op);
            prop_assert_eq!(show(&got), show(&want), "step {}: {:?}", i, op);
            for who in 0..WAITERS {
                let got = engine.received(waiter_id(who));
                let want = std::mem::take(&mut model.expected[who]);
                prop_assert_eq!(show(&got), show(&want), "step {}: {:?}, waiter {}", i, op, who);
            }
        }
    }
}
