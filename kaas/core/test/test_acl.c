/* test_acl.c — the authorizer (acl.c): binding checks, filters as
 * DescribeAcls/DeleteAcls apply them, Kafka's decision rules (literal,
 * prefixed and wildcard resources, DENY over ALLOW, implied operations,
 * super users, hosts, allow.everyone.if.no.acl.found), the files in
 * acls/ (hostile ones refused by name and closing the authorizer, never
 * widening it), concurrent creates of one binding from several threads,
 * and a second store seeing the first one's changes through the version
 * file. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kaas/core/acl.h"
#include "util/test/ktest.h"

static char dir[64];
static sub_vfs *vol;

static void up(void)
{
	char err[256];
	snprintf(dir, sizeof(dir), "/tmp/kaas-acl-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(sub_posix_open(dir, &vol, err, sizeof(err)), 0);
}

static void down(void)
{
	sub_destroy(vol);
	char cmd[100];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static kb_acl_binding mk(int rtype, int pattern, const char *name, const char *principal, const char *host, int op,
			 int perm)
{
	kb_acl_binding b;
	char why[200];
	int rc = kb_acl_binding_make(&b, (int8_t)rtype, (int8_t)pattern, name, strlen(name), principal,
				     strlen(principal), host, strlen(host), (int8_t)op, (int8_t)perm, why, sizeof(why));
	ck_assert_msg(rc == 0, "%s", why);
	return b;
}

static kb_acl *open_store(const char *supers, int allow_if_none)
{
	kb_acl_options o = {vol, supers, allow_if_none, 10, 0};
	kb_acl *a = NULL;
	char err[200];
	ck_assert_int_eq(kb_acl_open(&o, &a, err, sizeof(err)), 0);
	return a;
}

static void add(kb_acl *a, int rtype, int pattern, const char *name, const char *principal, const char *host,
		int op, int perm)
{
	kb_acl_binding b = mk(rtype, pattern, name, principal, host, op, perm);
	ck_assert_int_eq(kb_acl_create(a, &b), 0);
}

#define CAN(a, who, host, op, rtype, name) kb_acl_authorize(a, who, host, op, rtype, name, strlen(name))

START_TEST(binding_checks)
{
	kb_acl_binding b;
	char why[200];
#define MAKE(rt, pt, nm, pr, ho, op, pe) \
	kb_acl_binding_make(&b, rt, pt, nm, strlen(nm), pr, strlen(pr), ho, strlen(ho), op, pe, why, sizeof(why))
	ck_assert_int_eq(MAKE(KB_RES_TOPIC, KB_PAT_LITERAL, "t", "User:a", "*", KB_OP_READ, KB_PERM_ALLOW), 0);
	ck_assert_int_eq(MAKE(KB_RES_DELEGATION_TOKEN, KB_PAT_LITERAL, "t", "User:a", "*", KB_OP_READ, KB_PERM_ALLOW),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "DELEGATION_TOKEN"));
	ck_assert_int_eq(MAKE(KB_RES_ANY, KB_PAT_LITERAL, "t", "User:a", "*", KB_OP_READ, KB_PERM_ALLOW), -EINVAL);
	ck_assert_int_eq(MAKE(KB_RES_TOPIC, KB_PAT_MATCH, "t", "User:a", "*", KB_OP_READ, KB_PERM_ALLOW), -EINVAL);
	ck_assert_int_eq(MAKE(KB_RES_TOPIC, KB_PAT_ANY, "t", "User:a", "*", KB_OP_READ, KB_PERM_ALLOW), -EINVAL);
	ck_assert_int_eq(MAKE(KB_RES_TOPIC, KB_PAT_LITERAL, "t", "User:a", "*", KB_OP_ANY, KB_PERM_ALLOW), -EINVAL);
	ck_assert_int_eq(MAKE(KB_RES_TOPIC, KB_PAT_LITERAL, "t", "User:a", "*", KB_OP_READ, KB_PERM_ANY), -EINVAL);
	ck_assert_int_eq(MAKE(KB_RES_TOPIC, KB_PAT_LITERAL, "", "User:a", "*", KB_OP_READ, KB_PERM_ALLOW), -EINVAL);
	ck_assert_int_eq(MAKE(KB_RES_CLUSTER, KB_PAT_LITERAL, "other", "User:a", "*", KB_OP_ALTER, KB_PERM_ALLOW),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "kafka-cluster"));
	ck_assert_int_eq(MAKE(KB_RES_TOPIC, KB_PAT_LITERAL, "t", "alice", "*", KB_OP_READ, KB_PERM_ALLOW), -EINVAL);
	ck_assert_int_eq(MAKE(KB_RES_TOPIC, KB_PAT_LITERAL, "t", "User:", "*", KB_OP_READ, KB_PERM_ALLOW), -EINVAL);
	ck_assert_int_eq(MAKE(KB_RES_TOPIC, KB_PAT_LITERAL, "t", ":a", "*", KB_OP_READ, KB_PERM_ALLOW), -EINVAL);
	ck_assert_int_eq(MAKE(KB_RES_TOPIC, KB_PAT_LITERAL, "t", "User:a", "example.com", KB_OP_READ, KB_PERM_ALLOW),
			 -EINVAL);
	ck_assert_int_eq(MAKE(KB_RES_TOPIC, KB_PAT_LITERAL, "t\xc3", "User:a", "*", KB_OP_READ, KB_PERM_ALLOW),
			 -EINVAL);
	ck_assert_int_eq(MAKE(KB_RES_TOPIC, KB_PAT_LITERAL, "\xed\xa0\x80", "User:a", "*", KB_OP_READ, KB_PERM_ALLOW),
			 -EINVAL);
	/* hosts are kept in one form, so one binding has one file */
	ck_assert_int_eq(MAKE(KB_RES_TOPIC, KB_PAT_LITERAL, "t", "User:a", "0:0::1", KB_OP_READ, KB_PERM_ALLOW), 0);
	ck_assert_str_eq(b.host, "::1");
	ck_assert_int_eq(MAKE(KB_RES_TOPIC, KB_PAT_LITERAL, "t", "User:a", "::ffff:10.0.0.1", KB_OP_READ, KB_PERM_ALLOW),
			 0);
	ck_assert_str_eq(b.host, "10.0.0.1");
	char p1[128], p2[128];
	kb_acl_binding x = mk(KB_RES_TOPIC, KB_PAT_LITERAL, "t", "User:a", "::1", KB_OP_READ, KB_PERM_ALLOW);
	kb_acl_binding y = mk(KB_RES_TOPIC, KB_PAT_LITERAL, "t", "User:a", "0::1", KB_OP_READ, KB_PERM_ALLOW);
	kb_acl_binding z = mk(KB_RES_TOPIC, KB_PAT_PREFIXED, "t", "User:a", "::1", KB_OP_READ, KB_PERM_ALLOW);
	kb_acl_path(&x, p1, sizeof(p1));
	kb_acl_path(&y, p2, sizeof(p2));
	ck_assert_str_eq(p1, p2);
	kb_acl_path(&z, p2, sizeof(p2));
	ck_assert_str_ne(p1, p2);
	ck_assert_int_eq(strlen(p1), strlen("acls/") + 64 + 5);
