/*
 * census.c — the committed offsets the coordinator holds in memory, for the
 * consumer-lag collector of a metrics scrape: no I/O, groups not loaded yet
 * are not reported.
 */
#include "kaas/coord/coord.h"

#include "kaas/coord/coord_int.h"

void kg_coord_each_offset(kg_coord *c, kg_offset_fn fn, void *arg)
{
	pthread_mutex_lock(&c->mu);
	for (size_t b = 0; b < c->tabsize; b++)
		for (kg_group *g = c->tab[b]; g; g = g->hnext)
			for (size_t i = 0; i < g->noffs; i++) {
				const kg_offset *o = &g->offs[i];
				fn(arg, g->id.s ? g->id.s : "", g->id.len > 0 ? (size_t)g->id.len : 0,
				   o->topic.s ? o->topic.s : "", o->topic.len > 0 ? (size_t)o->topic.len : 0,
				   o->partition, o->offset);
			}
	pthread_mutex_unlock(&c->mu);
}
