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

typedef struct kaas_pool kaas_pool;

int kaas_pool_create(int nthreads, kaas_pool **out);
/* Queues fn(arg).  0, -ENOMEM, or -ESHUTDOWN after kaas_pool_stop(). */
int kaas_pool_run(kaas_pool *p, kaas_work_fn fn, void *arg);
kaas_timer *kaas_pool_timer(kaas_pool *p, int64_t delay_ms, kaas_work_fn fn, void *arg);
int kaas_pool_timer_cancel(kaas_pool *p, kaas_timer *t);
/* Runs every queued job, then joins the threads.  Pending timers are
 * dropped (their handles must still be cancelled by their owners). */
void kaas_pool_stop(kaas_pool *p);
void kaas_pool_destroy(kaas_pool *p); /* after stop; NULL-safe */

#endif
