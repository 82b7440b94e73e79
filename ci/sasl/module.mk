# ci/sasl/ — SASL listeners (PLAIN, SCRAM-SHA-256/512 over SASL_PLAINTEXT and
# SASL_SSL) with the real clients, `kaas users`, every refusal, KIP-368
# re-authentication; raw-socket exchanges by sasl_wire.py.
E2E_TESTS += ci/sasl/test_sasl.sh ci/sasl/test_sasl_listeners.sh
