/*
 * test_codec.c — streaming validation of compressed batches (codec.c and the
 * record walk in batch.c): records straddling the inflater's pieces in every
 * codec, decompression bombs, truncated and over-long streams, record-count
 * mismatches, the zstd window limit, and the heap one validation takes,
 * counted through AddressSanitizer's allocator hooks (the unit tests always
 * run under ASan).
 */
#include "kaas/storage/codec.h"
#include "kaas/storage/test/harness.h"
#include "util/test/ktest.h"

/* ---- heap accounting --------------------------------------------------------- */

int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *, size_t),
					      void (*free_hook)(const volatile void *));
size_t __sanitizer_get_allocated_size(const volatile void *p);

static volatile int heap_on;
static int64_t heap_cur, heap_peak;

static void heap_malloc_hook(const volatile void *p, size_t n)
{
	(void)p;
	if (heap_on) {
		heap_cur += (int64_t)n;
		if (heap_cur > heap_peak)
			heap_peak = heap_cur;
	}
}

static void heap_free_hook(const volatile void *p)
{
	if (heap_on && p)
		heap_cur -= (int64_t)__sanitizer_get_allocated_size(p);
}

/* Starts counting: what is allocated from now on and not yet freed. */
static void heap_arm(void)
{
	static int installed;
	if (!installed) {
		ck_assert_int_gt(__sanitizer_install_malloc_and_free_hooks(heap_malloc_hook, heap_free_hook), 0);
		installed = 1;
	}
	heap_cur = heap_peak = 0;
	heap_on = 1;
}

/* Stops counting; the peak since heap_arm in bytes. */
static int64_t heap_peak_bytes(void)
{
	heap_on = 0;
	return heap_peak;
}

/* ---- batches ----------------------------------------------------------------- */

#define PIECE KAAS_INFLATE_PIECE
#define TS0 1700000000000LL
#define XERIAL_CHUNK (32u << 10) /* snappy-java's default */

typedef struct tcodec {
	const char *name;
	int codec;
	size_t xerial;
} tcodec;

static const tcodec CODECS[] = {
	{"gzip", KBUILD_GZIP, 0},   {"snappy", KBUILD_SNAPPY, 0}, {"snappy-java", KBUILD_SNAPPY, XERIAL_CHUNK},
	{"lz4", KBUILD_LZ4, 0},     {"zstd", KBUILD_ZSTD, 0},
};
#define NCODECS ((int)(sizeof(CODECS) / sizeof(CODECS[0])))

static kb_limits limits(int32_t max_batch, uint64_t max_out)
{
	kb_limits l = {
		.max_batch_bytes = max_batch,
		.ts_diff_max_ms = -1,
		.now_ms = TS0,
		.create_time = 1,
		.validate_compressed = 1,
		.max_decompressed = max_out,
	};
	return l;
}

/* Validates one batch; the Kafka error, with *info and *msg filled. */
static int validate(const uint8_t *b, size_t len, const kb_limits *lim, kb_info *info, const char **msg)
{
	int n, bad;
	*msg = NULL;
	int err = ks__kb_validate(b, len, lim, info, 1, &n, &bad, msg);
	if (err)
		ck_assert_msg(*msg != NULL, "error %d without a message", err);
	return err;
}

/* Rewrites batchLength and the CRC of the batch at b (size bytes). */
static void refix(uint8_t *b, size_t size)
{
	kb_put32(b + KB_OFF_LENGTH, (uint32_t)(size - KB_LOG_OVERHEAD));
	kb_put32(b + KB_OFF_CRC, ks__kb_crc(b, size));
}

/* A batch of `count` records whose codec payload is given as is. */
static uint8_t *batch_of(int codec, int32_t count, int64_t max_ts, const uint8_t *payload, size_t plen,
			 size_t *size)
{
	*size = KB_HDR + plen;
	uint8_t *b = calloc(1, *size);
	ck_assert_ptr_nonnull(b);
	kb_put32(b + KB_OFF_LEADER_EPOCH, (uint32_t)-1);
	b[KB_OFF_MAGIC] = 2;
	kb_put16(b + KB_OFF_ATTRS, (uint16_t)codec);
	kb_put32(b + KB_OFF_LAST_DELTA, (uint32_t)(count - 1));
	kb_put64(b + KB_OFF_BASE_TS, (uint64_t)TS0);
	kb_put64(b + KB_OFF_MAX_TS, (uint64_t)max_ts);
	kb_put64(b + KB_OFF_PID, (uint64_t)-1);
	kb_put16(b + KB_OFF_PEPOCH, (uint16_t)-1);
	kb_put32(b + KB_OFF_BASE_SEQ, (uint32_t)-1);
	kb_put32(b + KB_OFF_COUNT, (uint32_t)count);
	memcpy(b + KB_HDR, payload, plen);
	refix(b, *size);
	return b;
}

