/*
 * group_admin.c — the group APIs that look at groups rather than belong to
 * one: FindCoordinator v0-2, DescribeGroups v0-4, ListGroups v0-4 (v4: states),
 * DeleteGroups v0-1.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/coord/coord_int.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

/* ---- FindCoordinator ------------------------------------------------------------ */

int kg__api_find_coordinator(kg_coord *c, const kg_coord_call *call, kw_rd *rd, kw_wr *w)
{
	int16_t v = call->version;
	kw_str key;
	int8_t key_type = 0;
	KRD_STR(rd, 0, &key);
	if (v >= 1)
		KRD_I8(rd, &key_type);

	int32_t node = -1, port = -1;
	char hostbuf[256] = "";
	const char *host = hostbuf;
	const char *msg = NULL;
	int16_t err;
	if (key.len < 0) {
		err = KERR_INVALID_REQUEST;
		msg = "the coordinator key is null";
	} else if (key_type == 0 && !kg__authorized(c, call, KB_OP_DESCRIBE, KB_RES_GROUP, key)) {
		err = KERR_GROUP_AUTHORIZATION_FAILED;
	} else if (key_type == 1 && !kg__authorized(c, call, KB_OP_DESCRIBE, KB_RES_TXN, key)) {
		err = KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
		msg = "Transactional Id authorization failed.";
	} else {
		err = kg_coord_owner(c, key_type, key, call->listener, &node, hostbuf, sizeof(hostbuf), &port);
		if (!err && node == c->cfg.broker_id && call->adv_host) {
			host = call->adv_host; /* on the listener the client uses, as Metadata */
			port = call->adv_port;
		}
		if (err == KERR_INVALID_REQUEST)
			msg = "unknown coordinator key type (0 = group, 1 = transaction)";
		else if (!err && key_type == 1) {
			/* No transaction coordinator yet: an error every client
			 * treats as fatal at once, with the reason in the message
			 * (librdkafka shows it; docs/groups.md). */
			err = KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
			msg = "transactions are not supported by this kaas broker yet";
			KLOG_WARN("coord", "FindCoordinator for transactional.id '%.*s': %s",
				  key.len > 200 ? 200 : key.len, key.s, msg);
		}
	}
	if (err) {
		node = -1;
		port = -1;
		host = "";
	}
	if (v >= 1) {
		kw_wr_i32(w, 0);
		kw_wr_i16(w, err);
		kw_wr_str(w, 0, msg);
	} else {
		kw_wr_i16(w, err);
	}
	kw_wr_i32(w, node);
	kw_wr_str(w, 0, host);
	kw_wr_i32(w, port);
	return KAAS_HANDLED;
err_parse:
	return -EBADMSG;
}

/* ---- DescribeGroups --------------------------------------------------------------- */

/* Kafka's ACL operation bits a group has: READ (3), DELETE (6), DESCRIBE
 * (8); without an authorizer a client may do all of them. */
static int32_t group_ops(const kg_coord *c, const kg_coord_call *call, kw_str id)
{
	if (!c->authz)
		return (int32_t)KB_OPS_GROUP;
	return c->authz->authorized_ops(call->ctx, KB_RES_GROUP, id.s, id.len < 0 ? 0 : id.len, KB_OPS_GROUP);
}

/* Whether the principal may do op on each group of ids (asked before
 * c->mu is taken: the authorizer may read the volume).  calloc'd. */
static int8_t *groups_allowed(const kg_coord *c, const kg_coord_call *call, const kw_str *ids, int32_t n, int op)
{
	int8_t *ok = calloc(n > 0 ? (size_t)n : 1, 1);
	for (int32_t i = 0; ok && i < n; i++)
		ok[i] = (int8_t)kg__authorized(c, call, op, KB_RES_GROUP, ids[i]);
	return ok;
}

/* The array of group ids DescribeGroups and DeleteGroups start with; *ids
 * (one spare element, so never empty) is the caller's to free, also when
 * the request turns out malformed (-EBADMSG).  0, -EBADMSG or -ENOMEM. */
