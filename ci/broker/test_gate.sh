#!/bin/bash
# ci/broker/test_gate.sh — the broker's start-up contract: bad flags, settings
# and config files exit 2 naming what is wrong; a volume without a passing
# qualification stamp exits 78 naming the command to run; a stamp written by
# `kaas-conform check --stamp` lets it start; --trust-unqualified starts with
# a loud warning; --help documents every setting.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh gate
BINABS=$(cd "$BIN" && pwd)

# expect CODE PATTERN -- kaas args...: exit code and a message on stderr.
expect() {
	local code=$1 pat=$2
	shift 3
	local rc=0
	timeout 60 "$BIN/kaas" "$@" >"$T/out" 2>"$T/err" </dev/null || rc=$?
	[ "$rc" = "$code" ] || { cat "$T/err"; fail "kaas $* exited $rc, expected $code"; }
	grep -q -- "$pat" "$T/err" || { cat "$T/err"; fail "kaas $*: no message matching '$pat'"; }
	echo "ok exit $code: kaas $* -> $(head -1 "$T/err")"
}

mkdir -p "$T/d"
expect 2 "--data is required" -- --listen 127.0.0.1:0
expect 2 "unknown option --bogus" -- --bogus
expect 2 "--data needs a value" -- --data
expect 2 "unexpected argument 'stray'" -- --data "$T/d" stray
expect 2 "--cluster-dir: kaas.cluster.dir: invalid value ''" -- --data "$T/d" --cluster-dir ""
expect 2 "--broker-id: broker.id: invalid value 'abc'" -- --data "$T/d" --broker-id abc
expect 2 "--broker-id: broker.id: invalid value '-3'" -- --data "$T/d" --broker-id -3
expect 2 "--listen: listeners: invalid value" -- --data "$T/d" --listen nowhere
expect 2 "--listen: listeners: invalid value" -- --data "$T/d" --listen SSL://h:99999
expect 2 "--advertise: advertised.listeners" -- --data "$T/d" --advertise h:0
expect 2 "--data: log.dirs: invalid value" -- --data "$T/a,$T/b"
expect 2 "--override: num.partitions: invalid value '0'" -- --data "$T/d" --override num.partitions=0
expect 2 "--override: no.such.key: unknown setting" -- --data "$T/d" --override no.such.key=1
expect 2 "expected KEY=VALUE" -- --data "$T/d" --override num.partitions
rc=0; KAAS_BROKER_ID=x "$BIN/kaas" --data "$T/d" 2>"$T/err" || rc=$?
[ "$rc" = 2 ] && grep -q "KAAS_BROKER_ID: broker.id: invalid value 'x'" "$T/err" || fail "bad KAAS_BROKER_ID: $rc"
echo "ok exit 2: a bad KAAS_BROKER_ID names the variable"
for ev in "KAAS_LOG_LEVEL=loud|KAAS_LOG_LEVEL: invalid value 'loud'" \
	"KAAS_TRUST_UNQUALIFIED=maybe|KAAS_TRUST_UNQUALIFIED: invalid value 'maybe'" \
	"KAAS_LISTEN=nowhere|KAAS_LISTEN: listeners: invalid value 'nowhere'" \
	"KAAS_ADVERTISE=h:0|KAAS_ADVERTISE: advertised.listeners: invalid value 'h:0'" \
	"KAAS_DATA=$T/a,$T/b|KAAS_DATA: log.dirs: invalid value"; do
	rc=0; env "${ev%%|*}" "$BIN/kaas" --data "$T/d" 2>"$T/err" </dev/null || rc=$?
	[ "$rc" = 2 ] && grep -q -- "${ev#*|}" "$T/err" || { cat "$T/err"; fail "${ev%%|*}: exit $rc"; }
	echo "ok exit 2: ${ev%%|*} -> $(head -1 "$T/err")"
