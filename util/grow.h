/* grow.h — room for one more element at the end of a growable array, the
 * one resize rule the engine, the server and the substrates share: arr (of
 * any element type) holds n of cap allocated elements; when it is full the
 * capacity doubles (the first allocation holds `first`).  Evaluates to 0,
 * or -ENOMEM with arr and cap as they were.  n and cap may be of any
 * unsigned or non-negative integer type.
 *
 *	if (KAAS_GROW(s->ix, s->nix, s->capix, 64))
 *		return -ENOMEM;
 *	s->ix[s->nix++] = entry;
 */
#ifndef KAAS_GROW_H
#define KAAS_GROW_H

#include <errno.h>
#include <stdlib.h>

#define KAAS_GROW(arr, n, cap, first)                                                   \
	({                                                                              \
		int grow_rc_ = 0;                                                       \
		if ((size_t)(n) >= (size_t)(cap)) {                                     \
			size_t grow_nc_ = (cap) ? (size_t)(cap) * 2 : (size_t)(first);  \
			void *grow_nv_ = realloc((arr), grow_nc_ * sizeof(*(arr)));     \
			if (grow_nv_) {                                                 \
				(arr) = grow_nv_;                                       \
				(cap) = grow_nc_;                                       \
			} else {                                                        \
				grow_rc_ = -ENOMEM;                                     \
			}                                                               \
		}                                                                       \
		grow_rc_;                                                               \
	})

#endif
