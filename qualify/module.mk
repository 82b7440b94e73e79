# qualify/ — the qualification stamp (CLUSTER/qualification.json) and the
# broker's start-up self-check.  kaas-conform writes the stamp, the broker
# verifies it; both programs link this module and nothing else of the other.
MODULES += qualify
qualify_SRCS := qualify/stamp.c qualify/selfcheck.c
qualify_USES := sub util
qualify_PREFIX := kq
qualify_TESTS := qualify/test/test_stamp.c
