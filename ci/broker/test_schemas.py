"""test_schemas.py HOST PORT APIS_FILE — every API version kaas advertises
that kafka-python 2.0.2 (Debian's python3-kafka, an independent
implementation of Kafka's message schemas) also knows: the request is
encoded with kafka-python's Request class, sent raw, and the answer decoded
with its Response class, which must consume it exactly, with the error codes
the request deserves.  A field kaas adds, drops, moves or sizes wrongly in
any of those versions fails here.

Prints "ok ..." per API and a closing "N passed, N failed" line.
"""
import io
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from kproto import Conn, Enc, read_apis, record_batch  # noqa: E402

from kafka.protocol import admin, commit, fetch, group, metadata, offset, produce  # noqa: E402
from kafka.protocol import types as T  # noqa: E402

HOST, PORT, APIS_FILE = sys.argv[1], int(sys.argv[2]), sys.argv[3]
TOPIC, GROUP = "kpy-schemas", "kpy-group"

served = read_apis(APIS_FILE)

# ---- request values by field name ----------------------------------------------------------
def values(schema, api, v):
    return tuple(value(n, t, api, v) for n, t in zip(schema.names, schema.fields))


def value(name, t, api, v):
    """A sensible value for field `name` of type `t` in API `api` version v."""
    created = "kpy-created-v%d" % v
    scalar = {
        "topic": created if api in (19,) else TOPIC,
        "group": GROUP, "group_id": GROUP, "consumer_group": GROUP, "coordinator_key": GROUP,
        "coordinator_type": 0, "member_id": "", "generation_id": -1, "session_timeout": 10000,
        "rebalance_timeout": 10000, "protocol_type": "consumer", "protocol_name": "range",
        "protocol_metadata": b"", "member_assignment": b"", "partition": 0, "offset": 0,
        "fetch_offset": 0, "log_start_offset": -1, "max_bytes": 1 << 20, "max_wait_time": 0,
        "min_bytes": 0, "replica_id": -1, "isolation_level": 0, "timestamp": -1,
        "max_num_offsets": 1, "retention_time": -1, "metadata": "", "required_acks": 1,
        "timeout": 30000, "transactional_id": None, "num_partitions": 1, "replication_factor": 1,
        "validate_only": api in (33, 37), "resource_type": 2, "resource_name": TOPIC,
        "config_name": "retention.ms", "config_value": "3600000", "include_synonyms": False,
        "allow_auto_topic_creation": True, "count": 2, "assignment": None, "session_id": 0,
        "session_epoch": -1, "rack_id": "", "current_leader_epoch": -1,
        "messages": record_batch([b"kpy"]), "records": record_batch([b"kpy"]), "max_offsets": 1,
        "consumer_group_generation_id": -1, "consumer_id": "",
        "include_authorized_operations": False,
    }
    lists = {
        "topics": {3: [TOPIC], 20: [created], 9: None}.get(api),
        "groups": {15: [GROUP], 42: ["kpy-no-such-group"]}.get(api),
        "partitions": [0], "config_names": ["retention.ms"], "groups_names": ["kpy-no-such-group"],
        "assignment": [[1]],  # CreatePartitions: the one new partition on broker 1
    }
    empty = ("replica_assignment", "configs", "forgotten_topics_data", "group_assignment")
    if isinstance(t, T.Array):
        inner = t.array_of
        if name in empty and not (api == 33 and name == "configs"):
            return []
        if lists.get(name) is not None and not isinstance(inner, T.Schema):
            return lists[name]
        if isinstance(inner, T.Schema):
            return [values(inner, api, v)]
        return [value(name, inner, api, v)]
    if isinstance(t, T.Schema):
        return values(t, api, v)
    if name in scalar:
        return scalar[name]
    raise KeyError("no value for field %r of API %d v%d" % (name, api, v))


# ---- the answers ------------------------------------------------------------------------------
def error_codes(obj, out):
    """Every error_code in a decoded response (kafka-python Structs/tuples)."""
    if hasattr(obj, "SCHEMA"):
        for n, f in zip(obj.SCHEMA.names, obj.SCHEMA.fields):
            error_codes((n, getattr(obj, n)), out)
    elif isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[0], str):
        n, val = obj
        if n in ("error_code", "error") and isinstance(val, int):
            out.append(val)
        elif isinstance(val, (list, tuple)):
            for x in val:
                error_codes(x, out)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            error_codes(x, out)


