//! Model-based property test: random sequences of string, TTL and sorted-set
//! commands (with a clock the test moves) run on coordis's engine and on a
//! small model written here from Redis's documented rules; every reply must
//! match byte for byte. Keys are shared between strings and sorted sets so
//! WRONGTYPE paths are exercised too.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use coordis::testing::LocalEngine;
use coordis::ManualClock;
use proptest::prelude::*;

const KEYS: &[&str] = &["a", "b", "c"];
const VALUES: &[&str] = &["1", "-3", "x", "9223372036854775807", ""];
const MEMBERS: &[&str] = &["m1", "m2", "m3"];

#[derive(Debug, Clone)]
enum Op {
    Set {
        key: usize,
        value: usize,
        px: Option<u64>,
        nx: bool,
        xx: bool,
    },
    Get(usize),
    Del(usize),
    Incr(usize),
    Pexpire(usize, i64),
    Pttl(usize),
    Exists(usize),
    Zadd(usize, i64, usize),
    Zrem(usize, usize),
    Zcard(usize),
    Zscore(usize, usize),
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0..KEYS.len();
    let member = 0..MEMBERS.len();
    // Few distinct durations, so clock moves land exactly on deadlines often.
    let ms = prop::sample::select(vec![1u64, 9, 10, 100, 1000]);
    prop_oneof![
        (
            key.clone(),
            0..VALUES.len(),
            prop::option::of(ms.clone()),
            any::<bool>(),
            any::<bool>()
        )
            .prop_map(|(key, value, px, nx, xx)| Op::Set {
                key,
                value,
                px,
                nx,
                xx: xx && !nx
            }),
        key.clone().prop_map(Op::Get),
        key.clone().prop_map(Op::Del),
        key.clone().prop_map(Op::Incr),
        (key.clone(), ms.clone(), any::<bool>())
            .prop_map(|(k, ms, neg)| Op::Pexpire(k, if neg { -(ms as i64) + 1 } else { ms as i64 })),
        key.clone().prop_map(Op::Pttl),
        key.clone().prop_map(Op::Exists),
        (key.clone(), -5i64..5, member.clone()).prop_map(|(k, s, m)| Op::Zadd(k, s, m)),
        (key.clone(), member.clone()).prop_map(|(k, m)| Op::Zrem(k, m)),
        key.clone().prop_map(Op::Zcard),
        (key, member).prop_map(|(k, m)| Op::Zscore(k, m)),
        ms.prop_map(Op::Advance),
    ]
}

#[derive(Debug, Clone)]
enum Value {
    Str(String),
    Zset(BTreeMap<String, i64>),
}

/// The model: keys with an optional deadline (unix ms).
#[derive(Default)]
struct Model {
    now: u64,
    keys: HashMap<String, (Value, Option<u64>)>,
}

const WRONGTYPE: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

fn int(n: i64) -> String {
    format!(":{n}\r\n")
}

fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

impl Model {
    /// Drops `key` if its deadline has passed (Redis: expired once now > deadline).
    fn live(&mut self, key: &str) -> Option<&mut (Value, Option<u64>)> {
        let now = self.now;
        if self.keys.get(key).is_some_and(|(_, d)| d.is_some_and(|d| now > d)) {
            self.keys.remove(key);
        }
        self.keys.get_mut(key)
    }

