# ci/badinput/ — malformed frames and hostile requests against a real broker
# (docs/compat.md, "Bad input").
E2E_TESTS += ci/badinput/test_badinput.sh
