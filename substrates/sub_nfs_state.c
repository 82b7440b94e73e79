/*
 * sub_nfs_state.c — NFSv4 open states shared by the files of one session.
 *
 * An NFSv4.0 server keeps one open state per (open-owner, file), and libnfs
 * 4.0 uses a single open-owner per context.  Opening a file that the session
 * already has open therefore does not make a second state: the server hands
 * out the same one with a newer stateid (the older handle's stateid is now
 * out of date) and the first CLOSE of either handle ends it for both — the
 * other handle's next READ or WRITE fails with NFS4ERR_BAD_STATEID.  A kernel
 * client counts its opens per file and sends CLOSE after the last one; this
 * file does the same for the nfs backend.
 *
 * Whether an open names a file we already hold is decided by a fresh GETATTR
 * of the path (close-to-open: it sees what another client renamed there) and
 * the file's fsid/fileid, compared with the states of the session.
 *
 * The same GETATTR, sent before every NFSv4 open, answers the opens that
 * would fail (a missing file without O_CREAT, an existing one with O_EXCL, a
 * directory) without sending an OPEN: an OPEN the server refuses puts libnfs
 * 4.0's open-owner sequence id out of step and retires the session
 * (sub_nfs_rpc.c).  Only a race with another client still makes an OPEN
 * fail.
 */
#include "substrates/sub_nfs_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>

static int st_lstat(struct nfs_context *ctx, void *arg, nfs_call *c)
{
	return nfs_lstat64_async(ctx, ((path_args *)arg)->a, sub_nfs_call_cb, c);
}

static int st_fstat(struct nfs_context *ctx, void *arg, nfs_call *c)
{
	return nfs_fstat64_async(ctx, ((io_args *)arg)->fh, sub_nfs_call_cb, c);
}

static int st_close(struct nfs_context *ctx, void *arg, nfs_call *c)
{
	return nfs_close_async(ctx, ((io_args *)arg)->fh, sub_nfs_call_cb, c);
}

static int covers(int have, int want)
{
	return have == O_RDWR || have == want;
}

/* The state's file identity, fetched once (a GETATTR of its handle). */
static int state_id(nfs_vfs *v, nfs_conn *cn, nfs_ostate *os)
{
	if (os->has_id)
		return 0;
	io_args a = {.fh = os->fh};
	nfs_call *c;
	int rc = sub_nfs_run_call(v, cn, CALL_STAT, 0, st_fstat, &a, &c);
	if (rc == 0) {
		os->dev = c->st.nfs_dev;
		os->ino = c->st.nfs_ino;
		os->has_id = 1;
	}
	sub_nfs_call_free(c);
	return rc < 0 ? rc : 0;
}

int sub_nfs_state_share(nfs_vfs *v, const char *p, int acc, int flags, nfs_ostate **os,
			nfs_ostate **upgrade, nfs_conn **cnp, int *exists)
{
	*os = *upgrade = NULL;
	*exists = -1;
	path_args a = {.a = p};
	nfs_call *c;
	nfs_conn *cn = NULL;
	int rc = sub_nfs_run_path_op(v, CALL_STAT | CALL_RETRANSMIT, st_lstat, &a, &c, &cn);
	if (rc < 0) {
		sub_nfs_call_free(c);
		if (rc != -ENOENT)
			return 0; /* the OPEN that follows reports anything else */
		if (!(flags & O_CREAT))
			return -ENOENT;
		*exists = 0;
		return 0;
	}
	struct nfs_stat_64 st = c->st;
	sub_nfs_call_free(c);
	if ((flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL))
		return -EEXIST; /* whatever the name is, even a dangling link */
	if (S_ISDIR(st.nfs_mode))
		return -EISDIR;
	/* A symbolic link: the OPEN follows it, wherever it points. */
	if (!S_ISLNK(st.nfs_mode))
		*exists = 1;
	if (!S_ISREG(st.nfs_mode) || cn != v->conn)
		return 0;
	for (nfs_ostate *s = cn->states; s; s = s->next) {
		if (state_id(v, cn, s) != 0)
			continue;
		if (s->dev != st.nfs_dev || s->ino != st.nfs_ino)
			continue;
		if (!covers(s->acc, acc)) {
			*upgrade = s;
			return 0;
		}
		s->refs++;
		*os = s;
		*cnp = cn;
		return 1;
	}
	return 0;
}

nfs_ostate *sub_nfs_state_add(nfs_conn *cn, struct nfsfh *fh, int acc, nfs_ostate *upgrade)
{
	if (upgrade) {
		/* The OPEN returned the same state with a newer stateid and the
		 * union of the accesses: the new handle replaces the old. */
		struct nfsfh **r = realloc(upgrade->retired, (size_t)(upgrade->nretired + 1) * sizeof(*r));
		if (r) {
			upgrade->retired = r;
			upgrade->retired[upgrade->nretired++] = upgrade->fh;
		}
		upgrade->fh = fh;
		upgrade->acc = covers(upgrade->acc, acc) ? upgrade->acc : O_RDWR;
		upgrade->refs++;
		return upgrade;
	}
	nfs_ostate *os = calloc(1, sizeof(*os));
	if (!os)
		return NULL;
	os->fh = fh;
	os->acc = acc;
	os->refs = 1;
	os->next = cn->states;
	cn->states = os;
	return os;
}

int sub_nfs_state_release(nfs_vfs *v, nfs_conn *cn, nfs_ostate *os)
{
	if (--os->refs > 0)
		return 0;
	for (nfs_ostate **pp = &cn->states; *pp; pp = &(*pp)->next) {
		if (*pp == os) {
			*pp = os->next;
			break;
		}
	}
	/* On a retired session the CLOSE is sent only because libnfs frees the
	 * handle that way (whatever the outcome); the answer, most likely
	 * NFS4ERR_BAD_SEQID, means nothing: the state ends with the session's
	 * lease.  What the file wrote was committed before (nv_close). */
	int retired = cn->retired;
	io_args a = {.fh = os->fh};
	nfs_call *c;
	int rc = sub_nfs_run_call(v, cn, CALL_PLAIN | CALL_SEQID, 0, st_close, &a, &c);
	sub_nfs_call_free(c);
	if (retired)
		rc = 0;
	if (rc == ERR_RETRY_DELAY || rc == ERR_RETRY_NEWCONN)
		rc = -EIO;
	/* Handles the state had before an upgrade.  The state is gone; libnfs
	 * frees them only by sending a CLOSE with their older stateid, which
	 * the server refuses or (ganesha) answers OK without counting it while
	 * libnfs counts it: the session's sequence id is unknown afterwards. */
	for (int i = 0; i < os->nretired; i++) {
		a.fh = os->retired[i];
		sub_nfs_run_call(v, cn, CALL_PLAIN, 0, st_close, &a, &c);
		sub_nfs_call_free(c);
		cn->retired = 1;
	}
	free(os->retired);
	free(os);
	return rc;
}
