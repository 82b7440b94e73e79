# ci/tls/ — TLS listeners with the real clients (server-only and mutual TLS,
# every refusal, several listeners each advertising its own endpoint);
# certificates made in the test by gen_certs.sh.
E2E_TESTS += ci/tls/test_tls.sh ci/tls/test_tls_mapping.sh