#undef MAKE
}
END_TEST

START_TEST(filters)
{
	kb_acl_binding lit = mk(KB_RES_TOPIC, KB_PAT_LITERAL, "orders", "User:a", "*", KB_OP_READ, KB_PERM_ALLOW);
	kb_acl_binding wild = mk(KB_RES_TOPIC, KB_PAT_LITERAL, "*", "User:a", "*", KB_OP_READ, KB_PERM_ALLOW);
	kb_acl_binding pre = mk(KB_RES_TOPIC, KB_PAT_PREFIXED, "ord", "User:a", "*", KB_OP_READ, KB_PERM_ALLOW);
	kb_acl_binding grp = mk(KB_RES_GROUP, KB_PAT_LITERAL, "orders", "User:b", "10.0.0.1", KB_OP_READ, KB_PERM_DENY);
	kb_acl_filter any = {KB_RES_ANY, KB_PAT_ANY, KB_OP_ANY, KB_PERM_ANY, NULL, 0, NULL, 0, NULL, 0};
	char why[100];
	ck_assert_int_eq(kb_acl_filter_check(&any, why, sizeof(why)), 0);
	ck_assert(kb_acl_filter_matches(&any, &lit) && kb_acl_filter_matches(&any, &grp));
	kb_acl_filter f = any;
	f.rtype = KB_RES_TOPIC;
	f.pattern = KB_PAT_MATCH;
	f.name = "orders";
	f.name_len = 6;
	ck_assert(kb_acl_filter_matches(&f, &lit) && kb_acl_filter_matches(&f, &wild) &&
		  kb_acl_filter_matches(&f, &pre) && !kb_acl_filter_matches(&f, &grp));
	f.name = "other";
	f.name_len = 5;
	ck_assert(!kb_acl_filter_matches(&f, &lit) && kb_acl_filter_matches(&f, &wild) &&
		  !kb_acl_filter_matches(&f, &pre));
	f.pattern = KB_PAT_LITERAL;
	f.name = "*";
	f.name_len = 1;
	ck_assert(!kb_acl_filter_matches(&f, &lit) && kb_acl_filter_matches(&f, &wild)); /* exact, not a wildcard */
	f.pattern = KB_PAT_ANY;
	f.name = "ord";
	f.name_len = 3;
	ck_assert(!kb_acl_filter_matches(&f, &lit) && kb_acl_filter_matches(&f, &pre));
	kb_acl_filter h = any;
	h.host = "::ffff:10.0.0.1";
	h.host_len = strlen(h.host);
	ck_assert(kb_acl_filter_matches(&h, &grp) && !kb_acl_filter_matches(&h, &lit));
	h.principal = "User:b";
	h.principal_len = 6;
	h.perm = KB_PERM_ALLOW;
	ck_assert(!kb_acl_filter_matches(&h, &grp));
	kb_acl_filter bad = any;
	bad.op = KB_OP_UNKNOWN;
	ck_assert_int_eq(kb_acl_filter_check(&bad, why, sizeof(why)), -EINVAL);
	bad = any;
	bad.rtype = KB_RES_UNKNOWN;
	ck_assert_int_eq(kb_acl_filter_check(&bad, why, sizeof(why)), -EINVAL);
}
END_TEST