/* A value of n bytes, compressible but not uniform. */
static void fill_value(uint8_t *v, size_t n, int salt)
{
	for (size_t i = 0; i < n; i++)
		v[i] = (uint8_t)('a' + (i / 7 + (size_t)salt) % 26);
}

/* Inflates the payload of the batch b with ks_inflate: the output equals
 * want, and every piece but the last is whole (a 64 KiB piece, a snappy-java
 * chunk), so the layouts the tests build put records where pieces end. */
static void check_pieces(const tcodec *c, const uint8_t *b, size_t size, const uint8_t *want, size_t wlen)
{
	ks_inflate *z;
	ck_assert_int_eq(ks_inflate_open(&z, c->codec, b + KB_HDR, size - KB_HDR, UINT64_MAX, 64u << 20), 0);
	size_t piece = c->codec == KBUILD_SNAPPY ? (c->xerial ? c->xerial : wlen) : PIECE;
	uint64_t pos = 0;
	const uint8_t *p;
	size_t n;
	int rc;
	while ((rc = ks_inflate_next(z, &p, &n)) == 1) {
		ck_assert_uint_le(pos + n, wlen);
		ck_assert_msg(memcmp(p, want + pos, n) == 0, "%s: output differs at %llu", c->name,
			      (unsigned long long)pos);
		pos += n;
		if (pos < wlen)
			ck_assert_msg(n == piece, "%s: piece of %zu bytes at %llu", c->name, n,
				      (unsigned long long)pos);
	}
	ck_assert_msg(rc == 0, "%s: inflate ended with %d", c->name, rc);
	ck_assert_uint_eq(pos, wlen);
	ck_assert_uint_eq(ks_inflate_total(z), wlen);
	ck_assert_int_eq(ks_inflate_next(z, &p, &n), 0);
	ks_inflate_free(z);
}

/* ---- records across piece boundaries ------------------------------------- */

/* Record 0 ends `back` bytes before the first piece boundary, so the next
 * record's length varint, then its header varints, then its fields start on
 * either side of it; record 1's value is around a piece long itself, and
 * the records after it carry headers.  Every codec, back = 0..13. */
START_TEST(records_straddle_pieces_in_every_codec)
{
	static const size_t big[] = {PIECE - 1, PIECE, PIECE + 1, 2 * PIECE + 7, 5, PIECE / 2 + 3};
	size_t vcap = (1u << 20) + 64;
	uint8_t *v = malloc(vcap);
	ck_assert_ptr_nonnull(v);
	kb_limits lim = limits(1 << 20, 256u << 20);
	for (int ci = 0; ci < NCODECS; ci++) {
		const tcodec *c = &CODECS[ci];
		for (int back = 0; back <= 13; back++) {
			kbuild b = KBUILD_INIT;
			b.xerial_chunk = c->xerial;
			/* Record 0's size: key "k0", ts delta 0, a value to fit. */
			size_t target = PIECE - (size_t)back;
			int32_t vlen = (int32_t)target - 13;
			kbuild_begin(&b, -1, -1, -1, TS0);
			fill_value(v, (size_t)vlen, back);
			kbuild_record(&b, "k0", 2, v, vlen, TS0);
			vlen += (int32_t)target - (int32_t)b.rlen;
			kbuild_begin(&b, -1, -1, -1, TS0);
			kbuild_record(&b, "k0", 2, v, vlen, TS0);
			ck_assert_uint_eq(b.rlen, target);
			size_t v1 = big[back % 6];
			fill_value(v, v1, back + 1);
			kbuild_record_h(&b, NULL, -1, v, (int32_t)v1, TS0 + 100003, 1);
			int n = 2;
			for (; n < 7; n++) {
				char k[16];
				int kl = snprintf(k, sizeof(k), "key-%d", n);
				fill_value(v, (size_t)(n * 11), n);
				kbuild_record_h(&b, k, kl, v, n * 11, TS0 + (int64_t)n * 7777777, n & 1);
			}
			if (back == 0) {
				/* Larger than a piece many times over (records may be up
				 * to max.message.bytes uncompressed and beyond). */
				fill_value(v, vcap - 64, 3);
				kbuild_record(&b, "huge", 4, v, (int32_t)(vcap - 64), TS0 + 5);
				n++;
			}
			kbuild_end(&b, c->codec);
			check_pieces(c, b.buf, b.len, b.rec, b.rlen);

			kb_info info;
			const char *msg;
			int err = validate(b.buf, b.len, &lim, &info, &msg);
			ck_assert_msg(err == 0, "%s back %d: %s", c->name, back, msg);
			ck_assert_int_eq(info.count, n);
			ck_assert_int_eq(info.max_ts, TS0 + 6 * 7777777);
			ck_assert_int_eq(info.fix_max_ts, 0);
			ck_assert_int_eq(info.first_ts, TS0);
			/* The by-timestamp search walks the same stream. */
			int64_t off, ts;
			ck_assert_int_eq(ks__kb_find_ts(b.buf, b.len, TS0 + 1, 0, &off, &ts), 0);
			ck_assert_int_eq(off, 1);
			ck_assert_int_eq(ts, TS0 + 100003);
			ck_assert_int_eq(ks__kb_find_ts(b.buf, b.len, TS0 + 6 * 7777777, 0, &off, &ts), 0);
			ck_assert_int_eq(off, 6);
			ck_assert_int_eq(ks__kb_find_ts(b.buf, b.len, TS0, 2, &off, &ts), 0);
			ck_assert_int_eq(off, 2);
			ck_assert_int_eq(ks__kb_find_ts(b.buf, b.len, TS0 + 6 * 7777777 + 1, 0, &off, &ts), -1);
			kbuild_free(&b);
		}
	}
	free(v);
}
END_TEST

