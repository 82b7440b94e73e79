#!/bin/bash
# ci/interop/test_kcat.sh — kcat (librdkafka 2.0) against a real kaas broker:
# 100k keyed records with headers per compression codec (none, gzip, snappy,
# lz4, zstd) into 3-partition topics, half before and half after a broker
# restart; everything consumed back (with check.crcs) and compared record by
# record (key, value, headers, partition, offset, order); the stored batches
# carry the codec they were produced with; consuming by timestamp (kcat -Q and
# -o s@TS) starts exactly at the first record at or after the time, also
# inside compressed batches.
NAME=kcat
source "$(dirname "$0")/lib.sh"
K="$PY ci/interop/kcat_tool.py"
N=${KCAT_RECORDS:-100000}
H=$((N / 2))
P=3
CODECS="none gzip snappy lz4 zstd"

broker_start "$T/data" --override num.partitions=$P

produce() { # codec from to half
	$K gen "$1" "$2" "$3" | kcat -b "$BROKER" -P -t "kc-$1" -K $'\t' -X compression.codec="$1" \
		-X acks=all -X linger.ms=20 -H half="$4" -H dup=a -H dup=b -H empty= ||
		fail "kcat -P kc-$1 ($2..$3)"
}

for c in $CODECS; do produce "$c" 0 $H 1; done
broker_restart || fail "restart"
for c in $CODECS; do produce "$c" $H $N 2; done
echo "ok produced $N records to each of: $CODECS (restart after $H)"

for c in $CODECS; do
	kcat -b "$BROKER" -C -t "kc-$c" -o beginning -e -q -X check.crcs=true -f '%p\t%o\t%T\t%k\t%s\t%h\n' > "$T/$c.c" ||
		fail "kcat -C kc-$c"
	$K check "$c" $N $P "$T/$c.c" > "$T/$c.targets" || fail "kc-$c: consumed != produced"
	$K codecs "$BROKER" "kc-$c" $P "$c" || fail "kc-$c: stored codec"
	while read -r line; do
		ts=${line%% *}
		kcat -Q -b "$BROKER" $(for p in $(seq 0 $((P - 1))); do echo "-t kc-$c:$p:$ts"; done) > "$T/q" ||
			fail "kcat -Q kc-$c $ts"
		kcat -b "$BROKER" -C -t "kc-$c" -o "s@$ts" -e -q -f '%p %o\n' > "$T/s" || fail "kcat -o s@$ts"
		$K bytime "$line" "$T/q" "$T/s" $P || fail "kc-$c by timestamp"
	done < "$T/$c.targets"
	rm -f "$T/$c.c"
done
interop_done