    fn apply(&mut self, op: &Op) -> Option<String> {
        Some(match *op {
            Op::Set { key, value, px, nx, xx } => {
                let exists = self.live(KEYS[key]).is_some();
                if (nx && exists) || (xx && !exists) {
                    return Some("$-1\r\n".into());
                }
                let deadline = px.map(|ms| self.now + ms);
                self.keys
                    .insert(KEYS[key].into(), (Value::Str(VALUES[value].into()), deadline));
                "+OK\r\n".into()
            }
            Op::Get(key) => match self.live(KEYS[key]) {
                None => "$-1\r\n".into(),
                Some((Value::Str(s), _)) => bulk(s),
                Some(_) => WRONGTYPE.into(),
            },
            Op::Del(key) => int(if self.live(KEYS[key]).is_some() {
                self.keys.remove(KEYS[key]);
                1
            } else {
                0
            }),
            Op::Incr(key) => match self.live(KEYS[key]) {
                None => {
                    self.keys.insert(KEYS[key].into(), (Value::Str("1".into()), None));
                    int(1)
                }
                Some((Value::Str(s), _)) => match s.parse::<i64>() {
                    Ok(n) if s == &n.to_string() => match n.checked_add(1) {
                        Some(m) => {
                            *s = m.to_string();
                            int(m)
                        }
                        None => "-ERR increment or decrement would overflow\r\n".into(),
                    },
                    _ => "-ERR value is not an integer or out of range\r\n".into(),
                },
                Some(_) => WRONGTYPE.into(),
            },
            Op::Pexpire(key, ms) => {
                let now = self.now;
                match self.live(KEYS[key]) {
                    None => int(0),
                    Some(_) if ms <= 0 => {
                        self.keys.remove(KEYS[key]);
                        int(1)
                    }
                    Some(entry) => {
                        entry.1 = Some(now + ms as u64);
                        int(1)
                    }
                }
            }
            Op::Pttl(key) => {
                let now = self.now;
                int(match self.live(KEYS[key]) {
                    None => -2,
                    Some((_, None)) => -1,
                    Some((_, Some(d))) => (*d - now) as i64,
                })
            }
            Op::Exists(key) => int(self.live(KEYS[key]).is_some() as i64),
            Op::Zadd(key, score, member) => match self.live(KEYS[key]) {
                None => {
                    let set = BTreeMap::from([(MEMBERS[member].to_string(), score)]);
                    self.keys.insert(KEYS[key].into(), (Value::Zset(set), None));
                    int(1)
                }
                Some((Value::Zset(set), _)) => int(set.insert(MEMBERS[member].into(), score).is_none() as i64),
                Some(_) => WRONGTYPE.into(),
            },
            Op::Zrem(key, member) => match self.live(KEYS[key]) {
                None => int(0),
                Some((Value::Zset(set), _)) => {
                    let removed = set.remove(MEMBERS[member]).is_some();
                    if set.is_empty() {
                        self.keys.remove(KEYS[key]);
                    }
                    int(removed as i64)
                }
                Some(_) => WRONGTYPE.into(),
            },
            Op::Zcard(key) => match self.live(KEYS[key]) {
                None => int(0),
                Some((Value::Zset(set), _)) => int(set.len() as i64),
                Some(_) => WRONGTYPE.into(),
            },
            Op::Zscore(key, member) => match self.live(KEYS[key]) {
                None => "$-1\r\n".into(),
                Some((Value::Zset(set), _)) => set
                    .get(MEMBERS[member])
                    .map_or("$-1\r\n".into(), |s| bulk(&s.to_string())),
                Some(_) => WRONGTYPE.into(),
            },
            Op::Advance(ms) => {
                self.now += ms;
                return None;
            }
        })
    }
}

fn command(op: &Op) -> Vec<String> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    match *op {
        Op::Set { key, value, px, nx, xx } => {
            let mut c = s(&["SET", KEYS[key], VALUES[value]]);
            if let Some(ms) = px {
                c.extend(s(&["PX", &ms.to_string()]));
            }
            if nx {
                c.push("NX".into());
            }
            if xx {
                c.push("XX".into());
            }
            c
        }
        Op::Get(k) => s(&["GET", KEYS[k]]),
        Op::Del(k) => s(&["DEL", KEYS[k]]),
        Op::Incr(k) => s(&["INCR", KEYS[k]]),
        Op::Pexpire(k, ms) => s(&["PEXPIRE", KEYS[k], &ms.to_string()]),
        Op::Pttl(k) => s(&["PTTL", KEYS[k]]),
        Op::Exists(k) => s(&["EXISTS", KEYS[k]]),
        Op::Zadd(k, score, m) => s(&["ZADD", KEYS[k], &score.to_string(), MEMBERS[m]]),
        Op::Zrem(k, m) => s(&["ZREM", KEYS[k], MEMBERS[m]]),
        Op::Zcard(k) => s(&["ZCARD", KEYS[k]]),
        Op::Zscore(k, m) => s(&["ZSCORE", KEYS[k], MEMBERS[m]]),
        Op::Advance(_) => vec![],
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn engine_agrees_with_the_model(ops in prop::collection::vec(op(), 1..120)) {
        let start = 1_700_000_000_000;
        let clock = Arc::new(ManualClock::at_ms(start));
        let mut engine = LocalEngine::new(coordis::Config::default(), clock.clone());
        let mut model = Model { now: start, ..Model::default() };
        for (i, op) in ops.iter().enumerate() {
            let expected = model.apply(op);
            if let Op::Advance(ms) = op {
                clock.advance_ms(*ms);
                continue;
            }
            let args: Vec<Bytes> = command(op).into_iter().map(Bytes::from).collect();
            let (reply, _) = engine.run(vec![args]);
            prop_assert_eq!(
                String::from_utf8_lossy(&reply).into_owned(),
                expected.unwrap(),
                "step {} {:?}", i, op
            );
        }
    }
}
