/*
 * check_enospc.c — out of space must surface where a writer can act on it.
 *
 * A network filesystem client buffers writes and may learn that the server
 * is full only when it flushes: at fsync, or (write-behind without fsync
 * passing the error on) at close, when the broker has long acknowledged the
 * records.  The broker answers KAFKA_STORAGE_ERROR only for errors it is
 * told about at write or fsync.  So on a volume filled on purpose:
 *   - ENOSPC or EDQUOT must come from a write or an fsync, not first from
 *     close (deferred_to_close);
 *   - every byte whose write and fsync returned success reads back
 *     (acked_lost counts those that do not);
 *   - a small file written, fsynced and closed without an error while the
 *     volume is full reads back whole (small_lost).
 *
 * It fills the volume, so it runs only when asked (--enospc LIMIT) and only
 * when the volume's free space is at most LIMIT: a small test volume, a
 * quota-bounded directory, a loop or tmpfs mount, never a user's large
 * volume by accident.  Everything it wrote is removed at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/judge.h"
#include "conformance/run.h"

#define CHUNK (1 << 20)
#define SMALL 4096
#define NSMALL 4
/* Beyond the free space statvfs reported: reserved blocks, compression,
 * other writers.  Still no error by then: the volume did not fill. */
#define SLACK (16LL << 20)

/* Bytes that depend on the file offset and the seed (splitmix64), so a
 * chunk read back in the wrong place, zeros or another file's data show. */
static void pattern(uint8_t *buf, size_t n, uint64_t off, uint64_t seed)
{
	for (size_t i = 0; i < n; i += 8) {
		uint64_t z = seed + (off + i) * 0x9E3779B97F4A7C15ULL;
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
		z ^= z >> 31;
		memcpy(buf + i, &z, n - i < 8 ? n - i : 8);
	}
}

static int is_space_error(int rc)
{
	return rc == -ENOSPC || rc == -EDQUOT;
}

static void anomaly(kc_result *res, const char *kind, const char *detail, json_t *trace)
{
	json_t *one = json_pack("[{s:s,s:i,s:i,s:s,s:o}]", "kind", kind, "actor", -1, "iteration", 0,
				"detail", detail, "trace", trace);
	kc_result_add_anomalies(res, NULL, one, 1);
	json_decref(one);
}

/* Reads [0, len) of path back against the pattern.  0 when whole; else
 * *bad gets the first differing offset (len when the file is short). */
static int verify(sub_vfs *v, const char *path, uint64_t len, uint64_t seed, uint8_t *buf,
		  uint8_t *want, uint64_t *bad)
{
	sub_file *f = NULL;
	*bad = 0;
	int rc = sub_open(v, path, O_RDONLY, 0, &f);
	if (rc)
		return rc;
	for (uint64_t off = 0; off < len; off += CHUNK) {
		size_t n = len - off < CHUNK ? (size_t)(len - off) : CHUNK;
		ssize_t got = 0;
		while ((size_t)got < n) { /* a network client reads in rsize pieces */
			ssize_t g = f->vfs->m->pread(f, buf + got, n - (size_t)got, off + (uint64_t)got);
			if (g <= 0) {
				if (g < 0)
					rc = (int)g;
				break;
			}
			got += g;
		}
		if (rc) {
			*bad = off;
			break;
		}
		pattern(want, n, off, seed);
		if ((size_t)got < n || memcmp(buf, want, (size_t)got) != 0) {
			size_t i = 0;
			while (i < (size_t)got && buf[i] == want[i])
				i++;
			*bad = off + i;
			rc = -EBADMSG;
			break;
		}
	}
	sub_close(f);
	return rc;
}

