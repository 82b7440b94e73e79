/*
 * controller.h — electing the controller through exclusive creates.
 *
 * CLUSTER/controller/<epoch:10>.json is created with sub_create_excl by a
 * candidate for that epoch; exactly one creation succeeds.  The return code
 * alone does not say who won: on a network filesystem a create retried
 * after a lost reply answers EEXIST to the very client that created the
 * file, and a create can fail after the name was taken.  So a candidate
 * always reads the claim back and has won exactly when the file holds its
 * own owner id, incarnation and per-attempt nonce.
 *
 * A claim that is empty or cut short (its creator died between the create
 * and the write, or its create's reply was lost before anything was
 * written) is *undecided*: nobody holds that epoch.  Candidates wait until
 * they have seen it undecided for a session timeout and then race the next
 * epoch; a late writer of the undecided claim becomes a controller of an
 * epoch that is already superseded, sees the higher file and steps down.
 *
 * The current controller is the owner of the highest complete claim.  A
 * controller checks for a higher epoch before every assignment it publishes
 * and at every poll, and steps down at once when there is one.  Old claims
 * are removed idempotently, keeping the newest few (epochs are never reused:
 * the next epoch is above both the highest claim and the highest controller
 * epoch any assignment names).
 *
 * Impossible claims.  Candidates only ever race the epoch after the highest
 * one they see, so the claims of a real cluster climb one at a time from
 * the epoch of the assignment it follows: between that epoch and the top
 * of controller/ no gap is wider than the claims cleanup removed, a few.
 * A claim more than KCL_EPOCH_WINDOW above the previous one on that walk
 * (or above the base when it is the first) was not made by a candidate: it
 * is refused by name as impossible, and so is every name above it.  Such a
 * claim is never followed, never raises the next epoch, never makes a
 * controller step down and is never removed (not proven garbage: it is
 * reported).  Without the rule one file named 9999999999.json (the highest
 * ten-digit epoch) would leave no next epoch and block elections forever.
 */
#ifndef KAAS_CLUSTER_CONTROLLER_H
#define KAAS_CLUSTER_CONTROLLER_H

#include <stddef.h>
#include <stdint.h>

#include "kaas/cluster/member.h"
#include "substrates/sub.h"

#define KCL_CLAIM_VERSION 1
#define KCL_EPOCH_MAX 9999999999LL /* ten digits in the name */
#define KCL_CLAIM_MAX_BYTES 4096
/* The widest step between two claims a real cluster makes (see above). */
#define KCL_EPOCH_WINDOW 1000
/* kcl_ctl_scan base when no epoch is known but assignment.json exists and
 * cannot be read: the walk starts at the lowest claim present. */
#define KCL_CTL_BASE_LOWEST (-1)

typedef struct kcl_claim {
	int64_t epoch;       /* 1..KCL_EPOCH_MAX; equals the file name's */
	int32_t owner;       /* broker id */
	kcl_incarn inc;      /* the owner's incarnation */
	uint64_t nonce;      /* random per attempt, != 0 */
	char endpoint[256];
	int64_t wall_ms;     /* informational */
} kcl_claim;

int kcl_claim_encode(const kcl_claim *c, char **out, size_t *len);
/* expect_epoch > 0: the claim must name that epoch (the file's name). */
int kcl_claim_decode(const char *buf, size_t len, int64_t expect_epoch, kcl_claim *out, char *err,
		     size_t errlen);
int kcl_ctl_path(int64_t epoch, char *dst, size_t dstlen);

/* What controller/ holds. */
typedef struct kcl_ctl_view {
	int64_t base;             /* the epoch the walk started from */
	int64_t highest_name;     /* highest possible epoch with a file, 0 when none */
	int64_t highest_complete; /* highest epoch whose claim decodes, 0 when none */
	kcl_claim current;        /* that claim (valid when highest_complete > 0) */
	size_t nfiles;            /* epoch files present */
	size_t ignored;           /* other names (logged by the caller) */
	char note[256];           /* why the files above highest_complete do not count */
	size_t impossible;        /* names refused as impossible (never read) */
	int64_t impossible_lowest; /* the lowest of them, 0 when none */
	char impossible_note[256]; /* why, naming the epochs */
} kcl_ctl_view;

/* The highest claim epoch reachable from `base` in steps of at most
 * KCL_EPOCH_WINDOW through the names in epochs[] (any order); names above
 * it are impossible.  base KCL_CTL_BASE_LOWEST: from the lowest name. */
int64_t kcl_ctl_possible_top(const int64_t *epochs, size_t n, int64_t base);

/* Lists controller/ and reads the newest possible claims (at most a few)
 * until one decodes.  `base`: the highest controller epoch this broker
 * knows to be real (the assignment it follows, its own claim), 0 when
 * none and no assignment.json exists, KCL_CTL_BASE_LOWEST when one exists
 * but cannot be read.  A missing directory is an empty view. */
int kcl_ctl_scan(sub_vfs *v, int64_t base, kcl_ctl_view *out);

/* The epoch a candidate races for: above every claim and above the highest
 * controller epoch an assignment was seen under. */
int64_t kcl_ctl_next_epoch(const kcl_ctl_view *cv, int64_t highest_assignment_epoch);

enum kcl_elect {
	KCL_ELECT_WON = 1,   /* the claim holds mine */
	KCL_ELECT_LOST,      /* someone else's (*winner filled; owner -1 when unreadable) */
	KCL_ELECT_UNDECIDED, /* no file, or an empty/short one: nobody holds it yet */
};

/* Claims mine->epoch: the exclusive create (retried up to `retries` times
 * after errors that leave the outcome unknown, e.g. EIO, ETIMEDOUT), then
 * the read-back that decides.  Returns 0 with *outcome set, or -errno when
 * even the read-back failed (outcome UNDECIDED). */
int kcl_ctl_elect(sub_vfs *v, const kcl_claim *mine, int retries, int *outcome, kcl_claim *winner,
		  char *err, size_t errlen);

/* 1 when a claim file for an epoch above `epoch` exists (complete or not:
 * either way this controller is superseded), 0 if not, -errno. */
int kcl_ctl_superseded(sub_vfs *v, int64_t epoch);

/* Removes claim files below `current`, keeping the `keep` newest names
 * overall; ENOENT is success (another controller cleaned too).  *removed
 * counts what this call removed. */
int kcl_ctl_cleanup(sub_vfs *v, int64_t current, unsigned keep, unsigned *removed);

#endif
