//! The manifest of a multi-part append-only file: which base, history and
//! incremental files make the dataset, in Redis 7.0.15's format and with
//! its names (`aof.c`'s `aofManifest`). Plain data and text; the files
//! themselves are the caller's.

use std::path::Path;

/// A file's part in the dataset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The dataset at the last rewrite (`type b`).
    Base,
    /// Replaced by a rewrite, to be removed (`type h`).
    History,
    /// Effects after the base (`type i`).
    Incr,
}

impl Kind {
    fn letter(self) -> char {
        match self {
            Kind::Base => 'b',
            Kind::History => 'h',
            Kind::Incr => 'i',
        }
    }
}

/// One file of the manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FileInfo {
    pub name: String,
    pub seq: u64,
    pub kind: Kind,
}

/// The manifest: Redis keeps the base first, then history, then the
/// incremental files in sequence order, and writes them in that order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Manifest {
    pub base: Option<FileInfo>,
    pub history: Vec<FileInfo>,
    pub incr: Vec<FileInfo>,
    /// The sequence of the current base (the next is one more).
    pub base_seq: u64,
    /// The sequence of the last incremental file.
    pub incr_seq: u64,
}

/// Redis's longest manifest line (`MANIFEST_MAX_LINE`).
const MAX_LINE: usize = 1024;

/// The manifest's file name: `<appendfilename>.manifest`.
pub(crate) fn manifest_name(prefix: &str) -> String {
    format!("{prefix}.manifest")
}

/// The temporary manifest written before the rename.
pub(crate) fn temp_manifest_name(prefix: &str) -> String {
    format!("temp-{prefix}.manifest")
}

impl Manifest {
    /// Parses a manifest's text; `Err` is Redis's reason, with the line
    /// (number and text) where one was read.
    pub(crate) fn parse(text: &[u8]) -> Result<Manifest, (String, Option<(usize, String)>)> {
        let mut m = Manifest::default();
        let mut lines = 0;
        let mut rest = text;
        let fail = |why: &str, at: Option<(usize, String)>| Err((why.to_string(), at));
        while !rest.is_empty() {
            let (line, more) = match rest.iter().position(|&b| b == b'\n') {
                Some(i) if i < MAX_LINE => (&rest[..i], &rest[i + 1..]),
                _ if rest[0] == b'#' => (rest, &b""[..]),
                _ => return fail("The AOF manifest file contains too long line", None),
            };
            rest = more;
            lines += 1;
            if line.first() == Some(&b'#') {
                continue;
            }
            let text = String::from_utf8_lossy(line)
                .trim_matches([' ', '\t', '\r', '\n'])
                .to_string();
            let at = Some((lines, text.clone()));
            if text.is_empty() {
                return fail("Invalid AOF manifest file format", at);
            }
            let Some(words) = crate::protocol::split_args(text.as_bytes()) else {
                return fail("Invalid AOF manifest file format", at);
            };
            if words.len() < 6 || words.len() % 2 != 0 {
                return fail("Invalid AOF manifest file format", at);
            }
            let (mut name, mut seq, mut kind) = (None, 0u64, None);
            for pair in words.chunks(2) {
                let value = String::from_utf8_lossy(&pair[1]).into_owned();
                match pair[0].to_ascii_lowercase().as_slice() {
                    b"file" => {
                        if value.contains('/') {
                            return fail("File can't be a path, just a filename", at);
                        }
                        name = Some(value);
                    }
                    // Redis reads it with atoll: digits up to the first other character.
                    b"seq" => {
                        seq = value
                            .bytes()
                            .take_while(u8::is_ascii_digit)
                            .fold(0u64, |n, d| n.wrapping_mul(10).wrapping_add(u64::from(d - b'0')))
                    }
                    b"type" => kind = value.bytes().next(),
                    _ => {}
                }
            }
            let (Some(name), true, Some(kind)) = (name, seq != 0, kind) else {
                return fail("Invalid AOF manifest file format", at);
            };
            match kind {
                b'b' => {
                    if m.base.is_some() {
                        return fail("Found duplicate base file information", at);
                    }
                    m.base_seq = seq;
                    m.base = Some(FileInfo {
                        name,
                        seq,
                        kind: Kind::Base,
                    });
                }
                b'h' => m.history.push(FileInfo {
                    name,
                    seq,
                    kind: Kind::History,
                }),
                b'i' => {
                    if seq <= m.incr_seq {
                        return fail("Found a non-monotonic sequence number", at);
                    }
                    m.incr_seq = seq;
                    m.incr.push(FileInfo {
                        name,
                        seq,
                        kind: Kind::Incr,
                    });
                }
                _ => return fail("Unknown AOF file type", at),
            }
        }
        if lines == 0 {
            return fail("Found an empty AOF manifest", None);
        }
        Ok(m)
    }

