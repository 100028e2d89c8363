//! ACL users as Redis 7.0.15 keeps them (`src/acl.c`): the users and their
//! rules ([`User`], [`Selector`]), the rule parser (`ACL SETUSER`'s
//! modifiers, the `user` directive, the ACL file), the description
//! `ACL LIST` and `ACL SAVE` print, the permission check admission makes
//! ([`check`]), and the ACL log.
//!
//! It owns no connection and performs no I/O except reading and writing
//! the ACL file for `ACL LOAD`/`ACL SAVE` ([`load_file`], [`save_file`]).
//! A malformed rule is an error with Redis's text ([`RuleError`]), never a
//! panic.
//!
//! Commands are indexed once from the command table ([`index`]): a
//! selector's allowed commands are one flag per row (subcommands included)
//! plus the "future commands" flag `+@all` sets, as Redis's bitmap with its
//! reserved bit. Where Redis walks its command dict (the single commands
//! `ACL LIST` names after the categories, `ACL CAT <category>`), the order
//! is coordis's table order: Redis's is its dict's hash order, seeded at
//! random per process.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use sha2::{Digest, Sha256};

use crate::cmd::{acl as cat, flags, keyspecs, CommandSpec};
use crate::errors;

/// Length of a password hash in hex (SHA-256).
const HASH_LEN: usize = 64;
/// Entries of the ACL log within this many milliseconds of each other
/// group into one (Redis's `ACL_LOG_GROUPING_MAX_TIME_DELTA`).
const LOG_GROUPING_MS: u64 = 60_000;
/// How many recent log entries a new one is compared with for grouping.
const LOG_GROUPING_SCAN: usize = 10;
/// The most bits `ACL GENPASS` makes.
pub(crate) const GENPASS_MAX_BITS: i64 = 4096;
/// `ACL GENPASS`'s default size.
pub(crate) const GENPASS_DEFAULT_BITS: i64 = 256;

/// The command table as the ACL sees it: every row, each container
/// followed by its subcommands, with their categories.
pub(crate) struct Index {
    pub(crate) rows: Vec<&'static CommandSpec>,
    /// Each row's parent (a subcommand's container).
    parent: Vec<Option<usize>>,
    /// Each container's subcommands (indices into `rows`).
    children: Vec<Vec<usize>>,
    /// The top-level rows, in table order.
    top: Vec<usize>,
    /// The rows' ACL category bits.
    pub(crate) cats: Vec<u32>,
    by_name: std::collections::HashMap<&'static str, usize>,
}

impl Index {
    /// The flag `+@all` sets beyond the rows: "future commands".
    fn future(&self) -> usize {
        self.rows.len()
    }

    pub(crate) fn id(&self, spec: &CommandSpec) -> Option<usize> {
        self.by_name.get(spec.name).copied()
    }

    /// The rows in the order Redis's walks visit them: each top-level row,
    /// then its subcommands.
    pub(crate) fn walk(&self) -> impl Iterator<Item = usize> + '_ {
        self.top
            .iter()
            .flat_map(move |&t| std::iter::once(t).chain(self.children[t].iter().copied()))
    }
}

/// The index of the command table, built on first use.
pub(crate) fn index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut index = Index {
            rows: vec![],
            parent: vec![],
            children: vec![],
            top: vec![],
            cats: vec![],
            by_name: Default::default(),
        };
        for spec in crate::cmd::all() {
            let id = index.rows.len();
            index.top.push(id);
            index.rows.push(spec);
            index.parent.push(None);
            index.children.push(vec![]);
            index.cats.push(spec.category_bits());
            index.by_name.insert(spec.name, id);
            for sub in spec.subcommands {
                let sid = index.rows.len();
                index.rows.push(sub);
                index.parent.push(Some(id));
                index.children.push(vec![]);
                index.cats.push(sub.category_bits());
                index.by_name.insert(sub.name, sid);
                index.children[id].push(sid);
            }
        }
        index
    })
}

/// The category named `name` (without `@`), as Redis's table names them.
pub(crate) fn category(name: &[u8]) -> Option<u32> {
    cat::NAMES
        .iter()
        .find(|(_, n)| n.as_bytes()[1..].eq_ignore_ascii_case(name))
        .map(|(bit, _)| *bit)
}

/// Why a rule was refused: Redis's errno, worded by `ACLSetUserStringError`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RuleError {
    /// EINVAL
    Syntax,
    /// ENOENT
    Unknown,
    /// EEXIST
    KeysAfterAll,
    /// EISDIR
    ChannelsAfterAll,
    /// ENODEV
    NoSuchPassword,
    /// EBADMSG
    BadHash,
    /// ECHILD
    FirstArgOfSub,
}

impl RuleError {
    pub(crate) fn text(self) -> &'static str {
        match self {
            RuleError::Syntax => errors::acl::SYNTAX,
            RuleError::Unknown => errors::acl::UNKNOWN,
            RuleError::KeysAfterAll => errors::acl::KEYS_AFTER_ALL,
            RuleError::ChannelsAfterAll => errors::acl::CHANNELS_AFTER_ALL,
            RuleError::NoSuchPassword => errors::acl::NO_SUCH_PASSWORD,
            RuleError::BadHash => errors::acl::BAD_HASH,
            RuleError::FirstArgOfSub => errors::acl::FIRST_ARG_OF_SUB,
        }
    }
}

/// Read permission of a key pattern (`%R~`).
const PERM_READ: u8 = 1;
/// Write permission of a key pattern (`%W~`).
const PERM_WRITE: u8 = 2;
const PERM_ALL: u8 = PERM_READ | PERM_WRITE;

