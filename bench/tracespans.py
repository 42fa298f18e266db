#!/usr/bin/env python3
# tracespans.py: where the time of a "tally serve" request goes, from an
# execution trace of the server (tally serve --pprof, issue 18):
#
#   curl -o trace.out 'http://HOST:PORT/debug/pprof/trace?seconds=10'
#   go tool trace -d=parsed trace.out | python3 bench/tracespans.py
#
# A span is one connection goroutine's work on one request (or read
# pipeline): from the netpoller making it runnable (input arrived) to its
# next park in the netpoller (reply written, nothing more to read). Prints
# the spans' distribution, the slowest 0.1% split by goroutine state
# (runnable after the wake, running, in a syscall, parked and where), and
# how many of them overlap a GC or stop-the-world window. Slow on big
# traces (about a minute per 10 s traced); stdlib only.
import sys, re, collections
tr = re.compile(r'^M=(-?\d+) P=(-?\d+) G=(-?\d+) StateTransition Time=(\d+) GoID=(\d+) (\w+)->(\w+) Reason="([^"]*)"')
rng = re.compile(r'^M=(-?\d+) P=(-?\d+) G=(-?\d+) Range(Begin|End) Time=(\d+) Name="([^"]*)"')
lines = sys.stdin
pending = None  # (goid, time, from, to, reason, p) awaiting stack
stack = []
spans = []
state = {}  # goid -> dict
ranges = []
def funcs(st):
    return [s.split(' @ ')[0].strip() for s in st]
def handle(ev, st):
    goid, t, a, b, reason, p = ev
    fs = funcs(st)
    g = state.setdefault(goid, {'conn': False, 'span': None, 'last': t, 'st': a})
    if any('server.(*Conn).serve' in f for f in fs):
        g['conn'] = True
    sp = g['span']
    # account time in previous state
    if sp is not None:
        d = t - g['last']
        key = g['st']
        if key == 'Waiting':
            key = 'Waiting:' + g.get('wkey', '?')
        if key == 'Runnable':
            key = 'Runnable:' + g.get('rkey', '?')
        sp['parts'][key] += d
    # transitions
    if b == 'Waiting' and a == 'Running':
        netpoll = reason == 'network' and any('server.(*Conn).serve' in f for f in fs)
        if netpoll:
            if sp is not None:
                sp['end'] = t
                spans.append(sp)
            g['span'] = None
            g['innet'] = True
        else:
            g['wkey'] = next((f for f in fs if not f.startswith('runtime.') and not f.startswith('sync.') and not f.startswith('internal/sync')), fs[0] if fs else '?')
            g['innet'] = False
    if a == 'Waiting' and b == 'Runnable':
        if g.get('innet') and g['conn']:
            g['span'] = {'g': goid, 'start': t, 'end': None, 'parts': collections.Counter()}
            g['innet'] = False
            g['rkey'] = 'wake'
        else:
            g['rkey'] = 'after-block'
    if a == 'Syscall' and b == 'Runnable':
        g['rkey'] = 'after-syscall'
    if a == 'Running' and b == 'Runnable':
        g['rkey'] = 'preempted'
    if sp is not None and any('hmget' in f for f in fs):
        sp['read'] = True
    if sp is not None and any('runBatch' in f for f in fs):
        sp['write'] = True
    g['last'] = t
    g['st'] = b
for line in lines:
    if line.startswith('M='):
        if pending is not None:
            handle(pending, stack); pending = None
        m = tr.match(line)
        if m:
            pending = (int(m.group(5)), int(m.group(4)), m.group(6), m.group(7), m.group(8), int(m.group(2)))
            stack = []
            continue
        m = rng.match(line)
        if m:
            ranges.append((m.group(4), int(m.group(5)), m.group(6)))
    elif line.startswith('\t') and not line.startswith('\t\t') and pending is not None:
        stack.append(line)
if pending is not None:
    handle(pending, stack)
spans = [s for s in spans if s['end'] is not None]
d = sorted(s['end'] - s['start'] for s in spans)
n = len(d)
def q(x): return d[min(n - 1, int(x * n))] / 1e3
print(f"spans {n}; p50 {q(.5):.1f}us p99 {q(.99):.1f}us p999 {q(.999):.1f}us p9999 {q(.9999):.1f}us max {d[-1]/1e3:.1f}us")
thr = d[int(.999 * n)]
slow = [s for s in spans if s['end'] - s['start'] >= thr]
tot = collections.Counter()
for s in slow:
    tot.update(s['parts'])
print(f"slowest {len(slow)} spans (>= {thr/1e3:.1f}us), time by state (sum, us):")
for k, v in tot.most_common(15):
    print(f"  {k:60s} {v/1e3:10.1f}  {v/len(slow)/1e3:8.1f} per span")
allt = collections.Counter()
for s in spans:
    allt.update(s['parts'])
print("all spans, mean per span (us):")
for k, v in allt.most_common(10):
    print(f"  {k:60s} {v/n/1e3:8.1f}")
print("slow spans marked read (a stack in hmget):", sum(1 for s in slow if s.get('read')), "write (a stack in runBatch):", sum(1 for s in slow if s.get('write')))
print("ranges:", collections.Counter(r[2] for r in ranges))
# GC and stop-the-world windows against spans
wins = []
openr = {}
for kind, t, name in ranges:
    if kind == 'Begin':
        openr[name] = t
    elif name in openr:
        wins.append((openr.pop(name), t, name))
for name, t in openr.items():
    wins.append((t, 1 << 62, name))
def overlaps(s, pred):
    return any(a < s['end'] and b > s['start'] for a, b, nm in wins if pred(nm))
for label, pred in [('GC (mark or STW)', lambda nm: 'GC' in nm or 'stop-the-world' in nm and 'trace' not in nm)]:
    tot_gc = sum(min(b, spans[-1]['end']) - a for a, b, nm in wins if pred(nm))
    span_t = spans[-1]['end'] - spans[0]['start']
    print(f"{label}: {tot_gc/1e6:.1f} ms of {span_t/1e6:.0f} ms traced ({100*tot_gc/span_t:.2f}%); spans overlapping: all {100*sum(1 for s in spans if overlaps(s, pred))/n:.2f}%, slowest 0.1% {100*sum(1 for s in slow if overlaps(s, pred))/len(slow):.1f}%")
for a, b, nm in wins:
    if 'trace' not in nm:
        print(f"  window {nm}: {(b-a)/1e6:.2f} ms")
