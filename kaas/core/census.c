/*
 * census.c — what the partition table can tell a metrics scrape without
 * touching the volume: each partition it knows, whether it leads it, whether
 * its take-over failed, and its high watermark as storage last announced it.
 * And the group-commit figures (fsync latency, offsets made durable per
 * fsync, poisoned partitions) the flushers feed.
 */
#include "kaas/core/ptable.h"

#include "kaas/core/ptable_int.h"
#include "util/metrics.h"

void kb_ptable_each(kb_ptable *t, kb_census_fn fn, void *arg)
{
	kb__lock(&t->mu, KB_MU);
	for (int b = 0; b < NBUCKETS; b++)
		for (ptopic *pt = t->buckets[b]; pt; pt = pt->next) {
			if (pt->dropping)
				continue;
			for (int32_t i = 0; i < pt->n; i++) {
				kb_pentry *e = pt->parts[i];
				if (e)
					fn(arg, pt->name, i, e->state == PE_LEADER, e->state == PE_FAILED, e->durable);
			}
		}
	kb__unlock(&t->mu, KB_MU);
}

static const double fsync_buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
static const double batch_buckets[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384, 65536};

/* Called by the first flusher under fmu, before any flush: the registry's
 * lock is taken inside fmu here, and no scrape takes fmu. */
void kb__census_init(kb_ptable *t)
{
	ku_metrics *m = t->b->metrics;
	static const char *const none[] = {NULL};
	ku_family *f;
	if (!m)
		return;
	if (!ku_metrics_family(m, "kaas_group_commit_fsync_seconds",
			       "time one group commit of a partition took (its fsyncs and manifest work)", KU_HISTOGRAM,
			       none, fsync_buckets, (int)(sizeof(fsync_buckets) / sizeof(double)), &f))
		t->m_fsync = ku_metrics_series(f, none);
	if (!ku_metrics_family(m, "kaas_group_commit_offsets",
			       "offsets one advance of a partition's high watermark made durable (the group "
			       "commit's batch size)",
			       KU_HISTOGRAM, none, batch_buckets, (int)(sizeof(batch_buckets) / sizeof(double)), &f))
		t->m_batch = ku_metrics_series(f, none);
	if (!ku_metrics_family(m, "kaas_partitions_poisoned_total",
			       "partitions poisoned by a failed write, fsync or rename (they answer "
			       "KAFKA_STORAGE_ERROR until taken over again)", KU_COUNTER, none, NULL, 0, &f))
		t->m_poisoned = ku_metrics_series(f, none);
}
