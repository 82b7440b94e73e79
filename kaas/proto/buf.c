/*
 * buf.c — out-of-line parts of the writer (growth, hand-off, CRC back-fill).
 */
#include "kaas/proto/buf.h"

#include <stdlib.h>

#include "util/crc32c.h"

uint8_t *kw_wr_room(kw_wr *w, size_t n)
{
	if (w->oom)
		return NULL;
	if (n > SIZE_MAX / 2 - w->len) {
		w->oom = 1;
		return NULL;
	}
	if (w->len + n > w->cap) {
		size_t ncap = w->cap ? w->cap : 256;
		while (ncap < w->len + n)
			ncap *= 2;
		uint8_t *nb = realloc(w->buf, ncap);
		if (!nb) {
			w->oom = 1;
			return NULL;
		}
		w->buf = nb;
		w->cap = ncap;
	}
	uint8_t *p = w->buf + w->len;
	w->len += n;
	return p;
}

void kw_wr_free(kw_wr *w)
{
	free(w->buf);
	w->buf = NULL;
	w->len = w->cap = 0;
	w->oom = 0;
}

uint8_t *kw_wr_take(kw_wr *w, size_t *len)
{
	uint8_t *b = w->buf;
	*len = w->len;
	w->buf = NULL;
	w->len = w->cap = 0;
	return b;
}

void kw_wr_patch_crc32c(kw_wr *w, size_t crc_off, size_t from)
{
	if (w->oom || from > w->len || crc_off + 4 > w->len)
		return;
	uint32_t crc = ku_crc32c(0, w->buf + from, w->len - from);
	kw_put_i32(w->buf + crc_off, (int32_t)crc);
}
