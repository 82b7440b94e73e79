#!/bin/bash
# ci/broker/test_metrics.sh — the metrics listener (metrics.listen) of a
# running broker: the probes' answers (/healthz, /readyz, 404, 405), the
# counts of a known workload (metrics_e2e.py), `promtool check metrics` on
# a scrape, and a real Prometheus (Debian's package) started on loopback,
# scraping the broker until its query API returns the broker's series;
# a volume failing fsyncs shows as KAFKA_STORAGE_ERROR answers and a
# poisoned partition.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh metrics
for t in prometheus promtool curl; do
	command -v $t >/dev/null || fail "$t is missing (ci/deps.sh test installs prometheus and curl)"
done

broker_start "$T/data" --override metrics.listen=127.0.0.1:0
MURL=$(grep -o 'serving http://127.0.0.1:[0-9]*' "$BROKER_LOGFILE" | tail -1 | sed 's/serving //')
[ -n "$MURL" ] || fail "the broker did not log its metrics endpoint"

code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
[ "$(code "$MURL/healthz")" = 200 ] || fail "/healthz"
[ "$(code "$MURL/readyz")" = 200 ] || fail "/readyz of a serving broker"
curl -s "$MURL/readyz" | grep -q '^ready: ' || fail "/readyz body"
[ "$(code "$MURL/nothing")" = 404 ] || fail "an unknown path is not 404"
[ "$(code -X POST "$MURL/metrics")" = 405 ] || fail "POST is not 405"
printf 'NOT HTTP\r\n\r\n' | timeout 5 curl -s -o /dev/null telnet://"${MURL#http://}" || true
[ "$(code "$MURL/healthz")" = 200 ] || fail "the listener died of a malformed request"
pass "probes: /healthz 200, /readyz 200, 404 and 405"

# A second broker joining the same volume is not ready until it leads the
# share the cluster gives it: /readyz 503 "joining" first, then 200.
MP2=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BIN/kaas" --data "$T/data" --listen 127.0.0.1:0 --broker-id 2 --trust-unqualified \
	--override "metrics.listen=127.0.0.1:$MP2" >"$T/b2.log" 2>&1 &
B2=$!
saw_joining=0
for _ in $(seq 1 600); do
	body=$(curl -s "http://127.0.0.1:$MP2/readyz" || true)
	case $body in "not ready: joining"*) saw_joining=1 ;; ready:*) break ;; esac
	sleep 0.05
done
case $body in ready:*) ;; *) kill "$B2"; fail "the joining broker never became ready: $body" ;; esac
grep -q 'cluster: ready' "$T/b2.log" || { kill "$B2"; fail "/readyz 200 before 'cluster: ready'"; }
kill -TERM "$B2"; wait "$B2" || true
[ "$saw_joining" = 1 ] || fail "/readyz never said 'joining' while the broker joined"
pass "a joining broker: /readyz 503 'joining the cluster' until it led its share, then 200"

$PY ci/broker/metrics_e2e.py "$BROKER" "$MURL" || fail "metrics against a known workload"

curl -s "$MURL/metrics" >"$T/scrape.txt"
promtool check metrics <"$T/scrape.txt" >"$T/promtool.out" 2>&1 || { cat "$T/promtool.out"; fail "promtool check metrics"; }
pass "promtool check metrics: $(wc -l <"$T/scrape.txt") lines, no complaint"

# A real Prometheus on a free loopback port, scraping every second.
PPORT=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$T/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: kaas
    static_configs:
      - targets: ['${MURL#http://}']
YML
promtool check config "$T/prometheus.yml" >/dev/null || fail "promtool check config"
prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/tsdb" \
	--web.listen-address=127.0.0.1:$PPORT >"$T/prometheus.log" 2>&1 &
PROM_PID=$!
e2e_on_exit "kill $PROM_PID 2>/dev/null; wait $PROM_PID 2>/dev/null || true"
e2e_show_log "$T/prometheus.log"
q() { curl -s --get --data-urlencode "query=$1" "http://127.0.0.1:$PPORT/api/v1/query"; }
got=
for _ in $(seq 1 60); do
	got=$(q 'sum(kaas_requests_total{job="kaas",api="Produce"})' 2>/dev/null || true)
	echo "$got" | $PY -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; sys.exit(0 if r and float(r[0]["value"][1]) >= 40 else 1)' \
		2>/dev/null && break
	got=
	sleep 1
done
[ -n "$got" ] || fail "Prometheus never returned the broker's Produce count (last: $(q 'up'))"
up=$(q 'up{job="kaas"}' | $PY -c 'import json,sys; print(json.load(sys.stdin)["data"]["result"][0]["value"][1])')
[ "$up" = 1 ] || fail "up{job=kaas} is $up"
lag=$(q 'kaas_consumer_group_lag{group="obs-lag"}' | $PY -c 'import json,sys; print(len(json.load(sys.stdin)["data"]["result"]))')
[ "$lag" -ge 1 ] || fail "Prometheus has no consumer lag series"
pass "Prometheus scraped the broker: up=1, Produce requests and consumer lag queryable"
kill "$PROM_PID"
wait "$PROM_PID" 2>/dev/null || true

broker_stop
[ "$BROKER_RC" = 0 ] || fail "broker exit $BROKER_RC"
pass "the broker stopped cleanly with the listener open"

# A volume that fails every fsync under poison/: the storage error and the
# poisoned partition show in the counters.
mkdir -p "$T/vol"
broker_start "fault:$T/vol?failpath=poison/*/*.log:fsync:EIO" --override metrics.listen=127.0.0.1:0
MURL=$(grep -o 'serving http://127.0.0.1:[0-9]*' "$BROKER_LOGFILE" | tail -1 | sed 's/serving //')
$PY ci/broker/metrics_e2e.py "$BROKER" "$MURL" --poison || fail "storage errors in the metrics"
broker_stop