START_TEST(rules)
{
	kb_acl *a = open_store("User:root; User:CN=ops,O=corp", 0);
	/* nothing at all: allow.everyone.if.no.acl.found=false denies */
	ck_assert(!CAN(a, "User:alice", "10.0.0.1", KB_OP_READ, KB_RES_TOPIC, "orders"));
	ck_assert(CAN(a, "User:root", "10.0.0.1", KB_OP_ALTER, KB_RES_CLUSTER, "kafka-cluster"));
	ck_assert(CAN(a, "User:CN=ops,O=corp", NULL, KB_OP_DELETE, KB_RES_TOPIC, "orders"));
	ck_assert(!CAN(a, "User:CN=ops", NULL, KB_OP_DELETE, KB_RES_TOPIC, "orders")); /* the whole DN */

	add(a, KB_RES_TOPIC, KB_PAT_LITERAL, "orders", "User:alice", "*", KB_OP_READ, KB_PERM_ALLOW);
	ck_assert(CAN(a, "User:alice", "10.0.0.1", KB_OP_READ, KB_RES_TOPIC, "orders"));
	ck_assert(!CAN(a, "User:alice", "10.0.0.1", KB_OP_WRITE, KB_RES_TOPIC, "orders"));
	ck_assert(!CAN(a, "User:alice", "10.0.0.1", KB_OP_READ, KB_RES_TOPIC, "orders2")); /* literal */
	ck_assert(!CAN(a, "User:bob", "10.0.0.1", KB_OP_READ, KB_RES_TOPIC, "orders"));
	ck_assert(!CAN(a, "User:alice", "10.0.0.1", KB_OP_READ, KB_RES_GROUP, "orders")); /* another type */
	/* implied: READ -> DESCRIBE, but not the other way */
	ck_assert(CAN(a, "User:alice", "10.0.0.1", KB_OP_DESCRIBE, KB_RES_TOPIC, "orders"));
	add(a, KB_RES_TOPIC, KB_PAT_LITERAL, "d", "User:alice", "*", KB_OP_DESCRIBE, KB_PERM_ALLOW);
	ck_assert(!CAN(a, "User:alice", NULL, KB_OP_READ, KB_RES_TOPIC, "d"));
	add(a, KB_RES_TOPIC, KB_PAT_LITERAL, "cfg", "User:alice", "*", KB_OP_ALTER_CONFIGS, KB_PERM_ALLOW);
	ck_assert(CAN(a, "User:alice", NULL, KB_OP_DESCRIBE_CONFIGS, KB_RES_TOPIC, "cfg"));
	ck_assert(!CAN(a, "User:alice", NULL, KB_OP_DESCRIBE, KB_RES_TOPIC, "cfg"));
	for (int op = KB_OP_WRITE; op <= KB_OP_ALTER; op++) {
		char t[16];
		snprintf(t, sizeof(t), "imp%d", op);
		add(a, KB_RES_TOPIC, KB_PAT_LITERAL, t, "User:alice", "*", op, KB_PERM_ALLOW);
		ck_assert_msg(CAN(a, "User:alice", NULL, KB_OP_DESCRIBE, KB_RES_TOPIC, t) == (op != KB_OP_CREATE),
			      "op %d", op);
	}
	/* prefixed */
	add(a, KB_RES_TOPIC, KB_PAT_PREFIXED, "logs-", "User:bob", "*", KB_OP_ALL, KB_PERM_ALLOW);
	ck_assert(CAN(a, "User:bob", NULL, KB_OP_WRITE, KB_RES_TOPIC, "logs-a"));
	ck_assert(CAN(a, "User:bob", NULL, KB_OP_WRITE, KB_RES_TOPIC, "logs-"));
	ck_assert(!CAN(a, "User:bob", NULL, KB_OP_WRITE, KB_RES_TOPIC, "logs"));
	/* DENY beats ALLOW, also a DENY on a prefix over a literal ALLOW */
	add(a, KB_RES_TOPIC, KB_PAT_LITERAL, "logs-secret", "User:bob", "*", KB_OP_READ, KB_PERM_DENY);
	ck_assert(!CAN(a, "User:bob", NULL, KB_OP_READ, KB_RES_TOPIC, "logs-secret"));
	ck_assert(CAN(a, "User:bob", NULL, KB_OP_WRITE, KB_RES_TOPIC, "logs-secret")); /* only READ denied */
	ck_assert(CAN(a, "User:bob", NULL, KB_OP_DESCRIBE, KB_RES_TOPIC, "logs-secret")); /* a DENY is not implied */
	add(a, KB_RES_TOPIC, KB_PAT_PREFIXED, "or", "User:alice", "*", KB_OP_ALL, KB_PERM_DENY);
	ck_assert(!CAN(a, "User:alice", NULL, KB_OP_READ, KB_RES_TOPIC, "orders"));
	ck_assert(!CAN(a, "User:alice", NULL, KB_OP_DESCRIBE, KB_RES_TOPIC, "orders"));
	/* wildcard resource and wildcard principal */
	add(a, KB_RES_GROUP, KB_PAT_LITERAL, "*", "User:*", "*", KB_OP_READ, KB_PERM_ALLOW);
	ck_assert(CAN(a, "User:anyone", NULL, KB_OP_READ, KB_RES_GROUP, "g1"));
	ck_assert(!CAN(a, "Group:x", NULL, KB_OP_READ, KB_RES_GROUP, "g1")); /* User:* is users only */
	add(a, KB_RES_GROUP, KB_PAT_LITERAL, "g-locked", "User:carol", "*", KB_OP_READ, KB_PERM_DENY);
	ck_assert(!CAN(a, "User:carol", NULL, KB_OP_READ, KB_RES_GROUP, "g-locked"));
	ck_assert(CAN(a, "User:dave", NULL, KB_OP_READ, KB_RES_GROUP, "g-locked"));
	ck_assert(CAN(a, "User:root", NULL, KB_OP_READ, KB_RES_GROUP, "g-locked")); /* super user */
	/* hosts: any textual form of the client's address */
	add(a, KB_RES_TXN, KB_PAT_LITERAL, "tx", "User:erin", "127.0.0.1", KB_OP_WRITE, KB_PERM_ALLOW);
	add(a, KB_RES_TXN, KB_PAT_LITERAL, "tx", "User:erin", "::1", KB_OP_WRITE, KB_PERM_ALLOW);
	ck_assert(CAN(a, "User:erin", "127.0.0.1", KB_OP_WRITE, KB_RES_TXN, "tx"));
	ck_assert(CAN(a, "User:erin", "::ffff:127.0.0.1", KB_OP_WRITE, KB_RES_TXN, "tx"));
	ck_assert(CAN(a, "User:erin", "0:0:0:0:0:0:0:1", KB_OP_WRITE, KB_RES_TXN, "tx"));
	ck_assert(!CAN(a, "User:erin", "10.0.0.2", KB_OP_WRITE, KB_RES_TXN, "tx"));
	ck_assert(!CAN(a, "User:erin", NULL, KB_OP_WRITE, KB_RES_TXN, "tx"));
	add(a, KB_RES_TXN, KB_PAT_LITERAL, "tx", "User:erin", "10.0.0.9", KB_OP_WRITE, KB_PERM_DENY);
	ck_assert(CAN(a, "User:erin", "127.0.0.1", KB_OP_WRITE, KB_RES_TXN, "tx")); /* deny is for another host */
	ck_assert(!CAN(a, "User:erin", "10.0.0.9", KB_OP_WRITE, KB_RES_TXN, "tx"));
	/* the cluster */
	add(a, KB_RES_CLUSTER, KB_PAT_LITERAL, "kafka-cluster", "User:ops", "*", KB_OP_ALTER, KB_PERM_ALLOW);
	ck_assert(CAN(a, "User:ops", NULL, KB_OP_ALTER, KB_RES_CLUSTER, "kafka-cluster"));
	ck_assert(CAN(a, "User:ops", NULL, KB_OP_DESCRIBE, KB_RES_CLUSTER, "kafka-cluster"));
	ck_assert(!CAN(a, "User:ops", NULL, KB_OP_CREATE, KB_RES_CLUSTER, "kafka-cluster"));
	/* authorized operations */
	int32_t ops = kb_acl_authorized_ops(a, "User:bob", NULL, KB_RES_TOPIC, "logs-secret", 11, KB_OPS_TOPIC);
	ck_assert_int_eq(ops, (int32_t)(KB_OPS_TOPIC & ~KB_OPS_BIT(KB_OP_READ)));
	ck_assert_int_eq(kb_acl_authorized_ops(a, "User:ops", NULL, KB_RES_CLUSTER, "kafka-cluster", 13, KB_OPS_CLUSTER),
			 (int32_t)(KB_OPS_BIT(KB_OP_ALTER) | KB_OPS_BIT(KB_OP_DESCRIBE)));
	ck_assert_int_eq(kb_acl_authorized_ops(a, "User:root", NULL, KB_RES_TOPIC, "x", 1, KB_OPS_TOPIC),
			 (int32_t)KB_OPS_TOPIC);
	ck_assert_int_eq(kb_acl_authorized_ops(NULL, "User:x", NULL, KB_RES_TOPIC, "x", 1, KB_OPS_TOPIC),
			 (int32_t)KB_OPS_TOPIC); /* no authorizer */
	ck_assert(kb_acl_authorize(NULL, "User:x", NULL, KB_OP_ALTER, KB_RES_CLUSTER, "kafka-cluster", 13));
	kb_acl_close(a);
}
END_TEST

