/*
 * actor.h — the actor side: an executor of named steps on its own substrate
 * handle, driven by JSON messages over a kc_chan.
 *
 * An actor is one independent client of the volume.  Today actors are
 * processes forked by the driver; a remote agent (TCP) or an in-process
 * client runs the same executor, because it sees nothing but messages:
 *
 *   driver -> actor   {"op":"<step>","id":N, ...arguments...}
 *                     {"op":"go","id":N}     release a step waiting at its barrier
 *                     {"op":"stop","id":N}   end a looping step (it replies)
 *   actor -> driver   {"id":N,"ev":"ready"}  prepared, waiting for "go"
 *                     {"id":N,"ev":"progress","done":D,"anomalies":A}
 *                     {"id":N,"ok":true,"result":{...}}
 *                     {"id":N,"ok":false,"errno":"ENOENT","rc":-2,"error":"..."}
 *
 * A step with "sync":true prepares, sends "ready" and waits for "go"; that is
 * how the driver starts several actors at the same instant.  Loops run inside
 * the actor and check for "stop" between iterations, so the per-iteration
 * traffic is nil.  Actors never coordinate through the filesystem under test.
 */
#ifndef KC_ACTOR_H
#define KC_ACTOR_H

#include <jansson.h>
#include <stdint.h>

#include "conformance/chan.h"
#include "substrates/sub.h"

#define KC_MAX_HANDLES 64

/* rename_reader, once told to stop: reads on until this many verified
 * reads, or this many attempts of any outcome, or this long after the stop
 * (the arguments min_ok, min_reads, grace_ms override them). */
#define KC_READER_MIN_OK 10
#define KC_READER_MIN_READS 200
#define KC_READER_GRACE_MS 60000
/* rename_reader with "observations" N: at most this many attempts per
 * observation (ESTALE answers are attempts, not observations). */
#define KC_READER_ATTEMPTS_PER_OBS 20
#define KC_MAX_ANOMALIES 10 /* kept per step; totals are always counted */

typedef struct kc_actor_state {
	kc_chan *ch;
	sub_vfs *vfs;
	int index;
	char url[SUB_PATH_MAX];
	char host[256];
	struct {
		sub_file *f;
		char path[512];
	} h[KC_MAX_HANDLES];
	int quit;
} kc_actor_state;

typedef struct kc_step {
	kc_actor_state *as;
	const json_t *req;
	json_t *result; /* the step fills this object */
	json_int_t id;
	int sync;
	int stopped;
	int64_t next_progress_ms;
	int64_t t0_ns; /* when the step started (after its barrier, if any) */
	const char *path; /* the "path" argument, checked, for steps that take one */
	char err[512];
} kc_step;

typedef int (*kc_step_fn)(kc_step *st);

/* Serves one driver until "bye", end of stream or a protocol error.
 * default_url is opened when "hello" names none (agents).  Returns an exit
 * status for the process. */
int kc_actor_serve(kc_chan *ch, int index, const char *default_url);

/* Inside a step ------------------------------------------------------------ */

/* For "sync" steps: send ready, wait for go.  -ECANCELED on stop. */
int kc_step_barrier(kc_step *st);
/* Non-blocking: has the driver asked this step to stop? */
int kc_step_should_stop(kc_step *st);
/* Rate-limited progress event (at most every 200 ms). */
void kc_step_progress(kc_step *st, int64_t done, int64_t anomalies);
/* Records a message for an ok:false reply and returns rc. */
int kc_step_fail(kc_step *st, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Arguments: 0 or -EINVAL with st->err set. */
int kc_arg_path(kc_step *st, const char *key, const char **out);
int kc_arg_int(kc_step *st, const char *key, int64_t def, int64_t lo, int64_t hi, int64_t *out);
int kc_arg_bool(kc_step *st, const char *key, int def);

/* Handle table: the actor keeps files open between steps. */
int kc_handle_put(kc_actor_state *as, sub_file *f, const char *path);
sub_file *kc_handle_get(kc_actor_state *as, int64_t h);
void kc_handle_drop(kc_actor_state *as, int64_t h);

/* A short ring of recent operations, attached to anomalies as their trace. */
#define KC_TRACE_LINES 8
typedef struct kc_trace {
	char line[KC_TRACE_LINES][200];
	int n, pos;
	int64_t t0_ns;
} kc_trace;
void kc_trace_init(kc_trace *t, int64_t t0_ns);
void kc_trace_add(kc_trace *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
json_t *kc_trace_json(const kc_trace *t);

/* Appends an anomaly {kind, actor, iteration, detail, trace} to arr unless it
 * already holds KC_MAX_ANOMALIES. */
void kc_anomaly_add(json_t *arr, kc_step *st, const char *kind, int64_t iteration,
		    const kc_trace *tr, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Counts {name: n} kept in a json object. */
void kc_count_add(json_t *obj, const char *key, json_int_t n);

/* The steps (steps_*.c). */
int kc_step_hello(kc_step *st);
int kc_step_mkdirs(kc_step *st);
int kc_step_remove_tree(kc_step *st);
int kc_step_unlink(kc_step *st);
int kc_step_rmdir(kc_step *st);
int kc_step_list(kc_step *st);
int kc_step_stat(kc_step *st);
int kc_step_statvfs(kc_step *st);
int kc_step_identity(kc_step *st);
int kc_step_read_small(kc_step *st);
int kc_step_file_write(kc_step *st);
int kc_step_file_verify(kc_step *st);
int kc_step_open_handle(kc_step *st);
int kc_step_reopen(kc_step *st);
int kc_step_hold_open(kc_step *st);
int kc_step_handle_probe(kc_step *st);
int kc_step_handle_verify(kc_step *st);
int kc_step_close_handle(kc_step *st);
int kc_step_rename_timed(kc_step *st);
int kc_step_rename_writer(kc_step *st);
int kc_step_rename_reader(kc_step *st);
int kc_step_dir_renamer(kc_step *st);
int kc_step_dir_lister(kc_step *st);
int kc_step_excl_create(kc_step *st);
int kc_step_cto_write(kc_step *st);
int kc_step_cto_read(kc_step *st);
int kc_step_fsync_probe(kc_step *st);
int kc_step_perf_probe(kc_step *st);

/* Exposed for unit tests: which shared object defines symbol `name` in this
 * process, and does it differ from the one that defines `write`? */
int kc_symbol_interposed(const char *name, char *object, size_t objlen);

/* Exposed for unit tests: is a listing (sorted or not) exactly the names
 * f0..f(files-1), each once? */
int kc_listing_complete(char *const *names, size_t n, int64_t files);

#endif
