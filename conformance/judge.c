/*
 * judge.c — verdict rules per check.
 */
#include "conformance/judge.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct sbuf {
	char *p;
	size_t len, used;
} sbuf;

static void sb_add(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(sbuf *b, const char *fmt, ...)
{
	if (b->used >= b->len)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(b->p + b->used, b->len - b->used, fmt, ap);
	va_end(ap);
	if (n > 0)
		b->used += (size_t)n;
	if (b->used >= b->len)
		b->used = b->len - 1;
}

#define C(key) ((long long)kc_count_get(counts, key))

/* Lists every non-zero "variant.key" among keys as "label N"; returns the sum. */
static long long list_violations(const json_t *counts, const char *variant,
				 const char *const *keys, size_t nkeys, sbuf *b, int *first)
{
	long long sum = 0;
	for (size_t i = 0; i < nkeys; i++) {
		char k[128];
		if (variant)
			snprintf(k, sizeof(k), "%s.%s", variant, keys[i]);
		else
			snprintf(k, sizeof(k), "%s", keys[i]);
		long long v = C(k);
		if (v <= 0)
			continue;
		sum += v;
		sb_add(b, "%s%s%s%s %lld", *first ? "" : ", ", variant ? variant : "",
		       variant ? " " : "", keys[i], v);
		*first = 0;
	}
	return sum;
}

kc_verdict kc_judge_rename(const json_t *counts, char *summary, size_t len)
{
	static const char *const file_keys[] = {"not_converged", "missing", "read_enoent",
						"empty", "short", "long", "torn", "backwards",
						"errors", "write_errors", "rename_errors",
						"hold_errors"};
	static const char *const dir_keys[] = {"not_converged", "partial", "errors",
					       "rename_errors"};
	char viol[512] = "";
	sbuf vb = {viol, sizeof(viol), 0};
	int first = 1;
	long long bad = 0;
	bad += list_violations(counts, "plain", file_keys, 12, &vb, &first);
	bad += list_violations(counts, "held", file_keys, 12, &vb, &first);
	bad += list_violations(counts, "dir", dir_keys, 4, &vb, &first);
	long long reads = C("plain.reads") + C("held.reads");
	long long ok = C("plain.ok") + C("held.ok");
	long long renames = C("plain.renames") + C("held.renames");
	long long estale = C("plain.estale_open") + C("plain.estale_read") + C("held.estale_open") +
			   C("held.estale_read") + C("dir.estale");
	sbuf b = {summary, len, 0};
	if (bad > 0) {
		sb_add(&b, "%lld violations in %lld reads and %lld listings (%s)", bad, reads,
		       C("dir.listings"), viol);
		return KC_FAIL;
	}
	/* Each variant tests something the others cannot (a held target, a
	 * directory), so each must have verified something of its own, and so
	 * must every reader: one that verified nothing cannot vouch for its
	 * client however much the others read. */
	const char *idle = C("plain.ok") == 0 ? "plain"
			   : C("held.ok") == 0 ? "held"
			   : C("dir.complete") == 0 ? "dir"
						  : NULL;
	const char *idle_reader = C("plain.readers_idle") > 0 ? "plain"
				  : C("held.readers_idle") > 0 ? "held"
				  : C("dir.readers_idle") > 0 ? "dir"
							       : NULL;
	if (!idle && idle_reader) {
		sb_add(&b, "inconclusive: %lld readers of the %s variant verified nothing of their own",
		       C(idle_reader[0] == 'p' ? "plain.readers_idle"
			 : idle_reader[0] == 'h' ? "held.readers_idle"
						 : "dir.readers_idle"),
		       idle_reader);
		return KC_WARN;
	}
	if (idle) {
		sb_add(&b, "inconclusive: the %s variant verified nothing (%lld reads, %lld directory listings",
		       idle, reads, C("dir.listings"));
		if (estale)
			sb_add(&b, ", ESTALE retried %lld times", estale);
		sb_add(&b, ")");
		return KC_WARN;
	}
	sb_add(&b, "%lld renames, %lld verified reads, %lld directory listings: none missing, torn or going backwards, every reader converged",
	       renames + C("dir.renames"), ok, C("dir.listings"));
	if (estale)
		sb_add(&b, " (ESTALE retried %lld times)", estale);
	return KC_PASS;
}

kc_verdict kc_judge_excl(const json_t *counts, char *summary, size_t len)
{
	static const char *const keys[] = {"multi_winner",     "no_winner",
					   "loser_eperm",      "loser_other",
					   "content_mismatch", "winner_write_errors",
					   "loser_own_content"};
	char viol[512] = "";
	sbuf vb = {viol, sizeof(viol), 0};
	int first = 1;
	long long bad = list_violations(counts, NULL, keys, 7, &vb, &first);
	sbuf b = {summary, len, 0};
	if (bad > 0) {
		sb_add(&b, "in %lld rounds of %lld racers: %s", C("rounds"), C("racers"), viol);
		return KC_FAIL;
	}
	if (C("rounds") == 0) {
		sb_add(&b, "inconclusive: no round ran");
		return KC_WARN;
	}
	sb_add(&b, "%lld rounds of %lld racers: exactly one winner each, every loser got EEXIST",
	       C("rounds"), C("racers"));
	return KC_PASS;
}

kc_verdict kc_judge_cto(const json_t *counts, char *summary, size_t len)
{
	static const char *const keys[] = {"stale",   "short",  "long",	  "torn",
					   "empty",   "missing", "future",	  "errors",
					   "write_errors", "not_converged"};
	char viol[512] = "";
	sbuf vb = {viol, sizeof(viol), 0};
	int first = 1;
	long long bad = list_violations(counts, "same", keys, 10, &vb, &first);
	bad += list_violations(counts, "grow", keys, 10, &vb, &first);
	bad += list_violations(counts, "renamed", keys, 10, &vb, &first);
	long long reads = C("same.reads") + C("grow.reads") + C("renamed.reads");
	sbuf b = {summary, len, 0};
	if (bad > 0) {
		sb_add(&b, "%lld of %lld reads after close did not see the closed version (%s)", bad,
		       reads, viol);
		return KC_FAIL;
	}
	if (C("same.reads") == 0 || C("grow.reads") == 0 || C("renamed.reads") == 0) {
		sb_add(&b, "inconclusive: no read of the %s rewrites ran",
		       C("same.reads") == 0  ? "same-size"
		       : C("grow.reads") == 0 ? "growing"
					      : "renamed-over");
		return KC_WARN;
	}
	sb_add(&b, "%lld same-size, %lld growing and %lld renamed-over reads after close: every open saw the new version, every reader converged",
	       C("same.reads"), C("grow.reads"), C("renamed.reads"));
	long long estale = C("same.estale") + C("grow.estale") + C("renamed.estale");
	if (estale)
		sb_add(&b, " (ESTALE retried %lld times)", estale);
	return KC_PASS;
}

kc_verdict kc_judge_unlink(const json_t *counts, char *summary, size_t len)
{
	sbuf b = {summary, len, 0};
	if (C("rmdir_after_close_failed") > 0 || C("space_not_freed") > 0 ||
	    C("hidden_after_close") > 0) {
		sb_add(&b, "after the holder closed the file:");
		if (C("hidden_after_close") > 0)
			sb_add(&b, " %lld hidden entries remained;", C("hidden_after_close"));
		if (C("rmdir_after_close_failed") > 0)
			sb_add(&b, " the directory could not be removed;");
		if (C("space_not_freed") > 0)
			sb_add(&b, " the space was not freed;");
		b.used = b.used > 0 ? b.used - 1 : 0;
		summary[b.used] = '\0';
		return KC_FAIL;
	}
	sb_add(&b, "deleted while open: %s; after close the directory was removed%s",
	       C("hidden_while_open") > 0 ? "silly-renamed to a hidden name" : "no hidden entry",
	       C("space_unknown") > 0 ? " (space accounting unavailable)" : " and the space freed");
	return KC_PASS;
}

int kc_fsync_too_fast(int64_t fsync_ns, int64_t lookup_ns, int64_t getattr_ns, int64_t *ref_ns,
		      const char **kind)
{
	int64_t ref = lookup_ns > 0 ? lookup_ns : -1;
	const char *k = ref > 0 ? "lookup" : "none";
	if (getattr_ns > 0 && (ref < 0 || getattr_ns < ref)) {
		ref = getattr_ns;
		k = "getattr";
	}
	*ref_ns = ref;
	*kind = k;
	return fsync_ns >= 0 && ref > 0 && fsync_ns < ref;
}

/* The last sample before index i that did not fail, or -1. */
static int64_t last_before(const int64_t *seq, int i)
{
	for (int k = i - 1; k >= 0; k--)
		if (seq[k] >= 0)
			return seq[k];
	return -1;
}

int kc_space_freed(const int64_t *seq, int n, int nlinked, int nheld, int64_t file_bytes,
		   int64_t *rise)
{
	int64_t linked = last_before(seq, nlinked); /* just before the unlink */
	int64_t held = last_before(seq, nheld);     /* just before the close */
	int64_t best = -1, prev = linked;
	for (int i = nlinked; i < n; i++) {
		if (seq[i] < 0)
			continue;
		/* Over the level before the event, or over the sample just
		 * before: a jump between neighbours that others' writes in
		 * between did not blur (but not one of more than twice the
		 * file: that is someone else's space coming back). */
		int64_t base = i < nheld ? linked : held;
		if (base >= 0 && seq[i] - base > best)
			best = seq[i] - base;
		if (prev >= 0 && seq[i] - prev > best && seq[i] - prev <= 2 * file_bytes)
			best = seq[i] - prev;
		prev = seq[i];
	}
	*rise = best;
	return best >= 0 && best >= file_bytes / 2;
}

kc_verdict kc_judge_fsync(const json_t *counts, char *summary, size_t len)
{
	sbuf b = {summary, len, 0};
	if (C("interposed_actors") > 0 || C("crash_lost") > 0) {
		if (C("interposed_actors") > 0)
			sb_add(&b, "fsync is interposed in %lld actor processes (LD_PRELOAD)",
			       C("interposed_actors"));
		if (C("crash_lost") > 0)
			sb_add(&b, "%sdata acknowledged by fsync was gone after the crash (%lld of %lld bytes lost)",
			       C("interposed_actors") > 0 ? "; " : "", C("crash_bytes_lost"),
			       C("crash_bytes"));
		return KC_FAIL;
	}
	if (C("fast_fsync") > 0 || C("libc_faster") > 0) {
		if (C("fast_fsync") > 0)
			sb_add(&b, "suspicious: fsync (%.1f us) returns faster than one round trip to the filesystem (%.1f us)",
			       C("raw_fsync_ns") / 1000.0, C("round_trip_ns") / 1000.0);
		if (C("libc_faster") > 0)
			sb_add(&b, "%ssuspicious: libc fsync (%.1f us) is much faster than the system call (%.1f us)",
			       C("fast_fsync") > 0 ? "; " : "", C("libc_fsync_ns") / 1000.0,
			       C("raw_fsync_ns") / 1000.0);
		sb_add(&b, "; %s", C("power_loss_cmd") > 0 ? "survived a power loss"
							   : "fsync not disproven: no power-loss hook");
		return KC_WARN;
	}
	if (C("power_loss_cmd") > 0) {
		sb_add(&b, "survived a power loss: %lld bytes fsynced, the writer killed and the storage's unsynced state dropped (--power-loss-cmd); fsync %.1f us vs one round trip %.1f us",
		       C("crash_bytes"), C("raw_fsync_ns") / 1000.0, C("round_trip_ns") / 1000.0);
		return KC_PASS;
	}
	sb_add(&b, "fsync not disproven: no power-loss hook; %lld bytes survived %s; fsync %.1f us vs one round trip %.1f us",
	       C("crash_bytes"),
	       C("crash_cmd") > 0 ? "the writer's kill and a crash of the server side (--crash-cmd)"
				  : "the writer's kill",
	       C("raw_fsync_ns") / 1000.0, C("round_trip_ns") / 1000.0);
	return KC_UNPROVEN;
}

json_t *kc_durability_json(int lost, int proven, int hook_ran)
{
	const char *by = proven ? "power-loss-cmd" : hook_ran ? "crash-cmd" : "writer-kill";
	const char *st = lost ? "lost: data fsync acknowledged was gone after the crash"
			 : proven ? "survived a power loss"
			 : hook_ran
				 ? "fsync not disproven: no power-loss hook (survived the writer's kill and a crash of the server side)"
				 : "fsync not disproven: no power-loss hook (survived the writer's kill)";
	return json_pack("{s:b,s:s,s:s}", "proven", proven && !lost, "by", by, "statement", st);
}

kc_verdict kc_judge_rcopy(const json_t *counts, char *summary, size_t len)
{
	sbuf b = {summary, len, 0};
	long long ratio = C("ratio_x100");
	if (C("inode_changed") > 0 || C("time_grows") > 0 || C("old_fd_broken") > 0 ||
	    C("content_mismatch") > 0 || C("rename_errors") > 0) {
		const char *sep = "";
		if (C("inode_changed") > 0) {
			sb_add(&b, "inode changed on rename");
			sep = "; ";
		}
		if (C("time_grows") > 0) {
			sb_add(&b, "%srenaming 64 MiB took %lld.%02lldx as long as 1 KiB", sep,
			       ratio / 100, ratio % 100);
			sep = "; ";
		}
		if (C("old_fd_broken") > 0) {
			sb_add(&b, "%sa descriptor opened before the rename no longer reads the file", sep);
			sep = "; ";
		}
		if (C("content_mismatch") > 0) {
			sb_add(&b, "%sthe renamed file's content differs", sep);
			sep = "; ";
		}
		if (C("rename_errors") > 0)
			sb_add(&b, "%s%lld renames failed", sep, C("rename_errors"));
		return KC_FAIL;
	}
	sb_add(&b, "inode kept, old descriptor still reads, 64 MiB vs 1 KiB rename time ratio %lld.%02lld",
	       ratio / 100, ratio % 100);
	return KC_PASS;
}

int64_t kc_power_needed(double rate, double prob)
{
	if (!(rate > 0 && rate < 1) || !(prob < 1))
		return -1;
	if (prob <= 0)
		return 1;
	double n = log1p(-prob) / log1p(-rate);
	/* ln() of numbers near 1 is inexact: take the integer just below
	 * when it already reaches prob. */
	int64_t k = (int64_t)ceil(n - 1e-9);
	return k < 1 ? 1 : k;
}

double kc_power_of(int64_t n, double rate)
{
	if (n <= 0 || !(rate > 0))
		return 0.0;
	if (rate >= 1)
		return 1.0;
	return -expm1((double)n * log1p(-rate));
}

int64_t kc_judge_readers(json_t *readers, int64_t *idle, int64_t *min_obs)
{
	int64_t stuck = 0;
	size_t i;
	json_t *rd;
	*idle = 0;
	*min_obs = -1;
	json_array_foreach(readers, i, rd)
	{
		const char *fs = json_string_value(json_object_get(rd, "final_status"));
		json_int_t obs = json_integer_value(json_object_get(rd, "reads"));
		/* Not converging is a violation whatever else the reader saw;
		 * a reader that verified nothing during the run (and was not
		 * caught) is no evidence for its client either way. */
		const char *v = fs && strcmp(fs, "ok") != 0 ? "not_converged"
				: !fs || json_integer_value(json_object_get(rd, "ok")) == 0 ? "idle"
											 : "converged";
		if (strcmp(v, "not_converged") == 0)
			stuck++;
		else if (strcmp(v, "idle") == 0)
			(*idle)++;
		if (*min_obs < 0 || obs < *min_obs)
			*min_obs = obs;
		json_object_set_new(rd, "verdict", json_string(v));
	}
	return stuck;
}

kc_verdict kc_judge_perf(const json_t *counts, char *summary, size_t len)
{
	sbuf b = {summary, len, 0};
	int slow_sync = C("fsync_p99_us") > C("target_fsync_p99_us");
	int slow_tput = C("target_mibps_x100") > 0 && C("mibps_1m_x100") < C("target_mibps_x100");
	sb_add(&b, "fsync p99 %.2f ms (target %.2f ms), 4 KiB append+fsync p99 %.2f ms, 1 MiB appends %.1f MiB/s",
	       C("fsync_p99_us") / 1000.0, C("target_fsync_p99_us") / 1000.0,
	       C("append_4k_p99_us") / 1000.0, C("mibps_1m_x100") / 100.0);
	if (C("target_mibps_x100") > 0)
		sb_add(&b, " (target %.1f)", C("target_mibps_x100") / 100.0);
	sb_add(&b, "; %lld creates/s, %lld renames/s, %lld unlinks/s", C("creates_per_s"),
	       C("renames_per_s"), C("unlinks_per_s"));
	if (!slow_sync && !slow_tput)
		return KC_PASS;
	sb_add(&b, ": %s", slow_sync && slow_tput ? "fsync and throughput miss their targets"
			   : slow_sync		  ? "fsync misses its target"
						  : "throughput misses its target");
	return C("strict") > 0 ? KC_FAIL : KC_WARN;
}

kc_verdict kc_judge_enospc(const json_t *counts, char *summary, size_t len)
{
	sbuf b = {summary, len, 0};
	const char *at = C("surfaced_at_write") ? "write" : C("surfaced_at_fsync") ? "fsync" : "close";
	sb_add(&b, "filled %lld MiB: out of space reported at %s", C("filled_bytes") >> 20,
	       C("deferred_to_close") ? "close only" : at);
	if (C("acked_lost"))
		sb_add(&b, "; %lld bytes reported written and fsynced do not read back", C("acked_lost"));
	if (C("small_lost"))
		sb_add(&b, "; %lld small file(s) reported written while full do not read back whole",
		       C("small_lost"));
	if (C("deferred_to_close") || C("acked_lost") || C("small_lost"))
		return KC_FAIL;
	sb_add(&b, "; %lld MiB acknowledged read back whole", C("acked_bytes") >> 20);
	return KC_PASS;
}

kc_verdict kc_judge_overall(const kc_result *res, int n)
{
	kc_verdict v = KC_PASS;
	for (int i = 0; i < n; i++)
		if (res[i].ran)
			v = kc_verdict_worst(v, res[i].verdict);
	return v;
}

int64_t kc_free_bytes(uint64_t blocks, uint64_t bavail, uint64_t bsize)
{
	if (blocks == 0 || bsize == 0 || bavail > (uint64_t)INT64_MAX / bsize)
		return -1;
	return (int64_t)(bavail * bsize);
}

void kc_judge_result(kc_result *r, uint64_t seed)
{
	typedef kc_verdict (*judge_fn)(const json_t *, char *, size_t);
	static const judge_fn judges[KC_NCHECKS] = {
		[KC_CHK_RENAME] = kc_judge_rename, [KC_CHK_EXCL] = kc_judge_excl,
		[KC_CHK_CTO] = kc_judge_cto,	   [KC_CHK_UNLINK] = kc_judge_unlink,
		[KC_CHK_FSYNC] = kc_judge_fsync,   [KC_CHK_RCOPY] = kc_judge_rcopy,
		[KC_CHK_PERF] = kc_judge_perf,	   [KC_CHK_ENOSPC] = kc_judge_enospc,
	};
	if (r->verdict == KC_ERROR)
		return;
	if (r->check >= 0 && r->check < KC_NCHECKS && judges[r->check])
		r->verdict = judges[r->check](r->counts, r->summary, sizeof(r->summary));
	if (r->verdict == KC_FAIL || r->verdict == KC_WARN)
		snprintf(r->reproduce, sizeof(r->reproduce), "--seed %" PRIu64 " --checks %s", seed,
			 kc_check_name(r->check));
}