/* A record whose fields are inconsistent in the middle of a piece or right
 * at its end is refused in every codec as it is uncompressed. */
START_TEST(broken_record_at_a_piece_boundary_is_refused)
{
	kb_limits lim = limits(1 << 20, 256u << 20);
	uint8_t *v = malloc(PIECE);
	ck_assert_ptr_nonnull(v);
	for (int ci = 0; ci < NCODECS; ci++) {
		const tcodec *c = &CODECS[ci];
		for (int back = 0; back <= 3; back++) {
			kbuild b = KBUILD_INIT;
			b.xerial_chunk = c->xerial;
			kbuild_begin(&b, -1, -1, -1, TS0);
			int32_t vlen = (int32_t)(PIECE - (size_t)back) - 13;
			fill_value(v, (size_t)vlen, 1);
			kbuild_record(&b, "k0", 2, v, vlen, TS0);
			ck_assert_uint_eq(b.rlen, PIECE - (size_t)back);
			size_t at = b.rlen;
			kbuild_record(&b, "k1", 2, "value", 5, TS0 + 1);
			/* Record 1's length (13, zigzag 26) one byte longer than
			 * its fields: it swallows record 2's length. */
			ck_assert_int_eq(b.rec[at], 26);
			b.rec[at] = 28;
			kbuild_record(&b, "k2", 2, "value", 5, TS0 + 2);
			kbuild_end(&b, c->codec);
			kb_info info;
			const char *msg;
			ck_assert_msg(validate(b.buf, b.len, &lim, &info, &msg) == KERR_CORRUPT_MESSAGE, "%s back %d",
				      c->name, back);
			kbuild_free(&b);
		}
	}
	free(v);
}
END_TEST

/* ---- record counts, truncation, trailing bytes ----------------------------- */

static void build_ten(kbuild *b, const tcodec *c)
{
	uint8_t v[3000];
	b->xerial_chunk = c->xerial;
	kbuild_begin(b, -1, -1, -1, TS0);
	for (int i = 0; i < 10; i++) {
		fill_value(v, sizeof(v), i);
		kbuild_record_h(b, "key", 3, v, (int32_t)(100 + i * 290), TS0 + i, 1);
	}
	kbuild_end(b, c->codec);
}

START_TEST(record_count_mismatch_in_every_codec)
{
	kb_limits lim = limits(1 << 20, 256u << 20);
	for (int ci = -1; ci < NCODECS; ci++) {
		static const tcodec none = {"none", KBUILD_NONE, 0};
		const tcodec *c = ci < 0 ? &none : &CODECS[ci];
		for (int delta = -9; delta <= 3; delta++) {
			kbuild b = KBUILD_INIT;
			build_ten(&b, c);
			kb_info info;
			const char *msg;
			int32_t count = 10 + delta;
			kb_put32(b.buf + KB_OFF_COUNT, (uint32_t)count);
			kb_put32(b.buf + KB_OFF_LAST_DELTA, (uint32_t)(count - 1));
			refix(b.buf, b.len);
			int err = validate(b.buf, b.len, &lim, &info, &msg);
			if (delta == 0)
				ck_assert_msg(err == 0, "%s: %s", c->name, msg);
			else
				ck_assert_msg(err == KERR_CORRUPT_MESSAGE, "%s count %d: error %d", c->name, count, err);
			if (delta < 0)
				ck_assert_str_eq(msg, "bytes left over after the last record");
			if (delta > 0)
				ck_assert_str_eq(msg, "record length runs past the batch");
			kbuild_free(&b);
		}
	}
}
END_TEST