START_TEST(allow_if_none_and_by_type)
{
	kb_acl *a = open_store(NULL, 1);
	ck_assert(CAN(a, "User:x", NULL, KB_OP_READ, KB_RES_TOPIC, "t"));
	ck_assert(kb_acl_authorize_any(a, "User:x", NULL, KB_OP_WRITE, KB_RES_TOPIC));
	add(a, KB_RES_TOPIC, KB_PAT_LITERAL, "t", "User:y", "*", KB_OP_READ, KB_PERM_ALLOW);
	/* a binding names t: only y now; other topics still open to all */
	ck_assert(!CAN(a, "User:x", NULL, KB_OP_READ, KB_RES_TOPIC, "t"));
	ck_assert(CAN(a, "User:y", NULL, KB_OP_READ, KB_RES_TOPIC, "t"));
	ck_assert(CAN(a, "User:x", NULL, KB_OP_READ, KB_RES_TOPIC, "u"));
	/* authorizeByResourceType: an allow no deny covers */
	ck_assert(!kb_acl_authorize_any(a, "User:x", NULL, KB_OP_WRITE, KB_RES_TOPIC));
	add(a, KB_RES_TOPIC, KB_PAT_PREFIXED, "w-", "User:x", "*", KB_OP_WRITE, KB_PERM_ALLOW);
	ck_assert(kb_acl_authorize_any(a, "User:x", NULL, KB_OP_WRITE, KB_RES_TOPIC));
	add(a, KB_RES_TOPIC, KB_PAT_PREFIXED, "w", "User:x", "*", KB_OP_WRITE, KB_PERM_DENY);
	ck_assert(!kb_acl_authorize_any(a, "User:x", NULL, KB_OP_WRITE, KB_RES_TOPIC));
	add(a, KB_RES_TOPIC, KB_PAT_LITERAL, "z", "User:x", "*", KB_OP_ALL, KB_PERM_ALLOW);
	ck_assert(kb_acl_authorize_any(a, "User:x", NULL, KB_OP_WRITE, KB_RES_TOPIC));
	add(a, KB_RES_TOPIC, KB_PAT_LITERAL, "*", "User:x", "*", KB_OP_WRITE, KB_PERM_DENY);
	ck_assert(!kb_acl_authorize_any(a, "User:x", NULL, KB_OP_WRITE, KB_RES_TOPIC));
	kb_acl_close(a);
}
END_TEST

