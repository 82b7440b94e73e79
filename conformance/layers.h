/*
 * layers.h — what stores the bytes of a directory: the mount that holds it
 * and everything below that mount, down to a disk, a RAM device or a
 * filesystem that keeps files in memory.
 *
 * A mount's own type says little when it is stacked: an overlay writes into
 * its upperdir (wherever that is), a bind mount shows one directory of
 * another filesystem (mountinfo's root field), a passthrough FUSE daemon
 * writes into a backing directory (named as its mount source), ext4 on a
 * loop device writes into a file of another filesystem, ext4 on /dev/ram0
 * or /dev/zram0 writes into RAM.  Preflight applies its rules to every
 * layer found here (preflight.h); resolution runs on the host of the mount
 * (the driver for its URL, each actor in its hello), since only that host's
 * /proc and /sys describe it.
 *
 * The parsers are pure so that the unit tests feed them lines and options.
 */
#ifndef KC_LAYERS_H
#define KC_LAYERS_H

#include <jansson.h>
#include <stddef.h>

#include "substrates/sub.h"

typedef struct kc_mount {
	int id, parent;
	unsigned major, minor;
	char root[SUB_PATH_MAX]; /* the directory of the filesystem mounted here */
	char mountpoint[SUB_PATH_MAX];
	char fstype[64];
	char source[512];
	char options[2048]; /* per-mount, then superblock options */
} kc_mount;

/* One line of /proc/self/mountinfo, \ooo escapes undone.  0 or -EINVAL. */
int kc_mountinfo_parse(const char *line, kc_mount *m);

/* An overlay's upperdir=, workdir= and lowerdir= (the last may be a
 * ':'-separated list; "lowerdir+=" entries are appended with ':').  Commas
 * and colons escaped with '\' in the options are kept as plain characters in
 * upper and work.  Missing members come back empty.  0 or -EINVAL when the
 * options are too long for the buffers. */
int kc_overlay_dirs(const char *options, char *upper, size_t ulen, char *work, size_t wlen,
		    char *lower, size_t llen);

/* Option `name` in a comma-separated list: 1, with its value (or "") in val;
 * the last occurrence wins (superblock options come after mount options). */
int kc_find_option(const char *opts, const char *name, char *val, size_t vlen);

/* Is mp a path prefix of path at a component boundary?  Its length, or 0. */
size_t kc_mount_prefix_len(const char *mp, const char *path);

#define KC_LAYERS_MAX 16

/* Resolves the storage of the absolute directory `path` on this host into a
 * JSON array, the mount holding it first, each entry an object:
 *   role        "mount", "overlay upperdir", "overlay workdir", "FUSE
 *               backing directory", "block device",
 *               "loop backing file", "device-mapper/md member"
 *   depth       0 for the mount holding path, +1 per layer below
 *   path        the path (or device) this layer was reached by
 *   for a mount: mountpoint, fstype, source, options, mount_root (mountinfo's
 *               root field: "/" unless a bind mount), device ("maj:min"),
 *               fs_magic (hex string, from statfs of path), bind (boolean)
 *   for a block device: device (kernel name), kind ("disk", "loop", "ram",
 *               "zram", "dm", "md", "nbd", "pmem", ...), write_cache
 *               ("write back", "write through" or ""), backing_file (loop)
 * Returns the array (never NULL but on out of memory); entries it could not
 * read carry "error". */
json_t *kc_layers_resolve(const char *path);

#endif
