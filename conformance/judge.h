/*
 * judge.h — turning a check's counts into its verdict and one-line summary.
 *
 * Pure functions of the counts (the keys are documented per check in
 * docs/formats.md), so that the rules are in one place, unit-tested, and
 * never re-derived by a report writer.
 */
#ifndef KC_JUDGE_H
#define KC_JUDGE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "conformance/kc.h"
#include "conformance/result.h"

kc_verdict kc_judge_rename(const json_t *counts, char *summary, size_t len);
kc_verdict kc_judge_excl(const json_t *counts, char *summary, size_t len);
kc_verdict kc_judge_cto(const json_t *counts, char *summary, size_t len);
kc_verdict kc_judge_unlink(const json_t *counts, char *summary, size_t len);
kc_verdict kc_judge_fsync(const json_t *counts, char *summary, size_t len);
kc_verdict kc_judge_rcopy(const json_t *counts, char *summary, size_t len);
/* perf: fsync_p99_us against target_fsync_p99_us, mibps_1m_x100 against
 * target_mibps_x100 (0: none); a miss is a WARN, a FAIL with strict=1. */
kc_verdict kc_judge_perf(const json_t *counts, char *summary, size_t len);

/* Class 4, detection power.  An anomaly that shows in a fraction `rate` of
 * independent observations is missed by n of them with probability
 * (1-rate)^n.  kc_power_needed: the smallest n that catches it with at least
 * probability `prob` (ceil(ln(1-prob)/ln(1-rate)): 688 for 1% and 99.9%);
 * 1 for prob <= 0, -1 for arguments outside (0,1).  kc_power_of: the
 * probability that n observations catch it (0 for n <= 0). */
int64_t kc_power_needed(double rate, double prob);
double kc_power_of(int64_t n, double rate);

/* Class 3, convergence, decided per reader.  A reader is a JSON object
 * {"ok": verified reads, "final_status": what its first open after the
 * writer's last rename and close read ("ok", "stale", "missing", ...;
 * absent when that read could not be made), "reads": its observations}.  It
 * did not converge when that open read anything but the final version; it
 * is idle when it was not caught but verified nothing during the run (or
 * made no final read): no evidence either way; else it converged.  Each reader gets
 * "verdict": "converged", "not_converged" or "idle"; the return value is
 * the number not converged, *idle the number idle, *min_obs the fewest
 * observations ("reads") of any reader (-1 for none). */
int64_t kc_judge_readers(json_t *readers, int64_t *idle, int64_t *min_obs);

/* The fsync check's durability in words, for the report and the stamp:
 * {"proven": bool, "by": "power-loss-cmd"|"crash-cmd"|"writer-kill",
 *  "statement": "survived a power loss" | "fsync not disproven: no
 *  power-loss hook (...)" | "lost after fsync (...)"}. */
json_t *kc_durability_json(int lost, int proven, int hook_ran);

/* The worst verdict of the checks that ran (PASS when none ran). */
kc_verdict kc_judge_overall(const kc_result *res, int n);

/* Decides a result from its counts with the judge of its check (not for
 * preflight, whose verdict comes from the identity) and fills the reproduce
 * hint for a FAIL. */
void kc_judge_result(kc_result *r, uint64_t seed);

/* fsync timing, a warning only: did the median fsync (fsync_ns) return
 * faster than one round trip to the filesystem?  The round trip is the
 * fastest sample of the cheaper of two operations, each at most one request
 * to the server when it is not answered from a cache:
 *   lookup_ns   the stat of a name that never existed (no cache can hold
 *               it; but libnfs walks a path one LOOKUP per component, and a
 *               GlusterFS lookup is several requests to the brick);
 *   getattr_ns  the fstat of the open file (one GETATTR for libnfs and for
 *               FUSE without attribute caching).
 * A client that answers either from a cache makes the reference small, and
 * then fsync is never suspicious: timing only ever errs towards PASS.  On a
 * local filesystem both are system calls without I/O, which a no-op fsync
 * (tmpfs) still undercuts by half.  -1 means not measured.  Sets *ref_ns
 * (-1 when none) and *kind ("lookup", "getattr" or "none"). */
int kc_fsync_too_fast(int64_t fsync_ns, int64_t lookup_ns, int64_t getattr_ns, int64_t *ref_ns,
		      const char **kind);

/* unlink-open: was the deleted file's space given back?  seq holds statvfs
 * "available bytes" samples in the order they were taken: seq[0, nlinked)
 * while the holder had the file open and it was still linked, seq[nlinked,
 * nheld) after another client deleted it but before the holder closed it,
 * the rest after the close; -1 is a failed sample.  Freed means a rise of at
 * least file_bytes/2 over the level just before the event that frees it
 * (over the last linked sample for a server that frees at the unlink: NFSv3
 * has no open state; over the last held sample for everyone else), or
 * between two neighbouring samples after the unlink, by at most twice the
 * file's size (a free that came a little later, while others kept
 * writing).  The samples around each event
 * are taken back to back, so other writers on the volume (free space falling
 * by itself) have a moment, not seconds, to hide the rise.  *rise gets the
 * largest rise seen (-1 when none could be measured). */
int kc_space_freed(const int64_t *seq, int n, int nlinked, int nheld, int64_t file_bytes,
		   int64_t *rise);

/* enospc: FAIL when out of space surfaced only at close (deferred_to_close),
 * when bytes reported written and fsynced did not read back (acked_lost), or
 * a small file reported written while full did not (small_lost). */
kc_verdict kc_judge_enospc(const json_t *counts, char *summary, size_t len);

/* rename-copy: a rename is "as slow as a copy" when the median rename of the
 * large file takes at least this many times the median of the small one. */
#define KC_RCOPY_RATIO_LIMIT 10
/* The large file's size for a volume with `avail` bytes free: 64 MiB, or
 * the largest power-of-two MiB within a quarter of the free space; 0 when
 * not even 1 MiB fits (the check says what it needs). */
int64_t kc_rcopy_big_bytes(int64_t avail);
/* The free bytes statvfs's counts say (blocks, bavail, fragment size), or
 * -1 when they say nothing: a volume of 0 blocks keeps no space accounting
 * (ceph-fuse without a Ceph manager, a FUSE filesystem without statfs
 * reports all zeros), and one beyond 2^63 bytes reports "unlimited". */
int64_t kc_free_bytes(uint64_t blocks, uint64_t bavail, uint64_t bsize);

#endif
