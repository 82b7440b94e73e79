/*
 * scratch.h — who owns a scratch directory (~kaas-conform-*) and whether its
 * run is provably over, so that leftovers of killed runs are removed only
 * when they are garbage.
 *
 * Each run records its owner {host_id, pid, pid_start, started_at_ms} in the
 * name of a subdirectory, "<scratch>/owner,<pid>,<pid_start>,<ms>,<host id>"
 * (every byte of the host id outside [A-Za-z0-9._-] written as =XX, so that
 * SMB, which refuses ':' and '|', stores it too, and smbnetfs, which
 * decodes %XX; records that wrote '/' as '|' are still read): a directory, not a file, because
 * the driver must not create files on an NFSv4 volume before it forks
 * actors (they would inherit its EXCLUSIVE4 verifier sequence), and the
 * fsync check forks again later.  Another run on the same host removes
 * a leftover only when that pid is gone, or is now another process (its
 * start time differs); every other leftover (another host's, one with no
 * owner file) is reported with its age and left for `kaas-conform clean`.
 */
#ifndef KC_SCRATCH_H
#define KC_SCRATCH_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "substrates/sub.h"

#define KC_SCRATCH_PREFIX "~kaas-conform-"
#define KC_SCRATCH_OWNER_PREFIX "owner,"
#define KC_SCRATCH_KIND "kaas-conform-scratch"

/* The start time of process pid in clock ticks since boot (field 22 of
 * /proc/PID/stat): 0 when the process does not exist or cannot be read. */
uint64_t kc_pid_start(long pid);

/* This process's owner record (malloc'd JSON). */
json_t *kc_scratch_owner_self(void);

/* The record as a directory name and back: 0 or -ENAMETOOLONG/-EINVAL;
 * NULL when name is not an owner record. */
int kc_scratch_owner_name(const json_t *owner, char *buf, size_t len);
json_t *kc_scratch_owner_parse(const char *name);

/* Pure: what a leftover's owner record says, seen from host my_host_id.
 * start_of(pid) gives the start time of a live process (0: none).
 *   1  provably dead: same host, and the pid is gone or another process
 *   0  possibly live: another host, or that very process still runs
 *  -EINVAL  not an owner record kaas-conform wrote */
int kc_scratch_owner_dead(const json_t *owner, const char *my_host_id,
			  uint64_t (*start_of)(long pid));

/* Every leftover ~kaas-conform-* directory in v's root except `skip`:
 * removes the provably dead ones (remove_dead) and, when remove_older_ms >= 0,
 * every other one not provably live that is at least that old; appends one
 * object per leftover to `list` {name, host_id, pid, age_ms, state:
 * "removed"|"left"|"live", why}; a line per leftover to out (NULL: quiet).
 * 0 or the -errno of listing the root. */
int kc_scratch_sweep(sub_vfs *v, const char *skip, int remove_dead, int64_t remove_older_ms,
		     json_t *list, FILE *out);

/* `kaas-conform clean URL [--older-than DURATION]` (exit status). */
int kc_cmd_clean(int argc, char **argv);

/* "90s", "15m", "2h", "3d", or plain seconds -> ms.  0 or -EINVAL. */
int kc_parse_duration_ms(const char *s, int64_t *ms);

#endif
