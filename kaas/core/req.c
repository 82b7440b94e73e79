/*
 * req.c — the request-side services of broker.h that handlers call:
 * completing a deferred request, splicing segment ranges into a response,
 * running work on the worker pool and timers, and the modules' periodic
 * upkeep.  The server installs the
 * operations (kb_server_ops); this file only forwards and does the
 * splicing bookkeeping, so engines link without the event loop.
 */
#include "kaas/core/broker.h"
#include "kaas/core/ptable.h"
#include "kaas/core/resident.h"
#include "kaas/core/splice.h"

#include <errno.h>
#include <stdlib.h>

#include "util/log.h"

void kb_req_complete(kb_req *req, kw_wr *resp)
{
	kb_broker *b = req->broker;
	b->ops->complete(b->server, req, resp);
}

int kb_broker_run(kb_broker *b, kb_work_fn fn, void *arg)
{
	if (!b->ops)
		return -ENOSYS;
	return b->ops->run(b->server, fn, arg);
}

kb_timer *kb_timer_start(kb_broker *b, int64_t delay_ms, kb_work_fn fn, void *arg)
{
	if (!b->ops)
		return NULL;
	return b->ops->timer_start(b->server, delay_ms, fn, arg);
}

int kb_timer_cancel(kb_broker *b, kb_timer *t)
{
	if (!t)
		return 0;
	return b->ops->timer_cancel(b->server, t);
}

int kb_broker_upkeep_add(kb_broker *b, kb_work_fn fn, void *arg)
{
	if (b->nupkeep >= KAAS_UPKEEP_MAX)
		return -ENOSPC;
	b->upkeep[b->nupkeep].fn = fn;
	b->upkeep[b->nupkeep].arg = arg;
	b->nupkeep++;
	return 0;
}

void kb_broker_upkeep(kb_broker *b)
{
	if (__atomic_load_n(&b->stopping, __ATOMIC_ACQUIRE))
		return;
	if (b->parts)
		kb_ptable_housekeep(b->parts);
	for (int i = 0; i < b->nupkeep; i++) {
		if (__atomic_load_n(&b->stopping, __ATOMIC_ACQUIRE))
			return;
		b->upkeep[i].fn(b->upkeep[i].arg);
	}
}

void kb_splices_free(struct kb_splices *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->nplans; i++)
		ks_read_plan_release(&s->plans[i]);
	free(s->plans);
	free(s->v);
	free(s);
}

static int grow(void **v, int *cap, int need, size_t elem)
{
	if (need <= *cap)
		return 0;
	int nc = *cap ? *cap * 2 : 4;
	while (nc < need)
		nc *= 2;
	void *nv = realloc(*v, (size_t)nc * elem);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	*cap = nc;
	return 0;
}

int kb_req_attach_read(kb_req *req, kw_wr *resp, ks_read_plan *plan)
{
	int rc = 0, spliced = 0;
	struct kb_splices *s = req->splices;
	size_t len0 = resp->len;
	int n0 = s ? s->n : 0;
	uint64_t total0 = s ? s->total : 0;
	for (int i = 0; i < plan->n; i++) {
		ks_read_range *r = &plan->r[i];
		if (r->len == 0)
			continue;
		int fd = sub_native_fd(r->file);
		if (fd < 0) {
			/* No kernel descriptor (libnfs, fault): read it here, on the worker. */
			uint8_t *d = kw_wr_room(resp, r->len);
			if (!d) {
				rc = -ENOMEM;
				goto out;
			}
			rc = sub_pread_full(r->file, d, r->len, r->pos);
			if (rc)
				goto out;
			continue;
		}
		if (!s) {
			s = req->splices = calloc(1, sizeof(*s));
			if (!s) {
				rc = -ENOMEM;
				goto out;
			}
		}
		if (grow((void **)&s->v, &s->cap, s->n + 1, sizeof(*s->v))) {
			rc = -ENOMEM;
			goto out;
		}
		/* Every page in memory before the event loop's sendfile(): read
		 * here, on the worker, what is not (the loop never waits for the
		 * disk). */
		if ((rc = kb_make_resident(fd, r->pos, r->len)))
			goto out;
		s->v[s->n++] = (kb_splice){resp->len, fd, r->pos, r->len};
		s->total += r->len;
		spliced = 1;
	}
	if (spliced) {
		if (grow((void **)&s->plans, &s->capplans, s->nplans + 1, sizeof(*s->plans))) {
			rc = -ENOMEM;
			goto out;
		}
		s->plans[s->nplans++] = *plan;
		*plan = (ks_read_plan)KAAS_READ_PLAN_INIT;
		return 0;
	}
out:
	if (rc) {
		/* Undo this call's part so the caller can answer with an error. */
		KLOG_WARN("server", "reading a fetch range failed: %s", sub_strerror(rc));
		resp->len = len0 < resp->len ? len0 : resp->len;
		if (s) {
			s->n = n0;
			s->total = total0;
		}
	}
	ks_read_plan_release(plan);
	return rc;
}
