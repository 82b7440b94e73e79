/*
 * stamp.h — the qualification stamp (CLUSTER/qualification.json) and the
 * broker's start-up self-check.
 *
 * A small module of its own (sub + util + jansson only) so that the broker
 * links it without the rest of kaas-conform:
 *
 *   kq_stamp_verify(cluster, &volume, why, sizeof why)
 *       0 when CLUSTER holds a passing stamp for the volume whose identity is
 *       given; otherwise a negative errno and a one-line reason:
 *         -ENOENT   no stamp
 *         -EBADMSG  unreadable, malformed or of an unknown schema
 *         -EPERM    the stamp does not record a full passing qualification
 *                   (every check PASS; fsync, and with it the verdict, may be
 *                   UNPROVEN: durability not disproven, no power-loss hook)
 *         -EXDEV    the stamp is for another volume
 *   kq_selfcheck(vfs, scratch_dir, why, sizeof why)
 *       a sub-second probe of the two atomic primitives (an O_EXCL race of two
 *       opens, a rename over an existing file, read back), cleaned up after.
 *
 * How a volume identity is matched is kq_volume_key() (docs/formats.md).
 */
#ifndef KC_STAMP_H
#define KC_STAMP_H

#include <jansson.h>
#include <stddef.h>

#include "substrates/sub.h"

#define KC_STAMP_FILE "qualification.json"
#define KC_STAMP_KIND "kaas-qualification"
#define KC_STAMP_SCHEMA 2 /* 2: "durability", verdict UNPROVEN; 1 is still read */

/* The key a stamp binds to: "nfs:<server>:<export>", "<fstype>:<source>" for a
 * specific device or network source, "<fstype>:fsid:<fsid>@<host>" otherwise.
 * 0, or -EINVAL when the identity carries too little to bind to. */
int kq_volume_key(const sub_identity *id, char *key, size_t keylen);

/* The identity as a JSON object (with its "volume_key"). */
json_t *kq_identity_json(const sub_identity *id);
/* And back (unknown members ignored, missing ones empty). 0 or -EINVAL. */
int kq_identity_from_json(const json_t *j, sub_identity *id);

/* The checks a stamp must record as PASS to count as a qualification. */
extern const char *const kq_stamp_required_checks[];

/* Writes dir/qualification.json with sub_write_atomic (creating dir). */
int kq_stamp_write(sub_vfs *v, const char *dir, const json_t *stamp);
/* Reads and parses dir/qualification.json. */
int kq_stamp_read(sub_vfs *v, const char *dir, json_t **out, char *why, size_t whylen);
/* Pure: is this parsed stamp a passing qualification of `volume`? */
int kq_stamp_check(const json_t *stamp, const sub_identity *volume, char *why, size_t whylen);

int kq_stamp_verify(sub_vfs *cluster, const sub_identity *volume, char *why, size_t whylen);
/* The same, for a cluster directory at `dir` inside v ("" = v's root). */
int kq_stamp_verify_at(sub_vfs *v, const char *dir, const sub_identity *volume, char *why,
		       size_t whylen);

/* The cluster directory, when it is not on the data volume, must be
 * qualified too: the stamp's "cluster_dir" names its volume and records a
 * preflight verdict of PASS or WARN (kaas-conform check DATA --cluster-dir
 * DIR --stamp).  Pure.  0 when cluster is on the data volume or so
 * qualified; -EPERM (not qualified, or refused), -EXDEV (another volume's
 * record), -EINVAL (the cluster directory cannot be identified), with why. */
int kq_stamp_check_cluster(const json_t *stamp, const sub_identity *data,
			   const sub_identity *cluster, char *why, size_t whylen);
/* The same, reading the stamp from the cluster directory itself. */
int kq_stamp_verify_cluster(sub_vfs *cluster, const sub_identity *data, char *why, size_t whylen);

/* scratch_dir must exist (relative to v's root; "" for the root). */
int kq_selfcheck(sub_vfs *v, const char *scratch_dir, char *why, size_t whylen);

#endif