START_TEST(store_files)
{
	kb_acl *a = open_store(NULL, 0);
	add(a, KB_RES_TOPIC, KB_PAT_LITERAL, "t", "User:a", "*", KB_OP_READ, KB_PERM_ALLOW);
	add(a, KB_RES_TOPIC, KB_PAT_LITERAL, "t", "User:a", "*", KB_OP_READ, KB_PERM_ALLOW); /* twice: one file */
	add(a, KB_RES_GROUP, KB_PAT_PREFIXED, "g", "User:a", "*", KB_OP_READ, KB_PERM_ALLOW);
	char **names = NULL;
	size_t n = 0;
	ck_assert_int_eq(sub_list(vol, KB_ACL_DIR, &names, &n), 0);
	ck_assert_int_eq(n, 2);
	/* the file round-trips and is checked against its name */
	char path[300], *buf = NULL;
	size_t len = 0;
	snprintf(path, sizeof(path), "%s/%s", KB_ACL_DIR, names[0]);
	ck_assert_int_eq(sub_read_file(vol, path, KB_ACL_FILE_MAX, &buf, &len), 0);
	kb_acl_binding b;
	char why[256];
	ck_assert_int_eq(kb_acl_parse(buf, len, names[0], &b, why, sizeof(why)), 0);
	ck_assert_int_eq(kb_acl_parse(buf, len, names[1], &b, why, sizeof(why)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "digest"));
	/* every truncation of a good file is refused, never crashes */
	for (size_t k = 0; k < len; k++)
		ck_assert_int_eq(kb_acl_parse(buf, k, NULL, &b, why, sizeof(why)), -EBADMSG);
	free(buf);
	sub_names_free(names, n);
	static const char *const hostile[] = {
		"",
		"[]",
		"{\"version\":2}",
		"{\"version\":1,\"resource_type\":\"TOPIC\",\"pattern_type\":\"LITERAL\",\"resource_name\":\"t\","
		"\"principal\":\"User:a\",\"host\":\"*\",\"operation\":\"READ\",\"permission\":\"ALLOW\",\"x\":1}",
		"{\"version\":1,\"resource_type\":\"TOPIC\",\"pattern_type\":\"MATCH\",\"resource_name\":\"t\","
		"\"principal\":\"User:a\",\"host\":\"*\",\"operation\":\"READ\",\"permission\":\"ALLOW\"}",
		"{\"version\":1,\"resource_type\":\"TOPIC\",\"pattern_type\":\"LITERAL\",\"resource_name\":\"t\","
		"\"principal\":\"User:a\",\"host\":\"0::1\",\"operation\":\"READ\",\"permission\":\"ALLOW\"}",
		"{\"version\":1,\"resource_type\":\"TOPIC\",\"pattern_type\":\"LITERAL\",\"resource_name\":\"t\\u0000x\","
		"\"principal\":\"User:a\",\"host\":\"*\",\"operation\":\"READ\",\"permission\":\"ALLOW\"}",
		"{\"version\":1,\"resource_type\":\"TOPIC\",\"pattern_type\":\"LITERAL\",\"resource_name\":\"t\","
		"\"principal\":\"User:a\",\"host\":\"*\",\"operation\":\"READ\",\"permission\":\"ALLOW\","
		"\"permission\":\"DENY\"}",
		"{\"version\":1,\"resource_type\":\"TOPIC\",\"pattern_type\":\"LITERAL\",\"resource_name\":7,"
		"\"principal\":\"User:a\",\"host\":\"*\",\"operation\":\"READ\",\"permission\":\"ALLOW\"}",
	};
	for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++)
		ck_assert_msg(kb_acl_parse(hostile[i], strlen(hostile[i]), NULL, &b, why, sizeof(why)) == -EBADMSG,
			      "%zu", i);
	kb_acl_close(a);
}
END_TEST

