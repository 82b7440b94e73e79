/*
 * preflight.h — what a volume is, from statfs and mountinfo, and what that
 * means for the contract.
 *
 * Identity alone refuses a volume only where no behaviour could redeem it:
 * tmpfs/ramfs (nothing survives a reboot), SMB/CIFS (different open, rename
 * and delete semantics) and FUSE object-store mounts (rename is copy+delete).
 * Everything else is explained (NFS and Ceph mount options) and left to the
 * behavioural checks to decide.
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

/* A short human name for the filesystem kind ("NFS", "tmpfs", "FUSE (s3fs)"). */
const char *kc_fs_kind(const sub_identity *id, char *buf, size_t len);

#endif
