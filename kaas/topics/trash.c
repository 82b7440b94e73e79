/*
 * trash.c — moving topic directories aside instead of deleting them, and
 * emptying the trash once its grace period is over.
 *
 * A delete or a proven reclaim renames DATA/<name> to DATA/~trash-...; a
 * directory whose identity contradicts itself is renamed to
 * DATA/~quarantine-... instead.  Both are one rename inside DATA/ (the
 * contract's atomic primitive: same directory), so the name is free at once
 * and nothing is lost until the trash is emptied: by the registry's upkeep
 * after kaas.trash.retention.ms, or by `kaas trash empty`.  Quarantine is
 * never emptied by kaas.  trash.h lists the names.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/topics/registry_int.h"
#include "kaas/topics/trash.h"
#include "util/clock.h"
#include "util/log.h"

#define QUARANTINE_PREFIX "~quarantine-"
#define TRASH_META ".trash.json"
/* The longest entry name: NAME_MAX of every substrate kaas qualifies. */
#define ENTRY_NAME_MAX 255

static const char *kind_prefix(int kind)
{
	return kind == KT_QUARANTINE ? QUARANTINE_PREFIX : kind == KT_KEPT ? KEPT_PREFIX : TRASH_PREFIX;
}

/* <prefix><ms>-<id>-<hex8>-<name, cut to fit> */
static int entry_name(char *dst, size_t len, int kind, int64_t ms, const char *id, const char *name)
{
	char hex[9];
	int rc = kt__rand_hex(hex, 8);
	if (rc)
		return rc;
	int n = snprintf(dst, len, "%s%" PRId64 "-%s-%s-", kind_prefix(kind), ms, id, hex);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	size_t room = (len - 1 < ENTRY_NAME_MAX ? len - 1 : ENTRY_NAME_MAX) - (size_t)n;
	snprintf(dst + n, room + 1, "%s", name);
	return 0;
}

/* Parses what entry_name() wrote (after the prefix).  Fields it cannot find
 * stay unknown: a name from an older kaas ("~trash-<id>-<hex>") gives its ID
 * and no time. */
static void entry_parse(const char *rest, kt_trash_entry *e)
{
	char id[KAAS_TOPIC_ID_LEN + 1];
	e->moved_ms = -1;
	const char *p = rest;
	int64_t ms = 0;
	int digits = 0;
	while (*p >= '0' && *p <= '9' && digits < 18) {
		ms = ms * 10 + (*p++ - '0');
		digits++;
	}
	if (digits > 0 && *p == '-' && strlen(p + 1) >= KAAS_TOPIC_ID_LEN && p[1 + 8] == '-') {
		p++;
	} else {
		p = rest; /* no time: maybe the old form, whose ID may start with digits */
		digits = 0;
	}
	char buf[KAAS_TOPIC_ID_LEN + 1];
	if (strlen(p) < KAAS_TOPIC_ID_LEN)
		return;
	memcpy(buf, p, KAAS_TOPIC_ID_LEN);
	buf[KAAS_TOPIC_ID_LEN] = '\0';
	if (kt_topic_id_parse(buf, id, NULL))
		return;
	snprintf(e->topic_id, sizeof(e->topic_id), "%s", id);
	if (digits > 0)
		e->moved_ms = ms;
	p += KAAS_TOPIC_ID_LEN;
	if (digits > 0 && *p == '-' && strlen(p) > 10 && p[9] == '-')
		snprintf(e->topic, sizeof(e->topic), "%s", p + 10);
}

/* .trash.json inside an entry: the whole topic name and why it was moved.
 * Informational only — the entry's name carries what the sweep decides on. */
static int meta_write(sub_vfs *data, const char *dir, const char *name, const char *id, int64_t ms,
		      const char *reason)
{
	char path[SUB_PATH_MAX];
	json_t *o = json_pack("{s:i,s:s,s:s,s:I,s:s}", "version", 1, "name", name, "topic_id", id, "moved_ms",
			      (json_int_t)ms, "reason", reason);
	char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(o);
	if (!s)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/" TRASH_META, dir);
	int rc = sub_write_atomic(data, path, s, strlen(s));
	free(s);
	return rc;
}

