//! Model-based property test: random sequences of string, TTL, sorted-set,
//! hash, list and set commands (with a clock the test moves) run on
//! coordis's engine and on a small model written here from Redis's
//! documented rules; every reply must match byte for byte. Keys are shared
//! between the types so WRONGTYPE paths are exercised too, and a collection
//! emptied by a removal is gone, as in Redis.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
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
    /// HSET key member value (members double as fields).
    Hset(usize, usize, usize),
    Hget(usize, usize),
    Hdel(usize, usize),
    Hlen(usize),
    /// LPUSH (true) or RPUSH (false) key value.
    Push(usize, bool, usize),
    /// LPOP (true) or RPOP (false) key.
    Pop(usize, bool),
    Llen(usize),
    Lindex(usize, i64),
    /// SADD key member; SREM key member.
    Sadd(usize, usize),
    Srem(usize, usize),
    Sismember(usize, usize),
    Scard(usize),
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
        (key.clone(), member.clone()).prop_map(|(k, m)| Op::Zscore(k, m)),
        (key.clone(), member.clone(), 0..VALUES.len()).prop_map(|(k, f, v)| Op::Hset(k, f, v)),
        (key.clone(), member.clone()).prop_map(|(k, f)| Op::Hget(k, f)),
        (key.clone(), member.clone()).prop_map(|(k, f)| Op::Hdel(k, f)),
        key.clone().prop_map(Op::Hlen),
        (key.clone(), any::<bool>(), 0..VALUES.len()).prop_map(|(k, left, v)| Op::Push(k, left, v)),
        (key.clone(), any::<bool>()).prop_map(|(k, left)| Op::Pop(k, left)),
        key.clone().prop_map(Op::Llen),
        (key.clone(), -4i64..4).prop_map(|(k, i)| Op::Lindex(k, i)),
        (key.clone(), member.clone()).prop_map(|(k, m)| Op::Sadd(k, m)),
        (key.clone(), member.clone()).prop_map(|(k, m)| Op::Srem(k, m)),
        (key.clone(), member).prop_map(|(k, m)| Op::Sismember(k, m)),
        key.prop_map(Op::Scard),
        ms.prop_map(Op::Advance),
    ]
}

