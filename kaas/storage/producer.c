/*
 * producer.c — the idempotent-producer window and its snapshot file format.
 *
 * Semantics follow the Kafka 2.x broker (ProducerStateManager): a retried
 * batch matching one of the last five (same epoch, same sequence range) is a
 * duplicate and answered with the original offsets; an older epoch is
 * INVALID_PRODUCER_EPOCH; a new epoch must start at sequence 0; an unknown
 * producer starting above 0 is UNKNOWN_PRODUCER_ID; any other gap is
 * OUT_OF_ORDER_SEQUENCE_NUMBER.
 */
#include "kaas/storage/producer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/storage/batch.h"
#include "util/crc32c.h"
#include "kaas/proto/kerr.h"

static size_t hash_pid(int64_t pid, size_t nb)
{
	uint64_t x = (uint64_t)pid * 0x9E3779B97F4A7C15ull;
	return (size_t)(x >> 32) & (nb - 1);
}

void ks__kp_free(kp_table *t)
{
	for (size_t i = 0; i < t->nbuckets; i++) {
		kp_entry *e = t->buckets[i];
		while (e) {
			kp_entry *n = e->next;
			free(e);
			e = n;
		}
	}
	free(t->buckets);
	t->buckets = NULL;
	t->nbuckets = t->count = 0;
}

kp_entry *ks__kp_find(const kp_table *t, int64_t pid)
{
	if (!t->nbuckets)
		return NULL;
	for (kp_entry *e = t->buckets[hash_pid(pid, t->nbuckets)]; e; e = e->next)
		if (e->pid == pid)
			return e;
	return NULL;
}

static int grow(kp_table *t)
{
	size_t nb = t->nbuckets ? t->nbuckets * 2 : 64;
	kp_entry **b = calloc(nb, sizeof(*b));
	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < t->nbuckets; i++) {
		kp_entry *e = t->buckets[i];
		while (e) {
			kp_entry *n = e->next;
			size_t h = hash_pid(e->pid, nb);
			e->next = b[h];
			b[h] = e;
			e = n;
		}
	}
	free(t->buckets);
	t->buckets = b;
	t->nbuckets = nb;
	return 0;
}

static kp_entry *find_or_add(kp_table *t, int64_t pid)
{
	kp_entry *e = ks__kp_find(t, pid);
	if (e)
		return e;
	if (t->count >= t->nbuckets && grow(t))
		return NULL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->pid = pid;
	e->epoch = -1;
	e->last_ts = INT64_MIN;
	size_t h = hash_pid(pid, t->nbuckets);
	e->next = t->buckets[h];
	t->buckets[h] = e;
	t->count++;
	return e;
}

int ks__kp_check(const kp_entry *e, int16_t epoch, int32_t first_seq, int32_t last_seq, int *dup,
	     kp_batch *dup_batch, const char **msg)
{
	*dup = 0;
	if (e && e->epoch == epoch) {
		for (int i = 0; i < e->n; i++) {
			if (e->b[i].first_seq == first_seq && e->b[i].last_seq == last_seq) {
				*dup = 1;
				*dup_batch = e->b[i];
				return KERR_NONE;
			}
		}
	}
	if (e && epoch < e->epoch) {
		*msg = "producer epoch is older than the current one";
		return KERR_INVALID_PRODUCER_EPOCH;
	}
	if (!e || epoch != e->epoch) {
		if (first_seq != 0) {
			if (e && e->epoch != -1) {
				*msg = "a new producer epoch must start at sequence 0";
				return KERR_OUT_OF_ORDER_SEQUENCE_NUMBER;
			}
			*msg = "no state for this producer id (expired or removed by retention)";
			return KERR_UNKNOWN_PRODUCER_ID;
		}
		return KERR_NONE;
	}
	int32_t last = e->n ? e->b[e->n - 1].last_seq : -1;
	if (last == -1 && first_seq != 0) {
		*msg = "sequence must restart at 0";
		return KERR_OUT_OF_ORDER_SEQUENCE_NUMBER;
	}
	if (last != -1 && !(first_seq == (int32_t)((uint32_t)last + 1) ||
			    (first_seq == 0 && last == INT32_MAX))) {
		*msg = "sequence number is not the next one expected";
		return KERR_OUT_OF_ORDER_SEQUENCE_NUMBER;
	}
	return KERR_NONE;
}

void ks__kp_entry_apply(kp_entry *e, int16_t epoch, const kp_batch *b)
{
	if (epoch != e->epoch) {
		e->epoch = epoch;
		e->n = 0;
	}
	if (e->n == KP_BATCHES) {
		memmove(&e->b[0], &e->b[1], sizeof(e->b[0]) * (KP_BATCHES - 1));
		e->n--;
	}
	e->b[e->n++] = *b;
	if (b->max_ts > e->last_ts)
		e->last_ts = b->max_ts;
}

int ks__kp_apply(kp_table *t, int64_t pid, int16_t epoch, const kp_batch *b)
{
	kp_entry *e = find_or_add(t, pid);
	if (!e)
		return -ENOMEM;
	ks__kp_entry_apply(e, epoch, b);
	return 0;
}

int ks__kp_put(kp_table *t, const kp_entry *src)
{
	kp_entry *e = find_or_add(t, src->pid);
	if (!e)
		return -ENOMEM;
	kp_entry *next = e->next;
	*e = *src;
	e->next = next;
	return 0;
}

