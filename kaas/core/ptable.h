/*
 * ptable.h — the partition table: which partitions this broker leads, at
 * which epoch, and the open ks_partition for each.
 *
 * It is the one interface between "who owns what" and the request handlers.
 * Handlers only ask kb_ptable_get() ("do I lead it, at which epoch?") and
 * never touch assignment files; the topic engine tells it when a topic
 * appears, grows or goes away.  Today a single broker leads everything; the
 * cluster work will drive the same table from CLUSTER/assignment.json
 * without changing these calls.
 *
 * Leadership epochs (single-broker mode): this broker is its own controller.
 * Before it takes over a partition it writes CLUSTER/assignment.json (with
 * sub_write_atomic) recording {leader: this broker, epoch: E} where E is one
 * more than the larger of the epoch recorded there and the highest epoch in
 * the partition's segment names.  So the epoch grows at every start and at
 * every re-take-over (after a poisoned write), is never reused even if
 * assignment.json is lost, and a segment of an older epoch is never appended
 * to.  The file's shape is DESIGN §5's (docs/broker.md has it):
 *   {"version": N, "controller_epoch": 0,
 *    "partitions": {"<topic>-<partition>": {"leader": id, "epoch": E}, ...}}
 * Keys are split at the LAST '-' (topic names may contain '-' and '.').
 *
 * Guarantees:
 *  - kb_ptable_get() returns a reference; the partition is neither closed
 *    nor relinquished while any reference is held.  Hold it for one request
 *    only; never across a KAAS_DEFERRED wait.
 *  - kb_ptable_ensure_topic() is idempotent: re-calling it with the same or
 *    a larger partition count converges the table to the registry.  A
 *    partition whose open/take-over failed stays in the table answering
 *    KAFKA_STORAGE_ERROR and is re-driven by the housekeeping timer.
 *  - kb_ptable_drop_topic() returns only after every descriptor under
 *    DATA/<topic>/ held by this process is closed (after relinquish: manifest
 *    and producer snapshot persisted), so the caller may then remove the
 *    directory without NFS silly-renames.  Parked fetches on it are woken.
 *  - All functions are thread-safe.
 */
#ifndef KAAS_SERVER_PTABLE_H
#define KAAS_SERVER_PTABLE_H

#include <stdint.h>

#include "kaas/proto/buf.h"
#include "kaas/core/broker.h"
#include "kaas/storage/storage.h"

typedef struct kb_ptable kb_ptable;
typedef struct kb_pentry kb_pentry; /* private */

/* A topic as the registry knows it. */
typedef struct kb_topic_desc {
	const char *name;
	const char *topic_id;   /* 36-character UUID string (checked against manifests), or NULL */
	int32_t partitions;
	ks_log_config cfg;    /* effective log config: broker defaults + topic overrides */
} kb_topic_desc;

/* A counted reference to one led partition. */
typedef struct kb_pref {
	kb_pentry *e;
	ks_partition *p;      /* valid while the reference is held */
	int32_t epoch;          /* leader epoch this broker took it over at */
} kb_pref;
#define KAAS_PREF_INIT {NULL, NULL, -1}

int kb_ptable_create(kb_broker *b, kb_ptable **out);

/* Registers the storage engine's damage and scrub counters
 * (kaas_storage_*) with a metrics registry; kb_ptable_create does it for
 * b->metrics.  0 or -errno. */
struct ku_metrics;
int kb_storage_metrics(struct ku_metrics *m);

/* Start-up: records fresh epochs for every partition of these topics in one
 * assignment.json write, then opens and takes each over.  Per-partition
 * failures are kept (see above); returns -errno only when assignment.json
 * cannot be written (nothing is taken over then). */
int kb_ptable_start(kb_ptable *t, const kb_topic_desc *topics, size_t n);

