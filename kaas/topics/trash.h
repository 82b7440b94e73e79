/*
 * trash.h — what kaas moved aside on the data volume instead of deleting it.
 *
 *   DATA/~trash-<ms>-<topic_id>-<hex>-<name>       a deleted or reclaimed topic
 *                                                  directory; removed once it is
 *                                                  older than the grace period
 *                                                  (kaas.trash.retention.ms) or by
 *                                                  `kaas trash empty`
 *   DATA/~quarantine-<ms>-<topic_id>-<hex>-<name>  a directory of unknown identity
 *                                                  (contradicting evidence); never
 *                                                  removed by kaas
 *   DATA/~kept-...                                 a directory that changed identity
 *                                                  while it was moved aside; never
 *                                                  removed by kaas
 *
 * <ms> is the mover's wall clock; <name> is the topic name, cut to fit a
 * file name (the whole name is in the directory's .trash.json).  '~' is not
 * in Kafka's topic alphabet, so none of these can be a topic.  docs/topics.md
 * has the rules, docs/formats.md the names.
 */
#ifndef KAAS_TOPICS_TRASH_H
#define KAAS_TOPICS_TRASH_H

#include <stddef.h>
#include <stdint.h>

#include "kaas/topics/topics.h"
#include "substrates/sub.h"

enum kt_trash_kind { KT_TRASH = 0, KT_QUARANTINE = 1, KT_KEPT = 2 };

typedef struct kt_trash_entry {
	char dir[256];                         /* its name under DATA/ */
	int kind;                              /* KT_* */
	int64_t moved_ms;                      /* when it was moved aside (wall clock); -1: unknown */
	char topic_id[KAAS_TOPIC_ID_LEN + 1];  /* "" when unknown */
	char topic[KAAS_TOPIC_NAME_MAX + 1];   /* "" when unknown */
	char reason[64];                       /* "deleted", "reclaimed", "conflict", ... or "" */
} kt_trash_entry;

/* Every entry under DATA/, sorted by name; *out is malloc'd (free()).
 * 0 or -errno. */
int kt_trash_list(sub_vfs *data, kt_trash_entry **out, size_t *n);

/* Removes the KT_TRASH entries moved aside at least older_than_ms before
 * now_ms (an entry of unknown age or dated in the future is kept).
 * older_than_ms < 0: every KT_TRASH entry, whatever its age.  Quarantined
 * and kept directories are never touched.  *removed (may be NULL) counts
 * the entries removed completely.  0 or the first -errno (every entry is
 * still attempted; a partly removed one is finished next time). */
int kt_trash_empty(sub_vfs *data, int64_t older_than_ms, int64_t now_ms, size_t *removed);

/* `kaas trash list|empty --data DIR [--older-than DURATION]`: argv[0] is
 * "trash".  Returns the process exit code (0, 1 failure, 2 usage). */
int kt_trash_main(int argc, char **argv);

#endif
