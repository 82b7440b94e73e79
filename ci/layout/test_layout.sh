#!/usr/bin/env bash
# ci/layout/test_layout.sh — the layer and naming checks catch what they
# are for: an include pointing up a layer, an include without its root path,
# a module folder missing from the architecture picture, a file over 800
# lines that does not say why, a global symbol without its module's
# prefix.  Each is planted in a scratch copy of the tree (or of the built
# libraries); the untouched copy must pass.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh --functions
e2e_scratch T kaas-layout

make --no-print-directory -s layout > /dev/null || fail "make layout fails on the tree itself"
git ls-files -z | xargs -0 cp --parents -t "$T"
layers() { (cd "$T" && python3 ci/layout/check_layers.py); }
layers > /dev/null || fail "the copy of the tree does not pass"

cp "$T/kaas/storage/read.c" "$T/read.c.orig"
sed -i '0,/^#include "/s||#include "kaas/net/server.h"\n#include "|' "$T/kaas/storage/read.c"
out=$(layers) && fail "an include of kaas/net from kaas/storage passed"
grep -q 'kaas/storage/read.c (module storage): includes kaas/net/server.h of module net' <<<"$out" ||
	fail "the upward include is not named: $out"
echo "ok: an include pointing up a layer is refused, named"
cp "$T/read.c.orig" "$T/kaas/storage/read.c"

sed -i '0,/^#include "/s||#include "storage.h"\n#include "|' "$T/kaas/storage/read.c"
out=$(layers) && fail "an include without its root path passed"
grep -q 'does not name its path from the repository root' <<<"$out" || fail "not named: $out"
echo "ok: an include without its path from the root is refused"
cp "$T/read.c.orig" "$T/kaas/storage/read.c"

sed -i 's|kaas/coord|kaas/co-ord|g' "$T/docs/architecture.md"
out=$(layers) && fail "a picture without kaas/coord passed"
grep -q 'docs/architecture.md does not show kaas/coord/' <<<"$out" || fail "not named: $out"
echo "ok: a module folder missing from docs/architecture.md is refused"
git show HEAD:docs/architecture.md > "$T/docs/architecture.md"
layers > /dev/null || fail "the restored copy does not pass"

for _ in $(seq 1 850); do echo "/* filler */"; done >> "$T/kaas/storage/read.c"
out=$(layers) && fail "a file of over 800 lines without a Length: reason passed"
grep -q 'kaas/storage/read.c: .* lines, and its header gives no "Length:" reason' <<<"$out" || fail "not named: $out"
sed -i '0,/\*\//s|\*/| * Length: a reason.\n */|' "$T/kaas/storage/read.c"
layers > /dev/null || fail "a long file with its Length: reason was refused"
echo "ok: a file over 800 lines must say why in its header"
cp "$T/read.c.orig" "$T/kaas/storage/read.c"

mkdir -p "$T/libs"
cp build/san/lib*.a "$T/libs/"
echo 'int stray_global_counter = 1; int ks_fine_name(void) { return 0; }' > "$T/stray.c"
cc -c -o "$T/stray.o" "$T/stray.c"
ar rcs "$T/libs/libstorage.a" "$T/stray.o"
out=$(python3 ci/layout/check_symbols.py "$T/libs") && fail "a symbol without the module prefix passed"
grep -q 'storage: stray_global_counter does not carry the module prefix ks_' <<<"$out" || fail "not named: $out"
grep -q 'ks_fine_name' <<<"$out" && fail "a well-named symbol was refused: $out"
echo "ok: a global symbol without its module prefix is refused, named"
echo "PASS ci/layout/test_layout.sh"
