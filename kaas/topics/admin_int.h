/*
 * admin_int.h — private to the admin codecs (admin_topics.c,
 * admin_configs.c, admin_records.c): the size of an error message, name
 * comparison, and reading a request's arrays into zeroed memory.
 */
#ifndef KAAS_TOPICS_ADMIN_INT_H
#define KAAS_TOPICS_ADMIN_INT_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/core/acl.h"
#include "kaas/proto/kerr.h"
#include "kaas/topics/admin.h"

#define MSG_LEN 320

static inline int kt__authorized(const kt_admin_ctx *c, int op, int rtype, kw_str name)
{
	return !c->authorize || c->authorize(c->authz, op, rtype, name.s, name.len < 0 ? 0 : name.len);
}

/* Kafka's rule for configs: a topic's need op on the topic
 * (TOPIC_AUTHORIZATION_FAILED), a broker's on the cluster
 * (CLUSTER_AUTHORIZATION_FAILED).  type is the ConfigResource type. */
static inline int16_t kt__configs_authz(const kt_admin_ctx *c, int8_t type, kw_str name, int op, char *msg,
					size_t msglen)
{
	static const kw_str cluster = {KB_ACL_CLUSTER_NAME, sizeof(KB_ACL_CLUSTER_NAME) - 1};
	if (type == 2 && !kt__authorized(c, op, KB_RES_TOPIC, name)) {
		snprintf(msg, msglen, "Topic authorization failed.");
		return KERR_TOPIC_AUTHORIZATION_FAILED;
	}
	if (type == 4 && !kt__authorized(c, op, KB_RES_CLUSTER, cluster)) {
		snprintf(msg, msglen, "Cluster authorization failed.");
		return KERR_CLUSTER_AUTHORIZATION_FAILED;
	}
	return KERR_NONE;
}

static inline int kstr_eq(kw_str a, kw_str b)
{
	return a.len == b.len && (a.len <= 0 || memcmp(a.s, b.s, (size_t)a.len) == 0);
}

/*
 * ADMIN_ARRAY(rd, min_elem, n, p): reads an array's count into n (a null
 * array reads as empty; KRD_ARRAY checks the count against what is left
 * before anything is allocated) and points p at n zeroed elements.  Like
 * the KRD_* macros it jumps to err_parse on a bad count; out of memory, it
 * sets n = 0 and rc = -ENOMEM and jumps to out, whose cleanup then has
 * nothing of this array to free.
 */
#define ADMIN_ARRAY(rd, min_elem, n, p) ADMIN_ARRAY_F(rd, 0, min_elem, n, p)
#define ADMIN_ARRAY_F(rd, flex, min_elem, n, p)                              \
	do {                                                                 \
		KRD_ARRAY((rd), (flex), (min_elem), &(n));                   \
		if ((n) < 0)                                                 \
			(n) = 0;                                             \
		if ((n) > 0 && !((p) = calloc((size_t)(n), sizeof(*(p))))) { \
			(n) = 0;                                             \
			rc = -ENOMEM;                                        \
			goto out;                                            \
		}                                                            \
	} while (0)

/* config_docs.c: the ConfigType code (0 when unknown) and one sentence on
 * what the config does in kaas, NULL when it has none. */
const char *kt__config_doc(const char *name, int8_t *type);
int kt__config_docs_sorted(void); /* 1 when the table is sorted (a test) */

/* dynbroker.c: the broker resources (dynamic broker configs). */
enum { KT_DYN_SET = 0, KT_DYN_DELETE = 1, KT_DYN_APPEND = 2, KT_DYN_SUBTRACT = 3 };
typedef struct kt_dyn_op {
	kw_str name;
	int8_t op;        /* KT_DYN_*; AlterConfigs sends only SET */
	kw_str value;
} kt_dyn_op;
struct kb_dynsnap;
/* "" -> KB_DYN_DEFAULT, this broker's id -> it, else INVALID_REQUEST. */
int16_t kt__dyn_entity(const kt_admin_ctx *c, kw_str name, int32_t *entity, char *msg, size_t msglen);
int kt__dyn_broker_entry(const kt_admin_ctx *c, kt_config_list *l, int k, const struct kb_dynsnap *s);
int kt__dyn_default_configs(const kt_admin_ctx *c, kt_config_list *l);
void kt__dyn_topic_chain(const kt_admin_ctx *c, kt_config_list *l);
/* replace: AlterConfigs (the ops are the whole new set); else incremental. */
int16_t kt__dyn_alter(const kt_admin_ctx *c, kw_str name, const kt_dyn_op *ops, size_t n, int replace,
		      int validate_only, char *msg, size_t msglen);

#endif
