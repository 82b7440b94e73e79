/*
 * payload.c — self-describing records and offset-addressable patterns.
 */
#include "conformance/payload.h"

#include <string.h>

#include "util/crc32c.h"

uint64_t kc_seed_mix(uint64_t a, uint64_t b)
{
	kc_rng r = {a ^ (b * 0xD6E8FEB86659FD93ULL)};
	kc_rng_next(&r);
	return kc_rng_next(&r);
}

const char *kc_payload_status_name(int st)
{
	switch (st) {
	case KC_PL_OK:
		return "ok";
	case KC_PL_EMPTY:
		return "empty";
	case KC_PL_SHORT:
		return "short";
	case KC_PL_LONG:
		return "long";
	case KC_PL_TORN:
		return "torn";
	}
	return "?";
}

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
	uint32_t v = 0;
	for (int i = 0; i < 4; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* Body bytes: 8 at a time from a stream keyed by (tag, seq). */
static void fill_stream(unsigned char *p, size_t n, uint64_t key)
{
	kc_rng r = {key};
	while (n >= 8) {
		put64(p, kc_rng_next(&r));
		p += 8;
		n -= 8;
	}
	if (n) {
		unsigned char last[8];
		put64(last, kc_rng_next(&r));
		memcpy(p, last, n);
	}
}

/* Layout: magic u32 | len u32 | seq u64 | tag u64 | crc u32 | body.
 * The CRC covers bytes [0,24) and the body, so any mix of two records (or a
 * record with a foreign tag) fails it. */
static uint32_t record_crc(const unsigned char *p, size_t len)
{
	uint32_t c = ku_crc32c(0, p, 24);
	return ku_crc32c(c, p + KC_PAYLOAD_HDR, len - KC_PAYLOAD_HDR);
}

void kc_payload_fill(void *buf, size_t len, uint64_t tag, uint64_t seq)
{
	unsigned char *p = buf;
	put32(p, KC_PAYLOAD_MAGIC);
	put32(p + 4, (uint32_t)len);
	put64(p + 8, seq);
	put64(p + 16, tag);
	fill_stream(p + KC_PAYLOAD_HDR, len - KC_PAYLOAD_HDR, kc_seed_mix(tag, seq));
	put32(p + 24, record_crc(p, len));
}

int kc_payload_check(const void *buf, size_t n, uint64_t tag, uint64_t *seq, uint32_t *len)
{
	const unsigned char *p = buf;
	if (n == 0)
		return KC_PL_EMPTY;
	if (n < KC_PAYLOAD_HDR)
		return KC_PL_SHORT;
	if (get32(p) != KC_PAYLOAD_MAGIC || get64(p + 16) != tag)
		return KC_PL_TORN;
	uint32_t l = get32(p + 4);
	if (l < KC_PAYLOAD_HDR)
		return KC_PL_TORN;
	*seq = get64(p + 8);
	*len = l;
	if (n < l)
		return KC_PL_SHORT;
	if (n > l)
		return KC_PL_LONG;
	if (get32(p + 24) != record_crc(p, l))
		return KC_PL_TORN;
	return KC_PL_OK;
}

/* The pattern is generated per 8-byte word: word w of tag t is a hash of
 * (t, w), so any window can be produced without the bytes before it. */
static uint64_t pattern_word(uint64_t tag, uint64_t w)
{
	kc_rng r = {tag ^ (w * 0x9E3779B97F4A7C15ULL)};
	return kc_rng_next(&r);
}

void kc_pattern_fill(void *buf, size_t len, uint64_t tag, uint64_t off)
{
	unsigned char *p = buf;
	size_t i = 0;
	while (i < len) {
		uint64_t pos = off + i;
		uint64_t w = pos / 8;
		unsigned char word[8];
		put64(word, pattern_word(tag, w));
		size_t in = (size_t)(pos % 8);
		size_t take = 8 - in;
		if (take > len - i)
			take = len - i;
		memcpy(p + i, word + in, take);
		i += take;
	}
}

int64_t kc_pattern_check(const void *buf, size_t len, uint64_t tag, uint64_t off)
{
	const unsigned char *p = buf;
	unsigned char tmp[4096];
	for (size_t i = 0; i < len; i += sizeof(tmp)) {
		size_t n = len - i < sizeof(tmp) ? len - i : sizeof(tmp);
		kc_pattern_fill(tmp, n, tag, off + i);
		if (memcmp(tmp, p + i, n) != 0) {
			for (size_t j = 0; j < n; j++)
				if (tmp[j] != p[i + j])
					return (int64_t)(i + j);
		}
	}
	return -1;
}