/// A set of permissions: the user's root one, or one of its `( ... )`
/// selectors. A command runs when any selector allows all of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Selector {
    allkeys: bool,
    allchannels: bool,
    /// `+@all` with nothing taken away since (Redis's ALLCOMMANDS flag:
    /// the command check is skipped).
    allcommands: bool,
    /// One flag per row of [`index`], then the future-commands flag.
    allowed: Vec<bool>,
    /// `+cmd|arg` of a command without subcommands: the first arguments
    /// it may run with although the command itself is not allowed.
    firstargs: BTreeMap<usize, Vec<Vec<u8>>>,
    /// Key patterns with their [`PERM_READ`]/[`PERM_WRITE`] bits, in order.
    patterns: Vec<(Vec<u8>, u8)>,
    channels: Vec<Vec<u8>>,
}

impl Selector {
    fn new(pubsub_all: bool) -> Selector {
        Selector {
            allkeys: false,
            allchannels: pubsub_all,
            allcommands: false,
            allowed: vec![false; index().rows.len() + 1],
            firstargs: BTreeMap::new(),
            patterns: vec![],
            channels: vec![],
        }
    }

    fn set_bit(&mut self, id: usize, value: bool) {
        self.allowed[id] = value;
        if !value {
            self.allcommands = false;
        }
    }

    /// Redis's `ACLChangeSelectorPerm`: the row and, for a container, its
    /// subcommands.
    fn change(&mut self, id: usize, allow: bool) {
        self.set_bit(id, allow);
        self.firstargs.remove(&id);
        for &sub in &index().children[id] {
            self.set_bit(sub, allow);
        }
    }

    fn set_category(&mut self, bit: u32, allow: bool) {
        let index = index();
        for id in index.walk() {
            if index.cats[id] & bit != 0 {
                self.change(id, allow);
            }
        }
    }

    fn set_all(&mut self, allow: bool) {
        self.allowed.iter_mut().for_each(|b| *b = allow);
        self.allcommands = allow;
        self.firstargs.clear();
    }

