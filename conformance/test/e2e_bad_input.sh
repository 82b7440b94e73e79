#!/bin/bash
# e2e_bad_input.sh — bad input gets one line naming the problem and exit 2,
# and leaves nothing behind in the volume: unknown URL schemes, missing,
# unwritable and non-directory paths, zero and huge actor counts, bad options,
# a failing --crash-cmd, a --mount or an --agent root that is another volume.
# An interrupt (SIGINT) ends the run the same way,
# with the scratch directory removed and no actor or crash command left.
source "$(dirname "$0")/lib.sh"

vol=$(newdir vol)
touch "$WORK/plainfile"
ro=$(newdir ro)
mount --bind "$vol" "$ro"
CLEANUPS+=("umount '$ro'")
mount -o remount,bind,ro "$ro"

bad() { # NEEDLE ARGS...: exit 2, one line on stderr naming the problem, nothing else
	local needle=$1
	shift
	expect_rc 2 "$KC" "$@"
	[ "$(wc -l <"$WORK/err")" = 1 ] || fail "not one line for '$*': $(cat "$WORK/err")"
	grep -q -- "$needle" "$WORK/err" || fail "'$*' said: $(cat "$WORK/err") (expected '$needle')"
	[ ! -s "$WORK/out" ] || fail "'$*' printed to stdout: $(cat "$WORK/out")"
	assert_empty "$vol"
}

bad "unknown substrate URL scheme" check "ftp://host/share"
bad "No such file or directory" check "$WORK/does/not/exist"
bad "not writable" check "$ro"
bad "not a directory" check "$WORK/plainfile"
bad "actors" check "$vol" --actors 0
bad "out of range" check "$vol" --actors 100000
bad "actors" check "$vol" --actors many
bad "unknown check 'nope'" check "$vol" --checks rename,nope
bad "unknown option '--colour'" check "$vol" --colour
bad "missing URL" check
bad "unknown fault option\|fault" check "fault:$vol?frobnicate=1"
bad "--mount" check "$vol" --mount "$WORK/does/not/exist"
# A --mount that is not the same volume as the URL: another directory, or
# the URL's own parent.  Found before any actor starts; nothing is left in
# either place.
other=$(newdir other)
bad "^kaas-conform: --mount $other: not the volume of $vol" check "$vol" --mount "$other"
assert_empty "$other"
bad "^kaas-conform: --mount posix:$WORK: not the volume of $vol" check "$vol" --mount "posix:$WORK" --actors 2
bad "--cluster-dir" check "$vol" --stamp --cluster-dir "$WORK/plainfile"
bad "--stamp needs every check" check "$vol" --stamp --checks rename
bad "unknown command 'chek'" chek "$vol"
# Report paths are tried before the run: a missing directory, a read-only
# file system, a directory in place of the file.
bad "^kaas-conform: --json: cannot write .*/does/not/exist/r.json: No such file" \
	check "$vol" --json "$WORK/does/not/exist/r.json"
bad "^kaas-conform: --junit: cannot write $ro/j.xml: Read-only file system" check "$vol" --junit "$ro/j.xml"
bad "^kaas-conform: --json: $WORK is a directory" check "$vol" --json "$WORK"
pass "bad URLs, paths and options: exit 2, one line, nothing created"

# Trying a report path leaves nothing beside it.
mkdir rep
expect_rc 0 "$KC" check "$vol" --checks preflight --json rep/r.json --junit rep/j.xml
[ "$(ls -A rep | tr '\n' ' ')" = "j.xml r.json " ] || fail "beside the reports: $(ls -A rep)"
assert_empty "$vol"
pass "report paths are checked before the run, and the check leaves nothing behind"

# An agent whose --root is not the volume of the URL: each agent reads back,
# relative to its root, a marker the driver wrote through the URL.  Another
# directory is refused before any check runs, naming the agent; a bind
# mount of the URL's directory (another path, the same volume) is not.  The
# agents listen on loopback in a network namespace of their own.
NS=kcbi-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
ip netns add "$NS"
CLEANUPS+=("ip netns del '$NS'")
ip netns exec "$NS" ip link set lo up
view=$(newdir view)
mount --bind "$vol" "$view"
CLEANUPS+=("umount '$view'")
roots=([7070]="$vol" [7071]="$other" [7072]="$view")
for p in 7070 7071 7072; do
	ip netns exec "$NS" "$KC" agent --listen "127.0.0.1:$p" --root "${roots[$p]}" >"agent$p.log" 2>&1 &
	CLEANUPS+=("kill $! 2>/dev/null; wait $! 2>/dev/null")
done
for p in 7070 7071 7072; do
	timeout 10 sh -c "until grep -q listening agent$p.log; do sleep 0.05; done" ||
		fail "agent $p did not start: $(cat "agent$p.log")"
done
expect_rc 2 ip netns exec "$NS" "$KC" check "$vol" --agent 127.0.0.1:7070 --agent 127.0.0.1:7071 \
	--checks excl --no-progress