static void meta_read(sub_vfs *data, kt_trash_entry *e)
{
	char path[SUB_PATH_MAX], *buf = NULL, msg[160];
	size_t len;
	snprintf(path, sizeof(path), "%s/" TRASH_META, e->dir);
	if (sub_read_file(data, path, 4096, &buf, &len))
		return;
	json_t *o = json_loadb(buf, len, 0, NULL);
	free(buf);
	json_t *jn = json_object_get(o, "name"), *jr = json_object_get(o, "reason");
	if (json_is_string(jn) &&
	    kt_topic_name_check(json_string_value(jn), (int32_t)json_string_length(jn), msg, sizeof(msg)) == 0)
		snprintf(e->topic, sizeof(e->topic), "%s", json_string_value(jn));
	if (json_is_string(jr))
		snprintf(e->reason, sizeof(e->reason), "%s", json_string_value(jr));
	json_decref(o);
}

int kt__move_aside(kt_topics *reg, const char *name, const char *expect_id, int kind, const char *reason,
		   trash_list *tl)
{
	char aside[ENTRY_NAME_MAX + 1], sid[KAAS_TOPIC_ID_LEN + 1];
	int64_t ms = ku_wall_ms();
	int rc = entry_name(aside, sizeof(aside), kind, ms, expect_id, name);
	if (rc)
		return rc;
	rc = sub_rename(reg->o.data, name, aside);
	if (rc)
		return rc;
	rc = sub_fsync_dir(reg->o.data, "");
	/* The stamp was read before the rename: check what was moved.  If
	 * another broker replaced the directory in between (a newer topic of
	 * this name), put it back; if that is impossible, keep it under a name
	 * the sweep never removes.  Never destroy what is not the expected ID. */
	if (kt__stamp_read(reg, aside, sid) != 0 || strcmp(sid, expect_id) != 0) {
		int brc = sub_rename(reg->o.data, aside, name);
		if (brc) {
			char kept[ENTRY_NAME_MAX + 1];
			snprintf(kept, sizeof(kept), KEPT_PREFIX "%s", aside + strlen(kind_prefix(kind)));
			brc = sub_rename(reg->o.data, aside, kept);
			KLOG_ERR("topics", "topic %s: the directory changed identity while it was being moved aside; "
				 "kept as DATA/%s (%s) for an operator", name, kept, brc ? sub_strerror(brc) : "moved");
		} else {
			KLOG_WARN("topics", "topic %s: the directory changed identity while it was being moved aside; "
				  "put back", name);
		}
		sub_fsync_dir(reg->o.data, "");
		return -EAGAIN;
	}
	int mrc = meta_write(reg->o.data, aside, name, expect_id, ms, reason);
	if (mrc)
		KLOG_WARN("topics", "DATA/%s: writing " TRASH_META " failed (%s); the entry is kept all the same", aside,
			  sub_strerror(mrc));
	if (kind == KT_TRASH) {
		KLOG_INFO("topics", "topic %s (id %s, %s): directory moved to DATA/%s; removed after the trash "
			  "retention (%" PRId64 " ms) or by `kaas trash empty`", name, expect_id, reason, aside,
			  reg->o.trash_retention_ms);
		if (tl && tl->n < TRASH_LIST_MAX)
			snprintf(tl->v[tl->n++], sizeof(tl->v[0]), "%s", aside);
	} else {
		KLOG_ERR("topics", "topic %s: directory of unknown identity (stamp %s, %s) quarantined as DATA/%s; "
			 "kaas never removes it — inspect it, then rename it back or delete it by hand", name, expect_id,
			 reason, aside);
	}
	return rc;
}

