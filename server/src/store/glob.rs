//! Glob-style matching exactly as Redis's `stringmatchlen` (KEYS, SCAN MATCH,
//! CONFIG GET, and later PSUBSCRIBE): `*`, `?`, `[abc]`, `[^a-z]`, `\x`.
//!
//! A line-by-line port, including its corner cases (an unterminated `[` and
//! reversed ranges) and its protection against exponential patterns.

/// Whether `string` matches the glob `pattern`.
pub(crate) fn matches(pattern: &[u8], string: &[u8], nocase: bool) -> bool {
    let mut skip_longer = false;
    match_impl(pattern, string, nocase, &mut skip_longer, 0)
}

fn at(s: &[u8], i: usize) -> u8 {
    s.get(i).copied().unwrap_or(0)
}

fn lower(c: u8) -> u8 {
    c.to_ascii_lowercase()
}

fn match_impl(pat: &[u8], s: &[u8], nocase: bool, skip_longer: &mut bool, nesting: u32) -> bool {
    if nesting > 1000 {
        return false;
    }
    let (mut p, mut i) = (0usize, 0usize);
    while p < pat.len() && i < s.len() {
        match pat[p] {
            b'*' => {
                while p + 1 < pat.len() && pat[p + 1] == b'*' {
                    p += 1;
                }
                if p + 1 == pat.len() {
                    return true;
                }
                while i < s.len() {
                    if match_impl(&pat[p + 1..], &s[i..], nocase, skip_longer, nesting + 1) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    i += 1;
                }
                *skip_longer = true;
                return false;
            }
            b'?' => i += 1,
            b'[' => {
                p += 1;
                let not = at(pat, p) == b'^';
                if not {
                    p += 1;
                }
                let mut matched = false;
                loop {
                    if at(pat, p) == b'\\' && pat.len() - p >= 2 {
                        p += 1;
                        if pat[p] == s[i] {
                            matched = true;
                        }
                    } else if at(pat, p) == b']' {
                        break;
                    } else if p >= pat.len() {
                        p -= 1;
                        break;
                    } else if pat.len() - p >= 3 && pat[p + 1] == b'-' {
                        // C compares signed chars here.
                        let (mut start, mut end, mut c) =
                            (pat[p] as i8 as i32, pat[p + 2] as i8 as i32, s[i] as i8 as i32);
                        if start > end {
                            std::mem::swap(&mut start, &mut end);
                        }
                        if nocase {
                            start = lower(start as u8) as i8 as i32;
                            end = lower(end as u8) as i8 as i32;
                            c = lower(c as u8) as i8 as i32;
                        }
                        p += 2;
                        if c >= start && c <= end {
                            matched = true;
                        }
                    } else if (!nocase && pat[p] == s[i]) || (nocase && lower(pat[p]) == lower(s[i])) {
                        matched = true;
                    }
                    p += 1;
                }
                if not {
                    matched = !matched;
                }
                if !matched {
                    return false;
                }
                i += 1;
            }
            c => {
                let mut c = c;
                if c == b'\\' && pat.len() - p >= 2 {
                    p += 1;
                    c = pat[p];
                }
                let equal = if nocase { lower(c) == lower(s[i]) } else { c == s[i] };
                if !equal {
                    return false;
                }
                i += 1;
            }
        }
        p += 1;
        if i == s.len() {
            while at(pat, p) == b'*' {
                p += 1;
            }
            break;
        }
    }
    p >= pat.len() && i == s.len()
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn redis_glob_cases() {
        let yes: &[(&str, &str)] = &[
            ("*", "anything"),
            ("h?llo", "hello"),
            ("h*llo", "heeeello"),
            ("h[ae]llo", "hallo"),
            ("h[^e]llo", "hallo"),
            ("h[a-b]llo", "hbllo"),
            ("h[b-a]llo", "hallo"),
            ("h\\*llo", "h*llo"),
            ("lock:*", "lock:1"),
            ("a*b*c", "aXXbYYc"),
            ("[abc", "a"),
        ];
        for (p, s) in yes {
            assert!(matches(p.as_bytes(), s.as_bytes(), false), "{p} should match {s}");
        }
        let no: &[(&str, &str)] = &[
            ("h[^e]llo", "hello"),
            ("h?llo", "hllo"),
            ("lock:*", "lockx"),
            ("a", ""),
            ("", "a"),
            ("*a", "b"),
            ("**", ""),
        ];
        for (p, s) in no {
            assert!(!matches(p.as_bytes(), s.as_bytes(), false), "{p} should not match {s}");
        }
        assert!(matches(b"HELLO", b"hello", true));
    }

    /// Redis's matcher never matches an empty string with a non-empty
    /// pattern; KEYS and SCAN special-case a lone `*` instead.
    #[test]
    fn empty_string() {
        assert!(!matches(b"*", b"", false));
        assert!(matches(b"", b"", false));
    }

    #[test]
    fn abusive_pattern_terminates() {
        let pat = "a*".repeat(30) + "b";
        assert!(!matches(pat.as_bytes(), "a".repeat(60).as_bytes(), false));
    }
}