static int read_group_ids(kw_rd *rd, int32_t *n, kw_str **ids)
{
	KRD_ARRAY(rd, 0, 2, n);
	if (*n < 0)
		*n = 0;
	if (!(*ids = calloc((size_t)*n + 1, sizeof(**ids))))
		return -ENOMEM;
	for (int32_t i = 0; i < *n; i++)
		KRD_STR(rd, 0, &(*ids)[i]);
	return 0;
err_parse:
	return -EBADMSG;
}

int kg__api_describe_groups(kg_coord *c, const kg_coord_call *call, kw_rd *rd, kw_wr *w)
{
	int16_t v = call->version;
	int32_t n;
	int8_t include_ops = 0;
	kw_str *ids = NULL;
	int rc = read_group_ids(rd, &n, &ids);
	if (rc)
		goto out;
	if (v >= 3)
		KRD_I8(rd, &include_ops);

	int8_t *allowed = groups_allowed(c, call, ids, n, KB_OP_DESCRIBE);
	int32_t *ops = calloc(n > 0 ? (size_t)n : 1, sizeof(*ops));
	if (!allowed || !ops) {
		free(allowed);
		free(ops);
		rc = -ENOMEM;
		goto out;
	}
	for (int32_t i = 0; i < n; i++)
		ops[i] = include_ops && allowed[i] ? group_ops(c, call, ids[i]) : INT32_MIN;
	if (v >= 1)
		kw_wr_i32(w, 0);
	kw_wr_array(w, 0, n);
	pthread_mutex_lock(&c->mu);
	for (int32_t i = 0; i < n; i++) {
		kg_group *g = NULL;
		int16_t err = allowed[i] ? kg__group_status(c, ids[i], 1) : KERR_GROUP_AUTHORIZATION_FAILED;
		if (!err)
			err = kg__group_get(c, ids[i], 0, &g);
		kw_wr_i16(w, err);
		kw_wr_kstr(w, 0, ids[i]);
		if (err || !g) {
			kw_wr_str(w, 0, err ? "" : "Dead");
			kw_wr_str(w, 0, "");
			kw_wr_str(w, 0, "");
			kw_wr_array(w, 0, 0);
		} else {
			int stable = g->state == KC_STABLE;
			kw_wr_str(w, 0, kg__state_name(g->state));
			kw_wr_strn(w, 0, g->protocol_type.len > 0 ? g->protocol_type.s : "",
				     g->protocol_type.len > 0 ? g->protocol_type.len : 0);
			kw_wr_strn(w, 0, stable && g->protocol.len > 0 ? g->protocol.s : "",
				     stable && g->protocol.len > 0 ? g->protocol.len : 0);
			kg__describe_members(g, v, w);
		}
		if (v >= 3)
			kw_wr_i32(w, ops[i]);
	}
	pthread_mutex_unlock(&c->mu);
	free(allowed);
	free(ops);
	rc = KAAS_HANDLED;
	goto out;
err_parse:
	rc = -EBADMSG;
out:
	free(ids);
	return rc;
}

/* ---- ListGroups -------------------------------------------------------------------- */

/* Group ids of the files under groups/ (read outside c->mu). */
int kg__ids_on_volume(kg_coord *c, kg_str **out, size_t *nout)
{
	char **names = NULL;
	size_t n = 0, k = 0;
	*out = NULL;
	*nout = 0;
	int rc = sub_list(c->vfs, "groups", &names, &n);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	kg_str *ids = calloc(2 * n + 1, sizeof(*ids)); /* two readings per name at most */
	if (!ids) {
		sub_names_free(names, n);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		char stem[KC_GNAME_MAX + 64];
		int64_t epoch;
		if (kg__group_fname_parse(names[i], stem, sizeof(stem), &epoch))
			continue; /* temp files of writes in flight, strangers */
		/* "<stem>.<10 digits>.json" is the stem's group at that epoch, or
		 * (rarely) the legacy file of a group whose id ends in the digits:
		 * both are offered, the loader keeps the one its contents name. */
		for (int alt = 0; alt < 2; alt++) {
			if (alt == 1) {
				size_t len = strlen(names[i]);
				if (epoch < 0 || len - 5 >= sizeof(stem))
					break;
				memcpy(stem, names[i], len - 5);
				stem[len - 5] = '\0';
			}
			char id[KC_GNAME_MAX + 1];
			size_t idlen;
			int d = kg__gname_decode(stem, id, sizeof(id), &idlen);
			ids[k].len = -1;
			ids[k].s = NULL;
			if (d == 0) {
				if (kg__str_set(&ids[k], id, (int32_t)idlen) == 0)
					k++;
			} else if (d == -ENOTUNIQ && alt == 0) {
				/* A long id: only the file knows it. */
				char path[SUB_PATH_MAX], *data = NULL;
				size_t dlen;
				kg_loaded l = KC_LOADED_INIT;
				snprintf(path, sizeof(path), "groups/%s", names[i]);
				if (sub_read_file(c->vfs, path, 64 << 20, &data, &dlen) == 0 &&
				    kg__group_file_parse(data, dlen, &ids[k], &l, NULL) == 0)
					k++;
				else
					KLOG_WARN("coord", "groups/%s: cannot read the group id from it", names[i]);
				kg__loaded_free(&l);
				free(data);
			}
		}
	}
	sub_names_free(names, n);
	*out = ids;
	*nout = k;
	return 0;
}

