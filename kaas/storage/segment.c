/*
 * segment.c — one segment: its epoch-stamped name, its in-memory sparse
 * indexes, reference counting (read plans keep a segment's file open after
 * retention unlinked it), and the walker that steps from batch to batch.
 */
#include "kaas/storage/storage_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/crc32c.h"
#include "util/grow.h"

const char *const ks__seg_suffix[SEG_NKINDS] = {".log", ".index", ".timeindex", ".txnindex"};

static int digits(const char *s, int n, uint64_t *v)
{
	uint64_t x = 0;
	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' || x > (UINT64_MAX - 9) / 10)
			return -1;
		x = x * 10 + (uint64_t)(s[i] - '0');
	}
	*v = x;
	return 0;
}

int ks__seg_parse_name(const char *name, int32_t *epoch, int64_t *base)
{
	uint64_t e, b;
	if (strlen(name) < SEG_STEM_LEN || name[10] != '-')
		return -1;
	if (digits(name, 10, &e) || digits(name + 11, 20, &b))
		return -1;
	if (e > INT32_MAX || b > (uint64_t)KB_OFFSET_MAX)
		return -1; /* not a name the engine writes: left alone */
	for (int k = 0; k < SEG_NKINDS; k++) {
		if (strcmp(name + SEG_STEM_LEN, ks__seg_suffix[k]) == 0) {
			*epoch = (int32_t)e;
			*base = (int64_t)b;
			return k;
		}
	}
	return -1;
}

int ks__seg_parse_name_g(const char *name, int32_t *epoch, int64_t *base, int64_t *gen)
{
	*gen = 0;
	int k = ks__seg_parse_name(name, epoch, base);
	if (k >= 0)
		return k;
	/* <stem>.c<gen:20><suffix> */
	uint64_t e, b, g;
	if (strlen(name) < SEG_STEM_LEN + 22 || name[10] != '-' || name[SEG_STEM_LEN] != '.' ||
	    name[SEG_STEM_LEN + 1] != 'c')
		return -1;
	if (digits(name, 10, &e) || digits(name + 11, 20, &b) || digits(name + SEG_STEM_LEN + 2, 20, &g))
		return -1;
	if (e > INT32_MAX || b > (uint64_t)KB_OFFSET_MAX || g == 0 || g > (uint64_t)INT64_MAX)
		return -1;
	for (int k2 = 0; k2 < SEG_NKINDS; k2++) {
		if (strcmp(name + SEG_STEM_LEN + 22, ks__seg_suffix[k2]) == 0) {
			*epoch = (int32_t)e;
			*base = (int64_t)b;
			*gen = (int64_t)g;
			return k2;
		}
	}
	return -1;
}

int ks__seg_path(char *dst, size_t len, const char *dir, int32_t epoch, int64_t base, int kind)
{
	return ks__seg_path_g(dst, len, dir, epoch, base, 0, kind);
}

int ks__seg_path_g(char *dst, size_t len, const char *dir, int32_t epoch, int64_t base, int64_t gen,
		   int kind)
{
	char leaf[80];
	if (gen > 0)
		snprintf(leaf, sizeof(leaf), "%010d-%020lld.c%020lld%s", (int)epoch, (long long)base,
			 (long long)gen, ks__seg_suffix[kind]);
	else
		snprintf(leaf, sizeof(leaf), "%010d-%020lld%s", (int)epoch, (long long)base,
			 ks__seg_suffix[kind]);
	return sub_join(dst, len, dir, leaf);
}

kseg *ks__seg_new(int32_t epoch, int64_t base)
{
	kseg *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->epoch = epoch;
	s->base = base;
	s->refs = 1;
	s->end_off = base;
	s->max_ts = -1;
	s->max_ts_off = base;
	return s;
}

void ks__seg_ref(kseg *s)
{
	/* Only a holder can make another: a segment at zero is being freed. */
	int n = __atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
	KAAS_ASSERT(n > 1);
	(void)n;
}

void ks__seg_close_sync(kseg *s)
{
	for (int k = 0; k < FLUSH_DEPTH_MAX; k++) {
		sub_close(s->sync[k]);
		s->sync[k] = NULL;
	}
}

void ks__seg_close_files(kseg *s)
{
	ks__seg_close_sync(s);
	sub_close(s->log);
	s->log = NULL;
}

void ks__seg_unref(kseg *s)
{
	if (!s)
		return;
	int n = __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL);
	KAAS_ASSERT(n >= 0);
	if (n != 0)
		return;
	/* The last reference: no flusher can still be using its files. */
	KAAS_ASSERT(s->flush_pins == 0);
	ks__seg_close_files(s);
	free(s->ix);
	free(s->tx);
	free(s);
}

