/*
 * listing.c — which segments a partition has: the directory listed and
 * sorted, live segments told from zombies by epoch, the list a partition
 * adopts (and lets go of), the follower's view, and the fencing check that
 * a newer epoch's segment triggers.
 *
 * Epoch fencing (docs/storage.md): segments are sorted by base offset; one
 * whose epoch is lower than that of a segment at or before its base is a
 * zombie's and ignored; a live segment's valid batches end where the next
 * live segment begins.
 */
#include "kaas/storage/storage_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/grow.h"
#include "util/log.h"

void ks__seglist_free(seglist *l)
{
	for (size_t i = 0; i < l->n; i++)
		ks__seg_unref(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

int ks__seglist_push(seglist *l, kseg *s)
{
	if (KAAS_GROW(l->v, l->n, l->cap, 16))
		return -ENOMEM;
	l->v[l->n++] = s;
	return 0;
}

static int cmp_seg(const void *a, const void *b)
{
	const kseg *x = *(kseg *const *)a, *y = *(kseg *const *)b;
	if (x->base != y->base)
		return x->base < y->base ? -1 : 1;
	if (x->epoch != y->epoch)
		return x->epoch > y->epoch ? -1 : 1; /* higher epoch first */
	return x->gen > y->gen ? -1 : x->gen < y->gen;
}

/* Adds the .log segments named in directory `sub` ("" or the quarantine
 * area) to out. */
static int list_in(ks_partition *p, const char *sub, int stat_sizes, seglist *out, int32_t *max_epoch)
{
	char **names = NULL, dir[SUB_PATH_MAX];
	size_t n = 0;
	int rc = sub[0] ? sub_join(dir, sizeof(dir), p->dir, sub) : 0;
	if (rc)
		return rc;
	if (!sub[0])
		snprintf(dir, sizeof(dir), "%s", p->dir);
	rc = sub_list(p->vfs, dir, &names, &n);
	if (rc == -ENOENT && sub[0])
		return 0;
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++) {
		int32_t e;
		int64_t b, g;
		int kind = ks__seg_parse_name_g(names[i], &e, &b, &g);
		if (kind < 0)
			continue;
		/* A cleaned file carries its source segment's epoch; the
		 * cleaner's own is checked through clean.json. */
		if (e > *max_epoch && g == 0)
			*max_epoch = e;
		if (kind != SEG_LOG)
			continue;
		kseg *s = ks__seg_new(e, b);
		if (!s || (rc = ks__seglist_push(out, s))) {
			ks__seg_unref(s);
			rc = rc ? rc : -ENOMEM;
			break;
		}
		s->gen = g;
		s->quarantined = sub[0] != 0;
		if (stat_sizes) {
			char path[SUB_PATH_MAX];
			sub_stat st;
			if (ks__seg_path_g(path, sizeof(path), dir, e, b, g, SEG_LOG) == 0 &&
			    sub_stat_path(p->vfs, path, &st) == 0)
				s->disk_size = st.size;
		}
	}
	sub_names_free(names, n);
	return rc;
}

/* Every .log segment in the directory and its quarantine area (a damaged
 * segment stays part of the log there), sorted by (base, epoch desc); a
 * name in both places counts once, from the directory (an operator put a
 * repaired copy back).  *max_epoch the highest epoch of any segment file. */
/* Is (epoch, base) an entry of c? */
static long clean_entry(const kclean *c, int32_t epoch, int64_t base)
{
	long k = ks__clean_find(c, base);
	return k >= 0 && c->v[k].base == base && c->v[k].epoch == epoch ? k : -1;
}

/* Applies clean.json to a sorted listing: the cleaned segments it names
 * take the place of the plain ones they replaced (a plain segment goes only
 * where the cleaned file covering it is present); cleaned files it does
 * not name are not part of the log (an interrupted or superseded clean). */
static int apply_clean(const kclean *c, seglist *l)
{
	unsigned char *present = NULL;
	if (c->state == 1 && !(present = calloc(c->n, 1)))
		return -ENOMEM;
	for (size_t i = 0; i < l->n; i++) {
		kseg *s = l->v[i];
		long k;
		if (s->gen > 0 && c->state == 1 && s->gen == c->gen && (k = clean_entry(c, s->epoch, s->base)) >= 0)
			present[k] = 1;
	}
	size_t n = 0;
	for (size_t i = 0; i < l->n; i++) {
		kseg *s = l->v[i];
		int keep;
		if (s->gen > 0) {
			keep = c->state == 1 && s->gen == c->gen && clean_entry(c, s->epoch, s->base) >= 0;
		} else {
			long k = c->state == 1 ? ks__clean_find(c, s->base) : -1;
			keep = k < 0 || !present[k];
		}
		if (keep)
			l->v[n++] = s;
		else
			ks__seg_unref(s);
	}
	l->n = n;
	free(present);
	return 0;
}

int ks__p_list_segments(ks_partition *p, int stat_sizes, seglist *out, int32_t *max_epoch)
{
	int rc = 0;
	/* clean.json read before and after the listing: a clean swapped in by
	 * another host meanwhile (its old files may be going) means list again. */
	for (int attempt = 0; attempt < 4; attempt++) {
		kclean before = {0};
		*max_epoch = -1;
		if ((rc = ks__clean_read(p->vfs, p->dir, &before)))
			return rc;
		rc = list_in(p, "", stat_sizes, out, max_epoch);
		if (rc == 0)
			rc = list_in(p, QUARANTINE_DIR, stat_sizes, out, max_epoch);
		if (rc == 0)
			rc = ks__clean_read(p->vfs, p->dir, &p->clean);
		int same = rc == 0 && before.state == p->clean.state && before.gen == p->clean.gen;
		ks__clean_free(&before);
		if (rc || same || attempt == 3)
			break;
		ks__seglist_free(out);
	}
	if (rc) {
		ks__seglist_free(out);
		return rc;
	}
	if (out->n > 1)
		qsort(out->v, out->n, sizeof(out->v[0]), cmp_seg);
	size_t k = 0;
	for (size_t i = 0; i < out->n; i++) {
		kseg *s = out->v[i];
		if (k && out->v[k - 1]->base == s->base && out->v[k - 1]->epoch == s->epoch &&
		    out->v[k - 1]->gen == s->gen) {
			if (s->quarantined) {
				ks__seg_unref(s);
				continue;
			}
			ks__seg_unref(out->v[k - 1]);
			k--;
		}
		out->v[k++] = s;
	}
	out->n = k;
	if ((rc = apply_clean(&p->clean, out)))
		ks__seglist_free(out);
	return rc;
}

int ks__p_clean_garbage(const ks_partition *p, int32_t epoch, int64_t base, int64_t gen)
{
	const kclean *c = &p->clean;
	if (gen <= 0 || c->state < 0)
		return 0;
	for (size_t i = 0; i < p->nsegs; i++)
		if (p->segs[i]->base == base && p->segs[i]->epoch == epoch && p->segs[i]->gen == gen)
			return 0;
	if (c->state == 1 && gen == c->gen && clean_entry(c, epoch, base) >= 0)
		return 0; /* named by the record (in quarantine/, or not listed yet) */
	if (p->cleaning && gen > (c->state == 1 ? c->gen : 0))
		return 0; /* our clean in progress is writing it */
	return 1;
}

/* Splits `all` (sorted) into live segments and zombies. */
static int split_live(seglist *all, seglist *live, seglist *zombies)
{
	int32_t maxe = -1;
	int rc = 0;
	for (size_t i = 0; i < all->n && !rc; i++) {
		kseg *s = all->v[i];
		if (s->epoch < maxe) {
			rc = ks__seglist_push(zombies, s);
		} else {
			maxe = s->epoch;
			rc = ks__seglist_push(live, s);
		}
		if (rc == 0)
			all->v[i] = NULL;
	}
	for (size_t i = 0; i < all->n; i++)
		ks__seg_unref(all->v[i]);
	free(all->v);
	memset(all, 0, sizeof(*all));
	return rc;
}

/* Read plans may hold a segment after the partition let go of it; they only
 * need the log, so the slots' extra descriptors close now (a flusher still
 * syncing through them closes them when it is done). */
void ks__seg_detach(kseg *s)
{
	KAAS_ASSERT(!s->detached && s->flush_pins >= 0);
	s->detached = 1;
	if (!s->flush_pins) {
		ks__seg_close_sync(s);
	}
	ks__seg_unref(s);
}

void ks__p_drop_segs(ks_partition *p)
{
	for (size_t i = 0; i < p->nsegs; i++)
		ks__seg_detach(p->segs[i]);
	free(p->segs);
	p->segs = NULL;
	p->nsegs = p->capsegs = 0;
}

static void adopt_list(ks_partition *p, seglist *l)
{
	ks__p_drop_segs(p);
	p->segs = l->v;
	p->nsegs = l->n;
	p->capsegs = l->cap;
	memset(l, 0, sizeof(*l));
}

/* The live segments of `all` (sorted) become p's list; the zombies go.
 * Takes over `all` whatever the outcome. */
int ks__p_adopt_live(ks_partition *p, seglist *all)
{
	seglist live = {0}, zombies = {0};
	int rc = split_live(all, &live, &zombies);
	ks__seglist_free(&zombies);
	if (rc) {
		ks__seglist_free(&live);
		return rc;
	}
	adopt_list(p, &live);
	return 0;
}

size_t ks__p_seg_find(const ks_partition *p, int64_t off)
{
	size_t lo = 0, hi = p->nsegs; /* first with base > off */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->segs[mid]->base <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? lo - 1 : 0;
}

/* The follower's view: names, sizes, manifest; no descriptors. */
int ks__p_load_view(ks_partition *p)
{
	seglist all = {0};
	int32_t maxe;
	int rc = ks__manifest_read(p->vfs, p->dir, &p->man);
	if (rc)
		return rc;
	if ((rc = ks__p_list_segments(p, 1, &all, &maxe)))
		return rc;
	if ((rc = ks__p_adopt_live(p, &all)))
		return rc;
	p->log_start = p->man.valid ? p->man.log_start : 0;
	if (p->nsegs && p->segs[0]->base > p->log_start)
		p->log_start = p->segs[0]->base;
	p->hw = p->man.valid ? p->man.hw : p->log_start;
	if (p->hw < p->log_start)
		p->hw = p->log_start;
	p->leo = p->hw;
	return 0;
}

int ks__p_fence_check(ks_partition *p)
{
	KS__P_LOCKED(p);
	seglist all = {0};
	int32_t maxe;
	int rc = ks__p_list_segments(p, 0, &all, &maxe);
	ks__seglist_free(&all);
	if (rc)
		return rc;
	if (maxe > p->epoch) {
		KLOG_WARN("storage", "%s: a segment of epoch %d exists, we lead at %d: fenced", p->dir,
			  (int)maxe, (int)p->epoch);
		ks__p_fence(p);
		return -ESTALE;
	}
	return 0;
}