/* A topic was created, or grew (CreatePartitions), or its config changed:
 * opens (creating directories) and takes over the partitions not yet in the
 * table; applies desc->cfg to the open ones.  0 when every new partition is
 * led.  -errno: either nothing new was added (out of memory, assignment.json
 * not written), or the new partitions are in the table but some could not be
 * led (the first take-over error, e.g. -EMFILE at the descriptor limit):
 * those answer KAFKA_STORAGE_ERROR and are re-driven by housekeeping, and
 * the caller should not report the change as a success (CreateTopics). */
int kb_ptable_ensure_topic(kb_ptable *t, const kb_topic_desc *desc);

/* A topic goes away: no new references, wait for the held ones, relinquish
 * and close every partition, remove them from assignment.json.  0 when the
 * topic was not in the table.  After this returns, DATA/<topic>/ may be
 * removed. */
int kb_ptable_drop_topic(kb_ptable *t, const char *topic);

/* Applies a changed effective config to the open partitions of a topic. */
int kb_ptable_set_config(kb_ptable *t, const char *topic, const ks_log_config *cfg);

/* The data-path lookup (refused while the ack gate is closed).  Returns
 * KERR_NONE with *ref filled, or a Kafka error:
 * UNKNOWN_TOPIC_OR_PARTITION (no such topic/partition here, or being dropped),
 * NOT_LEADER_OR_FOLLOWER (another broker leads it, or a newer epoch fenced us),
 * KAFKA_STORAGE_ERROR (take-over failed or the partition is poisoned). */
int16_t kb_ptable_get(kb_ptable *t, kw_str topic, int32_t partition, kb_pref *ref);
void kb_pref_put(kb_pref *ref); /* NULL-safe, safe to repeat */

/* For Metadata: the leader and its epoch of a partition, as last applied.
 * Returns KERR_NONE, UNKNOWN_TOPIC_OR_PARTITION, or LEADER_NOT_AVAILABLE
 * (*leader = -1) while nobody can serve it. */
int16_t kb_ptable_leader(kb_ptable *t, const char *topic, int32_t partition, int32_t *leader,
			   int32_t *epoch);

/* ---- durability (group commit) and waiting for it --------------------------- */

/* Data was appended: the flusher will fsync it soon (acks 0 and 1). */
void kb_ptable_dirty(kb_pref *ref);

/* Calls fn(arg, KERR_NONE, hw) once the partition's durable offset (the high
 * watermark) is >= `offset`, or fn(arg, error, -1) when the flush failed or
 * the partition went away: REQUEST_TIMED_OUT whenever the data may be on
 * the volume (a failed or ended group commit, the ack gate closed; a
 * successor's recovery may keep it), UNKNOWN_TOPIC_OR_PARTITION when the
 * topic was dropped.  fn runs exactly once, on a flusher thread or
 * right here when already durable; keep it short (post real work with
 * kb_broker_run).  0 or -ENOMEM (fn is then not called). */
typedef void (*kb_durable_fn)(void *arg, int16_t error, int64_t high_watermark);
int kb_ptable_when_durable(kb_pref *ref, int64_t offset, kb_durable_fn fn, void *arg);

/* Long polls: calls fn(arg) at most once, when the partition's high watermark
 * moves past `offset` or the partition leaves the table.  fn is called with a
 * table lock held: it must only set a flag or post work.  Every watch must be
 * given back with kb_ptable_unwatch() exactly once; after it returns fn
 * will not be called. */
typedef struct kb_watch kb_watch;
typedef void (*kb_watch_fn)(void *arg);
kb_watch *kb_ptable_watch(kb_pref *ref, int64_t offset, kb_watch_fn fn, void *arg);
void kb_ptable_unwatch(kb_ptable *t, kb_watch *w);

