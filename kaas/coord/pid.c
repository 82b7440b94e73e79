/*
 * pid.c — producer IDs and InitProducerId v0-4 (flexible from v2).
 *
 * Producer IDs are never reissued, across restarts and across brokers: ids
 * come in blocks of KC_PID_BLOCK_SIZE, and block N (ids N*1000 ..
 * N*1000+999) belongs to whoever created CLUSTER/pid-blocks/<N:10> with
 * O_CREAT|O_EXCL (sub_create_excl).  A broker uses only blocks it claimed
 * in this run; a restart claims a fresh one, so ids handed out before a
 * crash are never handed out again (names are not identities: a reused id
 * would land a new producer on a dead one's sequence numbers).  The file's
 * contents (owner, time) are informational: an empty or torn claim file
 * still counts as claimed.
 *
 * Transactions are not supported yet: a non-null transactional_id gets
 * TRANSACTIONAL_ID_AUTHORIZATION_FAILED (docs/groups.md explains the choice).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/coord/coord_int.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

#define KC_PID_MAX_BLOCK 9999999999LL /* ten digits */

int kg__pids_init(kg_pids *p)
{
	pthread_mutex_init(&p->mu, NULL);
	p->next = p->end = 0;
	p->last_block = -1;
	return 0;
}

void kg__pids_destroy(kg_pids *p) { pthread_mutex_destroy(&p->mu); }

static int parse_block(const char *name, int64_t *out)
{
	if (strlen(name) != 10)
		return -1;
	int64_t v = 0;
	for (int i = 0; i < 10; i++) {
		if (name[i] < '0' || name[i] > '9')
			return -1;
		v = v * 10 + (name[i] - '0');
	}
	*out = v;
	return 0;
}

/* The highest block anyone has claimed, or -1. */
static int highest_block(kg_coord *c, int64_t *out)
{
	char **names = NULL;
	size_t n = 0;
	*out = -1;
	int rc = sub_list(c->vfs, "pid-blocks", &names, &n);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++) {
		int64_t b;
		if (parse_block(names[i], &b) == 0 && b > *out)
			*out = b;
	}
	sub_names_free(names, n);
	return 0;
}

/* Claims the next free block (p->mu held: blocking I/O, but only for
 * InitProducerId, once per KC_PID_BLOCK_SIZE producers). */
static int claim_block(kg_coord *c, kg_pids *p)
{
	int rc;
	int64_t b;
	if (p->last_block < 0) {
		if ((rc = highest_block(c, &p->last_block)))
			return rc;
	}
	b = p->last_block + 1;
	for (int tries = 0;; tries++) {
		if (b > KC_PID_MAX_BLOCK)
			return -ENOSPC;
		char path[64], body[256];
		snprintf(path, sizeof(path), "pid-blocks/%010lld", (long long)b);
		int len = snprintf(body, sizeof(body),
				   "{\"version\":1,\"block\":%lld,\"first_id\":%lld,\"last_id\":%lld,"
				   "\"broker_id\":%d,\"claimed_ms\":%lld}\n",
				   (long long)b, (long long)(b * KC_PID_BLOCK_SIZE),
				   (long long)(b * KC_PID_BLOCK_SIZE + KC_PID_BLOCK_SIZE - 1),
				   c->cfg.broker_id, (long long)kg__wall(c));
		rc = sub_create_excl(c->vfs, path, body, (size_t)len);
		if (rc == -ENOENT && sub_mkdirs(c->vfs, "pid-blocks", 0755) == 0)
			rc = sub_create_excl(c->vfs, path, body, (size_t)len);
		if (rc && rc != -EEXIST) {
			/* The name may be ours with its contents unwritten: it stays
			 * claimed, we just do not use it. */
			p->last_block = b;
			return rc;
		}
		if (rc == 0) {
			p->last_block = b;
			p->next = b * KC_PID_BLOCK_SIZE;
			p->end = p->next + KC_PID_BLOCK_SIZE;
			pthread_mutex_lock(&c->mu);
			c->stats.pid_blocks++;
			pthread_mutex_unlock(&c->mu);
			KLOG_INFO("coord", "claimed producer-id block %lld (ids %lld-%lld)", (long long)b,
				  (long long)p->next, (long long)(p->end - 1));
			return 0;
		}
		/* Another broker got there first: skip ahead.  After a few
		 * misses, look again instead of walking one by one. */
		if (tries % 8 == 7) {
			int64_t hi;
			if ((rc = highest_block(c, &hi)))
				return rc;
			b = hi >= b ? hi + 1 : b + 1;
		} else {
			b++;
		}
	}
}