done
printf '# settings\nnum.partitions=3\nauto.create.topics.enable=maybe\n' > "$T/bad.properties"
expect 2 "bad.properties:3: auto.create.topics.enable: invalid value 'maybe'" -- --data "$T/d" --config "$T/bad.properties"
expect 2 "no-such.properties: cannot open the settings file: No such file" -- --data "$T/d" --config "$T/no-such.properties"
# Every source of a settings file names the file and why, before anything
# else is judged (a directory used to read as an empty file: "--data is
# required").
expect 2 "--config $T/d: is a directory, not a settings file" -- --config "$T/d"
expect 2 "--config $T/d: is a directory" -- --data "$T/d" --config "$T/d"
rc=0; KAAS_CONFIG="$T/d" "$BIN/kaas" --listen 127.0.0.1:0 2>"$T/err" </dev/null || rc=$?
[ "$rc" = 2 ] && grep -q "KAAS_CONFIG $T/d: is a directory" "$T/err" || { cat "$T/err"; fail "KAAS_CONFIG=<dir>: exit $rc"; }
echo "ok exit 2: KAAS_CONFIG=<a directory> -> $(head -1 "$T/err")"
# A path that came from the file is blamed on the file's line, not on --data.
printf 'log.dirs=%s\n' "$T/no-such-dir" > "$T/baddata.properties"
expect 2 "log.dirs in $T/baddata.properties $T/no-such-dir: .*No such file" -- --config "$T/baddata.properties"
rc=0; KAAS_DATA="$T/no-such-dir" "$BIN/kaas" 2>"$T/err" </dev/null || rc=$?
[ "$rc" = 2 ] && grep -q "KAAS_DATA $T/no-such-dir: .*No such file" "$T/err" || { cat "$T/err"; fail "KAAS_DATA=<missing>: exit $rc"; }
echo "ok a missing data directory names the source it came from (file line, variable)"
printf 'num.partitions=3\n' > "$T/nodata.properties"
expect 2 "the settings file $T/nodata.properties (--config) has no log.dirs" -- --config "$T/nodata.properties"
if [ "$(id -u)" != 0 ]; then
	printf 'num.partitions=3\n' > "$T/locked.properties"
	chmod 000 "$T/locked.properties"
	expect 2 "locked.properties: cannot open the settings file: Permission denied" -- --config "$T/locked.properties"
fi
expect 2 "log.segment.bytes: invalid value '12'" -- --data "$T/d" --override log.segment.bytes=12
expect 2 "connections.max.idle.ms: invalid value 'soon'" -- --data "$T/d" --override connections.max.idle.ms=soon
expect 2 "unknown substrate URL scheme" -- --data "smb://x/y"

# --help documents every setting the file accepts (same table).
"$BIN/kaas" --help > "$T/help"
for k in broker.id listeners advertised.listeners log.dirs num.partitions auto.create.topics.enable \
	log.retention.ms log.segment.bytes message.max.bytes socket.request.max.bytes \
	connections.max.idle.ms num.io.threads; do
	grep -q "^  $k " "$T/help" || fail "--help does not document $k"
done
grep -q -- "--trust-unqualified" "$T/help" || fail "--help does not document --trust-unqualified"
echo "ok --help documents the settings"

# docs/broker.md lists exactly the APIs and versions of the dispatch table,
# and every setting --help knows.
"$BIN/kaas" --apis > "$T/apis"
$PY - "$T/apis" "$T/help" docs/broker.md <<'PY' || fail "docs/broker.md is out of date"
import re, sys
apis = {}
for line in open(sys.argv[1]):
    w = line.split()
    lo, hi = w[2].split("-")
    apis[int(w[0])] = (w[1], lo if lo == hi else w[2], w[4] if len(w) > 4 else "")
doc = open(sys.argv[3]).read()
rows = {}
for m in re.finditer(r"^\| (\d+) \| (\w+) \| ([\d-]+) \| (\d*) ?\|$", doc, re.M):
    rows[int(m.group(1))] = (m.group(2), m.group(3), m.group(4))
