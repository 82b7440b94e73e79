# kaas/ — the broker binary (docs/broker.md).  main.c wires the modules
# together; each module lists what it links in its own module.mk.
BINS += kaas
kaas_MAIN := kaas/main.c
kaas_USES := cluster net coord topics core qualify storage proto sub util

E2E_TESTS += ci/broker/test_gate.sh ci/broker/test_protocol.sh ci/broker/test_kcat.sh \
	ci/broker/test_kafka_python.sh ci/broker/test_faults.sh ci/broker/test_nfs.sh \
	ci/broker/test_schemas.sh ci/broker/test_make_run.sh \
	ci/broker/test_damage.sh