/* ---- requests that wait for a take-over (hold.c) ------------------------------
 * A partition the applied leader map gives to this broker is not served
 * until its take-over here ends (recovery, producer state); a produce that
 * arrives meanwhile waits for it, as Kafka's partition lock makes it wait
 * for makeLeader, instead of being refused: a refused batch followed by a
 * pipelined one judged after the take-over reads to an idempotent producer
 * as skipped sequence numbers (docs/cluster.md, "What a producer is told").
 *
 * kb_ptable_hold: 0 when the request may go ahead now (nothing of it is
 * pending and no held request shares a partition or the connection with
 * it); 1 when it was parked: fn(arg, 0) then runs once on a worker when it
 * may go ahead — the requests of one connection, and of one partition, in
 * the order they were parked, each after the one before it called
 * kb_ptable_hold_done — or fn(arg, 1) when timeout_ms passed first (every
 * request of the same connection parked behind it is timed out with it, so
 * none of them is processed after it).  The caller calls
 * kb_ptable_hold_done exactly once after fn, when its appends are done.
 * -ENOMEM: go ahead (not parked). */
typedef struct kb_hold kb_hold;
typedef void (*kb_hold_fn)(void *arg, int timed_out);
typedef struct kb_hold_key {
	kw_str topic;
	int32_t partition;
} kb_hold_key;
int kb_ptable_hold(kb_ptable *t, uint64_t conn_id, const kb_hold_key *keys, size_t n, int64_t timeout_ms,
		   kb_hold_fn fn, void *arg, kb_hold **out);
void kb_ptable_hold_done(kb_ptable *t, kb_hold *h);
/* 1 when a take-over of topic/partition is pending (the applied map gives
 * it to this broker, which does not lead it at that epoch yet and has not
 * failed to) or under way here. */
int kb_ptable_pending(kb_ptable *t, kw_str topic, int32_t partition);

/* Refused batches of idempotent producers, remembered per partition so that
 * the gap a refusal leaves is not judged against the producer: after this
 * broker answered a batch of (pid, epoch) from sequence `seq` with a
 * retriable error that left it for a retry (not written; or written but
 * possibly cut by a re-take), a later batch of the same producer that the
 * log finds out of order (OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID)
 * is answered NOT_LEADER_OR_FOLLOWER instead — retriable, not persisted —
 * so that the producer drains and re-sends from the refused batch, in order.
 * kb_ptable_refusal_check answers 1 for such a batch; a batch of that
 * producer the log accepted (kb_ptable_refusal_clear) ends the memory, as
 * does KB_REFUSAL_TTL_MS.  At most KB_REFUSALS producers per partition
 * (the oldest is forgotten). */
#define KB_REFUSALS 64
#define KB_REFUSAL_TTL_MS 120000
void kb_ptable_refusal_note(kb_ptable *t, kw_str topic, int32_t partition, int64_t pid, int16_t epoch,
			    int32_t seq);
int kb_ptable_refusal_check(kb_ptable *t, kw_str topic, int32_t partition, int64_t pid, int16_t epoch,
			    int32_t seq);
void kb_ptable_refusal_clear(kb_ptable *t, kw_str topic, int32_t partition, int64_t pid);

/* ---- life cycle ---------------------------------------------------------------- */

/* Periodic work (called by the server's housekeeping timer on a worker):
 * retention and segment.ms rolls, re-driving failed or poisoned partitions. */
void kb_ptable_housekeep(kb_ptable *t);

/* SIGTERM has arrived: every parked watch fires now (long polls answer with
 * what they have) and later watches fire at once. */
void kb_ptable_wake_all(kb_ptable *t);

/* SIGTERM: flushes, then relinquishes every partition (manifest + producer
 * snapshot, then close).  Waits for held references.  Returns 0 or the first
 * -errno (every partition is still attempted). */
int kb_ptable_shutdown(kb_ptable *t);
void kb_ptable_destroy(kb_ptable *t); /* after shutdown; NULL-safe */

/* ---- driven by the cluster (kaas/cluster/) ---------------------------------------
 * In a cluster the table leads only what it is told.  kb_ptable_set_driven()
 * (before kb_ptable_start) turns self-assignment off: start-up and
 * kb_ptable_ensure_topic() only make the topics and partitions known (not led:
 * NOT_LEADER_OR_FOLLOWER), epoch.c's single-broker assignment.json is never
 * written, and the failed-partition re-drive is left to the driver. */