[ "$(wc -l <err)" = 1 ] || fail "not one line: $(cat err)"
grep -q "^kaas-conform: --agent 127.0.0.1:7071: its root $other is not the volume of $vol" err ||
	fail "wrong-root agent: $(cat err)"
[ ! -s out ] || fail "printed to stdout: $(cat out)"
assert_empty "$vol"
assert_empty "$other"
expect_rc 0 ip netns exec "$NS" "$KC" check "$vol" --agent 127.0.0.1:7070 --agent 127.0.0.1:7072 \
	--checks excl --iterations 5 --json view.json --no-progress
[ "$(jget view.json "[a['url'] for a in r['actors']['list']]")" = "['$vol', '$view']" ] ||
	fail "agents' roots: $(jget view.json "r['actors']['list']")"
assert_empty "$vol"
pass "an agent rooted on another volume is refused before the checks, naming it; a bind mount is the same volume"

# An output that cannot be written at the end (its directory removed during
# the run, by the crash command) makes the run exit 2, and the final line
# says exit 2 and why, not the verdict's exit status.
late() { # NAME WHAT ARGS...: the run exits 2 and its last line names WHAT
	local name=$1 what=$2 v
	shift 2
	mkdir "$WORK/$name"
	expect_rc 2 "$KC" check "$vol" --crash-cmd "rm -rf '$WORK/$name'" --no-progress "$@"
	grep -q "^kaas-conform: .*$what" err || fail "$name: no error naming $what: $(cat err)"
	v=$(grep -o '^VERDICT [A-Z]*' out) || fail "$name: no verdict line: $(cat out)"
	[[ "$(tail -n 1 out)" == "$v (exit 2: "*"$what"*")"* ]] ||
		fail "$name: the last line does not say exit 2: $(tail -n 1 out)"
	assert_empty "$vol"
}
late gone1 "cannot write $WORK/gone1/j.xml" --checks fsync --junit "$WORK/gone1/j.xml" --json late.json
validate late.json
late gone2 "cannot write $WORK/gone2/r.json" --checks fsync --json "$WORK/gone2/r.json"
late gone3 "$WORK/gone3" --stamp --cluster-dir "$WORK/gone3" --iterations 20
pass "a report or stamp that fails at the end: exit 2, and the last line says so"

# A crash command that fails stops the run with exit 2; the scratch is gone.
expect_rc 2 "$KC" check "$vol" --checks fsync --crash-cmd "exit 7" --json crash.json
[ "$(wc -l <err)" = 1 ] || fail "not one line: $(cat err)"
grep -q -- "--crash-cmd 'exit 7' failed with exit status 7" err || fail "crash-cmd error: $(cat err)"
validate crash.json
[ "$(jget crash.json "r['verdict']")" = ERROR ] || fail "verdict after a failing crash command"
assert_empty "$vol"
pass "a failing --crash-cmd: exit 2, named, scratch removed"

# SIGINT in the middle of a long check.
"$KC" check "$vol" --checks rename --iterations 1000000 --no-progress >int.out 2>int.err &
pid=$!
for _ in $(seq 200); do
	[ -n "$(ls -A "$vol")" ] && break
	sleep 0.05
done
[ -n "$(ls -A "$vol")" ] || fail "the run never created its scratch directory"
for _ in $(seq 200); do
	kids=$(pgrep -P "$pid" || true)
	[ "$(echo "$kids" | wc -w)" = 4 ] && break
	sleep 0.05
done
sleep 0.3 # into the rename check
[ "$(echo "$kids" | wc -w)" = 4 ] || fail "expected 4 actor processes, saw: $kids"
kill -INT "$pid"
rc=0
wait "$pid" || rc=$?
[ "$rc" = 2 ] || fail "exit $rc after SIGINT"
grep -q "interrupted" int.err || fail "no word about the interrupt: $(cat int.err)"
assert_empty "$vol"
for k in $kids; do ! kill -0 "$k" 2>/dev/null || fail "actor $k survived the interrupt"; done
pass "SIGINT: exit 2, scratch removed, actors gone"

# SIGINT while the crash command runs: the command is ended too.
"$KC" check "$vol" --checks fsync --crash-cmd "echo \$\$ >'$WORK/cmd.pid'; exec sleep 60" \
	--no-progress >int2.out 2>int2.err &
pid=$!
for _ in $(seq 200); do
	[ -s "$WORK/cmd.pid" ] && break
	sleep 0.05
done
[ -s "$WORK/cmd.pid" ] || fail "the crash command never started"
kill -INT "$pid"
rc=0
wait "$pid" || rc=$?
[ "$rc" = 2 ] || fail "exit $rc after SIGINT during the crash command"
sleep 0.2
! kill -0 "$(cat "$WORK/cmd.pid")" 2>/dev/null || fail "the crash command survived the interrupt"
assert_empty "$vol"
pass "SIGINT during --crash-cmd: the command is killed, scratch removed"