    /// The manifest's text, as Redis writes it (names quoted only when
    /// they need it, as `sdscatrepr` quotes).
    pub(crate) fn format(&self) -> String {
        let mut out = String::new();
        for f in self.base.iter().chain(&self.history).chain(&self.incr) {
            let needs_quotes = f
                .name
                .bytes()
                .any(|b| b.is_ascii_whitespace() || b == b'"' || b == b'\'' || !b.is_ascii_graphic());
            let name = if needs_quotes {
                let mut quoted = String::new();
                crate::cmd::server::repr(&mut quoted, f.name.as_bytes());
                quoted
            } else {
                f.name.clone()
            };
            out.push_str(&format!("file {name} seq {} type {}\n", f.seq, f.kind.letter()));
        }
        out
    }

    /// A new base's name (`<prefix>.<seq>.base.aof`, or `.rdb`), the
    /// current base moved to history, ahead of the older history (Redis's
    /// `getNewBaseFileNameAndMarkPreAsHistory`: the manifest lists the
    /// newest history first).
    pub(crate) fn new_base(&mut self, prefix: &str, rdb: bool) -> String {
        if let Some(mut old) = self.base.take() {
            old.kind = Kind::History;
            self.history.insert(0, old);
        }
        self.base_seq += 1;
        let name = format!("{prefix}.{}.base.{}", self.base_seq, if rdb { "rdb" } else { "aof" });
        self.base = Some(FileInfo {
            name: name.clone(),
            seq: self.base_seq,
            kind: Kind::Base,
        });
        name
    }

    /// A new incremental file's name (`<prefix>.<seq>.incr.aof`), added last.
    pub(crate) fn new_incr(&mut self, prefix: &str) -> String {
        self.incr_seq += 1;
        let name = format!("{prefix}.{}.incr.aof", self.incr_seq);
        self.incr.push(FileInfo {
            name: name.clone(),
            seq: self.incr_seq,
            kind: Kind::Incr,
        });
        name
    }

    /// Every incremental file but the last becomes history (they are in
    /// the new base: Redis's `markRewrittenIncrAofAsHistory`); with the
    /// file off (`writing` false: none is written to) the last one too.
    /// They go ahead of the history, in their order, as Redis's moves
    /// them (from the last to the first, each to the front).
    pub(crate) fn rewritten(&mut self, writing: bool) {
        let keep = if writing { self.incr.pop() } else { None };
        let rewritten = self.incr.drain(..).map(|mut f| {
            f.kind = Kind::History;
            f
        });
        self.history.splice(0..0, rewritten);
        self.incr.extend(keep);
    }

    /// The last incremental file, the one written to.
    pub(crate) fn last_incr(&self) -> Option<&str> {
        self.incr.last().map(|f| f.name.as_str())
    }

    /// Writes the manifest into `dir` atomically: a temporary file,
    /// fsynced, renamed over the manifest, and the directory fsynced (Redis's
    /// `persistAofManifest`).
    pub(crate) fn persist(&self, dir: &Path, prefix: &str) -> std::io::Result<()> {
        use std::io::Write;
        let temp = dir.join(temp_manifest_name(prefix));
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(self.format().as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temp, dir.join(manifest_name(prefix)))?;
        std::fs::File::open(dir)?.sync_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_manifests_parse_and_format_back() {
        let text = "file appendonly.aof.2.base.aof seq 2 type b\nfile appendonly.aof.1.incr.aof seq 1 type h\nfile appendonly.aof.2.incr.aof seq 2 type i\n";
        let m = Manifest::parse(text.as_bytes()).unwrap();
        assert_eq!((m.base_seq, m.incr_seq, m.history.len()), (2, 2, 1));
        assert_eq!(m.format(), text);
    }

    #[test]
    fn bad_manifests_give_redis_reasons() {
        let why = |t: &str| Manifest::parse(t.as_bytes()).unwrap_err().0;
        assert_eq!(why(""), "Found an empty AOF manifest");
        assert_eq!(why("file a seq 1\n"), "Invalid AOF manifest file format");
        assert_eq!(why("file a/b seq 1 type b\n"), "File can't be a path, just a filename");
        assert_eq!(why("file a seq 1 type x\n"), "Unknown AOF file type");
        assert_eq!(
            why("file a seq 2 type i\nfile b seq 1 type i\n"),
            "Found a non-monotonic sequence number"
        );
        assert_eq!(
            why("file a seq 1 type b\nfile b seq 2 type b\n"),
            "Found duplicate base file information"
        );
    }

    #[test]
    fn a_rewrite_moves_the_old_files_to_history() {
        let mut m = Manifest::default();
        m.new_base("appendonly.aof", false);
        m.new_incr("appendonly.aof");
        m.new_base("appendonly.aof", false);
        m.new_incr("appendonly.aof");
        m.rewritten(true);
        assert_eq!(
            m.format(),
            "file appendonly.aof.2.base.aof seq 2 type b\nfile appendonly.aof.1.incr.aof seq 1 type h\nfile appendonly.aof.1.base.aof seq 1 type h\nfile appendonly.aof.2.incr.aof seq 2 type i\n"
        );
    }
}
