/*
 * acl.h — the authorizer: ACL bindings kept in the cluster directory, one
 * file per binding (CLUSTER/acls/<sha256 of the binding>.json,
 * docs/formats.md), and Kafka's rules for deciding a request with them
 * (docs/security.md): DENY beats ALLOW, super.users bypass every check,
 * allow.everyone.if.no.acl.found for resources no binding names, and the
 * implied operations (READ, WRITE, DELETE, ALTER imply DESCRIBE;
 * ALTER_CONFIGS implies DESCRIBE_CONFIGS).
 *
 * Several brokers create and delete bindings at once: a binding's file name
 * is the digest of its contents, so writing it twice writes the same bytes,
 * and removal is an unlink.  Every change then rewrites CLUSTER/acls.version
 * with fresh random bytes; a broker re-lists acls/ only when that file's
 * bytes changed (checked at most every kaas.acl.poll.ms) or when its
 * backstop period passed.  Every file is validated when read: a file that
 * fails is refused by name and, while it is there, every principal but the
 * super users is denied (the broker cannot know what it said).
 *
 * The codes are Kafka's wire values.
 */
#ifndef KAAS_CORE_ACL_H
#define KAAS_CORE_ACL_H

#include <stddef.h>
#include <stdint.h>

#include "substrates/sub.h"

struct kb_req;

enum { KB_RES_UNKNOWN, KB_RES_ANY, KB_RES_TOPIC, KB_RES_GROUP, KB_RES_CLUSTER, KB_RES_TXN,
       KB_RES_DELEGATION_TOKEN, KB_RES_USER };
enum { KB_PAT_UNKNOWN, KB_PAT_ANY, KB_PAT_MATCH, KB_PAT_LITERAL, KB_PAT_PREFIXED };
enum { KB_OP_UNKNOWN, KB_OP_ANY, KB_OP_ALL, KB_OP_READ, KB_OP_WRITE, KB_OP_CREATE, KB_OP_DELETE,
       KB_OP_ALTER, KB_OP_DESCRIBE, KB_OP_CLUSTER_ACTION, KB_OP_DESCRIBE_CONFIGS, KB_OP_ALTER_CONFIGS,
       KB_OP_IDEMPOTENT_WRITE, KB_OP_CREATE_TOKENS, KB_OP_DESCRIBE_TOKENS, KB_OP_N };
enum { KB_PERM_UNKNOWN, KB_PERM_ANY, KB_PERM_DENY, KB_PERM_ALLOW };

#define KB_ACL_CLUSTER_NAME "kafka-cluster"
#define KB_ACL_NAME_MAX 1024     /* bytes of a resource name */
#define KB_ACL_PRINCIPAL_MAX 319 /* a connection's principal fits 320 bytes */
#define KB_ACL_HOST_MAX 63
#define KB_ACL_DIR "acls"
#define KB_ACL_VERSION_FILE "acls.version"
#define KB_ACL_FILE_MAX 8192
#define KB_ACL_MAX_BINDINGS 100000

/* What Metadata and DescribeCluster report as a resource's authorized
 * operations: Kafka's supported operations per resource type. */
#define KB_OPS_BIT(op) (1u << (op))
#define KB_OPS_TOPIC                                                                                   \
	(KB_OPS_BIT(KB_OP_READ) | KB_OPS_BIT(KB_OP_WRITE) | KB_OPS_BIT(KB_OP_CREATE) |               \
	 KB_OPS_BIT(KB_OP_DELETE) | KB_OPS_BIT(KB_OP_ALTER) | KB_OPS_BIT(KB_OP_DESCRIBE) |           \
	 KB_OPS_BIT(KB_OP_DESCRIBE_CONFIGS) | KB_OPS_BIT(KB_OP_ALTER_CONFIGS))
#define KB_OPS_CLUSTER                                                                                 \
	(KB_OPS_BIT(KB_OP_CREATE) | KB_OPS_BIT(KB_OP_ALTER) | KB_OPS_BIT(KB_OP_DESCRIBE) |            \
	 KB_OPS_BIT(KB_OP_CLUSTER_ACTION) | KB_OPS_BIT(KB_OP_DESCRIBE_CONFIGS) |                      \
	 KB_OPS_BIT(KB_OP_ALTER_CONFIGS) | KB_OPS_BIT(KB_OP_IDEMPOTENT_WRITE))
#define KB_OPS_GROUP (KB_OPS_BIT(KB_OP_READ) | KB_OPS_BIT(KB_OP_DESCRIBE) | KB_OPS_BIT(KB_OP_DELETE))

typedef struct kb_acl_binding {
	int8_t rtype;   /* KB_RES_TOPIC, GROUP, CLUSTER, TXN */
	int8_t pattern; /* KB_PAT_LITERAL or KB_PAT_PREFIXED */
	int8_t op;      /* KB_OP_ALL .. KB_OP_IDEMPOTENT_WRITE */
	int8_t perm;    /* KB_PERM_DENY or KB_PERM_ALLOW */
	char name[KB_ACL_NAME_MAX + 1];
	char principal[KB_ACL_PRINCIPAL_MAX + 1]; /* "User:alice", "User:*" */
	char host[KB_ACL_HOST_MAX + 1];           /* "*" or an IP address, normalised */
} kb_acl_binding;