/* Is st in the StatesFilter (v4; empty: every state)?  Kafka's state names,
 * compared without case as Kafka 3.7+ does. */
static int state_wanted(int st, const kw_str *states, int32_t n)
{
	if (n <= 0)
		return 1;
	const char *name = kg__state_name(st);
	size_t len = strlen(name);
	for (int32_t i = 0; i < n; i++)
		if (states[i].len == (int32_t)len && strncasecmp(states[i].s, name, len) == 0)
			return 1;
	return 0;
}

int kg__api_list_groups(kg_coord *c, const kg_coord_call *call, kw_rd *rd, kw_wr *w)
{
	int16_t v = call->version;
	int flex = v >= 3;
	kw_str *states = NULL;
	int32_t nstates = 0;
	kg_str *ids = NULL;
	size_t nids = 0;
	int16_t err = KERR_NONE;
	/* v0-2 have an empty body; v3 is flexible; v4 adds StatesFilter. */
	if (v >= 4) {
		KRD_ARRAY(rd, flex, 1, &nstates);
		if (nstates < 0)
			nstates = 0;
		if (!(states = calloc((size_t)nstates + 1, sizeof(*states))))
			return -ENOMEM;
		for (int32_t i = 0; i < nstates; i++)
			KRD_STR(rd, flex, &states[i]);
	}
	KRD_TAGS(rd, flex);
	int rc = kg__ids_on_volume(c, &ids, &nids);
	if (rc) {
		KLOG_WARN("coord", "ListGroups: cannot list groups/: %s", sub_strerror(rc));
		err = KERR_COORDINATOR_LOAD_IN_PROGRESS;
	}
	/* As Kafka: DESCRIBE on the cluster lists every group, else only the
	 * groups the principal may describe.  Asked before c->mu is taken, so
	 * that the checks below find the authorizer's set fresh in memory. */
	static const kw_str cluster = {KB_ACL_CLUSTER_NAME, sizeof(KB_ACL_CLUSTER_NAME) - 1};
	int all_groups = kg__visible(c, call, KB_OP_DESCRIBE, KB_RES_CLUSTER, cluster);
	if (v >= 1)
		kw_wr_i32(w, 0);
	kw_wr_i16(w, err);
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; !err && i < nids; i++) {
		kg_group *g;
		int64_t ep;
		if (kg__serve_epoch(c, kg_k(&ids[i]), 0, &ep) != KERR_NONE)
			continue; /* listed by its own coordinator */
		if (kg__group_get(c, kg_k(&ids[i]), 0, &g))
			KLOG_WARN("coord", "ListGroups: group '%s' cannot be loaded", ids[i].s);
	}
	/* Two passes: a flexible array's count comes first, as a varint. */
	int32_t cnt = 0;
	for (int pass = 0; pass < 2 && !err; pass++) {
		if (pass == 1)
			kw_wr_array(w, flex, cnt);
		for (size_t b = 0; b < c->tabsize; b++) {
			for (kg_group *g = c->tab[b]; g; g = g->hnext) {
				int64_t ep;
				if (!g->loaded || kg__group_is_idle(g) || !state_wanted(g->state, states, nstates) ||
				    kg__serve_epoch(c, kg_k(&g->id), 0, &ep) != KERR_NONE || ep != g->epoch)
					continue;
				if (!all_groups && !kg__visible(c, call, KB_OP_DESCRIBE, KB_RES_GROUP, kg_k(&g->id)))
					continue;
				if (pass == 0) {
					cnt++;
					continue;
				}
				kw_wr_kstr(w, flex, kg_k(&g->id));
				kw_wr_strn(w, flex, g->protocol_type.len > 0 ? g->protocol_type.s : "",
					   g->protocol_type.len > 0 ? g->protocol_type.len : 0);
				if (v >= 4)
					kw_wr_str(w, flex, kg__state_name(g->state));
				kw_wr_tags(w, flex);
			}
		}
	}
	if (err)
		kw_wr_array(w, flex, 0);
	kw_wr_tags(w, flex);
	pthread_mutex_unlock(&c->mu);
	for (size_t i = 0; i < nids; i++)
		kg__str_free(&ids[i]);
	free(ids);
	free(states);
	return KAAS_HANDLED;
