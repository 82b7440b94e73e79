"""ci/coord/txn_refused.py — a transactional producer (confluent-kafka,
librdkafka) is refused at once, as a fatal error that says why, rather
than retried until init_transactions() times out.

  txn_refused.py BROKER
"""
import sys
import time

from confluent_kafka import KafkaException, Producer

BROKER = sys.argv[1]
TIMEOUT_S = 30  # what init_transactions would wait for a retriable error


def check(cond, what):
    if not cond:
        print("FAIL:", what, file=sys.stderr)
        sys.exit(1)


p = Producer({"bootstrap.servers": BROKER, "transactional.id": "tx-refused", "log_level": 2})
t0 = time.time()
try:
    p.init_transactions(TIMEOUT_S)
    check(False, "init_transactions succeeded on a broker without transactions")
except KafkaException as e:
    err = e.args[0]
    took = time.time() - t0
    print("librdkafka: init_transactions failed after %.2f s: fatal=%s retriable=%s: %s"
          % (took, err.fatal(), err.retriable(), err.str()))
    check(err.fatal(), "the refusal is not fatal: %s" % err.str())
    check(not err.retriable(), "the refusal is retriable: %s" % err.str())
    check("not supported" in err.str(), "the error does not say why: %s" % err.str())
    # Generous: a retried error would take the whole TIMEOUT_S.
    check(took < 10, "init_transactions took %.1f s" % took)
# An idempotent (non-transactional) producer still works next to it.
q = Producer({"bootstrap.servers": BROKER, "enable.idempotence": True})
q.produce("txn-t", value=b"x")
check(q.flush(30) == 0, "idempotent producer did not deliver")
print("ok an idempotent producer still delivers")