    /// One selector rule (Redis's `ACLSetSelector`).
    fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        if op.is_empty() {
            return Err(RuleError::Syntax);
        }
        let is = |word: &str| op.eq_ignore_ascii_case(word.as_bytes());
        if is("allkeys") || op == b"~*" {
            self.allkeys = true;
            self.patterns.clear();
        } else if is("resetkeys") {
            self.allkeys = false;
            self.patterns.clear();
        } else if is("allchannels") || op == b"&*" {
            self.allchannels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.allchannels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.set_all(true);
        } else if is("nocommands") || is("-@all") {
            self.set_all(false);
        } else if op[0] == b'~' || op[0] == b'%' {
            if self.allkeys {
                return Err(RuleError::KeysAfterAll);
            }
            let mut perm = 0;
            let mut offset = 1;
            if op[0] == b'%' {
                while offset < op.len() {
                    match op[offset].to_ascii_uppercase() {
                        b'R' if perm & PERM_READ == 0 => perm |= PERM_READ,
                        b'W' if perm & PERM_WRITE == 0 => perm |= PERM_WRITE,
                        b'~' => {
                            offset += 1;
                            break;
                        }
                        _ => return Err(RuleError::Syntax),
                    }
                    offset += 1;
                }
            } else {
                perm = PERM_ALL;
            }
            let pattern = &op[offset.min(op.len())..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            match self.patterns.iter_mut().find(|(p, _)| p == pattern) {
                Some((_, existing)) => *existing |= perm,
                None => self.patterns.push((pattern.to_vec(), perm)),
            }
            self.allkeys = false;
        } else if op[0] == b'&' {
            if self.allchannels {
                return Err(RuleError::ChannelsAfterAll);
            }
            let pattern = &op[1..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|c| c == pattern) {
                self.channels.push(pattern.to_vec());
            }
            self.allchannels = false;
        } else if op[0] == b'+' && op.get(1) != Some(&b'@') {
            let name = &op[1..];
            match name.iter().rposition(|&c| c == b'|') {
                None => {
                    let id = lookup(name).ok_or(RuleError::Unknown)?;
                    self.change(id, true);
                }
                Some(bar) => {
                    let index = index();
                    let id = lookup(&name[..bar]).ok_or(RuleError::Unknown)?;
                    if index.parent[id].is_some() {
                        return Err(RuleError::FirstArgOfSub);
                    }
                    let sub = &name[bar + 1..];
                    if sub.is_empty() {
                        return Err(RuleError::Syntax);
                    }
                    if !index.children[id].is_empty() {
                        let id = lookup(name).ok_or(RuleError::Unknown)?;
                        self.change(id, true);
                    } else {
                        let args = self.firstargs.entry(id).or_default();
                        if !args.iter().any(|a| a.eq_ignore_ascii_case(sub)) {
                            args.push(sub.to_vec());
                        }
                    }
                }
            }
        } else if op[0] == b'-' && op.get(1) != Some(&b'@') {
            let id = lookup(&op[1..]).ok_or(RuleError::Unknown)?;
            self.change(id, false);
        } else if (op[0] == b'+' || op[0] == b'-') && op.get(1) == Some(&b'@') {
            let bit = category(&op[2..]).ok_or(RuleError::Unknown)?;
            self.set_category(bit, op[0] == b'+');
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    /// How many commands of a category this selector allows and denies.
    fn count(&self, bit: u32) -> (usize, usize) {
        let index = index();
        let (mut on, mut off) = (0, 0);
        for id in index.walk() {
            if index.cats[id] & bit != 0 {
                if self.allowed[id] {
                    on += 1;
                } else {
                    off += 1;
                }
            }
        }
        (on, off)
    }

    /// The command rules that rebuild this selector's commands (Redis's
    /// `ACLDescribeSelectorCommandRules`): `+@all` or `-@all`, the
    /// categories that fit best, then single commands.
    pub(crate) fn describe_commands(&self) -> String {
        let index = index();
        let additive = !self.allowed[index.future()];
        let mut rules = String::new();
        let mut fake = Selector::new(false);
        if additive {
            rules.push_str("-@all ");
        } else {
            rules.push_str("+@all ");
            fake.set_all(true);
        }
        let mut temp = self.clone();
        let mut applied = [false; 64];
        loop {
            let mut best = None;
            let (mut mindiff, mut maxsame) = (usize::MAX, 0);
            for (j, (bit, _)) in cat::NAMES.iter().enumerate() {
                if applied[j] {
                    continue;
                }
                let (on, off) = temp.count(*bit);
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < mindiff || (diff == mindiff && same > maxsame)) {
                    best = Some(j);
                    mindiff = diff;
                    maxsame = same;
                }
            }
            let Some(best) = best else { break };
            let (bit, name) = cat::NAMES[best];
            fake.set_category(bit, additive);
            temp.set_category(bit, !additive);
            rules.push(if additive { '+' } else { '-' });
            rules.push_str(name);
            rules.push(' ');
            applied[best] = true;
        }
        for &top in &index.top {
            self.describe_single(&mut fake, top, &mut rules);
        }
        rules.pop();
        rules
    }

    fn describe_single(&self, fake: &mut Selector, id: usize, rules: &mut String) {
        let index = index();
        let user = self.allowed[id];
        if user != fake.allowed[id] {
            rules.push(if user { '+' } else { '-' });
            rules.push_str(index.rows[id].name);
            rules.push(' ');
            fake.change(id, user);
        }
        for &sub in &index.children[id] {
            self.describe_single(fake, sub, rules);
        }
        if !user {
            for arg in self.firstargs.get(&id).into_iter().flatten() {
                rules.push('+');
                rules.push_str(index.rows[id].name);
                rules.push('|');
                rules.push_str(&String::from_utf8_lossy(arg));
                rules.push(' ');
            }
        }
    }

    /// `~pat %R~pat ...`, separated by spaces (GETUSER's `keys`).
    pub(crate) fn describe_keys(&self) -> String {
        if self.allkeys {
            return "~*".into();
        }
        let parts: Vec<String> = self.patterns.iter().map(|(p, perm)| pattern_rule(p, *perm)).collect();
        parts.join(" ")
    }

    /// `&pat ...` (GETUSER's `channels`).
    pub(crate) fn describe_channels(&self) -> String {
        if self.allchannels {
            return "&*".into();
        }
        let parts: Vec<String> = self
            .channels
            .iter()
            .map(|c| format!("&{}", String::from_utf8_lossy(c)))
            .collect();
        parts.join(" ")
    }

    /// Keys, channels and commands as `ACL LIST` prints a selector.
    fn describe(&self) -> String {
        let mut out = String::new();
        if self.allkeys {
            out.push_str("~* ");
        } else {
            for (p, perm) in &self.patterns {
                out.push_str(&pattern_rule(p, *perm));
                out.push(' ');
            }
        }
        if self.allchannels {
            out.push_str("&* ");
        } else {
            out.push_str("resetchannels ");
            for c in &self.channels {
                out.push('&');
                out.push_str(&String::from_utf8_lossy(c));
                out.push(' ');
            }
        }
        out.push_str(&self.describe_commands());
        out
    }

    fn unrestricted(&self) -> bool {
        self.allcommands && self.allkeys && self.allchannels
    }

    /// Redis's `ACLSelectorCheckCmd`.
    fn check(&self, spec: &CommandSpec, id: usize, args: &[Bytes], keys: &mut Option<Vec<keyspecs::Key>>) -> Check {
        if !self.allcommands && !spec.has(flags::NO_AUTH) && !self.allowed[id] {
            let Some(firstargs) = self.firstargs.get(&id) else {
                return Check::Denied(Denied::Command);
            };
            let at = if index().parent[id].is_some() { 2 } else { 1 };
            let Some(arg) = args.get(at) else {
                return Check::Denied(Denied::Command);
            };
            if !firstargs.iter().any(|a| a.eq_ignore_ascii_case(arg)) {
                return Check::Denied(Denied::Command);
            }
        }
        if !self.allkeys && !spec.key_specs.is_empty() {
            let keys = keys.get_or_insert_with(|| keyspecs::keys(spec, args));
            // Shard channels are `not_key` specs: not keys to the ACL
            // (Redis's GET_KEYSPEC_DEFAULT leaves them out).
            let checked = keys
                .iter()
                .filter(|(pos, flags)| *pos < args.len() && !flags.contains(&"not_key"));
            for &(pos, key_flags) in checked {
                if !self.key_allowed(&args[pos], key_flags) {
                    return Check::Denied(Denied::Key(pos));
                }
            }
        }
        if !self.allchannels {
            if let Some(channels) = spec.channels {
                let end = channels.end.unwrap_or(args.len()).min(args.len());
                for (pos, channel) in args.iter().enumerate().take(end).skip(channels.first) {
                    if !channel_allowed(&self.channels, channel, channels.patterns) {
                        return Check::Denied(Denied::Channel(pos));
                    }
                }
            }
        }
        Check::Ok
    }

    fn key_allowed(&self, key: &[u8], key_flags: &[&str]) -> bool {
        if self.allkeys {
            return true;
        }
        let mut need = 0;
        for f in key_flags {
            match *f {
                "access" => need |= PERM_READ,
                "insert" | "delete" | "update" => need |= PERM_WRITE,
                _ => {}
            }
        }
        self.patterns
            .iter()
            .any(|(p, perm)| perm & need == need && crate::store::glob::matches(p, key, false))
    }
}

enum Check {
    Ok,
    Denied(Denied),
}

/// A channel against a selector's channel patterns: a channel matches as a
/// glob, a PSUBSCRIBE pattern only literally.
fn channel_allowed(patterns: &[Vec<u8>], channel: &[u8], is_pattern: bool) -> bool {
    patterns.iter().any(|p| {
        if is_pattern {
            p == channel
        } else {
            crate::store::glob::matches(p, channel, false)
        }
    })
}

fn pattern_rule(pattern: &[u8], perm: u8) -> String {
    let prefix = match perm {
        PERM_READ => "%R~",
        PERM_WRITE => "%W~",
        _ => "~",
    };
    format!("{prefix}{}", String::from_utf8_lossy(pattern))
}

/// A row by ACL name (`get`, `config|get`), any case, as Redis's
/// `ACLLookupCommand`.
fn lookup(name: &[u8]) -> Option<usize> {
    let spec = crate::cmd::lookup(name)?;
    index().id(spec)
}

/// Spaces or NUL characters (not allowed in user names and patterns).
pub(crate) fn has_spaces(s: &[u8]) -> bool {
    s.iter().any(|&c| c.is_ascii_whitespace() || c == 0)
}

/// The SHA-256 hex of a password, as ACL stores passwords.
pub(crate) fn hash_password(password: &[u8]) -> String {
    let digest = Sha256::digest(password);
    let mut hex = String::with_capacity(HASH_LEN);
    for b in digest {
        hex.push_str(&format!("{b:02x}"));
    }
    hex
}

fn valid_hash(hash: &[u8]) -> bool {
    hash.len() == HASH_LEN && hash.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// Compares two equal-length strings in time independent of their content.
fn same_hash(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// The user flags in the order Redis describes them.
const FLAG_ON: u8 = 1;
const FLAG_OFF: u8 = 2;
const FLAG_NOPASS: u8 = 4;
const FLAG_SKIP_SANITIZE: u8 = 8;
const FLAG_SANITIZE: u8 = 16;
const FLAG_NAMES: &[(u8, &str)] = &[
    (FLAG_ON, "on"),
    (FLAG_OFF, "off"),
    (FLAG_NOPASS, "nopass"),
    (FLAG_SKIP_SANITIZE, "skip-sanitize-payload"),
    (FLAG_SANITIZE, "sanitize-payload"),
];

/// One ACL user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct User {
    pub(crate) name: Bytes,
    /// The `FLAG_*` bits (a new user has `off` only).
    flags: u8,
    /// SHA-256 hex of each password, in the order added.
    passwords: Vec<String>,
    /// The root selector first, then the `( ... )` ones.
    selectors: Vec<Selector>,
}

impl User {
    /// A new user: off, no password, no commands, no keys; channels as
    /// `acl-pubsub-default` says.
    pub(crate) fn new(name: &[u8], pubsub_all: bool) -> User {
        User {
            name: Bytes::copy_from_slice(name),
            flags: FLAG_OFF,
            passwords: vec![],
            selectors: vec![Selector::new(pubsub_all)],
        }
    }

    /// The `default` user: on, nopass, every key, channel and command.
    pub(crate) fn default_user(pubsub_all: bool) -> User {
        let mut user = User::new(b"default", pubsub_all);
        for rule in ["+@all", "~*", "&*", "on", "nopass"] {
            user.apply(rule.as_bytes(), pubsub_all)
                .expect("the default user's rules are valid");
        }
        user
    }

    pub(crate) fn enabled(&self) -> bool {
        self.flags & FLAG_OFF == 0
    }

    pub(crate) fn nopass(&self) -> bool {
        self.flags & FLAG_NOPASS != 0
    }

    /// Every command on every key and channel: the check can be skipped.
    pub(crate) fn unrestricted(&self) -> bool {
        self.selectors.iter().any(Selector::unrestricted)
    }

    /// Whether `password` opens this user (Redis's `ACLCheckUserCredentials`).
    pub(crate) fn accepts(&self, password: &[u8]) -> bool {
        if !self.enabled() {
            return false;
        }
        if self.nopass() {
            return true;
        }
        let hashed = hash_password(password);
        self.passwords
            .iter()
            .fold(false, |ok, p| same_hash(p.as_bytes(), hashed.as_bytes()) | ok)
    }

    /// One modifier (Redis's `ACLSetUser`).
    pub(crate) fn apply(&mut self, op: &[u8], pubsub_all: bool) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let is = |word: &str| op.eq_ignore_ascii_case(word.as_bytes());
        if is("on") {
            self.flags = (self.flags | FLAG_ON) & !FLAG_OFF;
        } else if is("off") {
            self.flags = (self.flags | FLAG_OFF) & !FLAG_ON;
        } else if is("skip-sanitize-payload") {
            self.flags = (self.flags | FLAG_SKIP_SANITIZE) & !FLAG_SANITIZE;
        } else if is("sanitize-payload") {
            self.flags = (self.flags | FLAG_SANITIZE) & !FLAG_SKIP_SANITIZE;
        } else if is("nopass") {
            self.flags |= FLAG_NOPASS;
            self.passwords.clear();
        } else if is("resetpass") {
            self.flags &= !FLAG_NOPASS;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let hash = if op[0] == b'>' {
                hash_password(&op[1..])
            } else {
                if !valid_hash(&op[1..]) {
                    return Err(RuleError::BadHash);
                }
                String::from_utf8_lossy(&op[1..]).into_owned()
            };
            if !self.passwords.contains(&hash) {
                self.passwords.push(hash);
            }
            self.flags &= !FLAG_NOPASS;
        } else if op[0] == b'<' || op[0] == b'!' {
            let hash = if op[0] == b'<' {
                hash_password(&op[1..])
            } else {
                if !valid_hash(&op[1..]) {
                    return Err(RuleError::BadHash);
                }
                String::from_utf8_lossy(&op[1..]).into_owned()
            };
            let at = self.passwords.iter().position(|p| *p == hash);
            match at {
                Some(at) => {
                    self.passwords.remove(at);
                }
                None => return Err(RuleError::NoSuchPassword),
            }
        } else if op[0] == b'(' && op[op.len() - 1] == b')' {
            let inner = &op[1..op.len() - 1];
            let mut selector = Selector::new(pubsub_all);
            // Unbalanced quotes split into no words at all, as Redis's
            // `sdssplitargs` (an empty selector).
            for word in crate::protocol::split_args(inner).unwrap_or_default() {
                selector.apply(&word)?;
            }
            self.selectors.push(selector);
        } else if is("clearselectors") {
            self.selectors.truncate(1);
        } else if is("reset") {
            for rule in ["resetpass", "resetkeys", "resetchannels"] {
                self.apply(rule.as_bytes(), pubsub_all)?;
            }
            if pubsub_all {
                self.apply(b"allchannels", pubsub_all)?;
            }
            for rule in ["off", "sanitize-payload", "clearselectors", "-@all"] {
                self.apply(rule.as_bytes(), pubsub_all)?;
            }
        } else {
            self.selectors[0].apply(op)?;
        }
        Ok(())
    }

    /// Applies modifiers as `ACL SETUSER` does: selectors spread over
    /// several arguments merged first; all or nothing.
    pub(crate) fn apply_all(&mut self, ops: &[Bytes], pubsub_all: bool) -> Result<(), String> {
        let merged = merge_selectors(ops).map_err(|start| errors::acl::unmatched_parenthesis(&start))?;
        let mut staged = self.clone();
        for op in &merged {
            staged
                .apply(op, pubsub_all)
                .map_err(|e| errors::acl::setuser_modifier(op, e.text()))?;
        }
        *self = staged;
        Ok(())
    }

    /// The user's rules as `ACL LIST` prints them after `user <name> `
    /// (Redis's `ACLDescribeUser`).
    pub(crate) fn describe(&self) -> String {
        let mut out = String::new();
        for (bit, name) in FLAG_NAMES {
            if self.flags & bit != 0 {
                out.push_str(name);
                out.push(' ');
            }
        }
        for p in &self.passwords {
            out.push('#');
            out.push_str(p);
            out.push(' ');
        }
        for (i, s) in self.selectors.iter().enumerate() {
            if i == 0 {
                out.push_str(&s.describe());
            } else {
                out.push_str(&format!(" ({})", s.describe()));
            }
        }
        out
    }

    pub(crate) fn flag_names(&self) -> Vec<&'static str> {
        FLAG_NAMES
            .iter()
            .filter(|(bit, _)| self.flags & bit != 0)
            .map(|(_, n)| *n)
            .collect()
    }