START_TEST(truncated_and_overlong_streams_in_every_codec)
{
	kb_limits lim = limits(1 << 20, 256u << 20);
	for (int ci = 0; ci < NCODECS; ci++) {
		const tcodec *c = &CODECS[ci];
		kbuild b = KBUILD_INIT;
		build_ten(&b, c);
		size_t plen = b.len - KB_HDR;
		kb_info info;
		const char *msg;
		ck_assert_msg(validate(b.buf, b.len, &lim, &info, &msg) == 0, "%s: %s", c->name, msg);
		/* Every cut of the last 24 bytes (trailers, checksums, end
		 * marks), then every 97th byte. */
		for (size_t cut = 0; cut < plen; cut += cut + 24 >= plen ? 1 : 97) {
			uint8_t *t = malloc(KB_HDR + cut);
			memcpy(t, b.buf, KB_HDR + cut);
			refix(t, KB_HDR + cut);
			int err = validate(t, KB_HDR + cut, &lim, &info, &msg);
			ck_assert_msg(err == KERR_CORRUPT_MESSAGE, "%s cut at %zu of %zu: error %d", c->name, cut,
				      plen, err);
			free(t);
		}
		/* Bytes after the end of the compressed stream. */
		static const uint8_t junk[][4] = {{0, 0, 0, 0}, {0x28, 0xb5, 0x2f, 0xfd}, {1, 2, 3, 4}};
		for (size_t j = 0; j < sizeof(junk) / sizeof(junk[0]); j++) {
			for (size_t jl = 1; jl <= 4; jl++) {
				uint8_t *t = malloc(b.len + jl);
				memcpy(t, b.buf, b.len);
				memcpy(t + b.len, junk[j], jl);
				refix(t, b.len + jl);
				int err = validate(t, b.len + jl, &lim, &info, &msg);
				ck_assert_msg(err == KERR_CORRUPT_MESSAGE, "%s + %zu junk bytes (%zu): error %d", c->name,
					      jl, j, err);
				free(t);
			}
		}
		kbuild_free(&b);
	}
}
END_TEST

/* ---- bombs ----------------------------------------------------------------- */

typedef struct obuf {
	uint8_t *p;
	size_t len, cap;
} obuf;

static void ob_put(obuf *o, const void *d, size_t n)
{
	kbuild__put(&o->p, &o->len, &o->cap, d, n);
}

/* Compresses `prefix` followed by `zeros` zero bytes with codec, a MiB at a
 * time, never holding the whole input. */
