/*
 * sub_fault.h — controls of the fault-injecting substrate backend.
 *
 * A fault vfs is opened like any other substrate, by URL:
 *
 *     fault:<inner-url>?<option>&<option>...
 *
 * The options follow the LAST '?' of the URL, so an inner URL that has its
 * own query keeps it: fault:nfs://h/export?version=3?rename=copy.  Such an
 * inner URL with no fault option needs a bare '?' at the end
 * (fault:nfs://h/export?version=3?).  docs/substrates.md lists the
 * options (seed, fail, failpath, crash_after, crash_mode, undo_max, fsync,
 * rename, copy_delay_us, excl, cto, leak, statvfs) and the crash model.
 *
 * The functions below reach the fault layer behind a sub_vfs.  Each one
 * checks that the vfs really is a fault vfs and answers -EINVAL (or, for the
 * counter, 0) when it is not.
 */
#ifndef KAAS_SUB_FAULT_H
#define KAAS_SUB_FAULT_H

#include <stdint.h>

#include "substrates/sub.h"

/* 0 when vfs is a fault vfs, -EINVAL otherwise (NULL included). */
int sub_fault_check(sub_vfs *vfs);

/* Simulates power loss now: every change not covered by a successful fsync
 * is reverted (per change, from the seed: kept, dropped or torn at a 512-byte
 * boundary; see crash_mode), data held by fsync=lie is dropped, and from then
 * on every call on the vfs and on its open files returns -EIO.  Files must
 * still be closed (close frees them and returns -EIO) and the vfs destroyed.
 * Returns 0, or the first error the inner backend gave while reverting (the
 * vfs is crashed either way).  A second call returns 0 and does nothing. */
int sub_fault_crash(sub_vfs *vfs);

/* 1 after a crash (explicit or from crash_after), 0 before, -EINVAL if not a
 * fault vfs. */
int sub_fault_is_crashed(sub_vfs *vfs);

/* How many mutating calls have been carried out so far: open with O_CREAT or
 * O_TRUNC, pwrite, ftruncate, fsync, fsync_dir, rename, unlink, mkdir, rmdir
 * that passed the injected errors and reached the fault layer's action
 * (whatever the inner backend answered).  Run a workload once to learn M,
 * then replay it with crash_after=0..M.  0 for a vfs that is not a fault vfs. */
uint64_t sub_fault_mutations(sub_vfs *vfs);

/* A deterministic observation point for tests.  The hook is called, with the
 * vfs lock held by the calling thread, at these points:
 *   "rename-copy-chunk"  rename=copy wrote one more 4 KiB chunk of a file;
 *                        what = the target file being filled;
 *   "rename-copy-entry"  rename=copy moved one entry of a directory;
 *                        what = that entry's new path;
 *   "rename-hide"        rename=hide moved a file open here aside before a
 *                        rename over it or its unlink; what = the hidden name;
 *   "crash-change"       a crash decided the fate of one unsynced change, in
 *                        the order the changes were made (all files): what =
 *                        "keep", "drop" or "torn:<offset>" (the change reached
 *                        the disk up to that file offset, a multiple of 512).
 * The hook may read through another vfs, or through this one from the same
 * thread (the lock is recursive).  fn = NULL removes it.  0 or -EINVAL. */
typedef void (*sub_fault_hook_fn)(void *arg, const char *point, const char *what);
int sub_fault_set_hook(sub_vfs *vfs, sub_fault_hook_fn fn, void *arg);

#endif