# Error codes a correct answer may carry (0 unless listed).
ALLOWED = {
    12: {25},        # Heartbeat as nobody: UNKNOWN_MEMBER_ID
    13: {25},        # LeaveGroup as nobody
    14: {25},        # SyncGroup as nobody
    42: {69},        # DeleteGroups of a group that does not exist: GROUP_ID_NOT_FOUND
}

REQUESTS = [
    (18, admin.ApiVersionRequest), (3, metadata.MetadataRequest), (0, produce.ProduceRequest),
    (1, fetch.FetchRequest), (2, offset.OffsetRequest), (19, admin.CreateTopicsRequest),
    (20, admin.DeleteTopicsRequest), (32, admin.DescribeConfigsRequest),
    (33, admin.AlterConfigsRequest), (37, admin.CreatePartitionsRequest),
    (10, group.GroupCoordinatorRequest if hasattr(group, "GroupCoordinatorRequest") else None),
    (11, group.JoinGroupRequest), (14, group.SyncGroupRequest), (12, group.HeartbeatRequest),
    (13, group.LeaveGroupRequest), (8, commit.OffsetCommitRequest), (9, commit.OffsetFetchRequest),
    (15, admin.DescribeGroupsRequest), (16, admin.ListGroupsRequest), (42, admin.DeleteGroupsRequest),
]
if REQUESTS[10][1] is None:
    from kafka.protocol.commit import GroupCoordinatorRequest
    REQUESTS[10] = (10, GroupCoordinatorRequest)

# kafka-python 2.0.2's own mistakes (Kafka's schemas differ; kaas follows Kafka).
KNOWN_WRONG = {
    (10, 1): "its FindCoordinator v1 response lacks throttle_time_ms",
    (16, 2): "its ListGroupsRequest_v2 says it is v1",
    (15, 3): "its DescribeGroups v3 response schema loses authorized_operations",
}

conn = Conn(HOST, PORT, timeout=120)
# The topic every request names (and its data for Fetch) exists first.
conn.send(3, 4, Enc().array(1).str(TOPIC).i8(1).done())
conn.recv()
passed = failed = 0
for key, classes in REQUESTS:
    lo, hi = served[key]
    done = []
    for v in range(lo, min(hi, len(classes) - 1) + 1):
        req_cls = classes[v]
        if (key, v) in KNOWN_WRONG:
            print("skip %s v%d: kafka-python %s" % (classes[0].__name__, v, KNOWN_WRONG[(key, v)]))
            continue
        assert req_cls.API_KEY == key and req_cls.API_VERSION == v, (req_cls, key, v)
        try:
            req = req_cls(*values(req_cls.SCHEMA, key, v))
            body = req.encode()  # (a bound weak method: keep req alive)
            corr = conn.send(key, v, body)
            rc, data = conn.recv()
            assert rc == corr, (rc, corr)
            buf = io.BytesIO(data)
            resp_cls = req_cls.RESPONSE_TYPE
            if resp_cls.API_VERSION != v:  # DescribeGroupsRequest_v3 points at the v2 answer
                mod = sys.modules[req_cls.__module__]
                resp_cls = getattr(mod, req_cls.__name__.split("Request")[0] + "Response")[v]
            assert resp_cls.API_VERSION == v, (resp_cls, v)
            resp = resp_cls.decode(buf)
            left = len(data) - buf.tell()
            assert left == 0, "%d bytes left after kafka-python's decode" % left
            errs = []
            error_codes(resp, errs)
            bad = [e for e in errs if e != 0 and e not in ALLOWED.get(key, ())]
            assert not bad, "error codes %s in %r" % (bad, resp)
            done.append(v)
        except (AssertionError, ValueError, TypeError, struct.error, KeyError, EOFError) as e:
            print("FAIL %s v%d: %s: %s" % (req_cls.__name__, v, type(e).__name__, e), flush=True)
            failed += 1
            conn = Conn(HOST, PORT, timeout=120)  # the broker may have closed it
            continue
        passed += 1
    if done:
        print("ok %s v%s decoded exactly by kafka-python" % (classes[0].__name__,
              ",".join(str(x) for x in done)), flush=True)
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
