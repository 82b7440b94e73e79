/*
 * scrub.c — the background scrub of sealed segments, and the storage
 * engine's damage counters as metrics.
 *
 * Damage in data that was durable is found where the broker reads anyway
 * (take-over's tail walk, the first serve of sealed bytes) and, for data
 * nobody reads, by this scrub: every housekeeping round the table spends
 * one broker-wide token bucket (kaas.log.scrub.bytes.per.sec) on the
 * sealed segments of the partitions it leads, one partition after the
 * other from where the last round stopped, so that every partition's
 * sealed data is verified in turn and the disk sees a bounded read rate.
 * What the scrub finds is handled by storage (ERROR naming the file and
 * byte range, counted, quarantined; docs/storage.md, "Damage").
 */
#include <errno.h>

#include "kaas/core/ptable_int.h"
#include "util/log.h"
#include "util/metrics.h"

void kb__scrub_round(kb_ptable *t, kb_pentry **lead, size_t n, int64_t now)
{
	int64_t rate = t->b->cfg.scrub_bytes_per_sec;
	if (rate <= 0 || n == 0)
		return;
	if (!t->scrub_started) {
		ks_scrub_rate_init(&t->scrub_rate, rate, now);
		t->scrub_started = 1;
	}
	/* At most one lap over the leaders: an empty bucket ends the round,
	 * and the next round resumes with the partition that was next. */
	for (size_t k = 0; k < n; k++) {
		kb_pentry *e = lead[(t->scrub_next + k) % n];
		int done = 0;
		int64_t got = ks_partition_scrub(e->p, &t->scrub_rate, now, &done);
		if (got < 0 && got != -EPERM)
			KLOG_WARN("ptable", "%s/%d: scrub: %s (tried again next round)", e->topic->name, e->index,
				  sub_strerror((int)got));
		if (got == 0 && t->scrub_rate.tokens <= 0) {
			t->scrub_next = (t->scrub_next + k) % n;
			return;
		}
		if (done)
			KLOG_DEBUG("ptable", "%s/%d: scrub pass over the sealed segments done", e->topic->name,
				   e->index);
	}
	t->scrub_next = 0;
}

/* ---- the storage engine's counters ------------------------------------------------------------------ */

enum { ST_RANGES, ST_BYTES, ST_READS, ST_QUAR, ST_FOREIGN, ST_SCRUBBED, ST_PASSES, ST_DAMAGED, ST_OPEN, ST_ABANDONED,
       ST_SKIPPED };

static void collect(void *arg, ku_emit_fn emit, void *ctx)
{
	ks_storage_stats s;
	ks_storage_stats_get(&s);
	const double v[] = {
		[ST_RANGES] = (double)s.corrupt_ranges,     [ST_BYTES] = (double)s.corrupt_bytes,
		[ST_READS] = (double)s.corrupt_reads,       [ST_QUAR] = (double)s.quarantined_files,
		[ST_FOREIGN] = (double)s.foreign_numbers,   [ST_SCRUBBED] = (double)s.scrubbed_bytes,
		[ST_PASSES] = (double)s.scrub_passes,       [ST_DAMAGED] = (double)s.damaged_segments,
		[ST_OPEN] = (double)s.open_files,           [ST_ABANDONED] = (double)s.takeovers_abandoned,
		[ST_SKIPPED] = (double)s.scans_skipped,
	};
	static const char *const none[] = {NULL};
	emit(ctx, none, v[(int)(intptr_t)arg]);
}

int kb_storage_metrics(ku_metrics *m)
{
	static const struct {
		const char *name, *help;
		enum ku_metric_type type;
	} fams[] = {
		[ST_RANGES] = {"kaas_storage_corrupt_ranges_total",
			       "Damaged byte ranges found in durable data (recovery, reads, scrub).", KU_COUNTER},
		[ST_BYTES] = {"kaas_storage_corrupt_bytes_total", "Bytes in the damaged ranges found.", KU_COUNTER},
		[ST_READS] = {"kaas_storage_corrupt_reads_total", "Fetches answered CORRUPT_MESSAGE.", KU_COUNTER},
		[ST_QUAR] = {"kaas_storage_quarantined_files_total",
			     "Files moved into a partition's quarantine/ area.", KU_COUNTER},
		[ST_FOREIGN] = {"kaas_storage_foreign_numbers_total",
				"Numbers read from the volume refused as impossible (epochs, offsets).", KU_COUNTER},
		[ST_SCRUBBED] = {"kaas_storage_scrubbed_bytes_total", "Bytes of sealed segments the scrub verified.",
				 KU_COUNTER},
		[ST_PASSES] = {"kaas_storage_scrub_passes_total",
			       "Complete scrub passes over a partition's sealed segments.", KU_COUNTER},
		[ST_DAMAGED] = {"kaas_storage_damaged_segments", "Live segments with a damaged range now.", KU_GAUGE},
		[ST_OPEN] = {"kaas_storage_open_files", "Descriptors the led partitions hold now.", KU_GAUGE},
		[ST_ABANDONED] = {"kaas_storage_takeovers_abandoned_total",
				  "Take-overs that found a newer leader or lost their lease and stepped down, moving nothing.",
				  KU_COUNTER},
		[ST_SKIPPED] = {"kaas_storage_scans_skipped_total",
				"Take-overs that trusted a matching relinquish record instead of scanning the tail.",
				KU_COUNTER},
	};
	if (!m)
		return 0;
	for (size_t i = 0; i < sizeof(fams) / sizeof(fams[0]); i++) {
		int rc = ku_metrics_collector(m, fams[i].name, fams[i].help, fams[i].type, NULL, collect,
					      (void *)(intptr_t)i);
		if (rc)
			return rc;
	}
	return 0;
}
