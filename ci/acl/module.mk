# ci/acl/ — ACLs on a 2-broker cluster over SASL with kcat, confluent-kafka,
# kafka-python and kafkajs; the ACL APIs v0-v3 on raw sockets (acl_wire.py).
E2E_TESTS += ci/acl/test_acl.sh