int kg__pid_next(kg_coord *c, int64_t *pid)
{
	kg_pids *p = &c->pids;
	int rc = 0;
	pthread_mutex_lock(&p->mu);
	if (p->next >= p->end)
		rc = claim_block(c, p);
	if (!rc)
		*pid = p->next++;
	pthread_mutex_unlock(&p->mu);
	return rc;
}

int kg__pid_issued(kg_coord *c, int64_t pid)
{
	if (pid < 0)
		return 0;
	char path[64];
	sub_stat st;
	snprintf(path, sizeof(path), "pid-blocks/%010lld", (long long)(pid / KC_PID_BLOCK_SIZE));
	int rc = sub_stat_path(c->vfs, path, &st);
	if (rc == -ENOENT)
		return 0;
	return rc ? rc : 1;
}

/* ---- InitProducerId ------------------------------------------------------------------ */

/* What a transactional producer is told until transactions exist: the one
 * error librdkafka, the Java client and kafkajs all give up on at once, so
 * init_transactions() fails fast instead of retrying until its timeout
 * (docs/groups.md).  FindCoordinator for a transactional id says why in
 * its error message; this response has no room for one. */
#define KC_TXN_UNSUPPORTED KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED

int kg__api_init_producer_id(kg_coord *c, const kg_coord_call *call, kw_rd *rd, kw_wr *w)
{
	int16_t v = call->version;
	int flex = v >= 2;
	kw_str txn;
	int32_t timeout;
	int64_t pid = -1;
	int16_t epoch = -1;
	KRD_STR(rd, flex, &txn);
	KRD_I32(rd, &timeout);
	if (v >= 3) {
		KRD_I64(rd, &pid);
		KRD_I16(rd, &epoch);
	}
	KRD_TAGS(rd, flex);

	int16_t err = KERR_NONE;
	int64_t out_pid = -1;
	int16_t out_epoch = -1;
	static const kw_str cluster = {KB_ACL_CLUSTER_NAME, sizeof(KB_ACL_CLUSTER_NAME) - 1};
	if (txn.len >= 0 && !kg__authorized(c, call, KB_OP_WRITE, KB_RES_TXN, txn)) {
		err = KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
	} else if (txn.len < 0 && !kg__visible(c, call, KB_OP_IDEMPOTENT_WRITE, KB_RES_CLUSTER, cluster) &&
		   c->authz && !c->authz->authorize_any(call->ctx, KB_OP_WRITE, KB_RES_TOPIC)) {
		/* KIP-679: WRITE on any topic also allows an idempotent producer. */
		err = KERR_CLUSTER_AUTHORIZATION_FAILED;
	} else if (txn.len >= 0) {
		KLOG_WARN("coord", "InitProducerId with transactional.id '%.*s': transactions are not "
				   "supported by this kaas broker", txn.len > 200 ? 200 : txn.len, txn.s);
		err = KC_TXN_UNSUPPORTED;
	} else if ((pid < 0) != (epoch < 0)) {
		err = KERR_INVALID_REQUEST;
	} else {
		int rc = 0;
		if (pid >= 0 && epoch < INT16_MAX - 1)
			rc = kg__pid_issued(c, pid);
		if (rc == 1) {
			/* KIP-360: the producer keeps its id with the next epoch; its
			 * partitions start a fresh sequence for it. */
			out_pid = pid;
			out_epoch = (int16_t)(epoch + 1);
		} else if (rc == 0) {
			/* A new producer, an exhausted epoch, or an id nobody issued. */
			rc = kg__pid_next(c, &out_pid);
			out_epoch = 0;
		}
		if (rc < 0) {
			KLOG_ERR("coord", "cannot allocate a producer id: %s", sub_strerror(rc));
			err = KERR_COORDINATOR_NOT_AVAILABLE;
			out_pid = -1;
			out_epoch = -1;
		}
	}
	kw_wr_i32(w, 0);
	kw_wr_i16(w, err);
	kw_wr_i64(w, out_pid);
	kw_wr_i16(w, out_epoch);
	kw_wr_tags(w, flex);
	return KAAS_HANDLED;
err_parse:
	return -EBADMSG;
}
