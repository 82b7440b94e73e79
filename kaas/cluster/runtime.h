/*
 * runtime.h — the cluster as a broker runs it: joining, the heartbeat that
 * renews the lease, the membership and assignment polls, the controller
 * loop, the ownership driver that converges the partition table to the
 * assignment, the stall watchdog and the SIGTERM drain (docs/cluster.md,
 * "Step by step").
 *
 * Threads: the heartbeat writer (one write at a time: the lease argument
 * needs it), the watchdog, and the cluster loop (membership, controller,
 * assignment, driver).  Leadership is given up by exiting: a broker whose
 * lease lapsed, whose volume stalled or whose id was taken by a newer
 * incarnation closes its ack gate and ends the process without writing to
 * any partition; its supervisor starts a new incarnation.
 */
#ifndef KAAS_CLUSTER_RUNTIME_H
#define KAAS_CLUSTER_RUNTIME_H

#include <stddef.h>

#include "kaas/core/broker.h"

typedef struct kcl_rt kcl_rt;

/* Exit codes of a broker that gave its leadership up. */
#define KCL_EXIT_SUPERSEDED 75 /* a newer incarnation of this broker id appeared */
#define KCL_EXIT_LAPSED 76     /* the lease lapsed (paused or cut off past the session timeout) */
#define KCL_EXIT_STALLED 77    /* an fsync or heartbeat write stalled (watchdog) */

/* Joins the cluster on b->cluster: takes an incarnation, waits out (or
 * proves gone) an earlier incarnation of the same id, writes the first
 * heartbeat, installs the ack gate and watchdog hooks on b->parts (which
 * must be driven: kb_ptable_set_driven) and starts the threads.  Refuses
 * (-EADDRINUSE, -EPROTONOSUPPORT, ...) with err saying why: another live
 * process holds the id, or its file was written by a newer kaas. */
int kcl_rt_start(kb_broker *b, kcl_rt **out, char *err, size_t errlen);

/* SIGTERM: heartbeats "draining", waits until the controller moved every
 * partition away and this broker relinquished them (or the drain timeout,
 * or no other broker can take them).  Blocking; safe to call once. */
void kcl_rt_drain(kcl_rt *rt);

/* Stops the cluster loop (no more take-overs); the heartbeat goes on until
 * kcl_rt_finish so the lease holds while the table is shut down. */
void kcl_rt_stop(kcl_rt *rt);

/* After kb_ptable_shutdown: the last heartbeat says "stopped", threads end,
 * memory is freed.  NULL-safe. */
void kcl_rt_finish(kcl_rt *rt);

#endif
