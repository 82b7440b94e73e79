/*
 * lease.c — lease arithmetic and the stall watchdog (see lease.h and the
 * argument in docs/cluster.md).
 */
#include "kaas/cluster/lease.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int64_t kcl_drift_margin_ms(int64_t session_ms)
{
	/* Two clocks each off by ppm in opposite directions: 2 * ppm of the
	 * session, rounded up, doubled again for slack. */
	int64_t m = (session_ms * 2 * KCL_DRIFT_PPM * 2 + 999999) / 1000000;
	return m < KCL_DRIFT_MIN_MS ? KCL_DRIFT_MIN_MS : m;
}

int64_t kcl_stall_bound_ms(int64_t stall_ms, int64_t session_ms, int64_t heartbeat_ms)
{
	if (stall_ms > 0)
		return stall_ms;
	int64_t b = session_ms - kcl_drift_margin_ms(session_ms) - 2 * heartbeat_ms;
	return b < session_ms / 3 ? session_ms / 3 : b;
}

int kcl_lease_init(kcl_lease *l, int64_t session_ms, int64_t drift_ms)
{
	memset(l, 0, sizeof(*l));
	if (session_ms <= 0 || drift_ms < 0 || drift_ms >= session_ms)
		return -EINVAL;
	l->session_ns = session_ms * 1000000LL;
	l->drift_ns = drift_ms * 1000000LL;
	l->state = KCL_LEASE_NONE;
	return pthread_mutex_init(&l->mu, NULL) ? -ENOMEM : 0;
}

void kcl_lease_destroy(kcl_lease *l)
{
	pthread_mutex_destroy(&l->mu);
}

/* mu held.  The window in which a renewal may still be credited closes
 * S - D after the issue of the anchor (the last write known to have reached
 * the server, or before any such, the first write that may have); past it
 * the lease has lapsed for good. */
static void settle(kcl_lease *l, int64_t now_ns)
{
	if ((l->state == KCL_LEASE_VALID || l->state == KCL_LEASE_NONE) && l->has_anchor &&
	    now_ns >= l->anchor_ns + l->session_ns - l->drift_ns) {
		l->state = KCL_LEASE_LAPSED;
		snprintf(l->why, sizeof(l->why), "no heartbeat write confirmed in time");
	}
}

int kcl_lease_renew_begin(kcl_lease *l, int64_t now_ns)
{
	int rc = 0;
	pthread_mutex_lock(&l->mu);
	if (l->state == KCL_LEASE_GIVEN_UP)
		rc = -ECANCELED;
	else if (l->outstanding)
		rc = -EBUSY;
	else {
		l->outstanding = 1;
		l->issue_ns = now_ns;
	}
	pthread_mutex_unlock(&l->mu);
	return rc;
}

int kcl_lease_renew_end(kcl_lease *l, int wrc, int64_t now_ns)
{
	int rc;
	pthread_mutex_lock(&l->mu);
	l->outstanding = 0;
	settle(l, now_ns);
	if (l->state == KCL_LEASE_GIVEN_UP) {
		rc = -ECANCELED;
	} else if (wrc) {
		/* It may have reached the server all the same (the reply was
		 * lost): observers may be timing it from now on. */
		if (!l->has_anchor) {
			l->has_anchor = 1;
			l->anchor_ns = l->issue_ns;
		}
		rc = wrc;
	} else if (l->state == KCL_LEASE_LAPSED) {
		/* Too late: an observer may have judged us expired meanwhile. */
		rc = -ETIME;
	} else {
		l->has_anchor = 1;
		l->anchor_ns = l->issue_ns;
		int64_t until = l->issue_ns + l->session_ns - l->drift_ns;
		if (until > now_ns) {
			l->valid_until_ns = until;
			l->state = KCL_LEASE_VALID;
			rc = 0;
		} else {
			/* The write itself took longer than the lease it would give. */
			l->state = KCL_LEASE_LAPSED;
			snprintf(l->why, sizeof(l->why), "heartbeat write took longer than the lease");
			rc = -ETIME;
		}
	}
	pthread_mutex_unlock(&l->mu);
	return rc;
}

int kcl_lease_holds(kcl_lease *l, int64_t now_ns)
{
	pthread_mutex_lock(&l->mu);
	settle(l, now_ns);
	int ok = l->state == KCL_LEASE_VALID;
	pthread_mutex_unlock(&l->mu);
	return ok;
}

int64_t kcl_lease_remaining(kcl_lease *l, int64_t now_ns)
{
	pthread_mutex_lock(&l->mu);
	settle(l, now_ns);
	int64_t r = l->state == KCL_LEASE_VALID ? l->valid_until_ns - now_ns : 0;
	pthread_mutex_unlock(&l->mu);
	return r;
}

