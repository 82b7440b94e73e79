/*
 * test_recompress.c — re-encoding batches for a topic's compression.type
 * (recompress.c, codec.c's compressor, append.c): every codec pair round
 * trips the records byte for byte with the header's other fields kept and
 * a valid CRC, each output is the standard stream its codec's own library
 * decodes, the append path stores the topic's codec without disturbing the
 * idempotent producer state, and a re-encoded batch above
 * max.message.bytes is refused.
 */
#include "kaas/storage/codec.h"
#include "kaas/storage/test/harness.h"
#include "util/test/ktest.h"

#define TS0 1700000000000LL

typedef struct tcodec {
	const char *name;
	int codec;
	size_t xerial;
} tcodec;

/* Inputs: every codec producers write (snappy raw and framed). */
static const tcodec FROM[] = {
	{"none", KBUILD_NONE, 0}, {"gzip", KBUILD_GZIP, 0}, {"snappy", KBUILD_SNAPPY, 0},
	{"snappy-java", KBUILD_SNAPPY, 32u << 10}, {"lz4", KBUILD_LZ4, 0}, {"zstd", KBUILD_ZSTD, 0},
};
#define NFROM ((int)(sizeof(FROM) / sizeof(FROM[0])))
static const char *const TO_NAME[] = {"none", "gzip", "snappy", "lz4", "zstd"};

static kb_limits limits(int32_t max_batch)
{
	kb_limits l = {
		.max_batch_bytes = max_batch,
		.ts_diff_max_ms = -1,
		.now_ms = TS0,
		.create_time = 1,
		.validate_compressed = 1,
		.max_decompressed = 256u << 20,
	};
	return l;
}

/* n records with keys, values of growing size, one header each, and
 * timestamps that do not increase monotonically. */
static void build(kbuild *b, const tcodec *c, int n, int64_t pid, int32_t seq)
{
	b->xerial_chunk = c->xerial;
	kbuild_begin(b, pid, pid >= 0 ? 3 : -1, seq, TS0);
	char k[32];
	static uint8_t v[8192];
	for (int i = 0; i < n; i++) {
		int kl = snprintf(k, sizeof(k), "key-%d", i % 17);
		int vl = (i * 97) % (int)sizeof(v);
		for (int j = 0; j < vl; j++)
			v[j] = (uint8_t)('a' + (j / 5 + i) % 26);
		kbuild_record_h(b, k, kl, i % 11 == 5 ? NULL : v, i % 11 == 5 ? -1 : vl,
				TS0 + (i * 7) % 50, 1);
	}
	kbuild_end(b, c->codec);
}

/* The records section of a whole batch, inflated with our own reader. */
static uint8_t *records_of(const uint8_t *b, size_t size, size_t *len)
{
	int codec = kb_get16(b + KB_OFF_ATTRS) & KB_ATTR_CODEC_MASK;
	uint8_t *out = NULL;
	*len = 0;
	if (codec == KB_CODEC_NONE) {
		*len = size - KB_HDR;
		out = malloc(*len ? *len : 1);
		memcpy(out, b + KB_HDR, *len);
		return out;
	}
	ks_inflate *z;
	ck_assert_int_eq(ks_inflate_open(&z, codec, b + KB_HDR, size - KB_HDR, UINT64_MAX, 64u << 20), 0);
	const uint8_t *p;
	size_t n, cap = 0;
	int rc;
	while ((rc = ks_inflate_next(z, &p, &n)) == 1) {
		kbuild__grow(&out, &cap, *len + n);
		memcpy(out + *len, p, n);
		*len += n;
	}
	ck_assert_int_eq(rc, 0);
	ks_inflate_free(z);
	return out;
}

/* The payload decoded by the codec's own library (one shot), as a client
 * would: the output is each format's standard stream. */
static int pledged = 1;

