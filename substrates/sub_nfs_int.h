/*
 * sub_nfs_int.h — internals shared by the nfs backend's files:
 * sub_nfs.c (the vtable and sub_nfs_open), sub_nfs_rpc.c (waiting for
 * libnfs, errors, sessions) and sub_nfs_url.c (the URL).  Not for callers:
 * everything else uses sub.h.
 */
#ifndef KAAS_SUB_NFS_INT_H
#define KAAS_SUB_NFS_INT_H

#include <sys/time.h> /* libnfs.h uses struct timeval without including it */

#include <nfsc/libnfs.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "substrates/sub.h"

#define NFS_SUPER_MAGIC 0x6969
#define V4_WRITE_CHUNK 3072u            /* below the 4 KiB encode buffer */
#define V4_READ_CHUNK (256u * 1024u)    /* below the 1 MiB reply limit */
#define V3_IO_CHUNK (1024u * 1024u)     /* libnfs splits further by rtmax/wtmax */
#define DEFAULT_TIMEOUT_MS 10000
#define RETRY_SLEEP_MS 100

/* One NFSv4 open state: our open-owner (one per libnfs context) and one
 * file.  The server keeps exactly one per pair: a second OPEN of the same
 * file returns the same state with a newer stateid, and one CLOSE ends it
 * for every handle.  libnfs does not track this, so we do (sub_nfs_state.c):
 * our files share a state and only the last close sends CLOSE. */
typedef struct nfs_ostate {
	struct nfsfh *fh;        /* the newest handle: it carries the current stateid */
	struct nfsfh **retired;  /* older handles of the same state, closed at the end */
	int nretired;
	uint64_t dev, ino;       /* the file, once known (has_id) */
	int has_id;
	int acc;                 /* O_RDONLY, O_WRONLY or O_RDWR: what the state allows */
	int refs;                /* our open files using it */
	struct nfs_ostate *next;
} nfs_ostate;

/* One NFS client session: a libnfs context. */
typedef struct nfs_conn {
	struct nfs_context *ctx;
	int refs;   /* the vfs while current, plus each file opened on it */
	int broken; /* no new operations: replace it */
	/* NFSv4: our open-owner's sequence id may be out of step with the
	 * server's (an OPEN or CLOSE failed; see sub_nfs_rpc.c).  No new
	 * OPENs: path operations move to a new session.  Its open files keep
	 * reading and writing (stateids carry no sequence id), the lease
	 * keeper keeps renewing it, and their CLOSEs are sent but their
	 * answers ignored: the states end with the session. */
	int retired;
	nfs_ostate *states; /* NFSv4 open states of this session */
} nfs_conn;

typedef struct nfs_vfs {
	sub_vfs base;
	pthread_mutex_t mu;
	nfs_conn *conn; /* current session; NULL until the first connect */
	/* from the URL */
	char server[256];
	int version;
	int port;      /* :port in the URL, 0 when absent */
	int nfsport, mountport;
	int uid, gid;  /* -1: libnfs default (our own ids) */
	int timeout_ms;
	char path[SUB_PATH_MAX];   /* export[/subdir] as written */
	char export[SUB_PATH_MAX]; /* what MOUNT/PUTROOTFH+LOOKUP accepted */
	char subdir[SUB_PATH_MAX]; /* the rest, prepended to every path */
	char root_url[SUB_PATH_MAX];
	/* NFSv4 lease keeper */
	pthread_t renew_thread;
	int renew_started;
	int stopping;
	pthread_cond_t cv;
	int64_t last_stateful_ms; /* last operation that renewed the lease */
	struct nfs_file *files;   /* open files (for the lease keeper) */
	int renew_ms;
} nfs_vfs;

typedef struct nfs_file {
	sub_file base;
	nfs_conn *conn;
	struct nfsfh *fh;  /* NFSv3: the file's own handle */
	nfs_ostate *os;    /* NFSv4: the shared open state (its fh is the handle) */
	int acc;           /* what this open asked for */
	int dirty; /* written since the last COMMIT */
	struct nfs_file *next, *prev;
} nfs_file;

#define NV(v) ((nfs_vfs *)(v))
#define NF(f) ((nfs_file *)(f))

