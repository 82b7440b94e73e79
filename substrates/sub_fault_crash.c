/*
 * sub_fault_crash.c — the fault backend's crash model.  Writes reach the inner
 * backend at once, but every write and ftruncate not yet covered by a
 * successful fsync keeps an undo record on its inode (fnode); a crash
 * decides per change, in the order the changes were made and from the seed,
 * whether it reached the disk, did not, or reached it up to a 512-byte
 * boundary, and puts the files back accordingly.
 */
#include "substrates/sub_fault_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/grow.h"

/* ---- undo records --------------------------------------------------------- */

void sub__fault_undo_free(fault_vfs *fv, undo_rec *r)
{
	if (!r)
		return;
	mem_release(fv, r->charged);
	free(r->old);
	free(r);
}

/* Prepares the record of a change to [off, off+len) of a file currently
 * old_size long, reading the bytes it will overwrite. */
int sub__fault_undo_prepare(fault_vfs *fv, sub_file *in, int can_read, uint64_t off, uint64_t len,
			uint64_t old_size, undo_rec **out)
{
	*out = NULL;
	uint64_t old_len = off < old_size ? old_size - off : 0;
	if (old_len > len)
		old_len = len;
	if (old_len && !can_read)
		return -EACCES; /* cannot save what the write destroys */
	if (old_len > SIZE_MAX / 2)
		return -ENOMEM;
	int rc = mem_charge(fv, sizeof(undo_rec) + old_len);
	if (rc)
		return rc;
	undo_rec *r = calloc(1, sizeof(*r));
	if (!r || (old_len && !(r->old = malloc((size_t)old_len)))) {
		free(r);
		mem_release(fv, sizeof(undo_rec) + old_len);
		return -ENOMEM;
	}
	r->off = off;
	r->len = len;
	r->old_size = old_size;
	r->old_len = (size_t)old_len;
	r->charged = sizeof(undo_rec) + (size_t)old_len;
	if (old_len) {
		ssize_t got = inner_read(in, r->old, r->old_len, off);
		if (got < 0) {
			sub__fault_undo_free(fv, r);
			return (int)got;
		}
		/* Shrunk by someone else since we asked for the size. */
		memset(r->old + got, 0, r->old_len - (size_t)got);
	}
	*out = r;
	return 0;
}

void sub__fault_undo_push(fault_vfs *fv, fnode *nd, undo_rec *r)
{
	r->seq = ++fv->seq;
	if (nd->undo_tail)
		nd->undo_tail->next = r;
	else
		nd->undo = r;
	nd->undo_tail = r;
}

/* Everything this node had pending is durable or moot now. */
void sub__fault_undo_clear(fault_vfs *fv, fnode *nd)
{
	undo_rec *r = nd->undo;
	while (r) {
		undo_rec *next = r->next;
		sub__fault_undo_free(fv, r);
		r = next;
	}
	nd->undo = nd->undo_tail = NULL;
	if (nd->keep) {
		sub_close(nd->keep);
		nd->keep = NULL;
	}
}

/* ---- nodes ---------------------------------------------------------------- */

fnode *sub__fault_node_find(fault_vfs *fv, uint64_t dev, uint64_t ino)
{
	for (fnode *nd = fv->nodes; nd; nd = nd->next)
		if (nd->dev == dev && nd->ino == ino)
			return nd;
	return NULL;
}

void sub__fault_node_unlist(fault_vfs *fv, fnode *nd)
{
	for (fnode **pp = &fv->nodes; *pp; pp = &(*pp)->next) {
		if (*pp == nd) {
			*pp = nd->next;
			nd->next = NULL;
			return;
		}
	}
}

/* Frees a node nobody needs: no open file, nothing pending. */
void sub__fault_node_maybe_free(fault_vfs *fv, fnode *nd)
{
	if (nd->refs > 0 || nd->undo)
		return;
	sub__fault_held_clear(fv, nd);
	if (!nd->dead)
		sub__fault_node_unlist(fv, nd);
	if (nd->keep)
		sub_close(nd->keep);
	free(nd->hidden);
	free(nd);
}

/* The inode lost its last name through this vfs: its pending changes can no
 * longer matter, and its number may be reused by the next file. */