size_t ks__kp_evict(kp_table *t, int64_t log_start, int64_t expire_before)
{
	size_t dropped = 0;
	for (size_t i = 0; i < t->nbuckets; i++) {
		kp_entry **pp = &t->buckets[i];
		while (*pp) {
			kp_entry *e = *pp;
			int gone = (e->n && e->b[e->n - 1].last_off < log_start) ||
				   (e->last_ts != INT64_MIN && e->last_ts < expire_before);
			if (gone) {
				*pp = e->next;
				free(e);
				t->count--;
				dropped++;
			} else {
				pp = &e->next;
			}
		}
	}
	return dropped;
}

/* ---- snapshot encoding ------------------------------------------------------
 * All integers big-endian.
 *   header 24 bytes: "KPS1" | u16 version=1 | u16 flags=0 | i32 leader epoch |
 *                    i64 offset | u32 producer count
 *   entry: i64 pid | i16 epoch | u8 nbatches | u8 0 | i64 last_ts |
 *          nbatches x { i32 first_seq | i32 last_seq | i64 first_off |
 *                       i64 last_off | i64 max_ts }            (32 bytes each)
 *   trailer: u32 CRC-32C of every byte before it
 */
#define SNAP_MAGIC "KPS1"
#define SNAP_VERSION 1
#define SNAP_HDR 24
#define SNAP_ENTRY 20
#define SNAP_BATCH 32

int ks__kp_encode(const kp_table *t, int32_t epoch, int64_t offset, uint8_t **out, size_t *len)
{
	size_t cap = SNAP_HDR + 4 + t->count * (SNAP_ENTRY + KP_BATCHES * SNAP_BATCH);
	uint8_t *b = malloc(cap), *p;
	if (!b)
		return -ENOMEM;
	memcpy(b, SNAP_MAGIC, 4);
	kb_put16(b + 4, SNAP_VERSION);
	kb_put16(b + 6, 0);
	kb_put32(b + 8, (uint32_t)epoch);
	kb_put64(b + 12, (uint64_t)offset);
	kb_put32(b + 20, (uint32_t)t->count);
	p = b + SNAP_HDR;
	for (size_t i = 0; i < t->nbuckets; i++) {
		for (kp_entry *e = t->buckets[i]; e; e = e->next) {
			kb_put64(p, (uint64_t)e->pid);
			kb_put16(p + 8, (uint16_t)e->epoch);
			p[10] = e->n;
			p[11] = 0;
			kb_put64(p + 12, (uint64_t)e->last_ts);
			p += SNAP_ENTRY;
			for (int j = 0; j < e->n; j++) {
				kb_put32(p, (uint32_t)e->b[j].first_seq);
				kb_put32(p + 4, (uint32_t)e->b[j].last_seq);
				kb_put64(p + 8, (uint64_t)e->b[j].first_off);
				kb_put64(p + 16, (uint64_t)e->b[j].last_off);
				kb_put64(p + 24, (uint64_t)e->b[j].max_ts);
				p += SNAP_BATCH;
			}
		}
	}
	kb_put32(p, ku_crc32c(0, b, (size_t)(p - b)));
	p += 4;
	*out = b;
	*len = (size_t)(p - b);
	return 0;
}

int ks__kp_decode(const uint8_t *buf, size_t len, kp_table *t, int32_t *epoch, int64_t *offset)
{
	kp_table nt = KP_TABLE_INIT;
	if (len < SNAP_HDR + 4 || memcmp(buf, SNAP_MAGIC, 4) != 0 || kb_get16(buf + 4) != SNAP_VERSION)
		return -EBADMSG;
	if (kb_get32(buf + len - 4) != ku_crc32c(0, buf, len - 4))
		return -EBADMSG;
	int64_t off = (int64_t)kb_get64(buf + 12);
	uint32_t count = kb_get32(buf + 20);
	if (off < 0)
		return -EBADMSG;
	const uint8_t *p = buf + SNAP_HDR, *end = buf + len - 4;
	for (uint32_t i = 0; i < count; i++) {
		kp_entry e;
		memset(&e, 0, sizeof(e));
		if ((size_t)(end - p) < SNAP_ENTRY)
			goto bad;
		e.pid = (int64_t)kb_get64(p);
		e.epoch = (int16_t)kb_get16(p + 8);
		e.n = p[10];
		e.last_ts = (int64_t)kb_get64(p + 12);
		p += SNAP_ENTRY;
		if (e.pid < 0 || e.n > KP_BATCHES || (size_t)(end - p) < (size_t)e.n * SNAP_BATCH)
			goto bad;
		for (int j = 0; j < e.n; j++) {
			e.b[j].first_seq = (int32_t)kb_get32(p);
			e.b[j].last_seq = (int32_t)kb_get32(p + 4);
			e.b[j].first_off = (int64_t)kb_get64(p + 8);
			e.b[j].last_off = (int64_t)kb_get64(p + 16);
			e.b[j].max_ts = (int64_t)kb_get64(p + 24);
			if (e.b[j].first_off < 0 || e.b[j].last_off < e.b[j].first_off ||
			    e.b[j].last_off >= off)
				goto bad;
			p += SNAP_BATCH;
		}
		if (ks__kp_find(&nt, e.pid) || ks__kp_put(&nt, &e))
			goto bad;
	}
	if (p != end)
		goto bad;
	ks__kp_free(t);
	*t = nt;
	*epoch = (int32_t)kb_get32(buf + 8);
	*offset = off;
	return 0;
bad:
	ks__kp_free(&nt);
	return -EBADMSG;
}
