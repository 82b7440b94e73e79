/*
 * pool.c — worker threads (a mutex + condition variable FIFO) and the timer
 * thread (a binary min-heap keyed by monotonic due time).
 */
#include "kaas/net/pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "util/clock.h"
#include "util/grow.h"
#include "util/log.h"

typedef struct job {
	struct job *next;
	kb_work_fn fn;
	void *arg;
} job;

struct kb_timer {
	int64_t due_ns;
	uint64_t seq;     /* FIFO among equal due times */
	int idx;          /* position in the heap, -1 once fired */
	kb_work_fn fn;
	void *arg;
};

struct kn_pool {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	job *head, *tail;
	int stopping;
	int nthreads;
	pthread_t *threads;

	pthread_mutex_t tmu;
	pthread_cond_t tcv;
	kb_timer **heap;
	int hn, hcap;
	uint64_t tseq;
	int tstop;
	pthread_t timer_thread;
	int timer_started;
};

static void *worker_main(void *arg)
{
	kn_pool *p = arg;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->head && !p->stopping)
			pthread_cond_wait(&p->cv, &p->mu);
		job *j = p->head;
		if (!j)
			break; /* stopping and drained */
		p->head = j->next;
		if (!p->head)
			p->tail = NULL;
		pthread_mutex_unlock(&p->mu);
		j->fn(j->arg);
		free(j);
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int kn_pool_run(kn_pool *p, kb_work_fn fn, void *arg)
{
	job *j = malloc(sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->fn = fn;
	j->arg = arg;
	j->next = NULL;
	pthread_mutex_lock(&p->mu);
	if (p->stopping == 2) {
		pthread_mutex_unlock(&p->mu);
		free(j);
		return -ESHUTDOWN;
	}
	if (p->tail)
		p->tail->next = j;
	else
		p->head = j;
	p->tail = j;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return 0;
}

/* ---- timers ----------------------------------------------------------------- */

static int tless(const kb_timer *a, const kb_timer *b)
{
	return a->due_ns < b->due_ns || (a->due_ns == b->due_ns && a->seq < b->seq);
}

static void hswap(kn_pool *p, int i, int j)
{
	kb_timer *t = p->heap[i];
	p->heap[i] = p->heap[j];
	p->heap[j] = t;
	p->heap[i]->idx = i;
	p->heap[j]->idx = j;
}

static void hup(kn_pool *p, int i)
{
	while (i > 0) {
		int parent = (i - 1) / 2;
		if (!tless(p->heap[i], p->heap[parent]))
			break;
		hswap(p, i, parent);
		i = parent;
	}
}

static void hdown(kn_pool *p, int i)
{
	for (;;) {
		int l = 2 * i + 1, r = l + 1, m = i;
		if (l < p->hn && tless(p->heap[l], p->heap[m]))
			m = l;
		if (r < p->hn && tless(p->heap[r], p->heap[m]))
			m = r;
		if (m == i)
			break;
		hswap(p, i, m);
		i = m;
	}
}

static void hremove(kn_pool *p, int i)
{
	p->heap[i]->idx = -1;
	p->hn--;
	if (i == p->hn)
		return;
	p->heap[i] = p->heap[p->hn];
	p->heap[i]->idx = i;
	hdown(p, i);
	hup(p, i);
}

static void *timer_main(void *arg)
{
	kn_pool *p = arg;
	pthread_mutex_lock(&p->tmu);
	while (!p->tstop) {
		if (p->hn == 0) {
			pthread_cond_wait(&p->tcv, &p->tmu);
			continue;
		}
		kb_timer *t = p->heap[0];
		int64_t now = ku_mono_ns();
		if (t->due_ns > now) {
			struct timespec ts = {(time_t)(t->due_ns / 1000000000LL), (long)(t->due_ns % 1000000000LL)};
			pthread_cond_timedwait(&p->tcv, &p->tmu, &ts);
			continue;
		}
		hremove(p, 0);
		kb_work_fn fn = t->fn;
		void *a = t->arg;
		/* The handle stays with its owner until kb_timer_cancel(). */
		pthread_mutex_unlock(&p->tmu);
		if (kn_pool_run(p, fn, a))
			KLOG_ERR("server", "a due timer could not be queued");
		pthread_mutex_lock(&p->tmu);
	}
	pthread_mutex_unlock(&p->tmu);
	return NULL;
}

kb_timer *kn_pool_timer(kn_pool *p, int64_t delay_ms, kb_work_fn fn, void *arg)
{
	kb_timer *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	if (delay_ms < 0)
		delay_ms = 0;
	if (delay_ms > INT64_MAX / 2000000)
		delay_ms = INT64_MAX / 2000000;
	t->due_ns = ku_mono_ns() + delay_ms * 1000000LL;
	t->fn = fn;
	t->arg = arg;
	pthread_mutex_lock(&p->tmu);
	if (KAAS_GROW(p->heap, p->hn, p->hcap, 64)) {
		pthread_mutex_unlock(&p->tmu);
		free(t);
		return NULL;
	}
	t->seq = p->tseq++;
	t->idx = p->hn;
	p->heap[p->hn++] = t;
	hup(p, t->idx);
	if (t->idx == 0)
		pthread_cond_signal(&p->tcv);
	pthread_mutex_unlock(&p->tmu);
	return t;
}

int kn_pool_timer_cancel(kn_pool *p, kb_timer *t)
{
	if (!t)
		return 0;
	pthread_mutex_lock(&p->tmu);
	int prevented = t->idx >= 0;
	if (prevented)
		hremove(p, t->idx);
	pthread_mutex_unlock(&p->tmu);
	free(t);
	return prevented;
}

/* ---- life cycle -------------------------------------------------------------- */

int kn_pool_create(int nthreads, kn_pool **out)
{
	kn_pool *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	pthread_mutex_init(&p->tmu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->tcv, &ca);
	pthread_condattr_destroy(&ca);
	p->threads = calloc((size_t)nthreads, sizeof(pthread_t));
	if (!p->threads) {
		kn_pool_destroy(p);
		return -ENOMEM;
	}
	for (int i = 0; i < nthreads; i++) {
		int rc = pthread_create(&p->threads[i], NULL, worker_main, p);
		if (rc) {
			kn_pool_stop(p);
			kn_pool_destroy(p);
			return -rc;
		}
		p->nthreads++;
	}
	int rc = pthread_create(&p->timer_thread, NULL, timer_main, p);
	if (rc) {
		kn_pool_stop(p);
		kn_pool_destroy(p);
		return -rc;
	}
	p->timer_started = 1;
	*out = p;
	return 0;
}

void kn_pool_stop(kn_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->tmu);
	p->tstop = 1;
	pthread_cond_signal(&p->tcv);
	pthread_mutex_unlock(&p->tmu);
	if (p->timer_started) {
		pthread_join(p->timer_thread, NULL);
		p->timer_started = 0;
	}
	pthread_mutex_lock(&p->mu);
	p->stopping = 1;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	p->nthreads = 0;
	pthread_mutex_lock(&p->mu);
	p->stopping = 2;
	pthread_mutex_unlock(&p->mu);
}

void kn_pool_destroy(kn_pool *p)
{
	if (!p)
		return;
	for (int i = 0; i < p->hn; i++)
		p->heap[i]->idx = -1; /* owners still cancel (and free) them */
	free(p->heap);
	free(p->threads);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->tmu);
	pthread_cond_destroy(&p->tcv);
	free(p);
}
