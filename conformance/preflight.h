/*
 * preflight.h — what a volume is, from statfs and mountinfo, and what that
 * means for the contract.
 *
 * Identity alone refuses a volume only where no behaviour could redeem it:
 * tmpfs/ramfs (nothing survives a reboot), SMB/CIFS (different open, rename
 * and delete semantics) and FUSE object-store mounts (rename is copy+delete).
 * The same durability rules apply to every layer below a stacked mount
 * (overlay upper and work directories, a FUSE daemon's backing directory,
 * the file behind a loop device, a RAM disk), and mount options that turn
 * fsync into a no-op (barriers off over a volatile cache, overlay volatile)
 * refuse or warn, naming the option.  Everything else is explained and left
 * to the behavioural checks to decide.
 */
#ifndef KC_PREFLIGHT_H
#define KC_PREFLIGHT_H

#include <jansson.h>
#include <stddef.h>

#include "conformance/kc.h"
#include "substrates/sub.h"

#define KC_MAGIC_NFS 0x6969ULL
#define KC_MAGIC_CIFS 0xFF534D42ULL
#define KC_MAGIC_SMB2 0xFE534D42ULL
#define KC_MAGIC_SMB 0x517BULL
#define KC_MAGIC_FUSE 0x65735546ULL
#define KC_MAGIC_CEPH 0x00C36400ULL
#define KC_MAGIC_TMPFS 0x01021994ULL
#define KC_MAGIC_RAMFS 0x858458F6ULL

/* Appends findings {"level": "REFUSED"|"WARN"|"INFO", "code", "explain"} to
 * `findings`, writes a one-line summary and returns REFUSED, WARN or PASS. */
kc_verdict kc_preflight_classify(const sub_identity *id, json_t *findings, char *summary,
				 size_t len);

/* The rules applied to every layer below a mount (layers.h, resolved on the
 * mount's host): a layer that keeps files in memory (tmpfs, ramfs), a RAM
 * block device (brd, zram, null_blk) is REFUSED; mount options that make
 * fsync a promise about nothing are REFUSED or WARN (kc_option_findings); the
 * rest is explained.  Appends findings with "layer" (index) and
 * "layer_role"; *decided* gets the description of the first layer with the
 * worst verdict ("overlay upperdir /x (tmpfs from t on /x)"), "" when every
 * layer passed. */
kc_verdict kc_preflight_layers(const json_t *layers, json_t *findings, char *decided, size_t dlen);

/* The option table for one filesystem: appends a finding per rule that
 * matches fstype and options, prefixed with where; write_cache is the sysfs
 * write_cache of the device below ("write back" makes a barrier option a
 * refusal), or NULL.  Returns 0 (explained), 1 (warned) or 2 (refused). */
int kc_option_findings(const char *fstype, const char *options, const char *write_cache,
		       const char *where, json_t *findings);

/* A short human name for the filesystem kind ("NFS", "tmpfs", "FUSE (s3fs)"). */
const char *kc_fs_kind(const sub_identity *id, char *buf, size_t len);

#endif