int ks__seg_ix_push(kseg *s, uint32_t rel, uint32_t pos)
{
	if (KAAS_GROW(s->ix, s->nix, s->capix, 64))
		return -ENOMEM;
	s->ix[s->nix].rel = rel;
	s->ix[s->nix].pos = pos;
	s->nix++;
	return 0;
}

int ks__seg_tx_push(kseg *s, int64_t ts, uint32_t rel)
{
	if (KAAS_GROW(s->tx, s->ntx, s->captx, 64))
		return -ENOMEM;
	s->tx[s->ntx].ts = ts;
	s->tx[s->ntx].rel = rel;
	s->ntx++;
	return 0;
}

void ks__seg_ix_lookup(const kseg *s, int64_t off, uint64_t *pos, int64_t *entry_off)
{
	*pos = 0;
	*entry_off = s->base;
	if (off < s->base)
		return;
	uint64_t rel = (uint64_t)(off - s->base);
	uint32_t lo = 0, hi = s->nix; /* first entry with rel > target */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (s->ix[mid].rel <= rel)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo > 0) {
		*pos = s->ix[lo - 1].pos;
		*entry_off = s->base + s->ix[lo - 1].rel;
	}
}

uint32_t ks__seg_tx_lower(const kseg *s, int by_ts, int64_t key)
{
	uint32_t lo = 0, hi = s->ntx;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if ((by_ts ? s->tx[mid].ts : (int64_t)s->tx[mid].rel) < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* ---- the walker ------------------------------------------------------------- */

void ks__seg_iter_init(seg_iter *it, sub_file *f, uint64_t pos, uint64_t end, int crc, size_t bufsize)
{
	memset(it, 0, sizeof(*it));
	it->f = f;
	it->pos = pos;
	it->end = end;
	it->crc = crc;
	it->cap = bufsize;
}

void ks__seg_iter_free(seg_iter *it)
{
	free(it->buf);
	it->buf = NULL;
}

/* Makes [off, off+n) available in the buffer (n <= cap).  1 ok, 0 short, <0 err. */
static int fill(seg_iter *it, uint64_t off, size_t n)
{
	if (off >= it->boff && off + n <= it->boff + it->blen)
		return 1;
	if (!it->buf) {
		it->buf = malloc(it->cap);
		if (!it->buf)
			return -ENOMEM;
	}
	size_t want = it->cap;
	if (it->end - off < want)
		want = (size_t)(it->end - off);
	if (want < n)
		return 0;
	size_t got = 0;
	while (got < want) {
		ssize_t r = sub_pread(it->f, it->buf + got, want - got, off + got);
		if (r < 0)
			return (int)r;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	it->boff = off;
	it->blen = got;
	return got >= n ? 1 : 0;
}

int ks__seg_iter_next(seg_iter *it, kb_hdr *h, uint64_t *pos)
{
	it->crc_bad = 0;
	if (it->pos >= it->end) {
		it->why = "end of segment";
		return 0;
	}
	if (it->end - it->pos < KB_HDR) {
		it->why = "truncated batch header";
		return 0;
	}
	int rc = fill(it, it->pos, KB_HDR);
	if (rc <= 0) {
		it->why = rc < 0 ? "read error" : "truncated batch header";
		it->io_err = rc < 0 ? rc : 0;
		return rc;
	}
	ks__kb_decode(it->buf + (it->pos - it->boff), h);
	if (!ks__kb_header_sane(h)) {
		it->why = "malformed batch header";
		return 0;
	}
	uint64_t size = kb_size(h);
	if (size > it->end - it->pos) {
		it->why = "truncated batch";
		return 0;
	}
	if (it->crc) {
		uint32_t crc = 0;
		uint64_t off = it->pos + KB_OFF_ATTRS, stop = it->pos + size;
		while (off < stop) {
			size_t n = (size_t)(stop - off) < it->cap ? (size_t)(stop - off) : it->cap;
			rc = fill(it, off, n);
			if (rc <= 0) {
				it->why = rc < 0 ? "read error" : "truncated batch";
				it->io_err = rc < 0 ? rc : 0;
				return rc;
			}
			crc = ku_crc32c(crc, it->buf + (off - it->boff), n);
			off += n;
		}
		if (crc != h->crc) {
			it->why = "CRC-32C mismatch";
			it->crc_bad = 1;
			*pos = it->pos;
			return 0;
		}
	}
	*pos = it->pos;
	it->pos += size;
	return 1;
}

int ks__seg_read_batch(sub_file *f, uint64_t pos, uint32_t size, uint8_t **out)
{
	uint8_t *b = malloc(size);
	if (!b)
		return -ENOMEM;
	int rc = sub_pread_full(f, b, size, pos);
	if (rc) {
		free(b);
		return rc;
	}
	*out = b;
	return 0;
}