static void lib_check(int codec, const uint8_t *p, size_t n, const uint8_t *want, size_t wlen)
{
	uint8_t *out = malloc(wlen + 1);
	size_t got = 0;
	switch (codec) {
	case KB_CODEC_NONE:
		got = n;
		memcpy(out, p, n < wlen ? n : wlen);
		break;
	case KB_CODEC_GZIP: {
		ck_assert(n > 2 && p[0] == 0x1f && p[1] == 0x8b); /* a gzip member */
		z_stream zs;
		memset(&zs, 0, sizeof(zs));
		ck_assert_int_eq(inflateInit2(&zs, 15 + 16), Z_OK);
		zs.next_in = (Bytef *)p;
		zs.avail_in = (uInt)n;
		zs.next_out = out;
		zs.avail_out = (uInt)wlen + 1;
		ck_assert_int_eq(inflate(&zs, Z_FINISH), Z_STREAM_END);
		ck_assert_uint_eq(zs.avail_in, 0);
		got = wlen + 1 - zs.avail_out;
		inflateEnd(&zs);
		break;
	}
	case KB_CODEC_SNAPPY: {
		static const uint8_t magic[8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
		ck_assert(n >= 16 && memcmp(p, magic, 8) == 0); /* snappy-java framing */
		size_t pos = 16;
		while (pos < n) {
			ck_assert_uint_ge(n - pos, 4);
			uint32_t bl = kb_get32(p + pos);
			pos += 4;
			ck_assert_uint_le(bl, n - pos);
			size_t ul;
			ck_assert_int_eq(snappy_uncompressed_length((const char *)p + pos, bl, &ul), SNAPPY_OK);
			ck_assert_uint_le(ul, 32u << 10);
			ck_assert_uint_le(got + ul, wlen);
			ck_assert_int_eq(snappy_uncompress((const char *)p + pos, bl, (char *)out + got, &ul), SNAPPY_OK);
			got += ul;
			pos += bl;
		}
		break;
	}
	case KB_CODEC_LZ4: {
		ck_assert(n >= 4 && kb_get32(p) == 0x04224d18); /* LZ4 frame magic, little-endian 0x184D2204 */
		LZ4F_dctx *d;
		ck_assert(!LZ4F_isError(LZ4F_createDecompressionContext(&d, LZ4F_VERSION)));
		LZ4F_frameInfo_t fi;
		size_t src = n;
		ck_assert(!LZ4F_isError(LZ4F_getFrameInfo(d, &fi, p, &src)));
		ck_assert_int_eq(fi.blockMode, LZ4F_blockIndependent);
		ck_assert_int_eq(fi.blockSizeID, LZ4F_max64KB);
		size_t dst = wlen + 1, rest = n - src;
		size_t r = LZ4F_decompress(d, out, &dst, p + src, &rest, NULL);
		ck_assert_msg(r == 0, "lz4 frame not complete: %zu", r);
		got = dst;
		LZ4F_freeDecompressionContext(d);
		break;
	}
	case KB_CODEC_ZSTD: {
		/* The content size is in the frame when it was pledged (the
		 * append path always knows it): clients that inflate whole
		 * size their buffer by it. */
		unsigned long long cs = ZSTD_getFrameContentSize(p, n);
		ck_assert(cs == wlen || (cs == ZSTD_CONTENTSIZE_UNKNOWN && !pledged));
		got = ZSTD_decompress(out, wlen + 1, p, n);
		ck_assert(!ZSTD_isError(got));
		break;
	}
	}
	ck_assert_uint_eq(got, wlen);
	ck_assert(memcmp(out, want, wlen) == 0);
	free(out);
}

/* The checks every re-encoded batch passes: header fields but codec,
 * length and CRC as they were; CRC valid; validation learns the same;
 * the records byte for byte. */
static void check_same(const uint8_t *a, size_t asz, const kb_info *ai, const uint8_t *b, size_t bsz, int to)
{
	kb_hdr ha, hb;
	ks__kb_decode(a, &ha);
	ks__kb_decode(b, &hb);
	ck_assert_uint_eq(kb_size(&hb), bsz);
	ck_assert_uint_eq(ks__kb_crc(b, bsz), hb.crc);
	ck_assert_int_eq(hb.attrs & KB_ATTR_CODEC_MASK, to);
	ck_assert_int_eq(hb.attrs & ~KB_ATTR_CODEC_MASK, ha.attrs & ~KB_ATTR_CODEC_MASK);
	ck_assert_int_eq(hb.base_offset, ha.base_offset);
	ck_assert_int_eq(hb.leader_epoch, ha.leader_epoch);
	ck_assert_int_eq(hb.last_delta, ha.last_delta);
	ck_assert_int_eq(hb.base_ts, ha.base_ts);
	ck_assert_int_eq(hb.max_ts, ha.max_ts);
	ck_assert_int_eq(hb.pid, ha.pid);
	ck_assert_int_eq(hb.pepoch, ha.pepoch);
	ck_assert_int_eq(hb.base_seq, ha.base_seq);
	ck_assert_int_eq(hb.count, ha.count);
	kb_limits lim = limits(64 << 20);
	kb_info bi;
	int n, bad;
	const char *msg;
	ck_assert_msg(ks__kb_validate(b, bsz, &lim, &bi, 1, &n, &bad, &msg) == 0, "%s", msg);
	ck_assert_int_eq(bi.count, ai->count);
	ck_assert_int_eq(bi.base_seq, ai->base_seq);
	ck_assert_int_eq(bi.last_seq, ai->last_seq);
	ck_assert_int_eq(bi.max_ts, ai->max_ts);
	ck_assert_int_eq(bi.first_ts, ai->first_ts);
	ck_assert_uint_eq(bi.inflated, ai->inflated);
	size_t la, lb;
	uint8_t *ra = records_of(a, asz, &la), *rb = records_of(b, bsz, &lb);
	ck_assert_uint_eq(la, lb);
	ck_assert(memcmp(ra, rb, la) == 0);
	lib_check(to, b + KB_HDR, bsz - KB_HDR, ra, la);
	free(ra);
	free(rb);
}

/* Every input codec to every output codec (the same one included), with
 * a small batch and one of several MiB that spans many inflater pieces,
 * snappy chunks and lz4 blocks; an idempotent and a plain producer. */
START_TEST(every_codec_pair_round_trips)
{
	static const int sizes[] = {3, 1500};
	for (int f = 0; f < NFROM; f++)
		for (int to = KB_CODEC_NONE; to <= KB_CODEC_ZSTD; to++)
			for (int s = 0; s < 2; s++) {
				kbuild b = KBUILD_INIT;
				build(&b, &FROM[f], sizes[s], s ? 4242 : -1, s ? 17 : -1);
				kb_limits lim = limits(64 << 20);
				kb_info in;
				int n, bad;
				const char *msg;
				ck_assert_msg(ks__kb_validate(b.buf, b.len, &lim, &in, 1, &n, &bad, &msg) == 0, "%s", msg);
				ck_assert_uint_gt(in.inflated, 0);
				uint8_t *out;
				size_t olen;
				pledged = s || FROM[f].codec == KB_CODEC_NONE;
				int rc = ks__kb_recompress(b.buf, b.len, to, 0, s ? in.inflated : 0, &lim, 64u << 20,
							   &out, &olen);
				ck_assert_msg(rc == 0, "%s -> %s: %d", FROM[f].name, TO_NAME[to], rc);
				check_same(b.buf, b.len, &in, out, olen, to);
				/* And back: the original codec again gives the same records. */
				uint8_t *back;
				size_t blen;
				ck_assert_int_eq(ks__kb_recompress(out, olen, FROM[f].codec, 0, 0, &lim, 64u << 20,
								   &back, &blen), 0);
				pledged = FROM[f].codec == KB_CODEC_NONE || to == KB_CODEC_NONE;
				check_same(b.buf, b.len, &in, back, blen, FROM[f].codec);
				pledged = 1;
				free(back);
				free(out);
				kbuild_free(&b);
			}
}
END_TEST

/* Levels are the codec's own (Kafka's compression.<codec>.level): a higher
 * one gives a smaller or equal batch of the same records; zstd's "ultra"
 * levels are held to an 8 MiB window so the broker can read them back. */
START_TEST(levels_apply_and_ultra_zstd_stays_readable)
{
	kbuild b = KBUILD_INIT;
	build(&b, &FROM[0], 3000, -1, -1);
	kb_limits lim = limits(64 << 20);
	kb_info in;
	int n, bad;
	const char *msg;
	ck_assert_int_eq(ks__kb_validate(b.buf, b.len, &lim, &in, 1, &n, &bad, &msg), 0);
	static const struct { int codec, lo, hi; } L[] = {
		{KB_CODEC_GZIP, 1, 9}, {KB_CODEC_LZ4, 1, 12}, {KB_CODEC_ZSTD, 1, 22}};
	for (int i = 0; i < 3; i++) {
		uint8_t *lo, *hi;
		size_t llen, hlen;
		ck_assert_int_eq(ks__kb_recompress(b.buf, b.len, L[i].codec, L[i].lo, 0, &lim, 64u << 20, &lo, &llen), 0);
		ck_assert_int_eq(ks__kb_recompress(b.buf, b.len, L[i].codec, L[i].hi, 0, &lim, 64u << 20, &hi, &hlen), 0);
		ck_assert_msg(hlen <= llen, "%s: level %d gave %zu bytes, level %d %zu", TO_NAME[L[i].codec], L[i].hi,
			      hlen, L[i].lo, llen);
		check_same(b.buf, b.len, &in, hi, hlen, L[i].codec);
		free(lo);
		free(hi);
	}
	kbuild_free(&b);
}
END_TEST

/* The new batch is bounded by max_size: a zstd batch of zeros that would
 * take 8 MiB uncompressed is refused, not built. */
START_TEST(output_above_the_bound_is_refused)
{
	kbuild b = KBUILD_INIT;
	kbuild_begin(&b, -1, -1, -1, TS0);
	static uint8_t v[1 << 20];
	for (int i = 0; i < 8; i++)
		kbuild_record(&b, "k", 1, v, (int32_t)sizeof(v), TS0);
	kbuild_end(&b, KBUILD_ZSTD);
	kb_limits lim = limits(1 << 20);
	uint8_t *out = (uint8_t *)&out;
	size_t olen = 1;
	ck_assert_int_eq(ks__kb_recompress(b.buf, b.len, KB_CODEC_NONE, 0, 0, &lim, 1 << 20, &out, &olen), -EMSGSIZE);
	ck_assert_ptr_null(out);
	ck_assert_uint_eq(olen, 0);
	ck_assert_int_eq(ks__kb_recompress(b.buf, b.len, KB_CODEC_LZ4, 0, 0, &lim, 1 << 20, &out, &olen), 0);
	ck_assert_uint_lt(olen, 1 << 20);
	free(out);
	kbuild_free(&b);
}
END_TEST

/* The stored batches of a partition, whole, in order. */
static size_t stored(ks_partition *p, uint8_t **log)
{
	return h_read_all(p, 0, 1 << 20, log);
}

/* A topic with compression.type=zstd receiving lz4, uncompressed and zstd
 * batches from an idempotent producer: every stored batch is zstd with the
 * producer's fields and the offsets it was answered with; a retry of an
 * acknowledged batch (in its original codec) is a duplicate answered with
 * the original offsets; the next sequence is accepted, a gap refused. */
START_TEST(append_stores_the_topic_codec_and_keeps_producer_state)
{
	ks_log_config cfg = h_cfg();
	cfg.compression_type = KS_COMPRESS_ZSTD;
	ks_partition *p;
	ck_assert_int_eq(ks_partition_open(h_vfs, "t/0", NULL, 1, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 1), 0);
	static const tcodec in[] = {{"lz4", KBUILD_LZ4, 0}, {"none", KBUILD_NONE, 0}, {"zstd", KBUILD_ZSTD, 0},
				    {"snappy-java", KBUILD_SNAPPY, 32u << 10}, {"gzip", KBUILD_GZIP, 0}};
	int32_t seq = 0;
	int64_t base[5];
	kbuild first = KBUILD_INIT;
	for (int i = 0; i < 5; i++) {
		kbuild b = KBUILD_INIT;
		build(&b, &in[i], 40, 77, seq);
		ks_append_result res;
		ck_assert_msg(h_append(p, &b, &res) == 0, "%s: %s", in[i].name, res.message ? res.message : "");
		base[i] = res.base_offset;
		ck_assert_int_eq(res.last_offset, base[i] + 39);
		seq += 40;
		if (i == 0)
			first = b;
		else
			kbuild_free(&b);
	}
	/* The retry of the first batch, lz4 as it was sent. */
	uint8_t *again = malloc(first.len);
	memcpy(again, first.buf, first.len);
	ks_append_result res;
	ck_assert_int_eq(ks_partition_append(p, again, first.len, &res), 0);
	ck_assert_int_eq(res.error, 0);
	ck_assert(res.duplicate);
	ck_assert_int_eq(res.base_offset, base[0]);
	free(again);
	kbuild_free(&first);
	kbuild gap = KBUILD_INIT;
	build(&gap, &in[1], 2, 77, seq + 5);
	ck_assert_int_eq(h_append(p, &gap, &res), KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
	kbuild_free(&gap);
	kbuild next = KBUILD_INIT;
	build(&next, &in[0], 2, 77, seq);
	ck_assert_int_eq(h_append(p, &next, &res), 0);
	ck_assert_int_eq(res.base_offset, 200);
	kbuild_free(&next);
	ck_assert_int_eq(ks_partition_flush(p, NULL), 0);

	uint8_t *log;
	size_t len = stored(p, &log);
	ck_assert_int_eq(h_check_log(log, len, 0), 202);
	size_t pos = 0;
	int nb = 0;
	int32_t want_seq = 0;
	while (pos < len) {
		kb_hdr h;
		ks__kb_decode(log + pos, &h);
		ck_assert_int_eq(h.attrs & KB_ATTR_CODEC_MASK, KB_CODEC_ZSTD);
		ck_assert_int_eq(h.pid, 77);
		ck_assert_int_eq(h.pepoch, 3);
		ck_assert_int_eq(h.base_seq, want_seq);
		ck_assert_int_eq(h.base_offset, nb < 5 ? base[nb] : 200);
		want_seq += h.count;
		pos += kb_size(&h);
		nb++;
	}
	ck_assert_int_eq(nb, 6);
	free(log);
	ks_partition_close(p);
}
END_TEST

/* compression.type=producer (the default) stores the request's bytes
 * unchanged but for the offsets; uncompressed stores them uncompressed. */
START_TEST(producer_keeps_bytes_uncompressed_inflates)
{
	for (int mode = 0; mode < 2; mode++) {
		ks_log_config cfg = h_cfg();
		cfg.compression_type = mode ? KS_COMPRESS_UNCOMPRESSED : KS_COMPRESS_PRODUCER;
		char dir[16];
		snprintf(dir, sizeof(dir), "t/%d", mode);
		ks_partition *p;
		ck_assert_int_eq(ks_partition_open(h_vfs, dir, NULL, 1, &cfg, &p), 0);
		ck_assert_int_eq(ks_partition_take_over(p, 1), 0);
		kbuild b = KBUILD_INIT;
		build(&b, &FROM[1], 30, -1, -1); /* gzip */
		uint8_t *sent = malloc(b.len);
		memcpy(sent, b.buf, b.len);
		ks_append_result res;
		ck_assert_int_eq(h_append(p, &b, &res), 0);
		ck_assert_int_eq(ks_partition_flush(p, NULL), 0);
		uint8_t *log;
		size_t len = stored(p, &log);
		kb_hdr h;
		ks__kb_decode(log, &h);
		ck_assert_uint_eq(kb_size(&h), len);
		if (mode == 0) {
			ck_assert_uint_eq(len, b.len);
			ck_assert(memcmp(log + KB_OFF_MAGIC, sent + KB_OFF_MAGIC, len - KB_OFF_MAGIC) == 0);
		} else {
			ck_assert_int_eq(h.attrs & KB_ATTR_CODEC_MASK, KB_CODEC_NONE);
			kb_info in;
			kb_limits lim = limits(64 << 20);
			int n, bad;
			const char *msg;
			ck_assert_int_eq(ks__kb_validate(sent, b.len, &lim, &in, 1, &n, &bad, &msg), 0);
			kb_put32(sent + KB_OFF_LEADER_EPOCH, 1); /* stamped on append, outside the CRC */
			check_same(sent, b.len, &in, log, len, KB_CODEC_NONE);
		}
		free(log);
		free(sent);
		kbuild_free(&b);
		ks_partition_close(p);
	}
}
END_TEST

/* Kafka's rule: a batch that recompression makes larger than
 * max.message.bytes is refused with MESSAGE_TOO_LARGE; nothing is
 * appended. */
START_TEST(append_refuses_a_recompressed_batch_above_max_message_bytes)
{
	ks_log_config cfg = h_cfg();
	cfg.compression_type = KS_COMPRESS_UNCOMPRESSED;
	cfg.max_message_bytes = 64 << 10;
	ks_partition *p;
	ck_assert_int_eq(ks_partition_open(h_vfs, "t/0", NULL, 1, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 1), 0);
	kbuild b = KBUILD_INIT;
	kbuild_begin(&b, -1, -1, -1, TS0);
	static uint8_t v[200 << 10];
	kbuild_record(&b, "k", 1, v, (int32_t)sizeof(v), TS0);
	kbuild_end(&b, KBUILD_GZIP);
	ck_assert_uint_lt(b.len, 64 << 10);
	ks_append_result res;
	ck_assert_int_eq(h_append(p, &b, &res), KERR_MESSAGE_TOO_LARGE);
	ck_assert_ptr_nonnull(res.message);
	ck_assert_ptr_nonnull(strstr(res.message, "max.message.bytes"));
	ck_assert_int_eq(res.batch_index, 0);
	ck_assert_int_eq(ks_partition_log_end(p), 0);
	kbuild_free(&b);
	ks_partition_close(p);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "storage-recompress", .tcase = "recompress", .timeout = 240,
					  .setup = h_setup, .teardown = h_teardown },
			  KTEST_LIST(every_codec_pair_round_trips, levels_apply_and_ultra_zstd_stays_readable,
				     output_above_the_bound_is_refused,
				     append_stores_the_topic_codec_and_keeps_producer_state,
				     producer_keeps_bytes_uncompressed_inflates,
				     append_refuses_a_recompressed_batch_above_max_message_bytes));
}