int kt__move_to_trash(kt_topics *reg, const char *name, const char *old_id, const char *reason, trash_list *tl)
{
	return kt__move_aside(reg, name, old_id, KT_TRASH, reason, tl);
}

/* Right after a delete or reclaim: only with a zero retention is the
 * trash emptied at once (tests, or an operator who chose no grace). */
void kt__trash_remove(kt_topics *reg, trash_list *tl)
{
	for (size_t i = 0; reg->o.trash_retention_ms == 0 && i < tl->n; i++) {
		int rc = sub_remove_tree(reg->o.data, tl->v[i]);
		if (rc)
			KLOG_WARN("topics", "removing DATA/%s: %s (retried by the next tick)", tl->v[i], sub_strerror(rc));
	}
	tl->n = 0;
}

int kt__trash_sweep(kt_topics *reg)
{
	if (reg->o.trash_retention_ms < 0)
		return 0; /* keep forever */
	return kt_trash_empty(reg->o.data, reg->o.trash_retention_ms, ku_wall_ms(), NULL);
}

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(((const kt_trash_entry *)a)->dir, ((const kt_trash_entry *)b)->dir);
}

static int list_entries(sub_vfs *data, int with_meta, kt_trash_entry **out, size_t *n)
{
	char **names = NULL;
	size_t nn = 0, k = 0;
	*out = NULL;
	*n = 0;
	int rc = sub_list(data, "", &names, &nn);
	if (rc)
		return rc;
	kt_trash_entry *v = calloc(nn ? nn : 1, sizeof(*v));
	if (!v) {
		sub_names_free(names, nn);
		return -ENOMEM;
	}
	static const int kinds[] = {KT_TRASH, KT_QUARANTINE, KT_KEPT};
	for (size_t i = 0; i < nn; i++) {
		for (size_t j = 0; j < sizeof(kinds) / sizeof(kinds[0]); j++) {
			const char *pre = kind_prefix(kinds[j]);
			if (strncmp(names[i], pre, strlen(pre)) != 0 || strlen(names[i]) >= sizeof(v[k].dir))
				continue;
			kt_trash_entry *e = &v[k++];
			snprintf(e->dir, sizeof(e->dir), "%s", names[i]);
			e->kind = kinds[j];
			entry_parse(names[i] + strlen(pre), e);
			if (with_meta)
				meta_read(data, e);
			break;
		}
	}
	sub_names_free(names, nn);
	qsort(v, k, sizeof(*v), entry_cmp);
	*out = v;
	*n = k;
	return 0;
}

int kt_trash_list(sub_vfs *data, kt_trash_entry **out, size_t *n)
{
	return list_entries(data, 1, out, n);
}

int kt_trash_empty(sub_vfs *data, int64_t older_than_ms, int64_t now_ms, size_t *removed)
{
	kt_trash_entry *v = NULL;
	size_t n = 0, done = 0;
	/* The decision rests on the entry names alone; .trash.json is read
	 * only for what is removed (the log line), not at every upkeep. */
	int rc = list_entries(data, 0, &v, &n);
	if (rc)
		return rc;
	int first_err = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i].kind != KT_TRASH)
			continue;
		if (older_than_ms >= 0 && (v[i].moved_ms < 0 || v[i].moved_ms > now_ms ||
					   now_ms - v[i].moved_ms < older_than_ms))
			continue;
		meta_read(data, &v[i]);
		int r = sub_remove_tree(data, v[i].dir);
		if (r) {
			KLOG_WARN("topics", "removing DATA/%s: %s (retried later)", v[i].dir, sub_strerror(r));
			if (!first_err)
				first_err = r;
			continue;
		}
		KLOG_INFO("topics", "emptied trash DATA/%s (topic %s, id %s)", v[i].dir, v[i].topic[0] ? v[i].topic : "?",
			  v[i].topic_id[0] ? v[i].topic_id : "?");
		done++;
	}
	free(v);
	if (removed)
		*removed = done;
	return first_err;
}
