/*
 * payload.h — deterministic contents for the files the checks write, so that
 * any actor can tell from the bytes alone what it read.
 *
 * Two shapes:
 *   - a self-describing record (rename and close-to-open checks): a header
 *     with magic, total length, sequence number, stream tag and CRC-32C, then
 *     a body derived from (tag, seq).  A reader classifies what it got as
 *     complete, empty, short, long or torn, and learns the sequence number;
 *   - a pattern (bulk files: held-open, fsync crash, rename-copy): the byte at
 *     any offset is a function of (tag, offset), so a 64 MiB file is written
 *     and verified in chunks.
 * Everything derives from a seed through splitmix64, so a run is reproducible.
 */
#ifndef KC_PAYLOAD_H
#define KC_PAYLOAD_H

#include <stddef.h>
#include <stdint.h>

/* splitmix64: tiny, fast, good enough to drive sizes, jitter and bodies. */
typedef struct kc_rng {
	uint64_t s;
} kc_rng;

static inline uint64_t kc_rng_next(kc_rng *r)
{
	uint64_t z = (r->s += 0x9E3779B97F4A7C15ULL);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* Uniform-ish in [lo, hi]. */
static inline uint64_t kc_rng_range(kc_rng *r, uint64_t lo, uint64_t hi)
{
	if (hi <= lo)
		return lo;
	return lo + kc_rng_next(r) % (hi - lo + 1);
}

/* Mixes several values into one seed (for per-check, per-actor streams). */
uint64_t kc_seed_mix(uint64_t a, uint64_t b);

#define KC_PAYLOAD_HDR 28
#define KC_PAYLOAD_MAGIC 0x3150434bu /* "KCP1" little-endian */

enum kc_payload_status {
	KC_PL_OK = 0,
	KC_PL_EMPTY, /* zero bytes */
	KC_PL_SHORT, /* fewer bytes than the header says */
	KC_PL_LONG,  /* more bytes than the header says (a mix of two versions) */
	KC_PL_TORN,  /* bad magic, tag or checksum: bytes of different versions */
};

const char *kc_payload_status_name(int st);

/* Fills buf[0..len) (len >= KC_PAYLOAD_HDR) with record (tag, seq). */
void kc_payload_fill(void *buf, size_t len, uint64_t tag, uint64_t seq);

/* Classifies n bytes read back.  On KC_PL_OK (and, when the header is intact,
 * on SHORT/LONG) *seq and *len receive the header's values. */
int kc_payload_check(const void *buf, size_t n, uint64_t tag, uint64_t *seq, uint32_t *len);

/* The pattern: byte i of a file with tag t. Fills buf with the bytes at
 * [off, off+len). */
void kc_pattern_fill(void *buf, size_t len, uint64_t tag, uint64_t off);
/* Returns the offset of the first mismatching byte in buf (which holds the
 * bytes at [off, off+len)), or -1 when all match. */
int64_t kc_pattern_check(const void *buf, size_t len, uint64_t tag, uint64_t off);

#endif