    pub(crate) fn passwords(&self) -> &[String] {
        &self.passwords
    }

    pub(crate) fn selectors(&self) -> &[Selector] {
        &self.selectors
    }

    /// The channel patterns of all selectors, or `None` when one allows
    /// every channel.
    fn all_channels(&self) -> Option<Vec<Vec<u8>>> {
        if self.selectors.iter().any(|s| s.allchannels) {
            return None;
        }
        Some(self.selectors.iter().flat_map(|s| s.channels.iter().cloned()).collect())
    }
}

/// Merges a selector spread over several arguments (`(~a` `+get)`) into
/// one, as Redis's `ACLMergeSelectorArguments`; the argument that opened
/// an unclosed one is the error.
pub(crate) fn merge_selectors(ops: &[Bytes]) -> Result<Vec<Vec<u8>>, Vec<u8>> {
    let mut out = vec![];
    let mut open: Option<(Vec<u8>, Vec<u8>)> = None;
    for op in ops {
        if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((op.to_vec(), op.to_vec()));
            continue;
        }
        if let Some((mut selector, start)) = open.take() {
            selector.push(b' ');
            selector.extend_from_slice(op);
            if op.last() == Some(&b')') {
                out.push(selector);
            } else {
                open = Some((selector, start));
            }
            continue;
        }
        out.push(op.to_vec());
    }
    match open {
        Some((_, start)) => Err(start),
        None => Ok(out),
    }
}

