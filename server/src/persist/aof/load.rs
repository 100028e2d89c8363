//! Reading an append-only file back: its commands, in order, and how it
//! ended (Redis's `loadSingleAppendOnlyFile`): cleanly, cut short (a last
//! command incomplete, or a MULTI without its EXEC: both give the offset of
//! the last whole command outside a transaction), or badly formed. Plain
//! parsing; replaying is the caller's.

use bytes::Bytes;

/// Redis's longest annotation or length line (`AOF_ANNOTATION_LINE_MAX_LEN`).
const LINE_MAX: usize = 1024;

/// How a file ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum End {
    /// Every command whole.
    Clean,
    /// Cut short: whole commands end at this offset (the commands returned
    /// are those before it).
    Truncated { valid_up_to: u64, in_multi: bool },
    /// Not the append-only format.
    Format,
}

/// A file's commands and how it ended.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub commands: Vec<Vec<Bytes>>,
    pub end: End,
}

/// Reads one line (through `\n`) starting at `at`; `None` at the end of the data.
fn line(data: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let rest = &data[at..];
    let len = rest
        .iter()
        .take(LINE_MAX - 1)
        .position(|&b| b == b'\n')
        .map_or(rest.len().min(LINE_MAX - 1), |i| i + 1);
    (len > 0).then(|| (&rest[..len], at + len))
}

/// Redis's `atoi`/`strtol` on a length line: digits after an optional sign.
fn number(text: &[u8]) -> i64 {
    let (neg, digits) = match text.first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let n = digits
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .fold(0i64, |n, &d| n.saturating_mul(10).saturating_add(i64::from(d - b'0')));
    if neg {
        -n
    } else {
        n
    }
}

/// Parses a whole file's bytes (not an RDB: the caller checks the `REDIS`
/// signature first).
pub(crate) fn parse(data: &[u8]) -> Parsed {
    let mut commands: Vec<Vec<Bytes>> = Vec::new();
    let mut at = 0;
    // Offset after the last whole command, and before the open MULTI.
    let mut valid_up_to = 0u64;
    let mut before_multi: Option<(u64, usize)> = None;
    let truncated = |commands: Vec<Vec<Bytes>>, valid_up_to, in_multi| Parsed {
        commands,
        end: End::Truncated { valid_up_to, in_multi },
    };
    while let Some((head, next)) = line(data, at) {
        at = next;
        if head[0] == b'#' {
            continue;
        }
        if head[0] != b'*' {
            return Parsed {
                commands,
                end: End::Format,
            };
        }
        if head.len() == 1 {
            return cut(commands, valid_up_to, before_multi);
        }
        let argc = number(&head[1..]);
        if argc < 1 {
            return Parsed {
                commands,
                end: End::Format,
            };
        }
        let mut args = Vec::with_capacity(argc.min(1024) as usize);
        for _ in 0..argc {
            let Some((len_line, next)) = line(data, at) else {
                return cut(commands, valid_up_to, before_multi);
            };
            if len_line[0] != b'$' {
                return Parsed {
                    commands,
                    end: End::Format,
                };
            }
            at = next;
            let len = number(&len_line[1..]).max(0) as usize;
            if data.len() - at < len + 2 {
                return cut(commands, valid_up_to, before_multi);
            }
            args.push(Bytes::copy_from_slice(&data[at..at + len]));
            at += len + 2;
        }
        let name = args[0].to_ascii_lowercase();
        if name == b"multi" {
            before_multi = Some((valid_up_to, commands.len()));
        } else if name == b"exec" {
            before_multi = None;
        }
        commands.push(args);
        valid_up_to = at as u64;
    }
    match before_multi {
        Some((offset, len)) => {
            commands.truncate(len);
            truncated(commands, offset, true)
        }
        None => Parsed {
            commands,
            end: End::Clean,
        },
    }
}

/// A file cut short: the commands of an open transaction are dropped too.
fn cut(mut commands: Vec<Vec<Bytes>>, valid_up_to: u64, before_multi: Option<(u64, usize)>) -> Parsed {
    let valid_up_to = match before_multi {
        Some((offset, len)) => {
            commands.truncate(len);
            offset
        }
        None => valid_up_to,
    };
    Parsed {
        commands,
        end: End::Truncated {
            valid_up_to,
            in_multi: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SET: &[u8] = b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n";

    #[test]
    fn whole_files_annotations_and_cut_ones() {
        let file = [b"#TS:1\r\n".as_slice(), SET, SET].concat();
        let p = parse(&file);
        assert_eq!((p.commands.len(), p.end), (2, End::Clean));
        let cut_file = [SET, &SET[..10]].concat();
        let p = parse(&cut_file);
        assert_eq!(
            (p.commands.len(), p.end),
            (
                1,
                End::Truncated {
                    valid_up_to: SET.len() as u64,
                    in_multi: false
                }
            )
        );
        assert_eq!(parse(b"SET a 1\r\n").end, End::Format);
    }

    #[test]
    fn an_open_transaction_is_dropped() {
        let file = [SET, b"*1\r\n$5\r\nMULTI\r\n", SET].concat();
        let p = parse(&file);
        assert_eq!(
            (p.commands.len(), p.end),
            (
                1,
                End::Truncated {
                    valid_up_to: SET.len() as u64,
                    in_multi: true
                }
            )
        );
    }
}
