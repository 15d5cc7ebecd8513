#!/usr/bin/env python3
"""Instructions per update from one callgrind dump of a server's main thread (the
instructions experiment, bench/experiments/instructions.md).

usage: callgrind-fold.py DUMP PERF_MAP UPDATES [self|incl|callers PATTERN...]

DUMP is the window's dump of the main thread (<pid>.out.1-01), PERF_MAP the
server's /tmp/perf-<pid>.map (node --perf-basic-prof), which names the code
V8 generated. Prints instructions per update: the total, by kind, and the
functions that cost most (self: their own instructions; incl: with what they
call, JavaScript only; callers: who calls the functions whose names hold a
PATTERN, and how much of theirs that is)."""
import bisect
import collections
import re
import subprocess
import sys


def load_map(path):
    entries = []
    with open(path) as f:
        for line in f:
            start, size, name = line.rstrip('\n').split(' ', 2)
            entries.append((int(start, 16), int(size, 16), name))
    entries.sort()
    return entries, [e[0] for e in entries]


def namer(path):
    entries, starts = load_map(path)

    def name(text):
        m = re.search(r'0x([0-9a-f]+)\s*(\([\d,]+x\)\s*)?\[\?\?\?\]', text)
        if m:
            address = int(m.group(1), 16)
            i = bisect.bisect_right(starts, address) - 1
            if i >= 0 and address < entries[i][0] + entries[i][1]:
                return 'JIT ' + entries[i][2]
            return 'JIT? 0x' + m.group(1)
        return re.sub(r'\s*\[/.*?\]\s*$', '', text).replace('???:', '').strip()[:130]

    return name


def annotate(dump, *options):
    return subprocess.run(['callgrind_annotate', '--threshold=100', *options, dump],
                          capture_output=True, text=True, check=True).stdout


COST = re.compile(r'\s*([\d,]+)\s+\([\s\d.]+%\)\s+(.*)$')


def rows(text):
    on = False
    for line in text.splitlines():
        if 'file:function' in line:
            on = True
        elif on:
            m = COST.match(line)
            if m:
                yield int(m.group(1).replace(',', '')), m.group(2)


def kind(name):
    if name.startswith('JIT'):
        return 'generated code (JavaScript)'
    if 'malloc' in name or name.endswith('_int_free') or name.endswith(':free'):
        return 'malloc'
    if name.startswith('Builtins_'):
        return 'V8 builtins'
    if 'Json' in name:
        return 'V8 JSON'
    if 'Scaveng' in name or 'IterateObjectCache' in name or 'Heap::' in name:
        return 'V8 collection'
    if 'v8::' in name:
        return 'V8 runtime'
    if 'node::' in name:
        return 'Node C++'
    if 'uv' in name:
        return 'libuv'
    return 'other'


def main():
    dump, perf_map, updates = sys.argv[1], sys.argv[2], float(sys.argv[3])
    mode = sys.argv[4] if len(sys.argv) > 4 else 'self'
    name = namer(perf_map)
    text = annotate(dump, '--inclusive=no')
    total = next(int(l.split()[0].replace(',', '')) for l in text.splitlines() if 'PROGRAM TOTALS' in l)
    print(f'{total / updates:8.0f}  instructions per update, main thread')
    if mode == 'self':
        by_kind, by_name = collections.Counter(), collections.Counter()
        for cost, fn in rows(text):
            if cost == total:
                continue  # main() and its callers: inclusive figures listed as self
            n = name(fn)
            by_kind[kind(n)] += cost
            by_name[n] += cost
        for k, v in by_kind.most_common():
            print(f'{v / updates:8.0f}  {k}')
        print('functions, own instructions:')
        for k, v in by_name.most_common(40):
            print(f'{v / updates:8.0f}  {k}')
    elif mode == 'incl':
        best = {}
        for cost, fn in rows(annotate(dump, '--inclusive=yes')):
            n = name(fn)
            if n.startswith('JIT'):
                best[n] = max(best.get(n, 0), cost)
        for k, v in sorted(best.items(), key=lambda x: -x[1])[:40]:
            print(f'{v / updates:8.0f}  {k}')
    else:
        patterns = sys.argv[5:]
        block = []
        for line in annotate(dump, '--tree=caller', '--inclusive=yes').splitlines() + ['']:
            if line.strip():
                block.append(line)
                continue
            if block:
                target = re.sub(r'^\s*[\d,]+\s+\([^)]*\)\s+\*\s*', '', block[-1])
                if any(p in block[-1] or p in name(target) for p in patterns):
                    print(f'{name(target)}:')
                    for caller in block[:-1]:
                        m = re.match(r'\s*([\d,]+)\s+\([^)]*\)\s+<\s+(.*)$', caller)
                        if m and int(m.group(1).replace(',', '')) / updates >= 20:
                            print(f'{int(m.group(1).replace(",", "")) / updates:8.0f}  < {name(m.group(2))}')
            block = []


main()
