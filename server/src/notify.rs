//! Keyspace notifications (`notify-keyspace-events`): the event classes,
//! their flag letters, and publishing `__keyspace@<db>__:<key>` /
//! `__keyevent@<db>__:<event>` messages exactly as Redis names them.

pub(crate) const KEYSPACE: u32 = 1 << 0;
pub(crate) const KEYEVENT: u32 = 1 << 1;
pub(crate) const GENERIC: u32 = 1 << 2;
pub(crate) const STRING: u32 = 1 << 3;
pub(crate) const LIST: u32 = 1 << 4;
pub(crate) const SET: u32 = 1 << 5;
pub(crate) const HASH: u32 = 1 << 6;
pub(crate) const ZSET: u32 = 1 << 7;
pub(crate) const EXPIRED: u32 = 1 << 8;
pub(crate) const EVICTED: u32 = 1 << 9;
pub(crate) const STREAM: u32 = 1 << 10;
pub(crate) const KEY_MISS: u32 = 1 << 11;
pub(crate) const MODULE: u32 = 1 << 13;
pub(crate) const NEW: u32 = 1 << 14;
/// `A`: every class but key-miss and new-key events.
pub(crate) const ALL: u32 = GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// Parses the flag letters of `notify-keyspace-events`; `None` on an unknown letter.
pub(crate) fn parse_flags(text: &str) -> Option<u32> {
    let mut flags = 0;
    for c in text.chars() {
        flags |= match c {
            'A' => ALL,
            'g' => GENERIC,
            '$' => STRING,
            'l' => LIST,
            's' => SET,
            'h' => HASH,
            'z' => ZSET,
            'x' => EXPIRED,
            'e' => EVICTED,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            't' => STREAM,
            'm' => KEY_MISS,
            'd' => MODULE,
            'n' => NEW,
            _ => return None,
        };
    }
    Some(flags)
}

/// The letters CONFIG GET shows for `flags` (Redis's canonical order).
pub(crate) fn flags_to_string(flags: u32) -> String {
    let mut out = String::new();
    if flags & ALL == ALL {
        out.push('A');
    } else {
        for (bit, c) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if flags & bit != 0 {
                out.push(c);
            }
        }
    }
    for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & bit != 0 {
            out.push(c);
        }
    }
    out
}

/// The channel/message pairs a notification produces under `flags`.
pub(crate) fn messages(flags: u32, class: u32, event: &str, key: &[u8], db: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    if flags & class == 0 {
        return out;
    }
    if flags & KEYSPACE != 0 {
        let mut channel = format!("__keyspace@{db}__:").into_bytes();
        channel.extend_from_slice(key);
        out.push((channel, event.as_bytes().to_vec()));
    }
    if flags & KEYEVENT != 0 {
        out.push((format!("__keyevent@{db}__:{event}").into_bytes(), key.to_vec()));
    }
    out
}

/// Which removals and additions databases must record for `flags`: keys
/// expired (`expired` events) and keys created (`new` events).
pub(crate) fn logged_events(flags: u32) -> (bool, bool) {
    let delivered = flags & (KEYSPACE | KEYEVENT) != 0;
    (delivered && flags & EXPIRED != 0, delivered && flags & NEW != 0)
}

/// Sets what every database records as `flags` (`notify-keyspace-events`)
/// and the effects feed need: expired keys for their `expired` events and,
/// while anything reads the feed (the append-only file, the replication
/// backlog, a reader of the Rust API), for their DELs; created keys for
/// `new` events. Called wherever either may change.
pub(crate) fn log_keys(
    dbs: &mut [crate::store::Db],
    config: &crate::config::Config,
    effects: &crate::exec::feed::Effects,
) {
    let (expired, new) = logged_events(config.notify_keyspace_events);
    let expired = expired || effects.active();
    for db in dbs {
        db.log_expired = expired;
        db.log_new = new;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_strings_round_trip_like_redis() {
        assert_eq!(flags_to_string(parse_flags("KEA").unwrap()), "AKE");
        assert_eq!(flags_to_string(parse_flags("Kg$xz").unwrap()), "g$zxK");
        assert_eq!(parse_flags("Q"), None);
        assert_eq!(flags_to_string(parse_flags("").unwrap()), "");
    }
}