static void compress_stream(const tcodec *c, const uint8_t *prefix, size_t plen, uint64_t zeros, obuf *out)
{
	const size_t step = 1u << 20;
	uint8_t *chunk = calloc(1, step);
	ck_assert_ptr_nonnull(chunk);
	uint64_t total = plen + zeros;
	uint8_t *tmp = NULL;
	size_t tcap = 0;
	z_stream zs;
	ZSTD_CCtx *zc = NULL;
	LZ4F_cctx *lc = NULL;
	switch (c->codec) {
	case KBUILD_GZIP:
		memset(&zs, 0, sizeof(zs));
		ck_assert_int_eq(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
		break;
	case KBUILD_ZSTD:
		zc = ZSTD_createCCtx();
		ck_assert_ptr_nonnull(zc);
		ck_assert(!ZSTD_isError(ZSTD_CCtx_setParameter(zc, ZSTD_c_compressionLevel, 1)));
		break;
	case KBUILD_LZ4: {
		ck_assert(!LZ4F_isError(LZ4F_createCompressionContext(&lc, LZ4F_VERSION)));
		tcap = LZ4F_compressBound(step, NULL) + 64;
		tmp = malloc(tcap);
		size_t n = LZ4F_compressBegin(lc, tmp, tcap, NULL);
		ck_assert(!LZ4F_isError(n));
		ob_put(out, tmp, n);
		break;
	}
	case KBUILD_SNAPPY: {
		static const uint8_t hdr[16] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1};
		ck_assert_msg(c->xerial, "raw snappy is one block: not streamed");
		ob_put(out, hdr, sizeof(hdr));
		tcap = snappy_max_compressed_length(c->xerial) + 4;
		tmp = malloc(tcap);
		break;
	}
	}
	for (uint64_t pos = 0; pos < total;) {
		size_t n = total - pos < step ? (size_t)(total - pos) : step;
		if (c->codec == KBUILD_SNAPPY && n > c->xerial)
			n = c->xerial;
		memset(chunk, 0, n);
		if (pos < plen)
			memcpy(chunk, prefix + pos, plen - pos < n ? plen - pos : n);
		int last = pos + n == total;
		switch (c->codec) {
		case KBUILD_GZIP: {
			uint8_t o[1 << 16];
			zs.next_in = chunk;
			zs.avail_in = (uInt)n;
			int r;
			do {
				zs.next_out = o;
				zs.avail_out = sizeof(o);
				r = deflate(&zs, last ? Z_FINISH : Z_NO_FLUSH);
				ob_put(out, o, sizeof(o) - zs.avail_out);
			} while (last ? r != Z_STREAM_END : zs.avail_in > 0 || zs.avail_out == 0);
			break;
		}
		case KBUILD_ZSTD: {
			uint8_t o[1 << 16];
			ZSTD_inBuffer ib = {chunk, n, 0};
			size_t r;
			do {
				ZSTD_outBuffer ob = {o, sizeof(o), 0};
				r = ZSTD_compressStream2(zc, &ob, &ib, last ? ZSTD_e_end : ZSTD_e_continue);
				ck_assert(!ZSTD_isError(r));
				ob_put(out, o, ob.pos);
			} while (last ? r != 0 : ib.pos < ib.size);
			break;
		}
		case KBUILD_LZ4: {
			size_t k = LZ4F_compressUpdate(lc, tmp, tcap, chunk, n, NULL);
			ck_assert(!LZ4F_isError(k));
			ob_put(out, tmp, k);
			if (last) {
				k = LZ4F_compressEnd(lc, tmp, tcap, NULL);
				ck_assert(!LZ4F_isError(k));
				ob_put(out, tmp, k);
			}
			break;
		}
		case KBUILD_SNAPPY: {
			size_t k = tcap - 4;
			ck_assert_int_eq(snappy_compress((const char *)chunk, n, (char *)tmp + 4, &k), SNAPPY_OK);
			kb_put32(tmp, (uint32_t)k);
			ob_put(out, tmp, k + 4);
			break;
		}
		}
		pos += n;
	}
	if (c->codec == KBUILD_GZIP)
		deflateEnd(&zs);
	ZSTD_freeCCtx(zc);
	if (lc)
		LZ4F_freeCompressionContext(lc);
	free(tmp);
	free(chunk);
}

/* The start of one record with a null key and a value of vlen bytes, no
 * headers; followed by vlen + 1 zero bytes (the value, the header count 0)
 * it is whole. */
static size_t record_prefix(uint8_t *p, int32_t vlen)
{
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0, blen = 0;
	kbuild__varint(&buf, &blen, &cap, vlen);
	size_t body = 1 + 1 + 1 + 1 + blen + (size_t)vlen + 1; /* attr ts od klen vlen value nh */
	free(buf);
	buf = NULL;
	cap = 0;
	kbuild__varint(&buf, &len, &cap, (int64_t)body);
	uint8_t attr = 0;
	kbuild__put(&buf, &len, &cap, &attr, 1);
	kbuild__varint(&buf, &len, &cap, 0);  /* ts delta */
	kbuild__varint(&buf, &len, &cap, 0);  /* offset delta */
	kbuild__varint(&buf, &len, &cap, -1); /* null key */
	kbuild__varint(&buf, &len, &cap, vlen);
	memcpy(p, buf, len);
	free(buf);
	return len;
}

/* One whole record of 24 MiB, inflating past an 8 MiB limit (with
 * max.message.bytes 2 MiB: snappy-java chunks of zeros compress only
 * 21-fold): refused with
 * MESSAGE_TOO_LARGE, holding a few hundred KiB at most; accepted whole
 * under a limit that fits it.  The same after one small valid record: the
 * stream must end there, it is refused as soon as it goes on. */
