/*
 * cleanlog.h — what the compaction tests share: keyed appends, the log
 * read back as (offset, key, value) records (compressed batches
 * inflated), and the "latest value per key" view a consumer reading from
 * the start ends up with.
 */
#ifndef KAAS_STORAGE_TEST_CLEANLOG_H
#define KAAS_STORAGE_TEST_CLEANLOG_H

#include "kaas/storage/codec.h"
#include "kaas/storage/test/harness.h"

#define CL_KEYS 512

typedef struct cl_rec {
	int64_t off;
	int key;    /* "k<n>" -> n; -1 keyless */
	int val;    /* "v<n>" -> n; -1 tombstone */
} cl_rec;

typedef struct cl_log {
	cl_rec *r;
	size_t n, cap;
	size_t batches, empty_batches;
	int64_t end;  /* offset after the last batch */
} cl_log;

static inline int64_t cl_varint(const uint8_t **p)
{
	uint64_t x = 0;
	for (int s = 0; s < 64; s += 7) {
		uint8_t b = *(*p)++;
		x |= (uint64_t)(b & 0x7f) << s;
		if (!(b & 0x80))
			break;
	}
	return (int64_t)((x >> 1) ^ (~(x & 1) + 1));
}

static inline void cl_push(cl_log *l, cl_rec r)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 256;
		l->r = realloc(l->r, l->cap * sizeof(cl_rec));
	}
	l->r[l->n++] = r;
}

/* Decodes the batches of buf (whole ones) into l; checks CRCs, that batch
 * offsets only grow, and that record offsets increase. */
static inline void cl_decode(const uint8_t *buf, size_t len, int64_t first, cl_log *l)
{
	size_t pos = 0;
	int64_t next = first, last_rec = -1;
	while (len - pos >= KB_HDR) {
		kb_hdr h;
		ks__kb_decode(buf + pos, &h);
		if (kb_size(&h) > len - pos)
			break;
		ck_assert_uint_eq(ks__kb_crc(buf + pos, kb_size(&h)), h.crc);
		/* A fetch into a gap starts at the next batch with records. */
		if (next >= 0)
			ck_assert_int_ge(h.base_offset, next);
		next = kb_last_offset(&h) + 1;
		l->batches++;
		if (h.count == 0)
			l->empty_batches++;
		const uint8_t *rp = buf + pos + KB_HDR;
		uint8_t *owned = NULL;
		int codec = h.attrs & 7;
		if (codec && h.count) {
			ks_inflate *z;
			ck_assert_int_eq(ks_inflate_open(&z, codec, rp, kb_size(&h) - KB_HDR, 1u << 28, 1u << 28), 0);
			size_t n = 0, cap = 0;
			const uint8_t *pc;
			size_t pn;
			int rc;
			while ((rc = ks_inflate_next(z, &pc, &pn)) == 1) {
				kbuild__grow(&owned, &cap, n + pn);
				memcpy(owned + n, pc, pn);
				n += pn;
			}
			ck_assert_int_eq(rc, 0);
			ks_inflate_free(z);
			rp = owned;
		}
		for (int32_t i = 0; i < h.count; i++) {
			int64_t rl = cl_varint(&rp);
			const uint8_t *re = rp + rl;
			rp++; /* attributes */
			cl_varint(&rp);
			int64_t od = cl_varint(&rp);
			int64_t kl = cl_varint(&rp);
			cl_rec r = {h.base_offset + od, -1, -1};
			ck_assert_int_le(od, h.last_delta);
			if (kl > 0) {
				char k[32];
				memcpy(k, rp, (size_t)(kl < 31 ? kl : 31));
				k[kl < 31 ? kl : 31] = 0;
				r.key = atoi(k + 1);
				rp += kl;
			}
			int64_t vl = cl_varint(&rp);
			if (vl >= 0) {
				char v[32];
				size_t c = (size_t)(vl < 31 ? vl : 31);
				memcpy(v, rp, c);
				v[c] = 0;
				r.val = atoi(v + 1);
			}
			ck_assert_int_gt(r.off, last_rec);
			last_rec = r.off;
			cl_push(l, r);
			rp = re;
		}
		free(owned);
		pos += kb_size(&h);
	}
	l->end = next;
}

static inline void cl_read(ks_partition *p, cl_log *l)
{
	memset(l, 0, sizeof(*l));
	uint8_t *buf;
	int64_t from = ks_partition_log_start(p);
	size_t len = h_read_all(p, from, 4096, &buf);
	/* The first batch may start before the log start. */
	int64_t first = -1;
	cl_decode(buf, len, first, l);
	free(buf);
}

static inline void cl_free(cl_log *l)
{
	free(l->r);
	memset(l, 0, sizeof(*l));
}

/* The view a consumer reading from the start ends with: latest[k] = the
 * value of k's last record, -1 none or deleted. */
static inline void cl_latest(const cl_log *l, int latest[CL_KEYS])
{
	for (int k = 0; k < CL_KEYS; k++)
		latest[k] = -1;
	for (size_t i = 0; i < l->n; i++)
		if (l->r[i].key >= 0 && l->r[i].key < CL_KEYS)
			latest[l->r[i].key] = l->r[i].val;
}

/* One batch of n records, key k+i -> value v+i (tombstones when v < 0). */
static inline int64_t cl_put(ks_partition *p, int64_t pid, int32_t seq, int k, int v, int n, int64_t ts,
			     int codec)
{
	kbuild b = KBUILD_INIT;
	kbuild_begin(&b, pid, pid >= 0 ? 0 : -1, pid >= 0 ? seq : -1, ts);
	for (int i = 0; i < n; i++) {
		char ks[16], vs[64];
		int kl = snprintf(ks, sizeof(ks), "k%d", k + i);
		int vl = v < 0 ? -1 : snprintf(vs, sizeof(vs), "v%d-padding-padding", v + i);
		kbuild_record(&b, ks, kl, vs, vl, ts);
	}
	kbuild_end(&b, codec);
	ks_append_result res;
	ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), 0);
	ck_assert_msg(res.error == 0, "append: %s", kw_kerr_name(res.error));
	kbuild_free(&b);
	return res.base_offset;
}

#endif