void kb_ptable_set_driven(kb_ptable *t);

/* Becomes leader of topic/partition at `epoch` (idempotent: 0 when already
 * leading at that epoch; leading at a lower one is relinquished first).
 * Refuses (-ESTALE) an epoch below the highest on disk, or equal to it unless
 * this table already tried that very epoch; -ENOENT when the table does not
 * know the partition (or topic_id names another incarnation); other -errno
 * from storage (the entry answers KAFKA_STORAGE_ERROR until re-driven).
 * prev_epoch/planned say a planned hand-off from prev_epoch is being
 * completed (logged).  Whether the tail is scanned does not depend on
 * them: storage skips the scan whenever the old leader's relinquish
 * record matches the files (docs/storage.md, "Relinquish record"). */
int kb_ptable_take_over(kb_ptable *t, const char *topic, const char *topic_id, int32_t partition,
			int32_t epoch, int32_t prev_epoch, int planned);

/* The same for many partitions at once: each item's checks run in order,
 * the take-overs themselves overlap on a few threads (a take-over is a few
 * volume round trips; thousands of them one after the other are what a
 * broker death costs at 10,000 partitions).  Every item's answer goes to
 * its rc; the items name distinct partitions.  Returns 0, or -ENOMEM
 * before anything was tried. */
typedef struct kb_takeover {
	const char *topic;
	const char *topic_id;
	int32_t partition;
	int32_t epoch;
	int32_t prev_epoch;
	int planned;
	int rc; /* out: what kb_ptable_take_over would have answered */
} kb_takeover;
int kb_ptable_take_over_many(kb_ptable *t, kb_takeover *v, size_t n);

/* Stops leading topic/partition: no new references, waits for the held ones,
 * then flush + final manifest + producer snapshot + close.  Idempotent (0 when
 * not led). */
int kb_ptable_relinquish(kb_ptable *t, const char *topic, int32_t partition);
/* The same for the partitions v[i].topic/v[i].partition (the other fields
 * are not used), their volume work overlapping on a few threads; rc[i] gets
 * each answer.  0, or -ENOMEM before anything was done. */
int kb_ptable_relinquish_many(kb_ptable *t, const kb_takeover *v, size_t n, int *rc);

/* What the table leads (or tried to): cb once per partition not idle, with
 * its state (1 leader, 2 failed take-over/poisoned).  Runs under the table
 * lock: cb must only copy. */
typedef void (*kb_led_fn)(void *arg, const char *topic, const char *topic_id, int32_t partition,
			  int32_t epoch, int state);
void kb_ptable_led(kb_ptable *t, kb_led_fn cb, void *arg);

/* The highest epoch named by the partition's segment files or manifest (0
 * when none): the balancer's floor for partitions an earlier run led.  A
 * number above KB_EPOCH_PLAUSIBLE is not followed (logged by name): an
 * epoch grows by one per leadership change, so a file claiming more was
 * written by something else, and following it would leave the partition
 * too few epochs to ever move again.  Storage sets such a file aside as
 * foreign when the partition is taken over (docs/storage.md). */
#define KB_EPOCH_PLAUSIBLE KS_EPOCH_PLAUSIBLE
int32_t kb_ptable_disk_epoch(kb_ptable *t, const char *topic, int32_t partition);

/* The ack gate: holds(arg) is asked after the fsync that made a write durable
 * and before any answer saying so (acks=all waiters, acks=1, offset commits);
 * 0 turns the answer into REQUEST_TIMED_OUT: the data is written (durable,
 * even) and a successor may serve it, so the answer must mean "outcome
 * unknown" — an idempotent producer then retries it with its sequence
 * numbers, which the successor recognises; NOT_LEADER_OR_FOLLOWER would
 * say "not written".  Lookups (kb_ptable_get) with the gate closed still
 * answer NOT_LEADER_OR_FOLLOWER: nothing was written.  No gate: always
 * open. */