/// Why a command was refused, with the argument that caused it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Denied {
    Command,
    Key(usize),
    Channel(usize),
}

impl Denied {
    /// Redis's order of the reasons when choosing which to report.
    fn rank(self) -> (u8, usize) {
        match self {
            Denied::Command => (1, 0),
            Denied::Key(pos) => (2, pos),
            Denied::Channel(pos) => (4, pos),
        }
    }
}

/// Whether `user` may run `spec` with `args` (Redis's
/// `ACLCheckAllUserCommandPerm`): allowed if one selector allows it;
/// otherwise the command when no selector allows the command, else the
/// last key or channel no selector matched.
pub(crate) fn check(user: &User, spec: &CommandSpec, args: &[Bytes]) -> Result<(), Denied> {
    let Some(id) = index().id(spec) else {
        return Ok(());
    };
    let mut keys = None;
    let mut worst = Denied::Command;
    for selector in &user.selectors {
        match selector.check(spec, id, args, &mut keys) {
            Check::Ok => return Ok(()),
            Check::Denied(d) => {
                let (rank, pos) = d.rank();
                let (worst_rank, worst_pos) = worst.rank();
                if rank > worst_rank || (rank == worst_rank && pos > worst_pos) {
                    worst = d;
                }
            }
        }
    }
    Err(worst)
}