START_TEST(bombs_in_every_codec_are_refused_in_little_memory)
{
	const int32_t vlen = 24 << 20;
	uint8_t prefix[32];
	size_t plen = record_prefix(prefix, vlen);
	for (int ci = 0; ci < NCODECS; ci++) {
		const tcodec *c = &CODECS[ci];
		if (c->codec == KBUILD_SNAPPY && !c->xerial)
			continue; /* one block: raw_snappy_blocks_are_bounded */
		obuf o = {0};
		compress_stream(c, prefix, plen, (uint64_t)vlen + 1, &o);
		size_t size;
		uint8_t *b = batch_of(c->codec, 1, TS0, o.p, o.len, &size);
		kb_info info;
		const char *msg;
		kb_limits lim = limits(2 << 20, 8u << 20);
		heap_arm();
		int err = validate(b, size, &lim, &info, &msg);
		int64_t peak = heap_peak_bytes();
		fprintf(stderr, "bomb %s: %zu KiB inflating to %d MiB, error %d (%s), peak heap %lld KiB\n", c->name,
			o.len >> 10, vlen >> 20, err, msg ? msg : "-", (long long)(peak >> 10));
		ck_assert_msg(err == KERR_MESSAGE_TOO_LARGE, "%s: error %d (%s)", c->name, err, msg);
		ck_assert_msg(peak < (2 << 20), "%s: peak heap %lld bytes", c->name, (long long)peak);
		/* Not corrupt: a limit that fits takes it. */
		lim = limits(2 << 20, 32u << 20);
		err = validate(b, size, &lim, &info, &msg);
		ck_assert_msg(err == 0, "%s: %s", c->name, msg);
		free(b);
		free(o.p);

		/* A valid record, then 24 MiB of zeros. */
		uint8_t rec[40];
		size_t rl = record_prefix(rec, 3);
		memcpy(rec + rl, "abc", 4); /* the value, header count 0 */
		o = (obuf){0};
		compress_stream(c, rec, rl + 4, 24u << 20, &o);
		b = batch_of(c->codec, 1, TS0, o.p, o.len, &size);
		lim = limits(2 << 20, 256u << 20);
		heap_arm();
		err = validate(b, size, &lim, &info, &msg);
		peak = heap_peak_bytes();
		ck_assert_msg(err == KERR_CORRUPT_MESSAGE, "%s trailing zeros: error %d", c->name, err);
		ck_assert_str_eq(msg, "bytes left over after the last record");
		ck_assert_msg(peak < (2 << 20), "%s: peak heap %lld bytes", c->name, (long long)peak);
		free(b);
		free(o.p);
	}
}
END_TEST

/* A raw snappy payload is one block, inflated whole: its length (in its
 * header) is checked against the limits before anything is allocated, and
 * is at most 8 x max.message.bytes; the same records framed by snappy-java
 * pass. */
START_TEST(raw_snappy_blocks_are_bounded)
{
	static const tcodec raw = {"snappy", KBUILD_SNAPPY, 0}, java = {"snappy-java", KBUILD_SNAPPY, XERIAL_CHUNK};
	kb_info info;
	const char *msg;
	/* A header claiming 300 MiB, then garbage. */
	uint8_t forged[64];
	size_t fl = 0;
	uint32_t claim = 300u << 20;
	while (claim >= 0x80) {
		forged[fl++] = (uint8_t)(claim | 0x80);
		claim >>= 7;
	}
	forged[fl++] = (uint8_t)claim;
	memset(forged + fl, 0x55, sizeof(forged) - fl);
	size_t size;
	uint8_t *b = batch_of(KBUILD_SNAPPY, 1, TS0, forged, sizeof(forged), &size);
	kb_limits lim = limits(1 << 20, 256u << 20);
	heap_arm();
	int err = validate(b, size, &lim, &info, &msg);
	int64_t peak = heap_peak_bytes();
	ck_assert_int_eq(err, KERR_MESSAGE_TOO_LARGE);
	ck_assert_msg(peak < (256 << 10), "peak heap %lld bytes", (long long)peak);
	free(b);

	/* 12 MiB of valid records: above 8 x 1 MiB as one raw block. */
	uint8_t *v = malloc(1 << 20);
	ck_assert_ptr_nonnull(v);
	for (int pass = 0; pass < 2; pass++) {
		const tcodec *c = pass ? &java : &raw;
		kbuild k = KBUILD_INIT;
		k.xerial_chunk = c->xerial;
		kbuild_begin(&k, -1, -1, -1, TS0);
		for (int i = 0; i < 12; i++) {
			memset(v, 'a' + i, 1 << 20);
			kbuild_record(&k, NULL, -1, v, 1 << 20, TS0 + i);
		}
		kbuild_end(&k, c->codec);
		ck_assert_uint_lt(k.len, 1 << 20);
		heap_arm();
		err = validate(k.buf, k.len, &lim, &info, &msg);
		peak = heap_peak_bytes();
		if (pass == 0) {
			ck_assert_int_eq(err, KERR_MESSAGE_TOO_LARGE);
			ck_assert_msg(peak < (256 << 10), "peak heap %lld bytes", (long long)peak);
			/* With a max.message.bytes 8 times its size, it passes. */
			kb_limits big = limits(2 << 20, 256u << 20);
			ck_assert_int_eq(validate(k.buf, k.len, &big, &info, &msg), 0);
		} else {
			ck_assert_msg(err == 0, "%s: %s", c->name, msg);
			ck_assert_msg(peak < (256 << 10), "peak heap %lld bytes", (long long)peak);
		}
		kbuild_free(&k);
	}
	free(v);
}
END_TEST

