/*
 * supervise.h — `kaas supervise`: the broker's parent process, which proves
 * its child's death to the rest of the cluster (docs/cluster.md, "Process
 * death: the fast path").
 *
 * The supervisor starts the broker as its child with one end of a pipe
 * inherited (KCL_SUP_ENV_FD names it, KCL_SUP_ENV_PID names the supervisor).
 * The broker, right after it picked its incarnation and before anything
 * else (token, predecessor, first heartbeat), writes one report line there:
 * its pid, broker id, incarnation, nonce and the URL of the cluster
 * directory it opened (kcl_sup_tell).  When waitpid() says that very
 * child exited or was killed, the supervisor writes the exit certificate of
 * the reported incarnation (kcl_gone_write_how, by "supervisor") into that
 * directory, and peers take its partitions over without waiting out the
 * lease.  A child that reported nothing (or something unreadable, or from
 * another pid) gets no certificate: its peers wait out its lease as before.
 * A stopped child (SIGSTOP) is not an exit; nothing is written while the
 * child lives, and a supervisor that is killed writes nothing at all.
 *
 * With restart, the supervisor starts a new incarnation after exit 75/76/77
 * (the broker gave its leadership up) and after death by a signal (kill -9,
 * segfault, the OOM killer), with a back-off when runs are short; anything
 * else ends it with the child's status (a signal as 128 + its number).
 * SIGTERM, SIGINT and SIGHUP are passed to the child (SIGTERM drains); the
 * supervisor then ends when the child does, without restarting it.
 */
#ifndef KAAS_CLUSTER_SUPERVISE_H
#define KAAS_CLUSTER_SUPERVISE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kaas/cluster/member.h"

#define KCL_SUP_ENV_FD "KAAS_SUPERVISOR_FD"
#define KCL_SUP_ENV_PID "KAAS_SUPERVISOR_PID"
#define KCL_SUP_REPORT_MAX 4096 /* one line, written atomically (PIPE_BUF) */
#define KCL_SUP_CERTIFY_MS 15000 /* how long a certificate write is retried, and may take */

typedef struct kcl_sup_report {
	pid_t pid;
	int32_t id;
	kcl_incarn inc;
	char cluster_url[KCL_SUP_REPORT_MAX];
} kcl_sup_report;

/* The report line ("kaas-supervise 1 pid=.. id=.. incarnation=.. nonce=..
 * cluster=URL\n").  -ENAMETOOLONG when it does not fit, -EINVAL for an
 * invalid report. */
int kcl_sup_report_encode(const kcl_sup_report *r, char *dst, size_t dstlen);

/* Parses one line (without its newline); on failure err says why:
 * -EBADMSG not a report, -EPROTONOSUPPORT a newer version, -ERANGE
 * impossible values. */
int kcl_sup_report_decode(const char *line, size_t len, kcl_sup_report *out, char *err,
			  size_t errlen);

/* Broker side: when this process was started by `kaas supervise`, tells it
 * who it is (and closes the descriptor; the variables are removed).  0 when
 * not supervised, 1 when reported, -errno with err saying why (a variable
 * that names no pipe of our parent, a write that failed). */
int kcl_sup_tell(int32_t id, kcl_incarn inc, const char *cluster_url, char *err,
		   size_t errlen);

typedef struct kcl_sup_opts {
	char *const *argv;  /* argv[0] is the program to execute */
	int restart;        /* start a new incarnation after 75/76/77 or a signal */
	int64_t certify_ms; /* 0: KCL_SUP_CERTIFY_MS */
	int max_starts;     /* 0: no limit (tests bound it) */
} kcl_sup_opts;

/* Runs the supervisor until it ends; returns the exit code (the child's
 * status, 128 + signal for a signal; 1 when the child could not be
 * started).  Blocks SIGTERM/SIGINT/SIGHUP/SIGCHLD in the calling thread. */
int kcl_sup_run(const kcl_sup_opts *o);

/* Exit status of a wait() status, as a shell reports it. */
int kcl_sup_exit_code(int wstatus);

/* `kaas supervise [--restart] -- BROKER ARGS...` (argv[0] = "supervise"). */
int kcl_supervise_main(int argc, char **argv);

#endif
