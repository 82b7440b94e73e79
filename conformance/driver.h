/*
 * driver.h — the driver's side of the actors: start them, send steps, wait
 * for answers, release barriers, stop loops, crash and respawn an actor.
 *
 * Every wait pumps all actors' channels, so progress events keep flowing
 * (live display), a dead actor is noticed at once, and an interrupt (SIGINT)
 * ends the wait with -EINTR.  Synchronisation between actors happens here and
 * only here: the filesystem under test never carries a signal.
 */
#ifndef KC_DRIVER_H
#define KC_DRIVER_H

#include <jansson.h>
#include <signal.h>
#include <sys/types.h>

#include "conformance/chan.h"
#include "substrates/sub.h"

typedef struct kc_actor {
	int index;
	kc_chan ch;
	pid_t pid; /* forked actor; 0 for an actor that is not our child */
	char agent[256]; /* HOST:PORT of a remote agent (agent.h); "" when forked */
	char url[SUB_PATH_MAX];
	int alive;
	json_t *hello; /* the hello result: pid, host, client, identity */
	json_int_t busy; /* id of the step in flight, 0 when idle */
	char busy_op[32];
	int ready;     /* the step in flight reached its barrier */
	json_t *reply; /* the final reply of the step in flight */
	int64_t done, anomalies; /* its last progress event */
	char why[256]; /* why it died */
} kc_actor;

typedef void (*kc_progress_fn)(void *arg);

typedef struct kc_driver {
	kc_actor *a;
	int n;
	json_int_t next_id;
	int timeout_ms; /* longest wait for one step */
	volatile sig_atomic_t *interrupted;
	kc_progress_fn on_progress;
	void *progress_arg;
	int64_t next_progress_ms;
	char err[768]; /* what went wrong in the last failed call */
} kc_driver;

/* Forks n actors; actor i opens urls[i % nurls] (hello).  0 or -errno with
 * d->err naming the actor and the reason. */
int kc_drv_spawn(kc_driver *d, int n, const char *const *urls, int nurls);

/* The steps of kc_drv_spawn that remote agents share (agent_client.c):
 * n empty actor slots; hello to every actor at once (each opens its URL),
 * or to one again.  A failed hello leaves d->err naming the actor, its
 * agent if it has one, and the actor's reason. */
int kc_drv_slots(kc_driver *d, int n);
int kc_drv_hello_all(kc_driver *d);
int kc_drv_hello(kc_driver *d, int a);

/* Starts a step (args is consumed; NULL for none).  sync: the step waits at
 * its barrier for kc_drv_release. */
int kc_drv_start(kc_driver *d, int a, const char *op, json_t *args, int sync);
/* Waits for the step's final answer.  0 and *result (the caller's), or
 * -errno: the step failed (d->err has its message), the actor died (-EPIPE),
 * -ETIMEDOUT, or -EINTR on interrupt. */
int kc_drv_wait(kc_driver *d, int a, json_t **result);
int kc_drv_call(kc_driver *d, int a, const char *op, json_t *args, json_t **result);
/* Waits until every listed actor is at its barrier, then releases them all
 * back to back. */
int kc_drv_release(kc_driver *d, const int *as, int n);
/* Asks a looping step to finish (it still answers; collect with wait). */
int kc_drv_stop(kc_driver *d, int a);
/* Ends every step in flight (stop, then wait and discard the answers). */
void kc_drv_abort(kc_driver *d);
/* Kills an actor the way a client crashes (SIGKILL, no close), reaps it. */
int kc_drv_crash(kc_driver *d, int a);
/* Starts a fresh process in a dead actor's slot and says hello again. */
int kc_drv_respawn(kc_driver *d, int a);
/* Polite end: bye to every actor, reap; stragglers are killed. */
void kc_drv_shutdown(kc_driver *d);
/* Interrupt path: kill and reap every actor at once. */
void kc_drv_kill_all(kc_driver *d);

/* Sum of done/anomalies over the actors' steps in flight (live progress). */
void kc_drv_progress(const kc_driver *d, int64_t *done, int64_t *anomalies);

#endif