/* DescribeAcls' and DeleteAcls' filter.  NULL strings match anything. */
typedef struct kb_acl_filter {
	int8_t rtype, pattern, op, perm; /* ANY matches anything; pattern MATCH as Kafka's */
	const char *name;
	size_t name_len;
	const char *principal;
	size_t principal_len;
	const char *host;
	size_t host_len;
} kb_acl_filter;

/* Names, both ways: "TOPIC" <-> KB_RES_TOPIC and so on; -1 / NULL when none. */
const char *kb_acl_rtype_name(int v);
const char *kb_acl_pattern_name(int v);
const char *kb_acl_op_name(int v);
const char *kb_acl_perm_name(int v);

/* Fills b from wire fields and checks it as CreateAcls must: a concrete
 * type (TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID; DELEGATION_TOKEN and USER
 * refused), LITERAL or PREFIXED, a concrete operation the type has, ALLOW or
 * DENY, a non-empty UTF-8 name (kafka-cluster for CLUSTER), a principal
 * "Type:name", a host "*" or an IP address (normalised).  0, or -EINVAL
 * with why. */
int kb_acl_binding_make(kb_acl_binding *b, int8_t rtype, int8_t pattern, const char *name, size_t nlen,
			const char *principal, size_t plen, const char *host, size_t hlen, int8_t op, int8_t perm,
			char *why, size_t whylen);
/* The filter itself is sound (no UNKNOWN fields).  0 or -EINVAL with why. */
int kb_acl_filter_check(const kb_acl_filter *f, char *why, size_t whylen);
int kb_acl_filter_matches(const kb_acl_filter *f, const kb_acl_binding *b);

/* The file of a binding: acls/<64 hex>.json, the hex a SHA-256 of the
 * binding's fields.  path holds 128 bytes. */
void kb_acl_path(const kb_acl_binding *b, char *path, size_t len);
/* The JSON of b (malloc'd) or NULL; and back, checked field by field and
 * against the name it was read under (file: the base name, NULL to skip). */
char *kb_acl_format(const kb_acl_binding *b);
int kb_acl_parse(const char *json, size_t len, const char *file, kb_acl_binding *out, char *why, size_t whylen);

/* ---- the store and the authorizer ---------------------------------------------------- */

typedef struct kb_acl kb_acl;

typedef struct kb_acl_options {
	sub_vfs *cluster;
	const char *super_users;   /* "User:a;User:b" */
	int allow_if_no_acl;       /* allow.everyone.if.no.acl.found */
	int64_t poll_ms;           /* how often the version file is read */
	int64_t backstop_ms;       /* how often acls/ is listed whatever the version says */
} kb_acl_options;

/* Opens the store and reads every binding.  A listing that fails leaves the
 * authorizer denying everyone but the super users until one succeeds.
 * -EINVAL (super_users malformed, err says why), -ENOMEM. */
int kb_acl_open(const kb_acl_options *o, kb_acl **out, char *err, size_t errlen);
void kb_acl_close(kb_acl *a);

/* Re-reads the set if the version file changed or the backstop passed
 * (force: whatever they say).  0 or -errno from the volume (the last good
 * set stays). */
int kb_acl_refresh(kb_acl *a, int force);

/* Writes b's file (idempotent: the same binding has the same name and
 * bytes) and announces the change.  0 or -errno. */
int kb_acl_create(kb_acl *a, const kb_acl_binding *b);
/* Every binding f matches (malloc'd array, free it).  0 or -ENOMEM. */
int kb_acl_describe(kb_acl *a, const kb_acl_filter *f, kb_acl_binding **out, size_t *n);
/* Removes every binding f matches and returns them; a file already gone
 * counts as removed.  0 or -errno (then out holds those removed before). */
int kb_acl_delete(kb_acl *a, const kb_acl_filter *f, kb_acl_binding **out, size_t *n);
/* Names of the refused files (for tests and logs): the count. */
size_t kb_acl_refused(kb_acl *a);

/* 1 when principal from host may do op on the resource, else 0.  host is
 * an IP address (any textual form) or NULL (matches "*" bindings only). */
int kb_acl_authorize(kb_acl *a, const char *principal, const char *host, int op, int rtype, const char *name,
		     size_t nlen);
/* The bit set (KB_OPS_BIT) of the operations of `supported` authorized. */
int32_t kb_acl_authorized_ops(kb_acl *a, const char *principal, const char *host, int rtype, const char *name,
			      size_t nlen, uint32_t supported);
/* Kafka's authorizeByResourceType: 1 when some resource of the type would
 * be allowed op (an ALLOW binding no DENY covers). */
int kb_acl_authorize_any(kb_acl *a, const char *principal, const char *host, int op, int rtype);

/* The request's view: the principal and peer of req against the broker's
 * authorizer (none configured: always 1).  kb_authorize logs a denial at
 * INFO as Kafka's authorizer logger does; kb_authorize_filter is for
 * listings that leave out what the principal may not see. */
int kb_authorize(const struct kb_req *req, int op, int rtype, const char *name, int32_t nlen);
int kb_authorize_filter(const struct kb_req *req, int op, int rtype, const char *name, int32_t nlen);
int kb_authorize_cluster(const struct kb_req *req, int op);
int32_t kb_authorized_ops(const struct kb_req *req, int rtype, const char *name, int32_t nlen, uint32_t supported);
int kb_authorize_any(const struct kb_req *req, int op, int rtype);
/* 1 when the broker has an authorizer. */
int kb_authorizer_on(const struct kb_req *req);

#endif