#[derive(Debug, Clone)]
enum Value {
    Str(String),
    Zset(BTreeMap<String, i64>),
    Hash(BTreeMap<String, String>),
    List(VecDeque<String>),
    Set(BTreeSet<String>),
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
            Op::Hset(key, f, v) => match self.live(KEYS[key]) {
                None => {
                    let h = BTreeMap::from([(MEMBERS[f].to_string(), VALUES[v].to_string())]);
                    self.keys.insert(KEYS[key].into(), (Value::Hash(h), None));
                    int(1)
                }
                Some((Value::Hash(h), _)) => int(h.insert(MEMBERS[f].into(), VALUES[v].into()).is_none() as i64),
                Some(_) => WRONGTYPE.into(),
            },
            Op::Hget(key, f) => match self.live(KEYS[key]) {
                None => "$-1\r\n".into(),
                Some((Value::Hash(h), _)) => h.get(MEMBERS[f]).map_or("$-1\r\n".into(), |v| bulk(v)),
                Some(_) => WRONGTYPE.into(),
            },
            Op::Hdel(key, f) => self.remove_from(key, |v| match v {
                Value::Hash(h) => Some((h.remove(MEMBERS[f]).is_some(), h.is_empty())),
                _ => None,
            }),
            Op::Hlen(key) => self.size(key, |v| match v {
                Value::Hash(h) => Some(h.len()),
                _ => None,
            }),
            Op::Push(key, left, v) => {
                let value = VALUES[v].to_string();
                match self.live(KEYS[key]) {
                    None => {
                        self.keys
                            .insert(KEYS[key].into(), (Value::List(VecDeque::from([value])), None));
                        int(1)
                    }
                    Some((Value::List(l), _)) => {
                        if left {
                            l.push_front(value);
                        } else {
                            l.push_back(value);
                        }
                        int(l.len() as i64)
                    }
                    Some(_) => WRONGTYPE.into(),
                }
            }
            Op::Pop(key, left) => match self.live(KEYS[key]) {
                None => "$-1\r\n".into(),
                Some((Value::List(l), _)) => {
                    let v = if left { l.pop_front() } else { l.pop_back() }.expect("lists are never empty");
                    if l.is_empty() {
                        self.keys.remove(KEYS[key]);
                    }
                    bulk(&v)
                }
                Some(_) => WRONGTYPE.into(),
            },
            Op::Llen(key) => self.size(key, |v| match v {
                Value::List(l) => Some(l.len()),
                _ => None,
            }),
            Op::Lindex(key, i) => match self.live(KEYS[key]) {
                None => "$-1\r\n".into(),
                Some((Value::List(l), _)) => {
                    let at = if i < 0 { l.len() as i64 + i } else { i };
                    match (at >= 0).then(|| l.get(at as usize)).flatten() {
                        Some(v) => bulk(v),
                        None => "$-1\r\n".into(),
                    }
                }
                Some(_) => WRONGTYPE.into(),
            },
            Op::Sadd(key, m) => match self.live(KEYS[key]) {
                None => {
                    let set = BTreeSet::from([MEMBERS[m].to_string()]);
                    self.keys.insert(KEYS[key].into(), (Value::Set(set), None));
                    int(1)
                }
                Some((Value::Set(set), _)) => int(set.insert(MEMBERS[m].into()) as i64),
                Some(_) => WRONGTYPE.into(),
            },
            Op::Srem(key, m) => self.remove_from(key, |v| match v {
                Value::Set(set) => Some((set.remove(MEMBERS[m]), set.is_empty())),
                _ => None,
            }),
            Op::Sismember(key, m) => match self.live(KEYS[key]) {
                None => int(0),
                Some((Value::Set(set), _)) => int(set.contains(MEMBERS[m]) as i64),
                Some(_) => WRONGTYPE.into(),
            },
            Op::Scard(key) => self.size(key, |v| match v {
                Value::Set(set) => Some(set.len()),
                _ => None,
            }),
            Op::Advance(ms) => {
                self.now += ms;
                return None;
            }
        })
    }

    /// A removal from a collection: `remove` answers (removed, now empty),
    /// or `None` for another type; an emptied collection's key goes.
    fn remove_from(&mut self, key: usize, remove: impl FnOnce(&mut Value) -> Option<(bool, bool)>) -> String {
        match self.live(KEYS[key]) {
            None => int(0),
            Some((value, _)) => match remove(value) {
                Some((removed, empty)) => {
                    if empty {
                        self.keys.remove(KEYS[key]);
                    }
                    int(removed as i64)
                }
                None => WRONGTYPE.into(),
            },
        }
    }

    /// A collection's size (0 when absent), or WRONGTYPE.
    fn size(&mut self, key: usize, len: impl FnOnce(&Value) -> Option<usize>) -> String {
        match self.live(KEYS[key]) {
            None => int(0),
            Some((value, _)) => len(value).map_or(WRONGTYPE.into(), |n| int(n as i64)),
        }
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
        Op::Hset(k, f, v) => s(&["HSET", KEYS[k], MEMBERS[f], VALUES[v]]),
        Op::Hget(k, f) => s(&["HGET", KEYS[k], MEMBERS[f]]),
        Op::Hdel(k, f) => s(&["HDEL", KEYS[k], MEMBERS[f]]),
        Op::Hlen(k) => s(&["HLEN", KEYS[k]]),
        Op::Push(k, left, v) => s(&[if left { "LPUSH" } else { "RPUSH" }, KEYS[k], VALUES[v]]),
        Op::Pop(k, left) => s(&[if left { "LPOP" } else { "RPOP" }, KEYS[k]]),
        Op::Llen(k) => s(&["LLEN", KEYS[k]]),
        Op::Lindex(k, i) => s(&["LINDEX", KEYS[k], &i.to_string()]),
        Op::Sadd(k, m) => s(&["SADD", KEYS[k], MEMBERS[m]]),
        Op::Srem(k, m) => s(&["SREM", KEYS[k], MEMBERS[m]]),
        Op::Sismember(k, m) => s(&["SISMEMBER", KEYS[k], MEMBERS[m]]),
        Op::Scard(k) => s(&["SCARD", KEYS[k]]),
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
