/*
 * cleaner.c — log compaction (cleanup.policy=compact): keeps the latest
 * record per key of a partition's sealed, durable segments.
 *
 * A pass, on the leader, mostly without the partition lock:
 *   1. picks the cleanable range: sealed segments wholly below the high
 *      watermark, up to the first damaged one or the first holding a
 *      record younger than min.compaction.lag.ms; runs only when the dirty
 *      share of it reaches min.cleanable.dirty.ratio (or its oldest dirty
 *      batch passed max.compaction.lag.ms);
 *   2. maps key -> latest offset over the dirty part, as many batches as
 *      the key map holds (the rest waits for the next pass);
 *   3. rewrites every segment below the mapped end into new files
 *      "<epoch>-<base>.c<gen>.log" (temp, fsync, rename; the directory
 *      fsynced), keeping a record when no later one has its key, batches
 *      keeping their base offset, last offset delta and producer fields
 *      (Kafka's rule), offsets whose records all went covered by empty
 *      batches so the log's batches stay contiguous;
 *   4. under the lock, if it still leads at the same leadership and a
 *      fencing listing shows no newer epoch: writes clean.json naming the
 *      new segments (sub_write_atomic: the one atomic step), takes them
 *      into the live list and unlinks what they replaced.
 * docs/storage.md ("Compaction") has the rules and the review answers.
 * Length: the pass is one pipeline (map, rewrite, swap) sharing its state;
 * split, its parts would each need all of it.
 */
#include "kaas/storage/storage_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kaas/storage/codec.h"
#include "util/clock.h"
#include "util/log.h"

/* A compressed batch is inflated whole to be filtered: at most this much. */
#define CLEAN_INFLATE_MAX (64u << 20)
/* Bytes between index entries of a cleaned segment when the topic's
 * interval is smaller (cleaned segments are read from the start anyway). */
#define FILLER_SPAN_MAX ((int64_t)INT32_MAX)

typedef struct kslot {
	uint64_t h1, h2;
	int64_t off; /* < 0: empty */
} kslot;

struct ks_cleaner {
	kslot *slots;
	size_t nslots, used, maxfill;
	int64_t rate, tokens, last_ms;
	int64_t (*now_ms)(void *);
	void (*sleep_ms)(void *, int64_t);
	void *clock_arg;
	int (*guard)(void *);   /* may this broker still swap (its lease)? NULL: yes */
	void *guard_arg;
	int stop;
	ks_clean_stats st;
};

/* ---- the key map ---------------------------------------------------------------- */

static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static uint64_t fmix(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdULL;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ULL;
	k ^= k >> 33;
	return k;
}

/* 128 bits of key hash (two murmur3-style lanes): a collision would drop
 * a record, so the map keeps far more bits than it indexes by. */
static void key_hash(const uint8_t *k, size_t n, uint64_t *h1, uint64_t *h2)
{
	uint64_t a = 0x9368e53c2f6af274ULL ^ n, b = 0x586dcd208f7cd3fdULL ^ (n * 0x9e3779b97f4a7c15ULL);
	const uint64_t c1 = 0x87c37b91114253d5ULL, c2 = 0x4cf5ad432745937fULL;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t x;
		memcpy(&x, k + i, 8);
		a ^= rotl(x * c1, 31) * c2;
		a = rotl(a, 27) * 5 + 0x52dce729;
		b ^= rotl(x * c2, 33) * c1;
		b = rotl(b, 31) * 5 + 0x38495ab5;
	}
	uint64_t t = 0;
	for (size_t j = 0; i + j < n; j++)
		t |= (uint64_t)k[i + j] << (8 * j);
	a ^= rotl(t * c1, 31) * c2;
	b ^= rotl(t * c2, 33) * c1;
	a += b;
	b += a;
	*h1 = fmix(a);
	*h2 = fmix(b ^ 0x2545f4914f6cdd1dULL);
}

static void map_clear(ks_cleaner *c)
{
	for (size_t i = 0; i < c->nslots; i++)
		c->slots[i].off = -1;
	c->used = 0;
}

static kslot *map_slot(ks_cleaner *c, uint64_t h1, uint64_t h2)
{
	size_t i = (size_t)(h1 % c->nslots);
	for (;;) {
		kslot *s = &c->slots[i];
		if (s->off < 0 || (s->h1 == h1 && s->h2 == h2))
			return s;
		i = i + 1 == c->nslots ? 0 : i + 1;
	}
}

static void map_put(ks_cleaner *c, const uint8_t *k, size_t n, int64_t off)
{
	uint64_t h1, h2;
	key_hash(k, n, &h1, &h2);
	kslot *s = map_slot(c, h1, h2);
	if (s->off < 0) {
		s->h1 = h1;
		s->h2 = h2;
		c->used++;
	}
	if (off > s->off)
		s->off = off;
}

static int64_t map_get(ks_cleaner *c, const uint8_t *k, size_t n)
{
	uint64_t h1, h2;
	key_hash(k, n, &h1, &h2);
	return map_slot(c, h1, h2)->off;
}

int ks_cleaner_new(size_t dedupe_bytes, int64_t io_bytes_per_sec, ks_cleaner **out)
{
	size_t n = dedupe_bytes / sizeof(kslot);
	if (n < 18)
		return -EINVAL;
	ks_cleaner *c = calloc(1, sizeof(*c));
	if (!c || !(c->slots = malloc(n * sizeof(kslot)))) {
		free(c);
		return -ENOMEM;
	}
	c->nslots = n;
	c->maxfill = n / 10 * 9 + (n % 10) * 9 / 10; /* Kafka's load factor 0.9 */
	c->rate = io_bytes_per_sec > 0 ? io_bytes_per_sec : 0;
	map_clear(c);
	*out = c;
	return 0;
}

void ks_cleaner_free(ks_cleaner *c)
{
	if (!c)
		return;
	free(c->slots);
	free(c);
}

void ks_cleaner_stop(ks_cleaner *c) { __atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE); }

