/*
 * pool.h — the worker threads that run request handlers and deferred work,
 * and the timer thread that feeds them.
 *
 * Handlers may block on the volume (NFS round trips, fsync), so they never
 * run on the event loop; the loop only moves bytes.  Jobs run in FIFO order
 * on `n` threads.  Timers live in a min-heap on their own thread and, when
 * due, become ordinary jobs.
 */
#ifndef KAAS_SERVER_POOL_H
#define KAAS_SERVER_POOL_H

#include <stdint.h>

#include "kaas/core/broker.h"

typedef struct kn_pool kn_pool;

int kn_pool_create(int nthreads, kn_pool **out);
/* Queues fn(arg).  0, -ENOMEM, or -ESHUTDOWN after kn_pool_stop(). */
int kn_pool_run(kn_pool *p, kb_work_fn fn, void *arg);
kb_timer *kn_pool_timer(kn_pool *p, int64_t delay_ms, kb_work_fn fn, void *arg);
int kn_pool_timer_cancel(kn_pool *p, kb_timer *t);
/* Runs every queued job, then joins the threads.  Pending timers are
 * dropped (their handles must still be cancelled by their owners). */
void kn_pool_stop(kn_pool *p);
void kn_pool_destroy(kn_pool *p); /* after stop; NULL-safe */

#endif