enum call_kind { CALL_PLAIN, CALL_FH, CALL_STAT, CALL_STATVFS, CALL_DIR, CALL_READ };
/* Or'ed into a kind: an NFSv3 request that only reads (LOOKUP, GETATTR,
 * ACCESS, READDIR, FSSTAT, READ).  nfs-ganesha 4.3 sometimes drops such a
 * request (seen on handles that just went stale) and relies on the client
 * retransmitting, as a kernel client does after its timeout; libnfs never
 * retransmits.  These are sent with a short timeout and sent again until
 * the operation's timeout is used up.  WRITE and COMMIT are not: a slow
 * server may legitimately take long over them. */
#define CALL_RETRANSMIT 0x100
/* Or'ed into a kind: an NFSv4 OPEN or CLOSE, which carries the open-owner
 * sequence id.  If it fails, the session is retired (sub_nfs_rpc.c). */
#define CALL_SEQID 0x200
#define CALL_KIND(k) ((k) & 0xff)
#define RETRANSMIT_MS 3000

/* A completion record.  Freed by the waiter once done, or by the callback
 * when the waiter gave up on it (abandoned). */
typedef struct nfs_call {
	int kind;
	int done, abandoned;
	int status;
	struct nfsfh *fh;
	struct nfsdir *dir;
	struct nfs_stat_64 st;
	struct nfs_statvfs_64 svfs;
	char *rbuf; /* CALL_READ: the data, owned by the record */
	size_t rcap;
	char err[320];
} nfs_call;

enum { ERR_RETRY_DELAY = -100000, ERR_RETRY_NEWCONN = -100001, ERR_RETRY_SEQID = -100002 };

/* Starts one libnfs async call for a record (0, or -1 when not queued). */
typedef int (*start_fn)(struct nfs_context *ctx, void *arg, nfs_call *c);

typedef struct path_args {
	const char *a, *b;
	int flags, mode;
} path_args;

typedef struct io_args {
	struct nfsfh *fh;
	uint64_t off, n;
	const void *buf;
} io_args;

/* sub_nfs_rpc.c */
void sub_nfs_init_process(void);
int sub_nfs_verifier_inherited(void);
int64_t sub_nfs_now_ms(void);
void sub_nfs_sleep_ms(int ms);
void sub_nfs_call_free(nfs_call *c);
void sub_nfs_call_cb(int status, struct nfs_context *nfs, void *data, void *priv);
int sub_nfs_conn_new(nfs_vfs *v, const char *export, nfs_conn **out, char *err, size_t errlen);
void sub_nfs_conn_put(nfs_conn *cn);
int sub_nfs_run_call(nfs_vfs *v, nfs_conn *cn, int kind, size_t rcap, start_fn start, void *arg,
		     nfs_call **cp);
int sub_nfs_run_path_op(nfs_vfs *v, int kind, start_fn start, void *arg, nfs_call **cp,
			nfs_conn **cnp);
int sub_nfs_run_file_op(nfs_vfs *v, nfs_file *f, int kind, size_t rcap, start_fn start, io_args *a,
			nfs_call **cp);
int sub_nfs_start_create_v4(struct nfs_context *ctx, void *arg, nfs_call *c);
/* The errno (or retry code) for the NFS status a libnfs error message
 * names ("... NFS4ERR_BAD_STATEID(-10025) ..."); 0 when it names none. */
int sub_nfs_status_errno(const char *msg);

/* sub_nfs_state.c (NFSv4; v->mu held) */
/* Before an OPEN of path p with open(2) `flags`: a GETATTR of the path, so
 * that no OPEN is sent that the server can already be seen to refuse:
 * -ENOENT (missing, no O_CREAT), -EEXIST (exists, O_CREAT|O_EXCL), -EISDIR.
 * When the session already holds an open state of the same file, shares it
 * (1, *os set, refs taken) if it allows `acc`; otherwise 0, with *upgrade
 * set when the OPEN will upgrade that state, and *exists 1 (a file is
 * there), 0 (nothing is) or -1 (unknown: the OPEN will tell). */
int sub_nfs_state_share(nfs_vfs *v, const char *p, int acc, int flags, nfs_ostate **os,
			nfs_ostate **upgrade, nfs_conn **cnp, int *exists);
/* After an OPEN on cn returned fh: records it (merging into `upgrade`). */
nfs_ostate *sub_nfs_state_add(nfs_conn *cn, struct nfsfh *fh, int acc, nfs_ostate *upgrade);
/* A file let go of its state; the last one sends CLOSE.  0 or -errno. */
int sub_nfs_state_release(nfs_vfs *v, nfs_conn *cn, nfs_ostate *os);

/* sub_nfs_url.c */
int sub_nfs_parse_url(nfs_vfs *v, const char *url, char *err, size_t errlen);

#endif
