/*
 * census.c — what a partition can tell an admin request without reading a
 * file: its size on the volume, summed from the segment metadata in memory
 * (valid bytes of the segments loaded, the listed size of the others).
 */
#include "kaas/storage/storage.h"

#include "kaas/storage/storage_int.h"

int64_t ks_partition_size(ks_partition *p)
{
	int64_t n = 0;
	ks__p_lock(p);
	for (size_t i = 0; i < p->nsegs; i++) {
		const kseg *s = p->segs[i];
		n += (int64_t)(s->meta ? s->end_pos : s->disk_size);
	}
	ks__p_unlock(p);
	return n;
}
