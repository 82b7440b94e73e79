/*
 * epochs.c — where each leader epoch ends in a partition log, from the
 * epochs and base offsets of its segments (epochs.h has the rules).
 */
#include "kaas/storage/epochs.h"

#include <errno.h>
#include <stdlib.h>

#include "kaas/storage/storage_int.h"

void ks_epoch_end_offset(const ks_epoch_seg *segs, size_t n, int32_t current, int64_t log_start,
			 int64_t log_end, int32_t requested, int32_t *epoch, int64_t *end_offset)
{
	*epoch = KS_UNDEFINED_EPOCH;
	*end_offset = KS_UNDEFINED_EPOCH_OFFSET;
	if (requested < 0)
		return;

	int32_t latest = current;
	for (size_t i = 0; i < n; i++)
		if (segs[i].epoch > latest)
			latest = segs[i].epoch;
	if (requested > latest)
		return; /* an epoch this log has not reached */
	if (requested == latest) {
		*epoch = requested;
		*end_offset = log_end;
		return;
	}

	/* The epochs' start offsets are the bases of the first live segment of
	 * each; a later segment of the same epoch is a roll, not a start. */
	int32_t seen = -1, floor = KS_UNDEFINED_EPOCH;
	int64_t higher = log_end; /* the current epoch's start when no segment has it */
	for (size_t i = 0; i < n; i++) {
		if (segs[i].epoch <= seen)
			continue; /* a zombie's (lower) or a roll (equal) */
		seen = segs[i].epoch;
		if (seen > requested) {
			higher = segs[i].base;
			break;
		}
		floor = seen;
	}
	/* Epochs that start at or below the log start count as one starting
	 * there (Kafka's truncateFromStart): if the next epoch starts there,
	 * every epoch up to `requested` is gone from the log. */
	if (higher <= log_start) {
		*epoch = requested;
		*end_offset = log_start;
	} else {
		*epoch = floor >= 0 ? floor : requested;
		*end_offset = higher;
	}
}

int32_t ks_epoch_at(const ks_epoch_seg *segs, size_t n, int32_t current, int64_t log_end,
		    int64_t offset)
{
	if (offset < 0)
		return KS_UNDEFINED_EPOCH;
	if (offset >= log_end)
		return current;
	int32_t seen = -1, at = KS_UNDEFINED_EPOCH;
	for (size_t i = 0; i < n && segs[i].base <= offset; i++) {
		if (segs[i].epoch < seen)
			continue; /* a zombie's */
		seen = at = segs[i].epoch;
	}
	return at;
}

/* p's epoch, log start, log end and live segments, read together under
 * its lock; *v is the caller's to free.  0 or as ks_partition_epoch_end. */
static int snapshot(ks_partition *p, ks_epoch_seg **v, size_t *n, int32_t *current, int64_t *log_start,
		    int64_t *log_end)
{
	int rc;
	*v = NULL;
	*n = 0;
	pthread_mutex_lock(&p->mu);
	*current = p->epoch;
	*log_start = p->log_start;
	*log_end = p->leo;
	rc = ks__p_unfit(p);
	if (rc)
		goto out;
	*v = malloc((p->nsegs ? p->nsegs : 1) * sizeof(**v));
	if (!*v) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < p->nsegs; i++) {
		(*v)[i].epoch = p->segs[i]->epoch;
		(*v)[i].base = p->segs[i]->base;
	}
	*n = p->nsegs;
out:
	pthread_mutex_unlock(&p->mu);
	return rc;
}

int ks_partition_epoch_end(ks_partition *p, int32_t requested, int32_t *epoch, int64_t *end_offset,
			   int32_t *current)
{
	ks_epoch_seg *v;
	size_t n;
	int32_t cur;
	int64_t start, end;
	int rc = snapshot(p, &v, &n, &cur, &start, &end);
	if (current)
		*current = cur;
	if (rc == 0)
		ks_epoch_end_offset(v, n, cur, start, end, requested, epoch, end_offset);
	free(v);
	return rc;
}

int ks_partition_epoch_at(ks_partition *p, int64_t offset, int32_t *epoch)
{
	ks_epoch_seg *v;
	size_t n;
	int32_t cur;
	int64_t start, end;
	int rc = snapshot(p, &v, &n, &cur, &start, &end);
	if (rc == 0)
		*epoch = ks_epoch_at(v, n, cur, end, offset);
	free(v);
	return rc;
}
