#!/usr/bin/env python3
"""check_symbols.py — the naming rule, checked on what the linker sees.

Every module declares its prefix in its module.mk (<m>_PREFIX := ks).  Its
public symbols are named <prefix>_..., its link-visible internals
<prefix>__... (libuv's uv_ / uv__).  This runs nm over each module's static
library and fails on any defined global symbol without its module's prefix,
and on two modules declaring the same prefix.  Static functions are not
link-visible and are not checked, nor are the sanitizers' per-global
symbols (__odr_asan.*).

Usage: python3 ci/layout/check_symbols.py BUILD_DIR   (e.g. build/rel)
"""
import glob
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_layers import parse_mk  # noqa: E402

def main():
    build = sys.argv[1] if len(sys.argv) > 1 else 'build/rel'
    mks = sorted(glob.glob('*/module.mk') + glob.glob('*/*/module.mk') + glob.glob('*/*/*/module.mk'))
    v = parse_mk(mks)
    errors = []
    seen = {}
    nsyms = 0
    for m in v.get('MODULES', []):
        pref = (v.get(m + '_PREFIX') or [None])[0]
        if not pref:
            errors.append('module %s declares no %s_PREFIX' % (m, m))
            continue
        if pref in seen:
            errors.append('modules %s and %s both use the prefix %s_' % (seen[pref], m, pref))
        seen[pref] = m
        lib = os.path.join(build, 'lib%s.a' % m)
        if not os.path.exists(lib):
            errors.append('%s is not built' % lib)
            continue
        out = subprocess.run(['nm', '-g', '--defined-only', lib], capture_output=True, text=True, check=True).stdout
        for line in out.split('\n'):
            parts = line.split()
            if len(parts) != 3 or parts[1] not in 'TDBRCGSV':
                continue
            sym = parts[2]
            if sym.startswith('__odr_asan') or sym.startswith('__asan') or sym.startswith('__ubsan'):
                continue  # the sanitizers' own per-global symbols
            nsyms += 1
            if not sym.startswith(pref + '_'):
                errors.append('%s: %s does not carry the module prefix %s_ (or %s__ for an internal)'
                              % (m, sym, pref, pref))
    for e in errors:
        print('symbols: ' + e)
    if errors:
        print('symbols: %d problem(s)' % len(errors))
        return 1
    print('symbols: %d global symbols in %d modules, each with its module prefix' % (nsyms, len(seen)))
    return 0

if __name__ == '__main__':
    sys.exit(main())