void sub__fault_node_kill(fault_vfs *fv, uint64_t dev, uint64_t ino)
{
	fnode *nd = sub__fault_node_find(fv, dev, ino);
	if (!nd)
		return;
	sub__fault_undo_clear(fv, nd);
	sub__fault_node_unlist(fv, nd);
	nd->dead = 1;
	sub__fault_node_maybe_free(fv, nd);
}

/* A synchronous truncation to zero (open with O_TRUNC, rename=copy's target)
 * made everything before it irrelevant. */
void sub__fault_node_truncated(fault_vfs *fv, fnode *nd)
{
	sub__fault_undo_clear(fv, nd);
	sub__fault_held_clear(fv, nd);
}

static int write_zeros(sub_file *in, uint64_t off, uint64_t len)
{
	static const unsigned char zeros[FAULT_CHUNK];
	while (len > 0) {
		size_t n = len < sizeof(zeros) ? (size_t)len : sizeof(zeros);
		int rc = sub_pwrite_full(in, zeros, n, off);
		if (rc)
			return rc;
		off += n;
		len -= n;
	}
	return 0;
}

/* ---- the crash ------------------------------------------------------------ */

typedef struct span {
	uint64_t a, b;
} span;

typedef struct span_set {
	span *v;
	size_t n, cap;
} span_set;

/* Adds [a, b) keeping the set sorted and merged. */
static int span_add(span_set *s, uint64_t a, uint64_t b)
{
	if (a >= b)
		return 0;
	size_t i = 0;
	while (i < s->n && s->v[i].b < a)
		i++;
	size_t j = i;
	while (j < s->n && s->v[j].a <= b) {
		if (s->v[j].a < a)
			a = s->v[j].a;
		if (s->v[j].b > b)
			b = s->v[j].b;
		j++;
	}
	if (j == i) {
		if (KAAS_GROW(s->v, s->n, s->cap, 16))
			return -ENOMEM;
		memmove(s->v + i + 1, s->v + i, (s->n - i) * sizeof(*s->v));
		s->n++;
	} else if (j > i + 1) {
		memmove(s->v + i + 1, s->v + j, (s->n - j) * sizeof(*s->v));
		s->n -= j - i - 1;
	}
	s->v[i].a = a;
	s->v[i].b = b;
	return 0;
}

/* Puts bytes [a, b) of the file back as they were before record r. */
static int revert_range(sub_file *in, const undo_rec *r, uint64_t a, uint64_t b)
{
	uint64_t old_end = r->off + r->old_len;
	int rc = 0;
	if (a < old_end) {
		uint64_t z = b < old_end ? b : old_end;
		rc = sub_pwrite_full(in, r->old + (a - r->off), (size_t)(z - a), a);
		a = z;
	}
	if (rc == 0 && a < b)
		rc = write_zeros(in, a, b - a);
	return rc;
}

/* Reverts [a, b) of record r except the bytes already settled by a later
 * change that reached the disk; nothing at or past `limit` matters. */
static int revert_unsettled(sub_file *in, const undo_rec *r, const span_set *settled,
			    uint64_t a, uint64_t b, uint64_t limit)
{
	if (b > limit)
		b = limit;
	for (size_t i = 0; i < settled->n && a < b; i++) {
		const span *s = &settled->v[i];
		if (s->b <= a)
			continue;
		if (s->a >= b)
			break;
		if (s->a > a) {
			int rc = revert_range(in, r, a, s->a);
			if (rc)
				return rc;
		}
		a = s->b;
	}
	return a < b ? revert_range(in, r, a, b) : 0;
}

/* Applies the crash outcome to one file.  Walking the changes newest first, a
 * byte keeps its current value once a change that reached the disk covers it
 * (settled); otherwise each change that did not reach the disk puts back the
 * value it overwrote.  The result is, byte by byte, the value of the newest
 * change that reached the disk, or the durable value. */