/* A hostile file closes the authorizer (but for super users) until it is
 * removed: what it said cannot be known, so nothing may widen. */
START_TEST(store_refuses_and_closes)
{
	kb_acl *a = open_store("User:root", 1);
	add(a, KB_RES_TOPIC, KB_PAT_LITERAL, "t", "User:a", "*", KB_OP_READ, KB_PERM_ALLOW);
	ck_assert(CAN(a, "User:a", NULL, KB_OP_READ, KB_RES_TOPIC, "t"));
	ck_assert(CAN(a, "User:b", NULL, KB_OP_READ, KB_RES_TOPIC, "other")); /* allow if none */
	const char *bad = "acls/0000000000000000000000000000000000000000000000000000000000000000.json";
	ck_assert_int_eq(sub_write_atomic(vol, bad, "{\"version\":1", 12), 0);
	ck_assert_int_eq(sub_write_atomic(vol, "acls/README", "x", 1), 0); /* not ours: ignored */
	ck_assert_int_eq(kb_acl_refresh(a, 1), 0);
	ck_assert_int_eq(kb_acl_refused(a), 1);
	ck_assert(!CAN(a, "User:a", NULL, KB_OP_READ, KB_RES_TOPIC, "t"));
	ck_assert(!CAN(a, "User:b", NULL, KB_OP_READ, KB_RES_TOPIC, "other"));
	ck_assert(!kb_acl_authorize_any(a, "User:b", NULL, KB_OP_WRITE, KB_RES_TOPIC));
	ck_assert(CAN(a, "User:root", NULL, KB_OP_READ, KB_RES_TOPIC, "t"));
	/* a good binding's bytes under another name are refused as well */
	char **names = NULL;
	size_t n = 0;
	ck_assert_int_eq(sub_unlink(vol, bad), 0);
	ck_assert_int_eq(sub_list(vol, KB_ACL_DIR, &names, &n), 0);
	char path[300], *buf = NULL;
	size_t len = 0;
	for (size_t i = 0; i < n; i++)
		if (strlen(names[i]) == 69)
			snprintf(path, sizeof(path), "%s/%s", KB_ACL_DIR, names[i]);
	sub_names_free(names, n);
	ck_assert_int_eq(sub_read_file(vol, path, KB_ACL_FILE_MAX, &buf, &len), 0);
	ck_assert_int_eq(sub_write_atomic(vol, "acls/1111111111111111111111111111111111111111111111111111111111111111.json",
					  buf, len), 0);
	free(buf);
	ck_assert_int_eq(kb_acl_refresh(a, 1), 0);
	ck_assert_int_eq(kb_acl_refused(a), 1);
	ck_assert(!CAN(a, "User:a", NULL, KB_OP_READ, KB_RES_TOPIC, "t"));
	ck_assert_int_eq(sub_unlink(vol, "acls/1111111111111111111111111111111111111111111111111111111111111111.json"),
			 0);
	/* removed: the set is back as it was, without a restart */
	ck_assert_int_eq(kb_acl_refresh(a, 0), 0);
	ck_assert_int_eq(kb_acl_refused(a), 0);
	ck_assert(CAN(a, "User:a", NULL, KB_OP_READ, KB_RES_TOPIC, "t"));
	ck_assert(CAN(a, "User:b", NULL, KB_OP_READ, KB_RES_TOPIC, "other"));
	kb_acl_close(a);
}
END_TEST