/// Where a denied command came from (an ACL log entry's `context`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Context {
    Toplevel,
    Multi,
    Lua,
}

impl Context {
    fn name(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

/// An ACL log entry's reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reason {
    Command,
    Key,
    Channel,
    Auth,
}

impl Reason {
    fn name(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Channel => "channel",
            Reason::Auth => "auth",
        }
    }
}

/// One entry of the ACL log.
#[derive(Clone, Debug)]
pub(crate) struct LogEntry {
    /// Identical denials grouped into this one.
    count: u64,
    reason: Reason,
    context: Context,
    /// The command, key or channel refused, or the AUTH/HELLO typed.
    object: Bytes,
    username: Bytes,
    /// When it last happened, unix ms.
    at_ms: u64,
    /// The CLIENT INFO line of the client it last happened to.
    client_info: String,
}

impl LogEntry {
    /// The entry as `ACL LOG` answers it (age from `now_ms`).
    pub(crate) fn reply(&self, now_ms: u64) -> crate::protocol::Reply {
        use crate::protocol::Reply;
        Reply::Map(vec![
            (Reply::bulk("count"), Reply::Int(self.count as i64)),
            (Reply::bulk("reason"), Reply::bulk(self.reason.name())),
            (Reply::bulk("context"), Reply::bulk(self.context.name())),
            (Reply::bulk("object"), Reply::Bulk(self.object.clone())),
            (Reply::bulk("username"), Reply::Bulk(self.username.clone())),
            (
                Reply::bulk("age-seconds"),
                Reply::Double(now_ms.saturating_sub(self.at_ms) as f64 / 1000.0),
            ),
            (Reply::bulk("client-info"), Reply::bulk(self.client_info.clone())),
        ])
    }
}

/// The server's users and ACL log.
#[derive(Debug)]
pub(crate) struct Acl {
    /// By name, in byte order (Redis's radix tree order: ACL LIST, USERS).
    users: BTreeMap<Bytes, Arc<User>>,
    /// Newest first.
    log: VecDeque<LogEntry>,
    /// The default user may run everything: the check every command of
    /// its clients would make is skipped without a lookup ([`Acl::restricted`]).
    default_unrestricted: bool,
    /// Counts changes to the users: a [`Snapshot`] taken before a change
    /// knows it is out of date without the engine.
    changes: Arc<AtomicU64>,
}

/// A restricted user's rules as they stood after a client's last batch,
/// for answering that client outside the engine while a script holds it
/// (`exec::busy`): valid until any user changes.
#[derive(Clone, Debug)]
pub(crate) struct Snapshot {
    user: Arc<User>,
    /// [`Acl::changes`] when it was taken.
    taken_at: u64,
    changes: Arc<AtomicU64>,
}

impl Snapshot {
    /// The user's rules, unless a user changed since the snapshot (then
    /// only the engine knows them).
    pub(crate) fn current(&self) -> Option<&User> {
        (self.changes.load(Ordering::Acquire) == self.taken_at).then_some(&*self.user)
    }
}

impl PartialEq for Snapshot {
    fn eq(&self, other: &Snapshot) -> bool {
        Arc::ptr_eq(&self.user, &other.user) && self.taken_at == other.taken_at
    }
}

impl Eq for Snapshot {}

impl Default for Acl {
    fn default() -> Self {
        Acl::new(false)
    }
}

impl Acl {
    pub(crate) fn new(pubsub_all: bool) -> Acl {
        let mut users = BTreeMap::new();
        users.insert(Bytes::from_static(b"default"), Arc::new(User::default_user(pubsub_all)));
        Acl {
            users,
            log: VecDeque::new(),
            default_unrestricted: true,
            changes: Arc::new(AtomicU64::new(0)),
        }
    }

    pub(crate) fn user(&self, name: &[u8]) -> Option<&Arc<User>> {
        self.users.get(name)
    }

    pub(crate) fn users(&self) -> impl Iterator<Item = &Arc<User>> {
        self.users.values()
    }

    /// The user a client runs as, when its commands need checking (`None`:
    /// it may run everything).
    pub(crate) fn restricted(&self, name: &[u8]) -> Option<Arc<User>> {
        if self.default_unrestricted && name == b"default" {
            return None;
        }
        self.users.get(name).filter(|u| !u.unrestricted()).cloned()
    }

    /// [`Acl::restricted`] as a [`Snapshot`] the client's connection keeps.
    pub(crate) fn snapshot(&self, name: &[u8]) -> Option<Snapshot> {
        self.restricted(name).map(|user| Snapshot {
            user,
            taken_at: self.changes.load(Ordering::Acquire),
            changes: Arc::clone(&self.changes),
        })
    }

    /// Notes whether the default user may run everything, after a change,
    /// and that snapshots are out of date.
    fn refresh(&mut self) {
        self.default_unrestricted = self.users.get(&b"default"[..]).is_some_and(|u| u.unrestricted());
        self.changes.fetch_add(1, Ordering::AcqRel);
    }

    /// Creates or replaces a user.
    pub(crate) fn put(&mut self, user: User) {
        self.users.insert(user.name.clone(), Arc::new(user));
        self.refresh();
    }

    pub(crate) fn remove(&mut self, name: &[u8]) -> bool {
        let removed = self.users.remove(name).is_some();
        self.refresh();
        removed
    }

