/*
 * splice.h — file ranges spliced into a response body (private to the
 * server and kb_req_attach_read).
 *
 * A response is its body buffer with zero or more splices: "at body offset
 * `at`, insert `len` bytes of descriptor `fd` from `pos`".  The event loop
 * sends the memory parts with writev and the file parts with sendfile, so a
 * Fetch answer is never copied through user space.  The read plans whose
 * references keep those descriptors open are released once the response has
 * gone out (or was dropped).
 */
#ifndef KAAS_SERVER_SPLICE_H
#define KAAS_SERVER_SPLICE_H

#include <stddef.h>
#include <stdint.h>

#include "kaas/storage/storage.h"

typedef struct kb_splice {
	size_t at;
	int fd;
	uint64_t pos;
	uint32_t len;
} kb_splice;

struct kb_splices {
	kb_splice *v;
	int n, cap;
	ks_read_plan *plans;
	int nplans, capplans;
	uint64_t total; /* sum of v[].len */
};

/* Releases the plans and frees everything.  NULL-safe.  May close files:
 * call it on a worker, not on the event loop. */
void kb_splices_free(struct kb_splices *s);

#endif