assert rows == apis, "API table differs:\n docs %r\n kaas %r" % (rows, apis)
keys = re.findall(r"^  (\S+) ", open(sys.argv[2]).read().split("\nsettings (")[1], re.M)
missing = [k for k in keys if "| `%s` |" % k not in doc]
assert not missing, "settings missing from docs/broker.md: %s" % missing
print("ok docs/broker.md matches the dispatch table (%d APIs) and documents %d settings" % (len(apis), len(keys)))
PY

# No stamp: exit 78, naming the command that qualifies the volume.
expect 78 "kaas-conform check $T/d --stamp" -- --data "$T/d" --listen 127.0.0.1:0
[ ! -e "$T/d/__cluster/topics" ] || fail "the gate let the broker touch the registry"
echo "ok an unqualified volume is refused before anything is written"

# A separate cluster directory: the hint names it.
mkdir -p "$T/c"
expect 78 "kaas-conform check $T/d --stamp --cluster-dir $T/c" -- --data "$T/d" --cluster-dir "$T/c" --listen 127.0.0.1:0

# --trust-unqualified: starts, with the warning in the log.
BROKER_LOG=$T/trust.log broker_start "$T/d"
grep -q "trust-unqualified: starting on a volume WITHOUT a passing" "$T/trust.log" || fail "no loud warning"
grep -q "start-up self-check passed" "$T/trust.log" || fail "no self-check"
mkdir -p "$T/d2"
expect 2 "Address already in use" -- --data "$T/d2" --listen "127.0.0.1:$BROKER_PORT" --trust-unqualified
broker_stop
[ "$BROKER_RC" = 0 ] || fail "exit $BROKER_RC"
echo "ok --trust-unqualified starts with a warning; the self-check ran"

# Descriptors: the soft limit is raised to the hard one and logged; with
# almost none left the start-up fails by name (libuv used to abort without
# a word when its signal pipe could not be made).
mkdir -p "$T/fd"
(ulimit -Sn 256; ulimit -Hn 2048; BROKER_LOG=$T/fd.log broker_start "$T/fd"
	grep -q "descriptors: soft limit raised from 256 to the hard limit 2048" "$T/fd.log" ||
		{ cat "$T/fd.log"; exit 1; }
	broker_stop; [ "$BROKER_RC" = 0 ]) || fail "the descriptor limit was not raised (or not logged)"
echo "ok the soft RLIMIT_NOFILE is raised to the hard limit at start-up, and logged"
for n in 8 11; do
	rc=0
	(ulimit -n $n; exec timeout 60 "$BIN/kaas" --data "$T/fd" --listen 127.0.0.1:0 --trust-unqualified) \
		>"$T/out" 2>"$T/err" </dev/null || rc=$?
	[ "$rc" = 1 ] && grep -q "event loop: no descriptors left for the server (Too many open files; RLIMIT_NOFILE soft $n" "$T/err" ||
		{ cat "$T/err"; fail "at a descriptor limit of $n: exit $rc, expected 1 with a named error"; }
done
echo "ok out of descriptors at start-up: exit 1 naming the limit, never an abort"

# Qualify with kaas-conform, then the broker starts without --trust-unqualified.
mkdir -p "$T/q"
# (A timing-based WARN, e.g. an fsync that looked too fast on a busy machine,
# writes no stamp: try again a few times.)
for attempt in 1 2 3; do
	(cd "$T" && "$BINABS/kaas-conform" check "$T/q" --actors 2 --stamp >"$T/conform.out" 2>&1) ||
		{ cat "$T/conform.out"; fail "kaas-conform did not qualify a local directory"; }
	[ -s "$T/q/__cluster/qualification.json" ] && break
