# ci/layout/ — the layer rule and the naming rule, checked (make layout,
# which make test runs first), and a test that the checks catch what they
# are for.
E2E_TESTS += ci/layout/test_layout.sh