    /// `requirepass`: the default user's password (or `nopass` for none),
    /// as Redis's `ACLUpdateDefaultUserPassword`.
    pub(crate) fn set_default_password(&mut self, password: Option<&str>) {
        let mut user = (**self.users.get(&b"default"[..]).expect("the default user exists")).clone();
        let _ = user.apply(b"resetpass", false);
        match password {
            Some(p) => {
                let mut op = b">".to_vec();
                op.extend_from_slice(p.as_bytes());
                let _ = user.apply(&op, false);
            }
            None => {
                let _ = user.apply(b"nopass", false);
            }
        }
        self.put(user);
    }

    /// Whether a new connection starts authenticated: the default user is
    /// on and needs no password.
    pub(crate) fn default_open(&self) -> bool {
        self.users
            .get(&b"default"[..])
            .is_some_and(|u| u.nopass() && u.enabled())
    }

    pub(crate) fn log(&self) -> &VecDeque<LogEntry> {
        &self.log
    }

    pub(crate) fn reset_log(&mut self) {
        self.log.clear();
    }

    /// Adds an entry, or bumps a recent identical one (Redis's
    /// `addACLLogEntry`), keeping at most `max_len` entries.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn add_log(
        &mut self,
        reason: Reason,
        context: Context,
        object: Bytes,
        username: Bytes,
        now_ms: u64,
        client_info: String,
        max_len: usize,
    ) {
        let same = |e: &LogEntry| {
            e.reason == reason
                && e.context == context
                && e.at_ms.abs_diff(now_ms) <= LOG_GROUPING_MS
                && e.object == object
                && e.username == username
        };
        if let Some(at) = self.log.iter().take(LOG_GROUPING_SCAN).position(same) {
            let mut entry = self.log.remove(at).expect("found above");
            entry.count += 1;
            entry.at_ms = now_ms;
            entry.client_info = client_info;
            self.log.push_front(entry);
            return;
        }
        self.log.push_front(LogEntry {
            count: 1,
            reason,
            context,
            object,
            username,
            at_ms: now_ms,
            client_info,
        });
        self.log.truncate(max_len);
    }

    /// The file `ACL SAVE` writes: one `user` line per user.
    pub(crate) fn file_text(&self) -> String {
        let mut out = String::new();
        for user in self.users.values() {
            out.push_str(&format!(
                "user {} {}\n",
                String::from_utf8_lossy(&user.name),
                user.describe()
            ));
        }
        out
    }

    /// Replaces the users with those of an ACL file's text (Redis's
    /// `ACLLoadFromFile`): all or nothing, the errors worded as Redis's.
    pub(crate) fn load_text(&mut self, filename: &str, text: &str, pubsub_all: bool) -> Result<(), String> {
        let mut errors = String::new();
        let mut users: BTreeMap<Bytes, Arc<User>> = BTreeMap::new();
        for (i, line) in text.split('\n').enumerate() {
            let linenum = i + 1;
            let line = line.trim_matches(|c| matches!(c, ' ' | '\t' | '\r' | '\n'));
            if line.is_empty() {
                continue;
            }
            let argv: Vec<&str> = line.split(' ').collect();
            if argv[0] != "user" || argv.len() < 2 {
                errors.push_str(&errors::acl::file_no_user_keyword(filename, linenum));
                continue;
            }
            if has_spaces(argv[1].as_bytes()) {
                errors.push_str(&errors::acl::file_bad_username(filename, linenum, argv[1]));
                continue;
            }
            if users.contains_key(argv[1].as_bytes()) {
                errors.push_str(&errors::acl::file_duplicate_user(argv[1], linenum));
                continue;
            }
            let mut user = User::new(argv[1].as_bytes(), pubsub_all);
            let ops: Vec<Bytes> = argv[2..].iter().map(|s| Bytes::copy_from_slice(s.as_bytes())).collect();
            let merged = match merge_selectors(&ops) {
                Ok(m) => m,
                Err(_) => {
                    errors.push_str(&errors::acl::file_unmatched_parenthesis(filename, linenum));
                    vec![]
                }
            };
            let mut syntax_error = false;
            for op in merged {
                let op: Vec<u8> = {
                    let s = String::from_utf8_lossy(&op);
                    s.trim_matches(|c| matches!(c, '\t' | '\r' | '\n')).as_bytes().to_vec()
                };
                if let Err(e) = user.apply(&op, pubsub_all) {
                    if e == RuleError::Unknown {
                        errors.push_str(&errors::acl::file_operation(
                            filename,
                            linenum,
                            &String::from_utf8_lossy(&op),
                            e.text(),
                        ));
                    } else if !syntax_error {
                        errors.push_str(&errors::acl::file_rule(filename, linenum, e.text()));
                        syntax_error = true;
                    }
                }
            }
            users.insert(user.name.clone(), Arc::new(user));
        }
        if !errors.is_empty() {
            errors.push_str(errors::acl::FILE_NO_CHANGE);
            return Err(errors);
        }
        if !users.contains_key(&b"default"[..]) {
            users.insert(Bytes::from_static(b"default"), Arc::new(User::default_user(pubsub_all)));
        }
        self.users = users;
        self.refresh();
        Ok(())
    }

    /// The channel patterns a change leaves a user (`None`: all), to find
    /// the subscribers it revokes (Redis's `ACLKillPubsubClientsIfNeeded`):
    /// `None` when nothing needs checking.
    pub(crate) fn revoked_channels(new: &User, original: &User) -> Option<Vec<Vec<u8>>> {
        let upcoming = new.all_channels()?;
        let superset = match original.all_channels() {
            None => false,
            Some(old) => old.iter().all(|c| upcoming.contains(c)),
        };
        (!superset).then_some(upcoming)
    }

    /// Whether a subscriber keeps its subscriptions under `upcoming`.
    pub(crate) fn subscriber_allowed(
        upcoming: &[Vec<u8>],
        channels: &[Bytes],
        patterns: &[Bytes],
        shard: &[Bytes],
    ) -> bool {
        patterns.iter().all(|p| channel_allowed(upcoming, p, true))
            && channels
                .iter()
                .chain(shard)
                .all(|c| channel_allowed(upcoming, c, false))
    }
}