void ks_cleaner_set_clock(ks_cleaner *c, int64_t (*now_ms)(void *), void (*sleep_ms)(void *, int64_t),
			  void *arg)
{
	c->now_ms = now_ms;
	c->sleep_ms = sleep_ms;
	c->clock_arg = arg;
}

void ks_cleaner_stats(const ks_cleaner *c, ks_clean_stats *out) { *out = c->st; }

void ks_cleaner_set_guard(ks_cleaner *c, int (*ok)(void *), void *arg)
{
	c->guard = ok;
	c->guard_arg = arg;
}

static int64_t cl_now(ks_cleaner *c) { return c->now_ms ? c->now_ms(c->clock_arg) : ku_mono_ms(); }

static void cl_sleep(ks_cleaner *c, int64_t ms)
{
	c->st.slept_ms += (uint64_t)ms;
	if (c->sleep_ms) {
		c->sleep_ms(c->clock_arg, ms);
		return;
	}
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int stopped(ks_cleaner *c) { return __atomic_load_n(&c->stop, __ATOMIC_ACQUIRE); }

/* The I/O bucket: n bytes read or written.  At most one second banked;
 * a debt is slept off in steps of at most 100 ms (a stop is seen). */
static int throttle(ks_cleaner *c, uint64_t n)
{
	if (c->rate <= 0)
		return 0;
	for (;;) {
		int64_t now = cl_now(c);
		if (c->last_ms == 0)
			c->last_ms = now;
		if (now > c->last_ms) {
			int64_t dt = now - c->last_ms > 2000 ? 2000 : now - c->last_ms;
			c->tokens += c->rate * dt / 1000;
			if (c->tokens > c->rate)
				c->tokens = c->rate;
			c->last_ms = now;
		}
		if (c->tokens >= 0)
			break;
		if (stopped(c))
			return -ECANCELED;
		int64_t ms = (-c->tokens * 1000 + c->rate - 1) / c->rate;
		cl_sleep(c, ms > 100 ? 100 : (ms < 1 ? 1 : ms));
	}
	c->tokens -= (int64_t)n;
	return 0;
}

/* ---- records ---------------------------------------------------------------------- */

static int rd_varint(const uint8_t **p, const uint8_t *end, int64_t *v)
{
	uint64_t x = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (*p >= end)
			return -1;
		uint8_t b = *(*p)++;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = (int64_t)((x >> 1) ^ (~(x & 1) + 1));
			return 0;
		}
	}
	return -1;
}

/* One record of a records section. */
typedef struct krec {
	const uint8_t *raw; /* the whole record, its length varint included */
	size_t rawlen;
	int64_t off_delta;
	const uint8_t *key;
	int64_t klen;       /* -1: null key */
	int tombstone;      /* null value */
} krec;

static int rd_record(const uint8_t **p, const uint8_t *end, krec *r)
{
	const uint8_t *s = *p;
	int64_t len, ts, v;
	if (rd_varint(p, end, &len) || len < 0 || len > end - *p)
		return -1;
	const uint8_t *rend = *p + len;
	r->raw = s;
	r->rawlen = (size_t)(rend - s);
	if (*p >= rend)
		return -1;
	(*p)++; /* attributes */
	if (rd_varint(p, rend, &ts) || rd_varint(p, rend, &r->off_delta) || rd_varint(p, rend, &r->klen))
		return -1;
	if (r->off_delta < 0 || r->klen < -1 || r->klen > rend - *p)
		return -1;
	r->key = *p;
	if (r->klen > 0)
		*p += r->klen;
	if (rd_varint(p, rend, &v) || v < -1 || v > rend - *p)
		return -1;
	r->tombstone = v < 0;
	*p = rend;
	return 0;
}

/* The records section of a whole batch b: b itself past the header when
 * uncompressed, else inflated into *owned. */
static int batch_records(const uint8_t *b, size_t size, const kb_hdr *h, uint8_t **owned,
			 const uint8_t **rp, size_t *rlen)
{
	int codec = h->attrs & KB_ATTR_CODEC_MASK;
	*owned = NULL;
	if (codec == KB_CODEC_NONE) {
		*rp = b + KB_HDR;
		*rlen = size - KB_HDR;
		return 0;
	}
	ks_inflate *z;
	int rc = ks_inflate_open(&z, codec, b + KB_HDR, size - KB_HDR, CLEAN_INFLATE_MAX, CLEAN_INFLATE_MAX);
	if (rc)
		return rc;
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0;
	const uint8_t *piece;
	size_t n;
	while ((rc = ks_inflate_next(z, &piece, &n)) == 1) {
		if (len + n > cap) {
			size_t nc = cap ? cap * 2 : 64 * 1024;
			while (nc < len + n)
				nc *= 2;
			uint8_t *nb = realloc(buf, nc);
			if (!nb) {
				rc = -ENOMEM;
				break;
			}
			buf = nb;
			cap = nc;
		}
		memcpy(buf + len, piece, n);
		len += n;
	}
	ks_inflate_free(z);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	*owned = buf;
	*rp = buf;
	*rlen = len;
	return 0;
}

/* ---- the source: batches of the segments being cleaned ------------------------- */

typedef struct csrc {
	kseg *s;          /* referenced */
	int64_t limit;    /* next segment's base */
} csrc;

/* Calls fn for every whole batch of src (CRC-checked) from offset `from`.
 * fn returns 0 to go on, 1 to stop, <0 error. */
typedef int (*batch_fn)(void *arg, const uint8_t *b, const kb_hdr *h);

