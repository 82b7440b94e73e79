/*
 * tkguard.c — the successor's guard (tkguard.h): the lease and the
 * assignment on the volume asked again right before a take-over changes a
 * file, so that a broker resumed after a pause, or back from a hung volume
 * call, never acts on a partition it no longer owns.
 */
#include "kaas/cluster/tkguard.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/clock.h"
#include "util/log.h"

int kcl_tkguard_init(kcl_tkguard *g, sub_vfs *v, kcl_lease *lease, int32_t id, kcl_incarn inc)
{
	memset(g, 0, sizeof(*g));
	g->v = v;
	g->lease = lease;
	g->id = id;
	g->inc = inc;
	return -pthread_mutex_init(&g->mu, NULL);
}

void kcl_tkguard_destroy(kcl_tkguard *g)
{
	if (g->have_doc)
		kcl_assign_free(&g->doc);
	g->have_doc = 0;
	pthread_mutex_destroy(&g->mu);
}

void kcl_tkguard_arm(kcl_tkguard *g, kcl_gen gen)
{
	uint64_t term = 0;
	kcl_lease_state(g->lease, ku_mono_ns(), &term);
	pthread_mutex_lock(&g->mu);
	g->armed = 1;
	g->gen = gen;
	g->term = term;
	g->logged = 0;
	pthread_mutex_unlock(&g->mu);
}

static int say(char *why, size_t whylen, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int say(char *why, size_t whylen, int rc, const char *fmt, ...)
{
	if (why && whylen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* The partition's slot in g->doc (mu held): 0 with *ceiling, or -ESTALE. */
static int slot_in_doc(kcl_tkguard *g, const char *topic, int32_t partition, int32_t epoch, int32_t *ceiling,
		       char *why, size_t whylen)
{
	const kcl_assign *a = &g->doc;
	const kcl_atopic *t = kcl_assign_topic(a, topic);
	if (!t || partition < 0 || partition >= t->n)
		return say(why, whylen, -ESTALE, "assignment generation %" PRId64 " no longer lists %s/%d",
			   a->gen.generation, topic, partition);
	const kcl_slot *s = &t->parts[partition];
	*ceiling = s->epoch;
	if (s->epoch > epoch)
		return 0; /* storage abandons: a newer leader was named */
	const kcl_abroker *me = kcl_assign_broker(a, g->id);
	if (s->leader != g->id || !me || kcl_incarn_cmp(me->inc, g->inc) != 0 || s->epoch != epoch)
		return say(why, whylen, -ESTALE,
			   "assignment generation %" PRId64 " gives %s/%d to broker %d at epoch %d, not to this "
			   "incarnation at %d",
			   a->gen.generation, topic, partition, s->leader, s->epoch, epoch);
	return 0;
}

int kcl_tkguard_check(kcl_tkguard *g, const char *topic, int32_t partition, int32_t epoch, int32_t *ceiling,
		      char *why, size_t whylen)
{
	int64_t now = ku_mono_ns();
	uint64_t term = 0;
	*ceiling = -1;
	pthread_mutex_lock(&g->mu);
	g->checks++;
	int armed = g->armed;
	kcl_gen gen = g->gen;
	uint64_t want_term = g->term;
	pthread_mutex_unlock(&g->mu);
	if (!armed)
		return say(why, whylen, -EPERM, "no take-over was started through the driver");
	/* The lease first: a broker without it does not act on the volume. */
	int st = kcl_lease_state(g->lease, now, &term);
	if (st != KCL_LEASE_VALID || term != want_term || !kcl_lease_holds(g->lease, now))
		return say(why, whylen, -ETIME, "the lease does not hold (%s, term %" PRIu64 ", started under %" PRIu64 ")",
			   kcl_lease_state_name(st), term, want_term);
	kcl_aptr p;
	char err[256];
	int rc = kcl_aptr_read(g->v, &p, err, sizeof(err));
	if (rc)
		return say(why, whylen, rc, "the issued epochs cannot be read again: %s", err);
	if (kcl_gen_cmp(p.gen, gen) <= 0) {
		/* The generation acted for (or an older controller's late write,
		 * which no broker follows): the epoch taken over is the newest. */
		*ceiling = epoch;
		return 0;
	}
	pthread_mutex_lock(&g->mu);
	if (!g->have_doc || kcl_gen_cmp(g->doc.gen, p.gen) != 0) {
		kcl_assign d;
		rc = kcl_assign_read(g->v, &p, &d, err, sizeof(err));
		if (rc == 0) {
			if (g->have_doc)
				kcl_assign_free(&g->doc);
			g->doc = d;
			g->have_doc = 1;
			g->docs_read++;
		}
	}
	if (rc == 0)
		rc = slot_in_doc(g, topic, partition, epoch, ceiling, why, whylen);
	else
		say(why, whylen, rc, "the newer assignment cannot be read: %s", err);
	pthread_mutex_unlock(&g->mu);
	return rc;
}

int kcl_tkguard_fn(void *arg, const char *topic, int32_t partition, int32_t epoch, const char *step,
		   int32_t *ceiling)
{
	kcl_tkguard *g = arg;
	char why[400] = "";
	int rc = kcl_tkguard_check(g, topic, partition, epoch, ceiling, why, sizeof(why));
	if (rc == 0 && *ceiling <= epoch)
		return 0;
	pthread_mutex_lock(&g->mu);
	g->refusals++;
	int first = !g->logged;
	g->logged = 1;
	pthread_mutex_unlock(&g->mu);
	if (first) {
		if (rc == 0)
			snprintf(why, sizeof(why), "epoch %d has been issued for it since", (int)*ceiling);
		KLOG_WARN("cluster", "%s/%d: take-over at epoch %d stopped before the %s: %s (later refusals of "
				     "this batch are not logged)",
			  topic, partition, (int)epoch, step, why);
	}
	return rc;
}
