/*
 * leaders.c — the applied leader map (leaders.h): construction, reference
 * counting and lookups.
 */
#include "kaas/core/leaders.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

kb_leaders *kb_leaders_new(size_t nbrokers, size_t ntopics, int32_t nshards)
{
	kb_leaders *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->refs = 1;
	m->controller = -1;
	m->brokers = calloc(nbrokers ? nbrokers : 1, sizeof(*m->brokers));
	m->topics = calloc(ntopics ? ntopics : 1, sizeof(*m->topics));
	m->shard_leader = calloc(nshards > 0 ? (size_t)nshards : 1, sizeof(int32_t));
	m->shard_epoch = calloc(nshards > 0 ? (size_t)nshards : 1, sizeof(int32_t));
	if (!m->brokers || !m->topics || !m->shard_leader || !m->shard_epoch) {
		kb_leaders_put(m);
		return NULL;
	}
	m->nbrokers = nbrokers;
	m->ntopics = ntopics;
	m->nshards = nshards > 0 ? nshards : 0;
	return m;
}

int kb_ltopic_init(kb_ltopic *t, const char *name, const char *topic_id, int32_t n)
{
	memset(t, 0, sizeof(*t));
	t->name = strdup(name);
	t->leader = calloc(n > 0 ? (size_t)n : 1, sizeof(int32_t));
	t->epoch = calloc(n > 0 ? (size_t)n : 1, sizeof(int32_t));
	if (!t->name || !t->leader || !t->epoch)
		return -ENOMEM;
	if (topic_id && strlen(topic_id) < sizeof(t->topic_id))
		strcpy(t->topic_id, topic_id);
	t->n = n;
	return 0;
}

void kb_leaders_get(kb_leaders *m)
{
	__atomic_add_fetch(&m->refs, 1, __ATOMIC_RELAXED);
}

void kb_leaders_put(kb_leaders *m)
{
	if (!m || __atomic_sub_fetch(&m->refs, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	for (size_t i = 0; m->topics && i < m->ntopics; i++) {
		free(m->topics[i].name);
		free(m->topics[i].leader);
		free(m->topics[i].epoch);
	}
	free(m->topics);
	free(m->brokers);
	free(m->shard_leader);
	free(m->shard_epoch);
	free(m);
}

int kb_leaders_find(const kb_leaders *m, const char *topic, int32_t partition, int32_t *leader,
		    int32_t *epoch)
{
	size_t lo = 0, hi = m->ntopics;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(m->topics[mid].name, topic);
		if (c == 0) {
			const kb_ltopic *t = &m->topics[mid];
			if (partition < 0 || partition >= t->n)
				return -ENOENT;
			*leader = t->leader[partition];
			*epoch = t->epoch[partition];
			return 0;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -ENOENT;
}

const kb_lbroker *kb_leaders_broker(const kb_leaders *m, int32_t id)
{
	for (size_t i = 0; i < m->nbrokers; i++)
		if (m->brokers[i].id == id)
			return &m->brokers[i];
	return NULL;
}

int kb_lbroker_endpoint(const kb_lbroker *lb, const char *listener, const char **host,
			int32_t *port)
{
	if (lb->nlst == 0 || !listener) {
		*host = lb->host;
		*port = lb->port;
		return 0;
	}
	for (int i = 0; i < lb->nlst; i++) {
		if (strcmp(lb->lst[i].name, listener) == 0) {
			*host = lb->lst[i].host;
			*port = lb->lst[i].port;
			return 0;
		}
	}
	return -ENOENT;
}