static int walk_batches(ks_cleaner *c, const csrc *src, int64_t from, batch_fn fn, void *arg)
{
	seg_iter it;
	kb_hdr h;
	uint64_t pos;
	int rc;
	ks__seg_iter_init(&it, src->s->log, 0, src->s->end_pos, 1, 256 * 1024);
	uint64_t next = 0;
	int cut = 0;
	while ((rc = ks__seg_iter_next(&it, &h, &pos)) == 1) {
		if (h.base_offset >= src->limit) {
			cut = 1;
			break;
		}
		next = pos + kb_size(&h);
		if (kb_last_offset(&h) < from)
			continue;
		if (stopped(c)) {
			rc = -ECANCELED;
			break;
		}
		if ((rc = throttle(c, kb_size(&h))))
			break;
		c->st.bytes_read += kb_size(&h);
		uint8_t *b;
		if ((rc = ks__seg_read_batch(src->s->log, pos, kb_size(&h), &b)))
			break;
		rc = fn(arg, b, &h);
		free(b);
		if (rc) {
			cut = 1;
			break;
		}
	}
	/* Every valid byte must be walked: a segment the walk cannot finish
	 * is damaged (the scrub or a read reports it) and is not cleaned. */
	if (rc == 0 && (it.crc_bad || (!cut && next < src->s->end_pos)))
		rc = -EBADMSG;
	ks__seg_iter_free(&it);
	return rc < 0 ? rc : 0;
}

/* ---- pass state ------------------------------------------------------------------- */

typedef struct cpass {
	ks_partition *p;
	ks_cleaner *c;
	int64_t now_ms;
	csrc *src;
	size_t nsrc;           /* segments of the cleanable range */
	int64_t range_end;     /* base of the first segment not cleanable */
	int64_t dirty;         /* first offset not yet de-duplicated */
	int64_t map_end;       /* offsets below it are in the map */
	int mapped_any;
	int full;              /* the map filled up at map_end */
	int64_t tomb_min;      /* the earliest a kept clean tombstone became clean (-1: none) */
	int unknown;           /* the clean.json write failed: the swap may be on the volume */
	kclean old;            /* clean.json at the start (copy of p->clean) */
	int64_t del_ret_ms;
	int32_t compression_type; /* the topic's, when the pass began (KS_COMPRESS_*) */
	int level[KB_CODEC_ZSTD + 1]; /* the topic's level per codec */
	int64_t *keep_empty;   /* last offsets of the producers' cached batches (sorted) */
	size_t nkeep;
	/* output of the group being written */
	sub_file *out;
	char tmp[SUB_PATH_MAX];
	uint64_t opos;
	int64_t onext;         /* next offset the output must cover */
	int32_t oepoch;
	int64_t obase;
	int64_t last_ts;
	uint8_t *ibuf;         /* index entries */
	size_t nib, capib;
	uint8_t *tbuf;
	size_t ntb, captb;
	uint64_t since_ix;
	int64_t max_ts;
	/* results */
	size_t nmade;
	kclean_ent *ents;
	uint64_t *sizes;       /* bytes of each cleaned segment (DescribeLogDirs before it is loaded) */
} cpass;

static int grow(uint8_t **b, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	size_t nc = *cap ? *cap * 2 : 4096;
	while (nc < need)
		nc *= 2;
	uint8_t *n = realloc(*b, nc);
	if (!n)
		return -ENOMEM;
	*b = n;
	*cap = nc;
	return 0;
}

/* Map phase: one batch of the dirty part. */
static int map_batch(void *arg, const uint8_t *b, const kb_hdr *h)
{
	cpass *ps = arg;
	ks_cleaner *c = ps->c;
	if (h->base_offset < ps->dirty)
		return 0;
	if (h->attrs & KB_ATTR_CONTROL || h->count == 0) {
		ps->map_end = kb_last_offset(h) + 1;
		return 0;
	}
	if (c->used + (size_t)h->count > c->maxfill) {
		if (!ps->mapped_any)
			return -ENOBUFS; /* not even one batch fits */
		ps->full = 1;
		return 1;            /* full: the rest waits for the next pass */
	}
	uint8_t *owned;
	const uint8_t *rp;
	size_t rlen;
	int rc = batch_records(b, kb_size(h), h, &owned, &rp, &rlen);
	if (rc)
		return rc;
	const uint8_t *end = rp + rlen;
	for (int32_t i = 0; i < h->count && rc == 0; i++) {
		krec r;
		if (rd_record(&rp, end, &r))
			rc = -EBADMSG;
		else if (r.klen >= 0)
			map_put(c, r.key, (size_t)r.klen, h->base_offset + r.off_delta);
	}
	free(owned);
	if (rc)
		return rc;
	ps->mapped_any = 1;
	ps->map_end = kb_last_offset(h) + 1;
	return 0;
}

/* When offset `off` first became clean (the tombstone clock); -1: not yet. */
static int64_t cleaned_at(const kclean *k, int64_t off)
{
	for (size_t i = 0; i < k->nhist; i++)
		if (off < k->hist[i].off)
			return k->hist[i].ms;
	return -1;
}

static int out_write(cpass *ps, const uint8_t *b, size_t n)
{
	int rc = throttle(ps->c, n);
	if (rc)
		return rc;
	if ((rc = sub_pwrite_full(ps->out, b, n, ps->opos)))
		return rc;
	ps->c->st.bytes_written += n;
	return 0;
}

/* Appends a whole batch to the output, with its index entries. */
static int emit(cpass *ps, uint8_t *b, size_t n)
{
	kb_hdr h;
	ks__kb_decode(b, &h);
	int rc;
	if (h.max_ts > ps->max_ts)
		ps->max_ts = h.max_ts;
	if (ps->opos > 0 && ps->since_ix >= (uint64_t)ps->p->cfg.index_interval_bytes) {
		uint32_t rel = (uint32_t)(h.base_offset - ps->obase);
		if ((rc = grow(&ps->ibuf, &ps->capib, ps->nib + IDX_ENTRY)) ||
		    (rc = grow(&ps->tbuf, &ps->captb, ps->ntb + TIDX_ENTRY)))
			return rc;
		kb_put32(ps->ibuf + ps->nib, rel);
		kb_put32(ps->ibuf + ps->nib + 4, (uint32_t)ps->opos);
		kb_put64(ps->tbuf + ps->ntb, (uint64_t)ps->max_ts);
		kb_put32(ps->tbuf + ps->ntb + 8, rel);
		ps->nib += IDX_ENTRY;
		ps->ntb += TIDX_ENTRY;
		ps->since_ix = 0;
	}
	if ((rc = out_write(ps, b, n)))
		return rc;
	ps->opos += n;
	ps->since_ix += n;
	ps->onext = kb_last_offset(&h) + 1;
	return 0;
}