void kcl_lease_give_up(kcl_lease *l, const char *why)
{
	pthread_mutex_lock(&l->mu);
	if (l->state != KCL_LEASE_GIVEN_UP) {
		l->state = KCL_LEASE_GIVEN_UP;
		snprintf(l->why, sizeof(l->why), "%s", why ? why : "given up");
	}
	pthread_mutex_unlock(&l->mu);
}

int kcl_lease_restart(kcl_lease *l)
{
	int rc = 0;
	pthread_mutex_lock(&l->mu);
	if (l->state == KCL_LEASE_GIVEN_UP)
		rc = -ECANCELED;
	else if (l->outstanding)
		rc = -EBUSY;
	else if (l->state != KCL_LEASE_LAPSED)
		rc = -EINVAL;
	else {
		l->state = KCL_LEASE_NONE;
		l->valid_until_ns = 0;
		l->has_anchor = 0;
		l->term++;
		l->why[0] = '\0';
	}
	pthread_mutex_unlock(&l->mu);
	return rc;
}

int kcl_lease_state(kcl_lease *l, int64_t now_ns, uint64_t *term)
{
	pthread_mutex_lock(&l->mu);
	settle(l, now_ns);
	int st = l->state;
	if (term)
		*term = l->term;
	pthread_mutex_unlock(&l->mu);
	return st;
}

const char *kcl_lease_state_name(int st)
{
	switch (st) {
	case KCL_LEASE_NONE: return "none";
	case KCL_LEASE_VALID: return "valid";
	case KCL_LEASE_LAPSED: return "lapsed";
	case KCL_LEASE_GIVEN_UP: return "given-up";
	default: return "?";
	}
}

/* ---- watchdog ------------------------------------------------------------------ */

int kcl_wd_init(kcl_wd *w, int64_t bound_ms)
{
	memset(w, 0, sizeof(*w));
	if (bound_ms <= 0)
		return -EINVAL;
	w->bound_ns = bound_ms * 1000000LL;
	return pthread_mutex_init(&w->mu, NULL) ? -ENOMEM : 0;
}

void kcl_wd_destroy(kcl_wd *w)
{
	pthread_mutex_destroy(&w->mu);
}

int kcl_wd_begin(kcl_wd *w, int kind, int64_t now_ns)
{
	/* 0 marks a free slot; a call begun at monotonic 0 is recorded at 1. */
	int64_t t = now_ns > 0 ? now_ns : 1;
	int slot = -1;
	pthread_mutex_lock(&w->mu);
	for (int i = 0; i < KCL_WD_SLOTS; i++)
		if (w->start_ns[i] == 0) {
			w->start_ns[i] = t;
			w->kind[i] = (uint8_t)kind;
			slot = i;
			break;
		}
	if (slot < 0 && w->untracked++ == 0)
		w->untracked_since_ns = t;
	pthread_mutex_unlock(&w->mu);
	return slot;
}

void kcl_wd_end(kcl_wd *w, int slot, int64_t now_ns)
{
	(void)now_ns;
	pthread_mutex_lock(&w->mu);
	if (slot >= 0 && slot < KCL_WD_SLOTS)
		w->start_ns[slot] = 0;
	else if (slot < 0 && w->untracked > 0)
		w->untracked--;
	pthread_mutex_unlock(&w->mu);
}

int kcl_wd_check(kcl_wd *w, int64_t now_ns, int *kind, int64_t *age_ns)
{
	int64_t oldest = 0;
	int k = 0;
	pthread_mutex_lock(&w->mu);
	for (int i = 0; i < KCL_WD_SLOTS; i++)
		if (w->start_ns[i] && (!oldest || w->start_ns[i] < oldest)) {
			oldest = w->start_ns[i];
			k = w->kind[i];
		}
	if (w->untracked && (!oldest || w->untracked_since_ns < oldest)) {
		oldest = w->untracked_since_ns;
		k = KCL_WD_META;
	}
	int stalled = oldest && now_ns - oldest >= w->bound_ns;
	pthread_mutex_unlock(&w->mu);
	if (stalled) {
		if (kind)
			*kind = k;
		if (age_ns)
			*age_ns = now_ns - oldest;
	}
	return stalled;
}

const char *kcl_wd_kind_name(int kind)
{
	switch (kind) {
	case KCL_WD_FSYNC: return "fsync";
	case KCL_WD_HEARTBEAT: return "heartbeat write";
	case KCL_WD_META: return "volume call";
	default: return "?";
	}
}
