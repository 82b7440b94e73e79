/*
 * epoch.c — leadership epochs on the volume: CLUSTER/assignment.json (read,
 * pruned, rewritten whole with sub_write_atomic) and the choice of the next
 * epoch of a partition, above everything recorded for it anywhere, so an
 * epoch is never reused even when assignment.json is lost (ptable.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/core/ptable_int.h"
#include "util/log.h"

int kb_partition_key_parse(const char *key, char *topic, size_t topiclen, int32_t *partition)
{
	const char *dash = strrchr(key, '-');
	if (!dash || dash == key || !dash[1])
		return -EINVAL;
	int64_t v = 0;
	for (const char *p = dash + 1; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		v = v * 10 + (*p - '0');
		if (v > INT32_MAX)
			return -EINVAL;
	}
	size_t n = (size_t)(dash - key);
	if (n >= topiclen)
		return -ENAMETOOLONG;
	memcpy(topic, key, n);
	topic[n] = 0;
	*partition = (int32_t)v;
	return 0;
}

void kb__part_key(char *dst, size_t len, const char *topic, int32_t partition)
{
	snprintf(dst, len, "%s-%d", topic, partition);
}

void kb__part_dir(char *dst, size_t len, const char *topic, int32_t partition)
{
	snprintf(dst, len, "%s/%d", topic, partition);
}

/* ---- assignment.json and epochs --------------------------------------------------------- */

json_t *kb__assign_partitions(kb_ptable *t)
{
	return json_object_get(t->assign, "partitions");
}

void kb__assign_reset(kb_ptable *t)
{
	json_decref(t->assign);
	t->assign = json_pack("{s:I,s:I,s:o}", "version", (json_int_t)0, "controller_epoch", (json_int_t)0,
			      "partitions", json_object());
}

/* Reads assignment.json; a missing file is an empty assignment.  A file that
 * does not parse is reported and replaced: epochs stay safe because every new
 * epoch is also above the highest epoch found in the partition's files. */
int kb__assign_load(kb_ptable *t)
{
	char *buf = NULL;
	size_t len = 0;
	int rc = sub_read_file(t->b->cluster, ASSIGNMENT_FILE, ASSIGNMENT_MAX, &buf, &len);
	kb__assign_reset(t);
	if (rc == -ENOENT)
		return 0;
	if (rc) {
		KLOG_ERR("ptable", "reading %s: %s", ASSIGNMENT_FILE, sub_strerror(rc));
		return rc;
	}
	json_error_t je;
	json_t *doc = json_loadb(buf, len, 0, &je);
	free(buf);
	if (!doc || !json_is_object(doc) || !json_is_object(json_object_get(doc, "partitions"))) {
		KLOG_WARN("ptable", "%s is not a valid assignment (%s); starting a new one",
			  ASSIGNMENT_FILE, doc ? "wrong shape" : je.text);
		json_decref(doc);
		return 0;
	}
	json_t *v = json_object_get(doc, "version");
	if (!json_is_integer(v))
		json_object_set_new(doc, "version", json_integer(0));
	if (!json_is_integer(json_object_get(doc, "controller_epoch")))
		json_object_set_new(doc, "controller_epoch", json_integer(0));
	json_decref(t->assign);
	t->assign = doc;
	return 0;
}

int kb__assign_write(kb_ptable *t)
{
	json_t *v = json_object_get(t->assign, "version");
	json_object_set_new(t->assign, "version", json_integer(json_integer_value(v) + 1));
	char *s = json_dumps(t->assign, JSON_SORT_KEYS | JSON_INDENT(1));
	if (!s)
		return -ENOMEM;
	int rc = sub_write_atomic(t->b->cluster, ASSIGNMENT_FILE, s, strlen(s));
	free(s);
	if (rc)
		KLOG_ERR("ptable", "writing %s: %s", ASSIGNMENT_FILE, sub_strerror(rc));
	return rc;
}

static int32_t assign_epoch(kb_ptable *t, const char *topic, int32_t partition)
{
	char key[512];
	kb__part_key(key, sizeof(key), topic, partition);
	json_t *e = json_object_get(kb__assign_partitions(t), key);
	json_t *ep = e ? json_object_get(e, "epoch") : NULL;
	if (!json_is_integer(ep))
		return 0;
	json_int_t v = json_integer_value(ep);
	return v < 0 ? 0 : v > INT32_MAX - 1 ? INT32_MAX - 1 : (int32_t)v;
}

static void assign_set(kb_ptable *t, const char *topic, int32_t partition, int32_t epoch)
{
	char key[512];
	kb__part_key(key, sizeof(key), topic, partition);
	json_object_set_new(kb__assign_partitions(t), key,
			    json_pack("{s:i,s:i}", "leader", (int)t->b->id, "epoch", (int)epoch));
}

void kb__assign_del_topic(kb_ptable *t, const char *topic, int32_t n)
{
	char key[512];
	for (int32_t i = 0; i < n; i++) {
		kb__part_key(key, sizeof(key), topic, i);
		json_object_del(kb__assign_partitions(t), key);
	}
}

/* The highest epoch named by the partition's segment files or its manifest. */
int32_t kb__disk_epoch(kb_ptable *t, const char *topic, int32_t partition)
{
	char dir[512];
	kb__part_dir(dir, sizeof(dir), topic, partition);
	char **names = NULL;
	size_t n = 0;
	int32_t best = 0;
	if (sub_list(t->b->data, dir, &names, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			const char *s = names[i];
			int ok = 1;
			int64_t ep = 0;
			for (int k = 0; k < 10; k++) {
				if (s[k] < '0' || s[k] > '9') {
					ok = 0;
					break;
				}
				ep = ep * 10 + (s[k] - '0');
			}
			if (ok && s[10] == '-' && ep > KB_EPOCH_PLAUSIBLE) {
				KLOG_WARN("ptable", "%s/%s: epoch %lld is above any this cluster can have issued "
						    "(%d); not followed (storage sets the file aside as foreign)",
					  dir, s, (long long)ep, KB_EPOCH_PLAUSIBLE);
				continue;
			}
			if (ok && s[10] == '-' && ep > best)
				best = (int32_t)ep;
		}
		sub_names_free(names, n);
	}
	char path[600];
	snprintf(path, sizeof(path), "%s/manifest.json", dir);
	char *buf = NULL;
	size_t len = 0;
	if (sub_read_file(t->b->data, path, 1 << 20, &buf, &len) == 0) {
		json_t *doc = json_loadb(buf, len, 0, NULL);
		json_t *ep = doc ? json_object_get(doc, "epoch") : NULL;
		if (json_is_integer(ep) && json_integer_value(ep) > KB_EPOCH_PLAUSIBLE)
			KLOG_WARN("ptable", "%s: epoch %lld is above any this cluster can have issued (%d); "
					    "not followed", path, (long long)json_integer_value(ep), KB_EPOCH_PLAUSIBLE);
		else if (json_is_integer(ep) && json_integer_value(ep) > best)
			best = (int32_t)json_integer_value(ep);
		json_decref(doc);
	}
	free(buf);
	return best;
}

/* Picks and records (in memory) the next epoch of a partition. */
int32_t kb__next_epoch(kb_ptable *t, const char *topic, int32_t partition, int32_t at_least)
{
	int32_t e = assign_epoch(t, topic, partition);
	int32_t d = kb__disk_epoch(t, topic, partition);
	if (d > e)
		e = d;
	if (at_least > e)
		e = at_least;
	if (e >= INT32_MAX - 1)
		e = INT32_MAX - 2;
	assign_set(t, topic, partition, e + 1);
	return e + 1;
}