/* Empty batches standing for offsets [ps->onext, to) whose records went:
 * the log's batches stay contiguous, so every walk, index and recovery
 * rule holds unchanged, and a consumer positioned in the gap is carried
 * past it by the batch's last offset (as by Kafka's own empty batches). */
static int fill_to(cpass *ps, int64_t to)
{
	while (ps->onext < to) {
		int64_t span = to - ps->onext;
		if (span > FILLER_SPAN_MAX)
			span = FILLER_SPAN_MAX;
		uint8_t b[KB_HDR];
		memset(b, 0, sizeof(b));
		kb_put64(b + KB_OFF_BASE_OFFSET, (uint64_t)ps->onext);
		kb_put32(b + KB_OFF_LENGTH, KB_HDR - KB_LOG_OVERHEAD);
		kb_put32(b + KB_OFF_LEADER_EPOCH, (uint32_t)ps->oepoch);
		b[KB_OFF_MAGIC] = 2;
		kb_put32(b + KB_OFF_LAST_DELTA, (uint32_t)(span - 1));
		/* No timestamp: ListOffsets and retention by time pass over it. */
		kb_put64(b + KB_OFF_BASE_TS, (uint64_t)-1);
		kb_put64(b + KB_OFF_MAX_TS, (uint64_t)-1);
		kb_put64(b + KB_OFF_PID, (uint64_t)-1);
		kb_put16(b + KB_OFF_PEPOCH, (uint16_t)-1);
		kb_put32(b + KB_OFF_BASE_SEQ, (uint32_t)-1);
		kb_put32(b + KB_OFF_COUNT, 0);
		kb_put32(b + KB_OFF_CRC, ks__kb_crc(b, KB_HDR));
		int rc = emit(ps, b, KB_HDR);
		if (rc)
			return rc;
	}
	return 0;
}