err_parse:
	free(states);
	return -EBADMSG;
}

/* ---- DeleteGroups --------------------------------------------------------------------- */

static int16_t delete_one(kg_coord *c, kw_str id, kg_outbox *ob)
{
	kg_group *g = NULL;
	int16_t err = kg__group_status(c, id, 1);
	if (!err)
		err = kg__group_get(c, id, 0, &g);
	if (err)
		return err;
	if (!g || g->deleting)
		return KERR_GROUP_ID_NOT_FOUND;
	if (g->nmembers || g->npending)
		return KERR_NON_EMPTY_GROUP;
	g->deleting = 1;
	/* Commits not yet written will not be: their clients retry. */
	kg__group_fail_commits(c, g, KERR_NOT_COORDINATOR, ob);
	while (g->writing)
		pthread_cond_wait(&c->state_cv, &c->mu);
	char path[SUB_PATH_MAX];
	int64_t epoch = g->epoch;
	int rc = kg__group_path(kg_k(&g->id), epoch, path, sizeof(path));
	g->refs++;
	pthread_mutex_unlock(&c->mu);
	if (!rc && epoch > 0) {
		/* Older owners' files first: with ours gone they would be read. */
		int n = kg__group_files_prune(c, id, epoch);
		rc = n < 0 ? n : 0;
	}
	if (!rc)
		rc = sub_unlink(c->vfs, path);
	if (rc == -ENOENT)
		rc = 0;
	pthread_mutex_lock(&c->mu);
	g->refs--;
	g->deleting = 0;
	if (rc) {
		KLOG_WARN("coord", "DeleteGroups '%s': cannot remove %s: %s", g->id.s, path,
			  sub_strerror(rc));
		return KERR_COORDINATOR_NOT_AVAILABLE;
	}
	kg__offsets_clear(g);
	g->file_exists = 0;
	if (!g->members)
		g->meta_written = g->meta_seq; /* no file, no members: nothing left to write */
	if (g->nmembers == 0 && g->npending == 0)
		kg__group_maybe_drop(c, g);
	return KERR_NONE;
}

int kg__api_delete_groups(kg_coord *c, const kg_coord_call *call, kw_rd *rd, kw_wr *w)
{
	int32_t n;
	kw_str *ids = NULL;
	int rc = read_group_ids(rd, &n, &ids);
	if (rc)
		goto out;
	int8_t *allowed = groups_allowed(c, call, ids, n, KB_OP_DELETE);
	if (!allowed) {
		rc = -ENOMEM;
		goto out;
	}
	kw_wr_i32(w, 0);
	kw_wr_array(w, 0, n);
	kg_outbox ob;
	kg__outbox_init(&ob);
	pthread_mutex_lock(&c->mu);
	for (int32_t i = 0; i < n; i++) {
		int16_t err = allowed[i] ? delete_one(c, ids[i], &ob) : KERR_GROUP_AUTHORIZATION_FAILED;
		kw_wr_kstr(w, 0, ids[i]);
		kw_wr_i16(w, err);
	}
	pthread_mutex_unlock(&c->mu);
	kg__outbox_deliver(&ob);
	free(allowed);
	rc = KAAS_HANDLED;
out:
	free(ids);
	return rc;
}
