#!/usr/bin/env python3
"""check_layers.py — the layer rule, checked: nothing includes a header from
a layer above it.

Reads every module.mk (MODULES, <m>_SRCS, <m>_TESTS, <m>_USES and the BINS'
<b>_MAIN / <b>_USES), gives each header to the module whose folder holds it,
and fails when a source, test or header of module M includes a project
header that belongs neither to M nor to a module M uses (directly or through
its uses).  Also fails when the USES graph has a cycle, when an include does
not name its path from the repository root, and when a module's folder is
missing from the picture in docs/architecture.md, and when a C file is
longer than 800 lines without saying why: a "Length: <reason>" line in its
header comment.

Run from the repository root: python3 ci/layout/check_layers.py
"""
import glob
import os
import re
import sys

LONG_LINES = 800


def parse_mk(paths):
    vars_ = {}
    for p in paths:
        text = open(p).read().replace('\\\n', ' ')
        for line in text.split('\n'):
            line = line.split('#', 1)[0]
            m = re.match(r'^\s*([A-Za-z0-9_.-]+)\s*(\+=|:=|=|\?=)\s*(.*)$', line)
            if not m:
                continue
            name, op, val = m.group(1), m.group(2), m.group(3).split()
            if op == '+=':
                vars_.setdefault(name, []).extend(val)
            else:
                vars_[name] = val
    return vars_

def main():
    mks = sorted(glob.glob('*/module.mk') + glob.glob('*/*/module.mk') + glob.glob('*/*/*/module.mk'))
    v = parse_mk(mks)
    units = {}  # name -> (files, uses)
    for m in v.get('MODULES', []):
        units[m] = (v.get(m + '_SRCS', []) + v.get(m + '_TESTS', []), v.get(m + '_USES', []))
    for b in v.get('BINS', []):
        if v.get(b + '_MAIN'):
            units['bin:' + b] = (v[b + '_MAIN'], v.get(b + '_USES', []))
    errors = []
    # a module's folders: where its sources live (tests in <folder>/test count as its own)
    folder = {}
    for m in v.get('MODULES', []):
        dirs = sorted({os.path.dirname(f) for f in v.get(m + '_SRCS', [])})
        if not dirs:
            errors.append('module %s has no sources' % m)
            continue
        folder[m] = dirs
    def owner(path):
        best, blen = None, -1
        for m, dirs in folder.items():
            for d in dirs:
                if (path.startswith(d + '/')) and len(d) > blen:
                    best, blen = m, len(d)
        return best
    def closure(uses, seen=None, stack=()):
        seen = set() if seen is None else seen
        for u in uses:
            if u in stack:
                errors.append('USES cycle: %s' % ' -> '.join(stack + (u,)))
                continue
            if u not in units:
                errors.append('unknown module in USES: %s' % u)
                continue
            if u not in seen:
                seen.add(u)
                closure(units[u][1], seen, stack + (u,))
        return seen
    inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    checked = set()
    for name, (files, uses) in sorted(units.items()):
        allowed = closure(uses, stack=(name,))
        if not name.startswith('bin:'):
            allowed.add(name)
        to_check = list(files)
        # the module's own headers are checked with it
        if name in folder:
            for d in folder[name]:
                to_check += [h for h in glob.glob(d + '/*.h') + glob.glob(d + '/test/*.h')]
        for f in to_check:
            if (name, f) in checked or not os.path.exists(f):
                continue
            checked.add((name, f))
            for x in inc.findall(open(f).read()):
                if not os.path.exists(x):
                    errors.append('%s: #include "%s" does not name its path from the repository root' % (f, x))
                    continue
                o = owner(x)
                if o is None or o in allowed:
                    continue
                errors.append('%s (module %s): includes %s of module %s, which %s does not use'
                              % (f, name.replace('bin:', 'program '), x, o, name.replace('bin:', '')))
    # the picture and the folders say the same thing
    arch = open('docs/architecture.md').read()
    for m, dirs in sorted(folder.items()):
        for d in dirs:
            if d + '/' not in arch and d not in arch:
                errors.append('docs/architecture.md does not show %s/ (module %s)' % (d, m))
    # files that do one thing: a long file says why it is long
    for f in sorted(set(f for _, f in checked)):
        if not f.endswith(('.c', '.h')) or not os.path.exists(f):
            continue
        lines = open(f).read().splitlines()
        head = next((n for n, l in enumerate(lines) if '*/' in l), 40) + 1  # the header comment
        if len(lines) > LONG_LINES and not any(re.search(r'\bLength: \S', l) for l in lines[:head]):
            errors.append('%s: %d lines, and its header gives no "Length:" reason' % (f, len(lines)))
    for e in sorted(set(errors)):
        print('layers: ' + e)
    if errors:
        print('layers: %d problem(s)' % len(set(errors)))
        return 1
    print('layers: %d modules and programs, every include points down' % len(units))
    return 0

if __name__ == '__main__':
    sys.exit(main())