typedef int (*kb_gate_fn)(void *arg);
void kb_ptable_set_ack_gate(kb_ptable *t, kb_gate_fn holds, void *arg);
int kb_ptable_ack_ok(kb_ptable *t);

/* The take-over guard: asked by every take-over of the table right before
 * each step that moves, renames, truncates, unlinks or sets aside anything
 * on the volume (ks_takeover_guard_fn, with the partition named).  0 lets
 * it go on, with *ceiling the highest epoch issued for the partition as
 * read from the volume just now (-1: not known); an errno abandons the
 * take-over.  The cluster checks its lease and the assignment there.
 * Called on the table's take-over threads; set before the first take-over
 * (NULL: none). */
typedef int (*kb_tk_guard_fn)(void *arg, const char *topic, int32_t partition, int32_t epoch,
			      const char *step, int32_t *ceiling);
void kb_ptable_set_takeover_guard(kb_ptable *t, kb_tk_guard_fn fn, void *arg);

/* Stall watchdog hooks around every flusher fsync: begin returns a token
 * handed to end. */
typedef int (*kb_io_begin_fn)(void *arg);
typedef void (*kb_io_end_fn)(void *arg, int token);
void kb_ptable_set_io_hooks(kb_ptable *t, kb_io_begin_fn begin, kb_io_end_fn end, void *arg);

/* Driven: waits (at most timeout_ms) until the applied leader map names a
 * leader for every partition of the topic and this broker leads its own
 * share, so a client told "created" finds the topic served.  1 when so, 0
 * on timeout (or when nothing drives the table), -errno of a take-over of
 * one of its own partitions that failed (it is re-driven). */
int kb_ptable_wait_led(kb_ptable *t, const char *topic, int64_t timeout_ms);

/* The applied leader map (kaas/core/leaders.h): Metadata, FindCoordinator and
 * the not-leader answers read it.  apply takes over the caller's reference;
 * kb_ptable_leaders returns a new reference (kb_leaders_put) or NULL. */
struct kb_leaders;
void kb_ptable_apply_leaders(kb_ptable *t, struct kb_leaders *m);
struct kb_leaders *kb_ptable_leaders(kb_ptable *t);

/* "orders-3" -> "orders", 3: split at the last '-'.  -EINVAL when malformed. */
int kb_partition_key_parse(const char *key, char *topic, size_t topiclen, int32_t *partition);

/* census.c: every partition the table knows, for a metrics scrape (no I/O;
 * the table's lock is held: fn must be quick and call nothing of the table).
 * led: this broker leads it; failed: its take-over failed; hwm: the high
 * watermark storage last announced (-1 before any). */
typedef void (*kb_census_fn)(void *arg, const char *topic, int32_t partition, int led, int failed,
			     int64_t hwm);
void kb_ptable_each(kb_ptable *t, kb_census_fn fn, void *arg);

/* cleaner.c: the log cleaner's state for a metrics scrape (memory only).
 * The counters are the cleaner's since start-up, published after each
 * pass; the dirty ratios (ks_partition_dirty_ratio) of the
 * KB_CLEANER_DIRTY_TOP dirtiest compacted partitions led here, dirtiest
 * first, as of the last round, so the series stay bounded however many
 * partitions there are.  0, or -ENOENT when no cleaner runs. */
#define KB_CLEANER_DIRTY_TOP 10
typedef struct kb_cleaner_obs {
	ks_clean_stats st;
	uint64_t errors;       /* passes that failed (not a lost leadership or a stop) */
	uint64_t rounds;
	double last_pass_s;    /* the last pass that swapped */
	int compacted;         /* compacted partitions led, last round */
	double max_dirty;
	int ndirty;
	struct {
		char topic[250];
		int32_t partition;
		double ratio;
	} dirty[KB_CLEANER_DIRTY_TOP];
} kb_cleaner_obs;
int kb_ptable_cleaner_obs(kb_ptable *t, kb_cleaner_obs *out);

#endif