/// Random hex characters for `ACL GENPASS`: `bits` rounded up to whole
/// hex digits.
pub(crate) fn genpass(bits: i64) -> String {
    let chars = ((bits + 3) / 4) as usize;
    (0..chars)
        .map(|_| char::from_digit(fastrand::u32(0..16), 16).expect("a hex digit"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(rules: &[&str]) -> Result<User, String> {
        let mut u = User::new(b"u", false);
        let ops: Vec<Bytes> = rules.iter().map(|r| Bytes::copy_from_slice(r.as_bytes())).collect();
        u.apply_all(&ops, false)?;
        Ok(u)
    }

    #[test]
    fn describes_users_as_redis() {
        assert_eq!(user(&[]).unwrap().describe(), "off resetchannels -@all");
        assert_eq!(User::default_user(false).describe(), "on nopass ~* &* +@all");
        let u = user(&["on", ">pw", "~lock:*", "+set", "(+del ~x)", "%R~r*"]).unwrap();
        assert_eq!(
            u.describe(),
            "on #30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4 ~lock:* %R~r* resetchannels -@all +set (~x resetchannels -@all +del)"
        );
        assert_eq!(
            user(&["+@all", "-flushall"]).unwrap().describe(),
            "off resetchannels +@all -flushall"
        );
        assert_eq!(
            user(&["+client", "-client|kill"]).unwrap().describe(),
            "off resetchannels -@all +client -client|kill"
        );
        assert_eq!(
            user(&["%RW~a", "%W~b", "%R~a"]).unwrap().describe(),
            "off ~a %W~b resetchannels -@all"
        );
        assert_eq!(
            user(&["-@all", "+@read", "-get"]).unwrap().describe(),
            "off resetchannels -@all +@read -get"
        );
    }

    #[test]
    fn refuses_malformed_rules_with_redis_texts() {
        let cases = [
            (&["("][..], "ERR Unmatched parenthesis in acl selector starting at '('."),
            (&["foo"], "ERR Error in ACL SETUSER modifier 'foo': Syntax error"),
            (&["+nope"], "ERR Error in ACL SETUSER modifier '+nope': Unknown command or category name in ACL"),
            (&["+config|get|x"], "ERR Error in ACL SETUSER modifier '+config|get|x': Allowing first-arg of a subcommand is not supported"),
            (&["+get|"], "ERR Error in ACL SETUSER modifier '+get|': Syntax error"),
            (&["~*", "~a"], "ERR Error in ACL SETUSER modifier '~a': Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns"),
            (&["#abc"], "ERR Error in ACL SETUSER modifier '#abc': The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"),
            (&["<nope"], "ERR Error in ACL SETUSER modifier '<nope': The password you are trying to remove from the user does not exist"),
        ];
        for (rules, text) in cases {
            assert_eq!(user(rules).unwrap_err(), text, "{rules:?}");
        }
    }

    #[test]
    fn passwords_open_the_user() {
        let u = user(&["on", ">secret"]).unwrap();
        assert!(u.accepts(b"secret"));
        assert!(!u.accepts(b"secreT"));
        assert!(!u.accepts(b"secret2"));
        assert!(!u.accepts(b""));
        assert!(!user(&["off", ">secret"]).unwrap().accepts(b"secret"));
        assert!(user(&["on", "nopass"]).unwrap().accepts(b"anything"));
    }

    #[test]
    fn checks_commands_keys_and_channels() {
        let get = crate::cmd::lookup(b"get").unwrap();
        let set = crate::cmd::lookup(b"set").unwrap();
        let publish = crate::cmd::lookup(b"publish").unwrap();
        let args = |a: &[&str]| {
            a.iter()
                .map(|s| Bytes::copy_from_slice(s.as_bytes()))
                .collect::<Vec<_>>()
        };
        let u = user(&["+get", "+set", "+publish", "%R~r*", "~lock:*", "&news"]).unwrap();
        assert_eq!(check(&u, get, &args(&["get", "r1"])), Ok(()));
        assert_eq!(check(&u, set, &args(&["set", "r1", "v"])), Err(Denied::Key(1)));
        assert_eq!(check(&u, set, &args(&["set", "lock:1", "v"])), Ok(()));
        assert_eq!(
            check(&u, publish, &args(&["publish", "other", "m"])),
            Err(Denied::Channel(1))
        );
        assert_eq!(check(&u, publish, &args(&["publish", "news", "m"])), Ok(()));
        let del = crate::cmd::lookup(b"del").unwrap();
        assert_eq!(check(&u, del, &args(&["del", "lock:1"])), Err(Denied::Command));
    }

    proptest::proptest! {
        #[test]
        fn random_rules_never_panic(rules in proptest::collection::vec("[-+~%&<>#!()@|a-zA-Z*RW0-9 ]{0,12}", 0..6)) {
            let ops: Vec<Bytes> = rules.iter().map(|r| Bytes::copy_from_slice(r.as_bytes())).collect();
            let mut u = User::new(b"u", false);
            if u.apply_all(&ops, false).is_ok() {
                let _ = u.describe();
            }
        }
    }
}