/* zstd frames declaring a window above 8 MiB are refused (the window is
 * what the stream allocates); 8 MiB passes. */
START_TEST(zstd_window_is_bounded)
{
	kb_limits lim = limits(1 << 20, 256u << 20);
	uint8_t *v = malloc(64 << 10);
	ck_assert_ptr_nonnull(v);
	for (int wlog = 22; wlog <= 27; wlog++) {
		kbuild k = KBUILD_INIT;
		kbuild_begin(&k, -1, -1, -1, TS0);
		for (int i = 0; i < 8; i++) {
			fill_value(v, 64 << 10, i);
			kbuild_record(&k, NULL, -1, v, 64 << 10, TS0 + i);
		}
		/* Streamed without a size, the frame keeps the window asked for. */
		ZSTD_CCtx *zc = ZSTD_createCCtx();
		ck_assert(!ZSTD_isError(ZSTD_CCtx_setParameter(zc, ZSTD_c_windowLog, wlog)));
		size_t cap = ZSTD_compressBound(k.rlen) + 64;
		uint8_t *out = malloc(cap);
		ZSTD_outBuffer ob = {out, cap, 0};
		ZSTD_inBuffer ib = {k.rec, k.rlen, 0};
		ck_assert(!ZSTD_isError(ZSTD_compressStream2(zc, &ob, &ib, ZSTD_e_continue)));
		ZSTD_inBuffer none = {NULL, 0, 0};
		ck_assert_uint_eq(ZSTD_compressStream2(zc, &ob, &none, ZSTD_e_end), 0);
		ZSTD_freeCCtx(zc);
		/* Frame header descriptor: not single-segment, so a window
		 * descriptor follows: exponent (log - 10) << 3, mantissa 0. */
		ck_assert_uint_eq(out[4] & 0x20, 0);
		ck_assert_uint_eq(out[5], (unsigned)(wlog - 10) << 3);
		size_t size;
		uint8_t *b = batch_of(KBUILD_ZSTD, 8, TS0 + 7, out, ob.pos, &size);
		kb_info info;
		const char *msg;
		heap_arm();
		int err = validate(b, size, &lim, &info, &msg);
		int64_t peak = heap_peak_bytes();
		if (wlog <= 23) {
			ck_assert_msg(err == 0, "window log %d: %s", wlog, msg);
			ck_assert_msg(peak < (int64_t)(((size_t)1 << wlog) + (2 << 20)), "peak heap %lld bytes",
				      (long long)peak);
		} else {
			ck_assert_msg(err == KERR_CORRUPT_MESSAGE, "window log %d: error %d", wlog, err);
			ck_assert_ptr_nonnull(strstr(msg, "window"));
			ck_assert_msg(peak < (1 << 20), "peak heap %lld bytes", (long long)peak);
		}
		free(b);
		free(out);
		kbuild_free(&k);
	}
	free(v);
}
END_TEST

/* ---- memory ---------------------------------------------------------------- */

/* A highly compressible batch of 100 MiB uncompressed, records of a little
 * over a piece each: validating it and finding its last record by timestamp
 * take a few MiB of heap whatever the codec (before streaming: the whole
 * 100 MiB and more).  Raw snappy is refused before it allocates. */