/* Two stores on one directory stand for two brokers. */
START_TEST(second_broker_sees_changes)
{
	kb_acl *a = open_store(NULL, 0), *b = open_store(NULL, 0);
	ck_assert(!CAN(b, "User:a", NULL, KB_OP_WRITE, KB_RES_TOPIC, "t"));
	add(a, KB_RES_TOPIC, KB_PAT_LITERAL, "t", "User:a", "*", KB_OP_WRITE, KB_PERM_ALLOW);
	usleep(20 * 1000); /* past b's poll period (10 ms) */
	ck_assert(CAN(b, "User:a", NULL, KB_OP_WRITE, KB_RES_TOPIC, "t"));
	kb_acl_filter f = {KB_RES_TOPIC, KB_PAT_ANY, KB_OP_ANY, KB_PERM_ANY, "t", 1, NULL, 0, NULL, 0};
	kb_acl_binding *gone = NULL;
	size_t ngone = 0;
	ck_assert_int_eq(kb_acl_delete(b, &f, &gone, &ngone), 0);
	ck_assert_int_eq(ngone, 1);
	ck_assert_str_eq(gone[0].principal, "User:a");
	free(gone);
	ck_assert(!CAN(b, "User:a", NULL, KB_OP_WRITE, KB_RES_TOPIC, "t"));
	usleep(20 * 1000);
	ck_assert(!CAN(a, "User:a", NULL, KB_OP_WRITE, KB_RES_TOPIC, "t"));
	/* deleting what is gone already deletes nothing, without error */
	ck_assert_int_eq(kb_acl_delete(a, &f, &gone, &ngone), 0);
	ck_assert_int_eq(ngone, 0);
	free(gone);
	kb_acl_close(a);
	kb_acl_close(b);
}
END_TEST

