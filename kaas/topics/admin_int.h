/*
 * admin_int.h — private to the admin codecs (admin_topics.c,
 * admin_configs.c, admin_records.c): the size of an error message, name
 * comparison, and reading a request's arrays into zeroed memory.
 */
#ifndef KAAS_TOPICS_ADMIN_INT_H
#define KAAS_TOPICS_ADMIN_INT_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/topics/admin.h"

#define MSG_LEN 320

static inline int kstr_eq(kw_str a, kw_str b)
{
	return a.len == b.len && (a.len <= 0 || memcmp(a.s, b.s, (size_t)a.len) == 0);
}

/*
 * ADMIN_ARRAY(rd, min_elem, n, p): reads an array's count into n (a null
 * array reads as empty; KRD_ARRAY checks the count against what is left
 * before anything is allocated) and points p at n zeroed elements.  Like
 * the KRD_* macros it jumps to err_parse on a bad count; out of memory, it
 * sets n = 0 and rc = -ENOMEM and jumps to out, whose cleanup then has
 * nothing of this array to free.
 */
#define ADMIN_ARRAY(rd, min_elem, n, p) ADMIN_ARRAY_F(rd, 0, min_elem, n, p)
#define ADMIN_ARRAY_F(rd, flex, min_elem, n, p)                              \
	do {                                                                 \
		KRD_ARRAY((rd), (flex), (min_elem), &(n));                   \
		if ((n) < 0)                                                 \
			(n) = 0;                                             \
		if ((n) > 0 && !((p) = calloc((size_t)(n), sizeof(*(p))))) { \
			(n) = 0;                                             \
			rc = -ENOMEM;                                        \
			goto out;                                            \
		}                                                            \
	} while (0)

/* config_docs.c: the ConfigType code (0 when unknown) and one sentence on
 * what the config does in kaas, NULL when it has none. */
const char *kt__config_doc(const char *name, int8_t *type);
int kt__config_docs_sorted(void); /* 1 when the table is sorted (a test) */

#endif