done
[ -s "$T/q/__cluster/qualification.json" ] || { cat "$T/conform.out"; fail "no stamp written"; }
BROKER_QUALIFIED=1 BROKER_LOG=$T/q.log broker_start "$T/q"
grep -q "passing qualification stamp" "$T/q.log" || fail "stamp not recognised"
if grep -q "WITHOUT a passing" "$T/q.log"; then fail "warned although qualified"; fi
echo 1 | timeout 30 kcat -b "$BROKER" -P -t gate-ok -X acks=all || fail "produce to a qualified broker"
broker_stop
[ "$BROKER_RC" = 0 ] || fail "exit $BROKER_RC"
echo "ok a volume stamped by kaas-conform starts the broker"

# A stamp bound to another volume does not count (the stamp binds to the
# filesystem's identity, not to a directory: rewrite that identity).
mkdir -p "$T/other/__cluster"
$PY - "$T/q/__cluster/qualification.json" "$T/other/__cluster/qualification.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
v = d["volume"]
v["source"] = "otherhost:/export/elsewhere"
v["fsid"] = "00000000deadbeef"
v["volume_key"] = v.get("fstype", "x") + ":otherhost:/export/elsewhere"
json.dump(d, open(sys.argv[2], "w"))
PY
rc=0; timeout 30 "$BIN/kaas" --data "$T/other" --listen 127.0.0.1:0 2>"$T/err" </dev/null || rc=$?
[ "$rc" = 78 ] || { cat "$T/err"; fail "a stamp of another volume was accepted (exit $rc)"; }
echo "ok a stamp of another volume is refused (78): $(head -1 "$T/err")"

# The stamped volume seen through a substrate whose O_EXCL lets two creators
# win (same identity, so the stamp passes): the start-up self-check fails,
# exit 78 naming the primitive and the command, and no file on the volume
# changes (the probe's own files are gone again).  With --trust-unqualified it starts, logging the failure loudly.
before=$(cd "$T/q" && find . \( -type f -printf '%p %s %T@\n' \) -o -printf '%p\n' | sort | md5sum)
broken="fault:$T/q?excl=broken"
expect 78 "kaas-conform check $broken --stamp" -- --data "$broken" --listen 127.0.0.1:0
grep -q "self-check failed: .*O_CREAT|O_EXCL" "$T/err" || { cat "$T/err"; fail "the failed primitive is not named"; }
grep -q "passing qualification stamp" "$T/err" || fail "the stamp was not what refused the start"
after=$(cd "$T/q" && find . \( -type f -printf '%p %s %T@\n' \) -o -printf '%p\n' | sort | md5sum)
[ "$before" = "$after" ] || fail "a broker refused by the self-check changed the volume"
echo "ok a failing start-up self-check exits 78 naming O_EXCL and the command; the volume is untouched"
BROKER_LOG=$T/broken.log broker_start "$broken"
grep -q "start-up self-check FAILED (self-check: O_CREAT|O_EXCL" "$BROKER_LOGFILE" || fail "no loud self-check warning"
broker_stop
[ "$BROKER_RC" = 0 ] || fail "exit $BROKER_RC"
echo "ok --trust-unqualified starts despite the failed self-check, with a warning"

# A separate cluster directory: the self-check runs there too, and the
# command the refusal names carries --cluster-dir.
mkdir -p "$T/q2" "$T/c2"
for attempt in 1 2 3; do
	(cd "$T" && "$BINABS/kaas-conform" check "$T/q2" --cluster-dir "$T/c2" --actors 2 --stamp >"$T/conform.out" 2>&1) ||
		{ cat "$T/conform.out"; fail "kaas-conform did not qualify a local directory with --cluster-dir"; }
	[ -s "$T/c2/qualification.json" ] && break
done
[ -s "$T/c2/qualification.json" ] || { cat "$T/conform.out"; fail "no stamp written in the cluster directory"; }
broken="fault:$T/c2?excl=broken"
expect 78 "kaas-conform check $T/q2 --stamp --cluster-dir $broken" -- --data "$T/q2" --cluster-dir "$broken" --listen 127.0.0.1:0
grep -q "self-check failed: .*O_CREAT|O_EXCL" "$T/err" || { cat "$T/err"; fail "the failed primitive is not named"; }
echo "test_gate: all passed"