typedef struct racer {
	kb_acl *a;
	int rc;
} racer;

static void *race(void *arg)
{
	racer *r = arg;
	for (int i = 0; i < 20 && !r->rc; i++) {
		char name[16];
		snprintf(name, sizeof(name), "t%d", i % 5);
		kb_acl_binding b = mk(KB_RES_TOPIC, KB_PAT_LITERAL, name, "User:a", "*", KB_OP_READ, KB_PERM_ALLOW);
		r->rc = kb_acl_create(r->a, &b);
	}
	return NULL;
}

/* Several brokers creating the same bindings at once: every create
 * succeeds and each binding is one file. */
START_TEST(concurrent_creates)
{
	racer r[4];
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		r[i].a = open_store(NULL, 0);
		r[i].rc = 0;
		ck_assert_int_eq(pthread_create(&th[i], NULL, race, &r[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(r[i].rc, 0);
	}
	char **names = NULL;
	size_t n = 0, bindings = 0;
	ck_assert_int_eq(sub_list(vol, KB_ACL_DIR, &names, &n), 0);
	for (size_t i = 0; i < n; i++)
		bindings += names[i][0] != '.';
	sub_names_free(names, n);
	ck_assert_int_eq(bindings, 5);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(kb_acl_refresh(r[i].a, 1), 0);
		ck_assert_int_eq(kb_acl_refused(r[i].a), 0);
		ck_assert(CAN(r[i].a, "User:a", NULL, KB_OP_READ, KB_RES_TOPIC, "t4"));
		kb_acl_close(r[i].a);
	}
}
END_TEST

START_TEST(super_users_checked)
{
	kb_acl_options o = {vol, "User:ok;alice", 0, 10, 0};
	kb_acl *a = NULL;
	char err[200];
	ck_assert_int_eq(kb_acl_open(&o, &a, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "alice"));
	o.super_users = " User:a ;; User:b;";
	ck_assert_int_eq(kb_acl_open(&o, &a, err, sizeof(err)), 0);
	ck_assert(CAN(a, "User:a", NULL, KB_OP_ALTER, KB_RES_CLUSTER, "kafka-cluster"));
	ck_assert(CAN(a, "User:b", NULL, KB_OP_ALTER, KB_RES_CLUSTER, "kafka-cluster"));
	ck_assert(!CAN(a, "User:c", NULL, KB_OP_ALTER, KB_RES_CLUSTER, "kafka-cluster"));
	kb_acl_close(a);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){.suite = "acl", .timeout = 60, .setup = up, .teardown = down},
			  KTEST_LIST(binding_checks, filters, rules, allow_if_none_and_by_type, store_files,
				     store_refuses_and_closes, second_broker_sees_changes, concurrent_creates,
				     super_users_checked));
}