int kc_check_enospc(kc_run *r, kc_result *res, const char *dir)
{
	sub_vfs *v = r->vfs;
	char fill[256] = "", small[NSMALL][256];
	uint8_t *buf = malloc(CHUNK), *want = malloc(CHUNK);
	sub_file *f = NULL;
	int rc = 0;
	res->iterations = 1;
	static const char *const zero[] = {"surfaced_at_write", "surfaced_at_fsync", "deferred_to_close",
					   "acked_lost", "small_written", "small_lost"};
	for (size_t k = 0; k < sizeof(zero) / sizeof(zero[0]); k++)
		kc_result_count(res, zero[k], 0);
	if (!buf || !want) {
		rc = -ENOMEM;
		kc_result_error(res, "out of memory");
		goto out;
	}
	kc_run_variant(r, "fill");
	sub_fsinfo fi;
	if ((rc = sub_statvfs(v, dir, &fi))) {
		kc_result_error(res, "statvfs %s: %s: the free space must be known before filling", dir,
				sub_strerror(rc));
		goto out;
	}
	/* Filling a volume whose free space is unknown could mean filling a
	 * shared one without bound. */
	int64_t avail = kc_free_bytes(fi.blocks, fi.bavail, fi.bsize);
	if (avail < 0) {
		rc = -EFBIG;
		kc_result_error(res,
				"statvfs %s reports %s: the free space must be known before filling",
				dir, fi.blocks == 0 ? "0 blocks (no space accounting)" : "more than 2^63 bytes");
		goto out;
	}
	json_object_set_new(res->profile, "free_bytes", json_integer(avail));
	json_object_set_new(res->profile, "limit_bytes", json_integer(r->o->enospc_limit));
	if (avail > r->o->enospc_limit) {
		rc = -EFBIG;
		kc_result_error(res,
				"the volume has %lld MiB free, more than --enospc %lld MiB allows to fill: run it on a small volume, a quota-bounded directory or a test mount, or raise the limit",
				(long long)(avail >> 20), (long long)(r->o->enospc_limit >> 20));
		goto out;
	}
	snprintf(fill, sizeof(fill), "%s/fill", dir);
	if ((rc = sub_open(v, fill, O_CREAT | O_EXCL | O_WRONLY, 0644, &f))) {
		kc_result_error(res, "create %s: %s", fill, sub_strerror(rc));
		goto out;
	}
	uint64_t off = 0, acked = 0, max = (uint64_t)avail + SLACK;
	int surfaced = 0; /* 1 write, 2 fsync */
	int serr = 0;
	while (off < max && !*r->interrupted) {
		pattern(buf, CHUNK, off, r->seed);
		rc = sub_pwrite_full(f, buf, CHUNK, off);
		if (rc == 0) {
			off += CHUNK;
			rc = sub_fsync(f);
			if (rc == 0) {
				acked = off;
				continue;
			}
			surfaced = 2;
		} else {
			surfaced = 1;
		}
		serr = rc;
		break;
	}
	r->manual = 1;
	r->manual_done = (int64_t)(off >> 20);
	int crc = sub_close(f);
	f = NULL;
	if (*r->interrupted) {
		rc = -EINTR;
		goto out;
	}
	if (serr && !is_space_error(serr)) {
		rc = serr;
		kc_result_error(res, "%s at byte %llu: %s, not out of space: no verdict", surfaced == 1 ? "write" : "fsync",
				(unsigned long long)off, sub_strerror(serr));
		goto out;
	}
	kc_result_count(res, "filled_bytes", (json_int_t)off);
	kc_result_count(res, "acked_bytes", (json_int_t)acked);
	json_object_set_new(res->profile, "surfaced_at",
			    json_string(surfaced == 1 ? "write" : surfaced == 2 ? "fsync" : crc ? "close" : "none"));
	json_object_set_new(res->profile, "error", json_string(kc_errname(serr ? serr : crc)));
	if (surfaced == 1)
		kc_result_count(res, "surfaced_at_write", 1);
	else if (surfaced == 2)
		kc_result_count(res, "surfaced_at_fsync", 1);
	if (!surfaced && crc) {
		kc_result_count(res, "deferred_to_close", 1);
		char d[400];
		snprintf(d, sizeof(d),
			 "%llu MiB written and fsynced without an error, then close answered %s: a writer that acknowledged after fsync was never told",
			 (unsigned long long)(acked >> 20), kc_errname(crc));
		char l1[400], l2[200];
		snprintf(l1, sizeof(l1), "driver: create %s; write 1 MiB + fsync, %llu times: OK", fill,
			 (unsigned long long)(acked >> 20));
		snprintf(l2, sizeof(l2), "driver: close: %s", kc_errname(crc));
		anomaly(res, "deferred_to_close", d, json_pack("[s,s]", l1, l2));
	} else if (!surfaced && !crc) {
		rc = -ENOSPC;
		kc_result_error(res,
				"wrote %llu MiB (%lld MiB free before) without an out-of-space error: the volume did not fill (compression, thin provisioning, or space freed meanwhile); no verdict",
				(unsigned long long)(off >> 20), (long long)(avail >> 20));
		goto out;
	}

	kc_run_variant(r, "verify");
	uint64_t bad = 0;
	int vrc = verify(v, fill, acked, r->seed, buf, want, &bad);
	if (vrc) {
		kc_result_count(res, "acked_lost", (json_int_t)(acked - bad));
		char d[400];
		snprintf(d, sizeof(d), "%llu of %llu bytes reported written and fsynced read back; from byte %llu: %s",
			 (unsigned long long)bad, (unsigned long long)acked, (unsigned long long)bad,
			 vrc == -EBADMSG ? "different or missing data" : sub_strerror(vrc));
		char l1[400];
		snprintf(l1, sizeof(l1), "driver: open %s, read %llu bytes", fill, (unsigned long long)acked);
		anomaly(res, "acked_lost", d, json_pack("[s]", l1));
	}

	/* While full: what a metadata write (a small file, written whole,
	 * fsynced, closed) looks like.  Failing is fine; succeeding and then
	 * reading back short is not. */
	kc_run_variant(r, "small");
	for (int k = 0; k < NSMALL; k++) {
		snprintf(small[k], sizeof(small[k]), "%s/small-%d", dir, k);
		sub_file *sf = NULL;
		uint64_t seed = r->seed ^ (uint64_t)(k + 1);
		int s1 = sub_open(v, small[k], O_CREAT | O_EXCL | O_WRONLY, 0644, &sf);
		if (s1)
			continue;
		pattern(buf, SMALL, 0, seed);
		int s2 = sub_pwrite_full(sf, buf, SMALL, 0);
		int s3 = s2 ? s2 : sub_fsync(sf);
		int s4 = sub_close(sf);
		if (s2 || s3 || s4)
			continue;
		kc_result_count(res, "small_written", 1);
		if (verify(v, small[k], SMALL, seed, buf, want, &bad) != 0) {
			kc_result_count(res, "small_lost", 1);
			char d[300];
			snprintf(d, sizeof(d), "%s: written, fsynced and closed without an error while full, reads back %llu of %d bytes",
				 small[k], (unsigned long long)bad, SMALL);
			anomaly(res, "small_lost", d, json_pack("[s]", "driver: create, write 4 KiB, fsync, close: OK"));
		}
	}
	rc = 0;
out:
	if (f)
		sub_close(f);
	free(buf);
	free(want);
	/* The space goes back at once, before anything else runs. */
	char p[256];
	snprintf(p, sizeof(p), "%s/fill", dir);
	sub_unlink(v, p);
	for (int k = 0; k < NSMALL; k++) {
		snprintf(p, sizeof(p), "%s/small-%d", dir, k);
		sub_unlink(v, p);
	}
	return rc;
}
