# ci/interop/ — real Kafka clients against a real kaas broker, every test
# with a broker restart in the middle and a record-by-record comparison of
# what was consumed with what was produced (docs/compat.md); and all of them
# reading Fetch answers that end inside a batch (test_cut_batches.sh).
E2E_TESTS += ci/interop/test_kcat.sh ci/interop/test_confluent.sh \
	ci/interop/test_kafka_python.sh ci/interop/test_kafkajs.sh \
	ci/interop/test_sarama.sh ci/interop/test_cut_batches.sh