static int crash_node(fnode *nd, undo_rec **recs, size_t n)
{
	sub_file *in = nd->keep;
	for (fault_file *f = nd->files; !in && f; f = f->node_next)
		if (f->can_write)
			in = f->inner;
	if (!in)
		return -EBADF; /* cannot happen: a change implies a writable handle */

	uint64_t final = recs[0]->old_size;
	for (size_t i = n; i-- > 0;) {
		const undo_rec *r = recs[i];
		if (r->out == OUT_KEEP) {
			final = r->new_size;
			break;
		}
		if (r->out == OUT_TORN) {
			final = r->old_size > r->cut ? r->old_size : r->cut;
			break;
		}
	}

	span_set settled = {0};
	int rc = 0;
	for (size_t i = n; i-- > 0 && rc == 0;) {
		const undo_rec *r = recs[i];
		/* A truncate decides every byte from its lower size on: the ones
		 * it cut and any that an undone earlier change would bring back. */
		uint64_t a = r->off, b = r->is_trunc ? UINT64_MAX : r->off + r->len;
		switch (r->out) {
		case OUT_KEEP:
			rc = span_add(&settled, a, b);
			break;
		case OUT_DROP:
			rc = revert_unsettled(in, r, &settled, a, b, final);
			break;
		case OUT_TORN:
			rc = revert_unsettled(in, r, &settled, r->cut, b, final);
			if (rc == 0)
				rc = span_add(&settled, a, r->cut);
			break;
		}
	}
	free(settled.v);
	if (rc == 0)
		rc = sub_ftruncate(in, final);
	return rc;
}

static int cmp_rec_seq(const void *a, const void *b)
{
	const undo_rec *x = *(undo_rec *const *)a, *y = *(undo_rec *const *)b;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Decides, in the order the changes were made, what became of each. */
static void crash_decide(fault_vfs *fv, undo_rec *r)
{
	if (fv->crash_mode == CRASH_DROP) {
		r->out = OUT_DROP;
		return;
	}
	if (fv->crash_mode == CRASH_KEEP) {
		r->out = OUT_KEEP;
		return;
	}
	/* Sector boundaries strictly inside the write: where it can tear. */
	uint64_t first = (r->off / FAULT_SECTOR + 1) * FAULT_SECTOR;
	uint64_t last = r->len ? ((r->off + r->len - 1) / FAULT_SECTOR) * FAULT_SECTOR : 0;
	int tearable = !r->is_trunc && r->len > 0 && first <= last;
	uint64_t x = rng_next(fv) % 3;
	if (x == 2 && !tearable)
		x = rng_next(fv) % 2;
	r->out = x == 0 ? OUT_KEEP : x == 1 ? OUT_DROP : OUT_TORN;
	if (r->out == OUT_TORN)
		r->cut = first + FAULT_SECTOR * (rng_next(fv) % ((last - first) / FAULT_SECTOR + 1));
}

static void report_decision(fault_vfs *fv, const undo_rec *r)
{
	if (!fv->hook)
		return;
	char what[48];
	if (r->out == OUT_TORN)
		snprintf(what, sizeof(what), "torn:%" PRIu64, r->cut);
	else
		snprintf(what, sizeof(what), "%s", r->out == OUT_KEEP ? "keep" : "drop");
	fire_hook(fv, "crash-change", what);
}

int sub__fault_crash_locked(fault_vfs *fv)
{
	if (fv->crashed)
		return 0;
	fv->crashed = 1;
	int rc = 0;

	size_t total = 0;
	for (fnode *nd = fv->nodes; nd; nd = nd->next) {
		sub__fault_held_clear(fv, nd);
		for (undo_rec *r = nd->undo; r; r = r->next)
			total++;
	}
	undo_rec **all = total ? calloc(total, sizeof(*all)) : NULL;
	if (total && !all) {
		rc = -ENOMEM; /* cannot decide: treat every change as kept */
	} else if (total) {
		size_t k = 0;
		for (fnode *nd = fv->nodes; nd; nd = nd->next)
			for (undo_rec *r = nd->undo; r; r = r->next)
				all[k++] = r;
		qsort(all, total, sizeof(*all), cmp_rec_seq);
		for (size_t i = 0; i < total; i++) {
			crash_decide(fv, all[i]);
			report_decision(fv, all[i]);
		}
		/* Per node, its records in order (they are already in seq order). */
		for (fnode *nd = fv->nodes; nd; nd = nd->next) {
			size_t n = 0;
			for (undo_rec *r = nd->undo; r; r = r->next)
				all[n++] = r;
			if (n) {
				int nrc = crash_node(nd, all, n);
				if (nrc && !rc)
					rc = nrc;
			}
		}
	}
	free(all);

	fnode *nd = fv->nodes;
	while (nd) {
		fnode *next = nd->next;
		sub__fault_undo_clear(fv, nd);
		sub__fault_node_maybe_free(fv, nd);
		nd = next;
	}
	sub__fault_cto_drop_all(fv);
	return rc;
}
