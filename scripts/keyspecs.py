#!/usr/bin/env python3
"""Regenerates the two tables of server/src/cmd/keyspecs.rs from Redis
7.0.15's COMMAND INFO, for every command and subcommand coordis lists:
KEY_SPECS (each spec's notes, flags, begin_search and find_keys, in
Redis's order) and TIPS (the command tips, for rows that have any).

    redis-server --port 7777 --save '' --daemonize yes
    coordis-server --port 7779 &
    python3 scripts/keyspecs.py > /tmp/table.rs   # paste over both tables

Ports: REDIS_PORT (7777) and COORDIS_PORT (7779).
"""
import os
import socket, sys
def conn(port):
    s = socket.create_connection(("127.0.0.1", port)); return s
def send(s, args):
    out = b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
    s.sendall(out)
class R:
    def __init__(self, s): self.s = s; self.buf = b""
    def line(self):
        while b"\r\n" not in self.buf: self.buf += self.s.recv(65536)
        l, self.buf = self.buf.split(b"\r\n", 1); return l
    def read(self):
        l = self.line(); t = l[:1]; v = l[1:]
        if t in (b"+", b"-"): return v.decode()
        if t == b":": return int(v)
        if t == b"$":
            n = int(v)
            if n < 0: return None
            while len(self.buf) < n + 2: self.buf += self.s.recv(65536)
            d = self.buf[:n]; self.buf = self.buf[n+2:]; return d.decode()
        if t == b"*":
            n = int(v)
            if n < 0: return None
            return [self.read() for _ in range(n)]
        raise Exception(l)
def rust_str(text):
    """`text` as a Rust string literal."""
    out = []
    for ch in text:
        if ch in '"\\': out.append("\\" + ch)
        elif ch == "\n": out.append("\\n")
        elif ch == "\t": out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7f: out.append("\\u{%x}" % ord(ch))
        else: out.append(ch)
    return '"' + "".join(out) + '"'
def q(port, args):
    s = conn(port); send(s, [a.encode() for a in args]); r = R(s).read(); s.close(); return r
names = q(int(os.environ.get('COORDIS_PORT', 7779)), ["COMMAND", "LIST"])
rows = []
tips = []
for name in sorted(names):
    if name.startswith("coordis."): continue
    info = q(int(os.environ.get('REDIS_PORT', 7777)), ["COMMAND", "INFO", name])[0]
    if info is None: continue
    if info[7]: tips.append((name, info[7]))
    specs = info[8]
    out = []
    for spec in specs:
        d = dict(zip(spec[::2], spec[1::2]))
        flags = d["flags"]
        bs = dict(zip(d["begin_search"][::2], d["begin_search"][1::2]))
        fk = dict(zip(d["find_keys"][::2], d["find_keys"][1::2]))
        bspec = dict(zip(bs["spec"][::2], bs["spec"][1::2])) if isinstance(bs["spec"], list) else {}
        fspec = dict(zip(fk["spec"][::2], fk["spec"][1::2])) if isinstance(fk["spec"], list) else {}
        if bs["type"] == "index": b = "Begin::Index(%d)" % bspec["index"]
        elif bs["type"] == "keyword": b = 'Begin::Keyword(%s, %d)' % (rust_str(bspec["keyword"]), bspec["startfrom"])
        else: b = "Begin::Unknown"
        if fk["type"] == "range": f = "Find::Range { lastkey: %d, step: %d, limit: %d }" % (fspec["lastkey"], fspec["keystep"], fspec["limit"])
        elif fk["type"] == "keynum": f = "Find::Keynum { index: %d, first: %d, step: %d }" % (fspec["keynumidx"], fspec["firstkey"], fspec["keystep"])
        else: f = "Find::Unknown"
        notes = d.get("notes")
        out.append((flags, b, f, notes))
    rows.append((name, out))
print("#[rustfmt::skip]")
print("const KEY_SPECS: &[(&str, &[KeySpec])] = &[")
for name, specs in rows:
    if not specs: continue
    parts = []
    for flags, b, f, notes in specs:
        fl = ", ".join('"%s"' % x for x in flags)
        n = "Some(%s)" % rust_str(notes) if notes is not None else "None"
        parts.append("KeySpec { notes: %s, flags: &[%s], begin: %s, find: %s }" % (n, fl, b, f))
    print('    ("%s", &[%s]),' % (name, ", ".join(parts)))
print("];")
print()
print("#[rustfmt::skip]")
print("const TIPS: &[(&str, &[&str])] = &[")
for name, these in tips:
    print('    ("%s", &[%s]),' % (name, ", ".join(rust_str(t) for t in these)))
print("];")