START_TEST(validating_100_mib_takes_little_heap)
{
	const size_t vsize = PIECE + 1000;
	const int nrec = (int)((100u << 20) / vsize) + 1;
	uint8_t *v = malloc(vsize);
	ck_assert_ptr_nonnull(v);
	memset(v, 'x', vsize);
	for (int ci = 0; ci < NCODECS; ci++) {
		const tcodec *c = &CODECS[ci];
		kbuild k = KBUILD_INIT;
		k.xerial_chunk = c->xerial;
		kbuild_begin(&k, -1, -1, -1, TS0);
		for (int i = 0; i < nrec; i++) {
			v[i % vsize] = (uint8_t)('a' + i % 26);
			kbuild_record(&k, "key", 3, v, (int32_t)vsize, TS0 + i);
		}
		ck_assert_uint_ge(k.rlen, 100u << 20);
		kbuild_end(&k, c->codec);
		kb_limits lim = limits(8 << 20, 256u << 20);
		ck_assert_uint_le(k.len, 8u << 20);
		kb_info info;
		const char *msg;
		heap_arm();
		int err = validate(k.buf, k.len, &lim, &info, &msg);
		int64_t peak = heap_peak_bytes();
		int64_t off = -1, ts = -1;
		heap_arm();
		int found = ks__kb_find_ts(k.buf, k.len, TS0 + nrec - 1, 0, &off, &ts);
		int64_t fpeak = heap_peak_bytes();
		fprintf(stderr, "%s: %zu MiB in %zu KiB, error %d, peak heap: validate %lld KiB, find %lld KiB\n",
			c->name, k.rlen >> 20, k.len >> 10, err, (long long)(peak >> 10), (long long)(fpeak >> 10));
		if (c->codec == KBUILD_SNAPPY && !c->xerial) {
			ck_assert_int_eq(err, KERR_MESSAGE_TOO_LARGE);
			ck_assert_msg(peak < (256 << 10), "%s: peak heap %lld bytes", c->name, (long long)peak);
		} else {
			ck_assert_msg(err == 0, "%s: %s", c->name, msg);
			ck_assert_int_eq(info.count, nrec);
			ck_assert_int_eq(info.max_ts, TS0 + nrec - 1);
			ck_assert_msg(peak < (4 << 20), "%s: peak heap %lld bytes", c->name, (long long)peak);
			ck_assert_int_eq(found, 0);
			ck_assert_int_eq(off, nrec - 1);
			ck_assert_msg(fpeak < (4 << 20), "%s: find peak heap %lld bytes", c->name, (long long)fpeak);
		}
		kbuild_free(&k);
	}
	free(v);
}
END_TEST

/* The append path with the default limit (256 MiB): a zstd bomb of a
 * record claiming 300 MiB is refused with MESSAGE_TOO_LARGE, nothing is
 * appended, and the heap barely moves. */
START_TEST(append_refuses_a_zstd_bomb_in_little_memory)
{
	static const tcodec zstd = {"zstd", KBUILD_ZSTD, 0};
	ks_log_config cfg = h_cfg();
	ks_partition *p;
	ck_assert_int_eq(ks_partition_open(h_vfs, "t/0", NULL, 1, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 1), 0);
	const int32_t vlen = 300 << 20;
	uint8_t prefix[32];
	size_t plen = record_prefix(prefix, vlen);
	obuf o = {0};
	compress_stream(&zstd, prefix, plen, (uint64_t)vlen + 1, &o);
	size_t size;
	uint8_t *b = batch_of(KBUILD_ZSTD, 1, TS0, o.p, o.len, &size);
	ks_append_result res;
	heap_arm();
	ck_assert_int_eq(ks_partition_append(p, b, size, &res), 0);
	int64_t peak = heap_peak_bytes();
	fprintf(stderr, "append of a %zu KiB zstd bomb: %s, peak heap %lld KiB\n", size >> 10,
		kw_kerr_name(res.error), (long long)(peak >> 10));
	ck_assert_int_eq(res.error, KERR_MESSAGE_TOO_LARGE);
	ck_assert_msg(peak < (2 << 20), "peak heap %lld bytes", (long long)peak);
	ck_assert_int_eq(ks_partition_log_end(p), 0);
	free(b);
	free(o.p);
	ks_partition_close(p);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "storage-codec", .tcase = "codec", .timeout = 240,
					  .setup = h_setup, .teardown = h_teardown },
			  KTEST_LIST(records_straddle_pieces_in_every_codec,
				     broken_record_at_a_piece_boundary_is_refused,
				     record_count_mismatch_in_every_codec,
				     truncated_and_overlong_streams_in_every_codec,
				     bombs_in_every_codec_are_refused_in_little_memory,
				     raw_snappy_blocks_are_bounded, zstd_window_is_bounded,
				     validating_100_mib_takes_little_heap,
				     append_refuses_a_zstd_bomb_in_little_memory));
}