static int keep_empty(const cpass *ps, int64_t last_off)
{
	size_t lo = 0, hi = ps->nkeep;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ps->keep_empty[mid] == last_off)
			return 1;
		if (ps->keep_empty[mid] < last_off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

/* Rewrite phase: one batch of a segment being rewritten. */
static int clean_batch(void *arg, const uint8_t *b, const kb_hdr *h)
{
	cpass *ps = arg;
	ks_cleaner *c = ps->c;
	size_t size = kb_size(h);
	if (h->attrs & KB_ATTR_CONTROL) {
		/* Transaction markers: kept as they are (no transactions yet). */
		int rc = fill_to(ps, h->base_offset);
		uint8_t *copy = malloc(size);
		if (!copy)
			return -ENOMEM;
		memcpy(copy, b, size);
		if (rc == 0)
			rc = emit(ps, copy, size);
		free(copy);
		return rc;
	}
	uint8_t *owned;
	const uint8_t *rp;
	size_t rlen;
	int rc = h->count ? batch_records(b, size, h, &owned, &rp, &rlen) : 0;
	if (rc)
		return rc;
	if (!h->count) {
		owned = NULL;
		rp = NULL;
		rlen = 0;
	}
	const uint8_t *end = rp + rlen;
	uint8_t *nb = NULL;
	size_t nlen = KB_HDR, cap = 0;
	int32_t kept = 0;
	for (int32_t i = 0; i < h->count && rc == 0; i++) {
		krec r;
		if (rd_record(&rp, end, &r)) {
			rc = -EBADMSG;
			break;
		}
		int64_t off = h->base_offset + r.off_delta;
		int keep = r.klen >= 0; /* a keyless record has no place in a compacted log */
		if (keep && off < ps->map_end) {
			int64_t latest = map_get(c, r.key, (size_t)r.klen);
			keep = latest < 0 || off >= latest;
		}
		/* A tombstone goes once delete.retention.ms passed since its
		 * offset first became clean (then every older record of its key
		 * was already removed: a reader that saw one sees the tombstone
		 * if it reads on within delete.retention.ms). */
		int64_t horizon = keep && r.tombstone ? cleaned_at(&ps->old, off) : -1;
		if (keep && r.tombstone && off < ps->old.dirty && horizon >= 0 &&
		    ps->now_ms - horizon >= ps->del_ret_ms) {
			keep = 0;
			c->st.tombstones_removed++;
		}
		if (!keep) {
			c->st.records_removed++;
			continue;
		}
		if (r.tombstone && off < ps->map_end) {
			/* Clean from this pass on (or since `horizon`): a pass is due
			 * for it once delete.retention.ms passed, dirty data or not. */
			int64_t since = horizon >= 0 && off < ps->old.dirty ? horizon : ps->now_ms;
			if (ps->tomb_min < 0 || since < ps->tomb_min)
				ps->tomb_min = since;
		}
		c->st.records_kept++;
		kept++;
		if ((rc = grow(&nb, &cap, nlen + r.rawlen)))
			break;
		memcpy(nb + nlen, r.raw, r.rawlen);
		nlen += r.rawlen;
	}
	free(owned);
	if (rc) {
		free(nb);
		return rc;
	}
	if (h->max_ts >= 0)
		ps->last_ts = h->max_ts;
	if (kept == h->count && h->count > 0) {
		free(nb);
		/* Nothing removed: the batch as it is (compression and CRC kept). */
		uint8_t *copy = malloc(size);
		if (!copy)
			return -ENOMEM;
		memcpy(copy, b, size);
		rc = fill_to(ps, h->base_offset);
		if (rc == 0)
			rc = emit(ps, copy, size);
		free(copy);
		return rc;
	}
	if (kept == 0 && !(h->pid >= 0 && keep_empty(ps, kb_last_offset(h)))) {
		free(nb);
		return 0; /* the offsets are covered by an empty batch later */
	}
	/* Kafka's rewrite: base offset, last offset delta, timestamps and the
	 * producer fields as they were (the producer's sequence window and
	 * offsets survive), only the records kept, compressed again with the
	 * batch's codec (Kafka's cleaner) or the topic's compression.type when
	 * that is not producer (what an append would store today). */
	int codec = kept == 0 ? KB_CODEC_NONE /* Kafka's empty batches carry no codec */
		    : ps->compression_type == KS_COMPRESS_PRODUCER ? (h->attrs & KB_ATTR_CODEC_MASK)
								 : KS_COMPRESS_CODEC(ps->compression_type);
	uint8_t *sealed = NULL;
	size_t slen = 0;
	rc = ks__kb_seal(b, nb ? nb + KB_HDR : NULL, nlen - KB_HDR, kept, codec, ps->level[codec],
			 (size_t)CLEAN_INFLATE_MAX * 2, &sealed, &slen);
	free(nb);
	if (rc)
		return rc;
	if (codec != KB_CODEC_NONE)
		c->st.recompressed++;
	rc = fill_to(ps, h->base_offset);
	if (rc == 0)
		rc = emit(ps, sealed, slen);
	free(sealed);
	return rc;
}

/* ---- output files ------------------------------------------------------------------ */

static int out_open(cpass *ps, int32_t epoch, int64_t base, int64_t gen)
{
	char final[SUB_PATH_MAX];
	int rc = ks__seg_path_g(final, sizeof(final), ps->p->dir, epoch, base, gen, SEG_LOG);
	if (rc)
		return rc;
	const char *leaf = strrchr(final, '/') ? strrchr(final, '/') + 1 : final;
	char t[SUB_PATH_MAX - 8];
	snprintf(t, sizeof(t), ".%.200s.tmp.clean", leaf);
	if ((rc = sub_join(ps->tmp, sizeof(ps->tmp), ps->p->dir, t)))
		return rc;
	sub_unlink(ps->p->vfs, ps->tmp); /* a leftover of an interrupted pass */
	if ((rc = sub_open(ps->p->vfs, ps->tmp, O_RDWR | O_CREAT | O_EXCL, 0644, &ps->out)))
		return rc;
	ps->opos = 0;
	ps->onext = base;
	ps->oepoch = epoch;
	ps->obase = base;
	ps->nib = ps->ntb = 0;
	ps->since_ix = 0;
	ps->max_ts = -1;
	return 0;
}

/* Seals the group's output: fsync, rename to its name, index files. */
static int out_close(cpass *ps, int64_t gen)
{
	char final[SUB_PATH_MAX];
	int rc = sub_fsync(ps->out);
	int c2 = sub_close(ps->out);
	ps->out = NULL;
	if (rc == 0)
		rc = c2;
	if (rc == 0)
		rc = ks__seg_path_g(final, sizeof(final), ps->p->dir, ps->oepoch, ps->obase, gen, SEG_LOG);
	if (rc == 0)
		rc = sub_rename(ps->p->vfs, ps->tmp, final);
	if (rc) {
		sub_unlink(ps->p->vfs, ps->tmp);
		return rc;
	}
	ps->tmp[0] = '\0';
	/* The index files are hints checked on load: written whole. */
	for (int k = SEG_INDEX; k <= SEG_TIMEINDEX && rc == 0; k++) {
		uint8_t *buf = k == SEG_INDEX ? ps->ibuf : ps->tbuf;
		size_t len = k == SEG_INDEX ? ps->nib : ps->ntb;
		if (!len)
			continue;
		if ((rc = ks__seg_path_g(final, sizeof(final), ps->p->dir, ps->oepoch, ps->obase, gen, k)) == 0)
			rc = sub_write_atomic(ps->p->vfs, final, buf, len);
	}
	return rc;
}

static void unlink_made(cpass *ps, int64_t gen)
{
	if (ps->out) {
		sub_close(ps->out);
		ps->out = NULL;
	}
	if (ps->tmp[0])
		sub_unlink(ps->p->vfs, ps->tmp);
	for (size_t i = 0; i < ps->nmade; i++)
		ks__p_unlink_seg(ps->p, ps->ents[i].epoch, ps->ents[i].base, gen);
}

/* ---- the pass ------------------------------------------------------------------------ */

static uint64_t seg_bytes(const kseg *s) { return s->meta ? s->end_pos : s->disk_size; }

/* The producers' cached batches: an emptied batch that is one of them is
 * kept, empty, so that a rebuild of producer state from the log finds the
 * same window (Kafka keeps the last batch of each producer). */
static int collect_keep(cpass *ps)
{
	const kp_table *t = &ps->p->prod;
	size_t n = 0;
	for (size_t i = 0; i < t->nbuckets; i++)
		for (kp_entry *e = t->buckets[i]; e; e = e->next)
			n += e->n;
	if (!n)
		return 0;
	if (!(ps->keep_empty = malloc(n * sizeof(int64_t))))
		return -ENOMEM;
	for (size_t i = 0; i < t->nbuckets; i++)
		for (kp_entry *e = t->buckets[i]; e; e = e->next)
			for (int k = 0; k < e->n; k++)
				ps->keep_empty[ps->nkeep++] = e->b[k].last_off;
	for (size_t i = 1; i < ps->nkeep; i++) /* insertion sort: a handful per producer */
		for (size_t j = i; j > 0 && ps->keep_empty[j - 1] > ps->keep_empty[j]; j--) {
			int64_t x = ps->keep_empty[j];
			ps->keep_empty[j] = ps->keep_empty[j - 1];
			ps->keep_empty[j - 1] = x;
		}
	return 0;
}

/* The first batch timestamp of segment s (max.compaction.lag.ms), -1. */
static int64_t first_ts(kseg *s)
{
	uint8_t b[KB_HDR];
	if (!s->log || sub_pread_full(s->log, b, KB_HDR, 0))
		return -1;
	kb_hdr h;
	ks__kb_decode(b, &h);
	return ks__kb_header_sane(&h) ? h.base_ts : -1;
}

/* Under the lock: is p due, and which range.  0 with ps->nsrc > 0 when a
 * pass should run; 0 with nsrc 0 when not. */
static int plan(cpass *ps)
{
	ks_partition *p = ps->p;
	const ks_log_config *cfg = &p->cfg;
	int rc;
	size_t j = 0;
	for (; j + 1 < p->nsegs; j++) {
		kseg *s = p->segs[j];
		if (p->segs[j + 1]->base > p->hw || s->quarantined || s->active)
			break;
		if ((rc = ks__p_seg_load(p, j, INT64_MAX)) || (rc = ks__p_seg_open_log(p, s, 0)))
			return rc;
		if (s->dmg_hi > s->dmg_lo)
			break;
		if (cfg->min_compaction_lag_ms > 0 && s->max_ts >= 0 &&
		    ps->now_ms - s->max_ts < cfg->min_compaction_lag_ms)
			break;
	}
	if (j == 0)
		return 0;
	ps->range_end = p->segs[j]->base;
	int64_t dirty = p->clean.state == 1 ? p->clean.dirty : p->segs[0]->base;
	if (dirty < p->segs[0]->base)
		dirty = p->segs[0]->base;
	/* Tombstones in the clean part past delete.retention.ms make a pass
	 * due without dirty data (it rewrites the whole clean part). */
	int tomb_due = p->clean.state == 1 && p->clean.tomb_ms >= 0 && dirty <= ps->range_end &&
		       ps->now_ms - p->clean.tomb_ms >= cfg->delete_retention_ms;
	if (dirty >= ps->range_end && !tomb_due)
		return 0;
	uint64_t clean_b = 0, dirty_b = 0;
	size_t d = ks__p_seg_find(p, dirty);
	for (size_t i = 0; i < j; i++) {
		if (i < d)
			clean_b += seg_bytes(p->segs[i]);
		else
			dirty_b += seg_bytes(p->segs[i]);
	}
	double ratio = (double)dirty_b / (double)(clean_b + dirty_b ? clean_b + dirty_b : 1);
	int forced = 0;
	if (cfg->max_compaction_lag_ms > 0 && cfg->max_compaction_lag_ms < INT64_MAX) {
		int64_t ts = first_ts(p->segs[d]);
		forced = ts >= 0 && ps->now_ms - ts >= cfg->max_compaction_lag_ms;
	}
	if (ratio < cfg->min_cleanable_dirty_ratio && !forced && !tomb_due)
		return 0;
	ps->dirty = dirty;
	if (!(ps->src = calloc(j, sizeof(csrc))))
		return -ENOMEM;
	for (size_t i = 0; i < j; i++) {
		ks__seg_ref(p->segs[i]);
		ps->src[i].s = p->segs[i];
		ps->src[i].limit = p->segs[i + 1]->base;
	}
	ps->nsrc = j;
	if ((rc = collect_keep(ps)))
		return rc;
	ps->old = p->clean;
	ps->old.v = NULL;
	ps->old.n = 0;
	return 0;
}

/* Writes the rewritten groups (unlocked).  Groups of consecutive source
 * segments whose bytes together stay within segment.bytes. */
static int rewrite(cpass *ps, size_t nrw, int64_t gen)
{
	int rc = 0;
	if (!(ps->ents = calloc(nrw, sizeof(kclean_ent))) || !(ps->sizes = calloc(nrw, sizeof(uint64_t))))
		return -ENOMEM;
	size_t i = 0;
	while (i < nrw && rc == 0) {
		uint64_t bytes = seg_bytes(ps->src[i].s);
		size_t g = i + 1;
		while (g < nrw && bytes + seg_bytes(ps->src[g].s) <= (uint64_t)ps->p->cfg.segment_bytes &&
		       ps->src[g].limit - ps->src[i].s->base < INT32_MAX)
			bytes += seg_bytes(ps->src[g++].s);
		int32_t epoch = ps->src[g - 1].s->epoch;
		int64_t base = ps->src[i].s->base;
		if ((rc = out_open(ps, epoch, base, gen)))
			break;
		ps->last_ts = -1;
		for (size_t k = i; k < g && rc == 0; k++)
			rc = walk_batches(ps->c, &ps->src[k], INT64_MIN, clean_batch, ps);
		if (rc == 0)
			rc = fill_to(ps, ps->src[g - 1].limit);
		ps->sizes[ps->nmade] = ps->opos;
		if (rc == 0)
			rc = out_close(ps, gen);
		if (rc)
			break;
		ps->ents[ps->nmade].epoch = epoch;
		ps->ents[ps->nmade].base = base;
		ps->nmade++;
		i = g;
	}
	if (rc == 0)
		rc = sub_fsync_dir(ps->p->vfs, ps->p->dir);
	return rc;
}

/* The new record: this pass's segments, its dirty point, the tombstone
 * clock with this pass's end added (entries older than any tombstone can
 * still wait for merged into one). */
static int new_record(cpass *ps, kclean *k, int64_t gen, int64_t clean_end)
{
	memset(k, 0, sizeof(*k));
	k->state = 1;
	k->epoch = ps->p->epoch;
	k->gen = gen;
	k->clean_end = clean_end;
	k->dirty = ps->map_end;
	if (!(k->v = calloc(ps->nmade, sizeof(kclean_ent))))
		return -ENOMEM;
	memcpy(k->v, ps->ents, ps->nmade * sizeof(kclean_ent));
	k->n = ps->nmade;
	for (size_t i = 0; i < ps->old.nhist; i++)
		if (ps->old.hist[i].off < ps->map_end)
			k->hist[k->nhist++] = ps->old.hist[i];
	/* Merging two entries keeps the later time: tombstones wait longer,
	 * never less. */
	while (k->nhist >= CLEAN_HIST_MAX) {
		k->hist[1].off = k->hist[1].off > k->hist[0].off ? k->hist[1].off : k->hist[0].off;
		memmove(&k->hist[0], &k->hist[1], (k->nhist - 1) * sizeof(k->hist[0]));
		k->nhist--;
	}
	k->tomb_ms = ps->tomb_min;
	int64_t prev_off = k->nhist ? k->hist[k->nhist - 1].off : -1;
	int64_t prev_ms = k->nhist ? k->hist[k->nhist - 1].ms : 0;
	if (ps->map_end > prev_off) {
		k->hist[k->nhist].off = ps->map_end;
		k->hist[k->nhist].ms = ps->now_ms > prev_ms ? ps->now_ms : prev_ms;
		k->nhist++;
	}
	return 0;
}

/* Under the lock: the swap.  0 done; -EPERM/-ESTALE lost the leadership
 * (nothing swapped); -EAGAIN the list changed meanwhile (retention). */
static int swap(cpass *ps, uint64_t gen_lead, size_t nrw, int64_t gen)
{
	ks_partition *p = ps->p;
	if (p->state != KAAS_PART_LEADER || p->lead_gen != gen_lead)
		return -EPERM;
	if (p->nsegs <= nrw)
		return -EAGAIN;
	for (size_t i = 0; i < nrw; i++)
		if (p->segs[i] != ps->src[i].s)
			return -EAGAIN;
	int64_t clean_end = ps->src[nrw - 1].limit;
	kclean k;
	int rc = new_record(ps, &k, gen, clean_end);
	kseg **made = calloc(ps->nmade, sizeof(kseg *));
	for (size_t i = 0; made && i < ps->nmade; i++)
		if (!(made[i] = ks__seg_new(ps->ents[i].epoch, ps->ents[i].base)))
			rc = -ENOMEM;
	if (!made)
		rc = -ENOMEM;
	char *buf = NULL;
	size_t len = 0;
	char path[SUB_PATH_MAX];
	if (rc == 0)
		rc = ks__clean_encode(&k, &buf, &len);
	if (rc == 0)
		rc = sub_join(path, sizeof(path), p->dir, CLEAN_NAME);
	/* The broker's lease first (a paused broker whose lease ran out may
	 * not have heard yet that another took over), then the volume: fenced
	 * here, the newer leader's view stays as it was. */
	if (rc == 0 && ps->c->guard && !ps->c->guard(ps->c->guard_arg)) {
		ps->c->st.fenced++;
		rc = -EPERM;
	}
	if (rc == 0 && (rc = ks__p_fence_check(p)) == -ESTALE)
		ps->c->st.fenced++;
	if (rc == 0 && (rc = sub_write_atomic(p->vfs, path, buf, len))) {
		/* Whether the rename happened is unknown: the volume decides
		 * which view the next take-over sees; this leadership ends. */
		ps->unknown = 1;
		ks__p_poison(p, "clean.json write", rc);
	}
	free(buf);
	if (rc) {
		for (size_t i = 0; made && i < ps->nmade; i++)
			ks__seg_unref(made[i]);
		free(made);
		ks__clean_free(&k);
		return rc;
	}
	/* A take-over between the check and the rename may have listed the
	 * directory with the old clean.json: its view holds the plain
	 * segments this swap replaced.  Fenced now, they stay (the newer
	 * leader's listing and sweep decide about them, and never remove a
	 * file of its own view); this leadership ends.  The lease first: one
	 * that still holds after the rename returned means no successor's
	 * take-over has begun (a successor starts only after it ran out), so
	 * every listing of a successor comes after the swap; one that does
	 * not hold leaves the files to the successor even before its first
	 * segment shows on the volume. */
	int late = ps->c->guard && !ps->c->guard(ps->c->guard_arg) ? -ESTALE : 0;
	if (!late)
		late = ks__p_fence_check(p);
	if (late) {
		ps->c->st.fenced++;
		KLOG_WARN("storage", "%s: fenced right after the clean.json swap: the files it replaced are "
			  "left to the newer leader", p->dir);
		for (size_t i = 0; i < ps->nmade; i++)
			ks__seg_unref(made[i]);
		free(made);
		ks__clean_free(&k);
		if (late != -ESTALE)
			ks__p_poison(p, "fencing check after the clean.json swap", late);
		ps->unknown = 1; /* the swapped files are named by clean.json: not ours to remove */
		return -ESTALE;
	}
	/* The new view: the cleaned segments, then the rest as it was. */
	kseg **old = malloc(nrw * sizeof(kseg *));
	if (old)
		memcpy(old, p->segs, nrw * sizeof(kseg *));
	size_t rest = p->nsegs - nrw;
	kseg **segs = malloc((ps->nmade + rest + 1) * sizeof(kseg *));
	if (!segs || !old) {
		/* The swap is on the volume; memory follows at the next take-over. */
		free(segs);
		free(old);
		for (size_t i = 0; i < ps->nmade; i++)
			ks__seg_unref(made[i]);
		free(made);
		ks__clean_free(&p->clean);
		p->clean = k;
		ks__p_poison(p, "cleaner swap (out of memory)", -ENOMEM);
		return -ENOMEM;
	}
	for (size_t i = 0; i < ps->nmade; i++) {
		made[i]->gen = gen;
		made[i]->disk_size = ps->sizes[i];
		segs[i] = made[i];
	}
	memcpy(segs + ps->nmade, p->segs + nrw, rest * sizeof(kseg *));
	free(p->segs);
	p->segs = segs;
	p->nsegs = ps->nmade + rest;
	p->capsegs = ps->nmade + rest + 1;
	ks__clean_free(&p->clean);
	p->clean = k;
	free(made);
	/* What they replaced is garbage now, provably: clean.json names its
	 * replacement and is durable.  A crash before these unlinks leaves
	 * files the next take-over or housekeeping removes by the same rule. */
	for (size_t i = 0; i < nrw; i++) {
		kseg *s = old[i];
		if (ks__p_unlink_seg(p, s->epoch, s->base, s->gen) == 0)
			ps->c->st.unlinked++;
		ks__seg_detach(s);
	}
	free(old);
	if (p->scrub_base >= 0 && p->scrub_base < clean_end)
		p->scrub_base = -1;
	/* The high watermark's byte position named a replaced segment: then
	 * the high watermark is clean_end (the range ends at or below it), the
	 * start of the segment after the cleaned ones. */
	if (p->hw_seg < clean_end) {
		KAAS_ASSERT(p->hw == clean_end);
		p->hw_seg = clean_end;
		p->hw_pos = 0;
	}
	return 0;
}

int ks_partition_clean(ks_partition *p, ks_cleaner *c, int64_t now_ms)
{
	cpass ps;
	memset(&ps, 0, sizeof(ps));
	ps.p = p;
	ps.c = c;
	ps.now_ms = now_ms;
	ps.tomb_min = -1;
	ks__p_lock(p);
	int rc = 0;
	if (p->state != KAAS_PART_LEADER) {
		ks__p_unlock(p);
		return -EPERM;
	}
	if (p->cfg.cleanup_compact == KS_CLEANUP_DELETE || p->clean.state < 0) {
		ks__p_unlock(p);
		return 0;
	}
	if (p->cleaning) {
		ks__p_unlock(p);
		return -EBUSY;
	}
	if ((rc = plan(&ps)) || ps.nsrc == 0) {
		ks__p_unlock(p);
		goto out;
	}
	uint64_t gen_lead = p->lead_gen;
	int64_t gen = CLEAN_GEN(p->epoch, 1);
	if (p->clean.state == 1 && CLEAN_GEN_EPOCH(p->clean.gen) == p->epoch)
		gen = p->clean.gen + 1;
	ps.del_ret_ms = p->cfg.delete_retention_ms;
	ps.compression_type = p->cfg.compression_type;
	for (int k = KB_CODEC_NONE; k <= KB_CODEC_ZSTD; k++)
		ps.level[k] = ks__cfg_level(&p->cfg, k);
	p->cleaning = 1;
	ks__p_unlock(p);

	map_clear(c);
	ps.map_end = ps.dirty;
	size_t d = 0;
	while (d + 1 < ps.nsrc && ps.src[d].limit <= ps.dirty)
		d++;
	for (size_t i = d; i < ps.nsrc && rc == 0 && !ps.full; i++) {
		rc = walk_batches(c, &ps.src[i], ps.dirty, map_batch, &ps);
		if (rc == 0 && !ps.full)
			ps.map_end = ps.src[i].limit; /* the whole segment, empty batches included */
	}
	size_t nrw = 0;
	while (nrw < ps.nsrc && ps.src[nrw].s->base < ps.map_end)
		nrw++;
	if (rc == 0 && nrw)
		rc = rewrite(&ps, nrw, gen);

	ks__p_lock(p);
	p->cleaning = 0;
	if (rc == 0 && nrw)
		rc = swap(&ps, gen_lead, nrw, gen);
	if (rc == -EPERM || rc == -ESTALE)
		KLOG_INFO("storage", "%s: clean pass of generation %lld not swapped in: %s", p->dir, (long long)gen,
			  rc == -ESTALE ? "a newer epoch leads the partition"
			  : p->state != KAAS_PART_LEADER || p->lead_gen != gen_lead ? "the leadership ended"
										  : "the broker's lease is gone");
	if (rc && !ps.unknown)
		unlink_made(&ps, gen); /* nothing swapped: what the pass wrote goes (its names are ours) */
	if (rc == 0 && nrw) {
		c->st.passes++;
		KLOG_INFO("storage", "%s: cleaned [%lld, %lld) into %zu segment(s), generation %lld; "
			  "de-duplicated up to %lld", p->dir, (long long)ps.src[0].s->base,
			  (long long)ps.src[nrw - 1].limit, ps.nmade, (long long)gen, (long long)ps.map_end);
	}
	ks__p_unlock(p);
	if (rc == -ESTALE)
		rc = -EPERM;
	if (rc == 0 && nrw)
		rc = 1;
out:
	for (size_t i = 0; i < ps.nsrc; i++)
		ks__seg_unref(ps.src[i].s);
	free(ps.src);
	free(ps.keep_empty);
	free(ps.ents);
	free(ps.sizes);
	free(ps.ibuf);
	free(ps.tbuf);
	if (rc < 0 && rc != -EPERM && rc != -ECANCELED && rc != -EAGAIN)
		KLOG_WARN("storage", "%s: clean: %s (tried again later)", p->dir, sub_strerror(rc));
	return rc == -EAGAIN ? 0 : rc;
}

void ks_partition_clean_point(ks_partition *p, int64_t *dirty, int64_t *clean_end)
{
	ks__p_lock(p);
	int64_t start = p->nsegs ? p->segs[0]->base : p->log_start;
	*dirty = p->clean.state == 1 && p->clean.dirty > start ? p->clean.dirty : start;
	*clean_end = p->clean.state == 1 && p->clean.clean_end > start ? p->clean.clean_end : start;
	ks__p_unlock(p);
}

int ks_partition_dirty_ratio(ks_partition *p, double *ratio)
{
	*ratio = 0;
	ks__p_lock(p);
	int rc = -ENOENT;
	if (p->state == KAAS_PART_LEADER && p->cfg.cleanup_compact != KS_CLEANUP_DELETE && p->nsegs) {
		int64_t dirty = p->clean.state == 1 ? p->clean.dirty : p->segs[0]->base;
		uint64_t clean_b = 0, dirty_b = 0;
		/* The range plan() would consider, less its lag and damage rules. */
		for (size_t j = 0; j + 1 < p->nsegs && p->segs[j + 1]->base <= p->hw; j++) {
			const kseg *sg = p->segs[j];
			if (sg->active || sg->quarantined)
				break;
			if (p->segs[j + 1]->base <= dirty)
				clean_b += seg_bytes(sg);
			else
				dirty_b += seg_bytes(sg);
		}
		*ratio = clean_b + dirty_b ? (double)dirty_b / (double)(clean_b + dirty_b) : 0;
		rc = 0;
	}
	ks__p_unlock(p);
	return rc;
}
