/*
 * test_takeover.c — the successor side of a take-over: what a take-over
 * may touch when another leader is, or becomes, newer, and when it may
 * trust the old leader's relinquish record instead of scanning the tail.
 *
 * Two instances of a partition on one directory stand for two brokers of a
 * cluster; the take-over guard (ks_takeover_opts) stands for the broker's
 * lease and assignment check and is also the hook through which a test
 * makes things happen "while the broker was paused", right before a step
 * that changes the volume.
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "kaas/storage/test/harness.h"
#include "util/test/ktest.h"

/* ---- helpers ------------------------------------------------------------------ */

static void path_of(char *dst, size_t len, const char *dir, const char *leaf)
{
	snprintf(dst, len, "%s/%s/%s", h_dir, dir, leaf);
}

static void write_file(const char *dir, const char *leaf, const void *buf, size_t len)
{
	char path[1024];
	path_of(path, sizeof(path), dir, leaf);
	FILE *f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	if (len)
		ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
	fclose(f);
}

/* The whole file (NUL-terminated), its length in *len. */
static char *read_file(const char *dir, const char *leaf, size_t *len)
{
	char path[1024];
	path_of(path, sizeof(path), dir, leaf);
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	char *buf = malloc(1 << 20);
	size_t n = fread(buf, 1, (1 << 20) - 1, f);
	fclose(f);
	buf[n] = 0;
	if (len)
		*len = n;
	return buf;
}

static off_t file_size(const char *dir, const char *leaf)
{
	char path[1024];
	struct stat st;
	path_of(path, sizeof(path), dir, leaf);
	return stat(path, &st) == 0 ? st.st_size : -1;
}

/* Every file under the partition directory with its size, sorted: what a
 * take-over that must not touch anything is compared against. */
static char *tree(const char *dir)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "cd %s/%s && find . -type f ! -name '.*' -printf '%%P %%s\\n' | sort", h_dir,
		 dir);
	FILE *f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	char *buf = calloc(1, 1 << 16);
	size_t n = fread(buf, 1, (1 << 16) - 1, f);
	buf[n] = 0;
	pclose(f);
	return buf;
}

static int has_quarantine(const char *dir)
{
	char path[1024];
	struct stat st;
	path_of(path, sizeof(path), dir, "quarantine");
	return stat(path, &st) == 0;
}

static ks_partition *open_part(const char *dir, int create)
{
	ks_log_config cfg = h_cfg();
	ks_partition *p;
	ck_assert_int_eq(ks_partition_open(h_vfs, dir, NULL, create, &cfg, &p), 0);
	return p;
}

static void put_n(ks_partition *p, int batches)
{
	for (int i = 0; i < batches; i++)
		h_put(p, 3, "rec", 40);
	ck_assert_int_eq(ks_partition_flush(p, NULL), 0);
}

/* The log read back from the start holds consecutive offsets up to `end`. */
static void check_log_to(ks_partition *p, int64_t end)
{
	ck_assert_int_eq(ks_partition_log_end(p), end);
	uint8_t *log;
	size_t len = h_read_all(p, 0, 1 << 20, &log);
	ck_assert_int_eq(h_check_log(log, len, 0), end);
	free(log);
}

/* One batch of n records whose base offset is `base`, as segment
 * <epoch>-<base>.log (the CRC does not cover the base offset). */
static void write_segment(const char *dir, int32_t epoch, int64_t base, int n)
{
	kbuild b = KBUILD_INIT;
	char leaf[64];
	if (n > 0) {
		kbuild_simple(&b, -1, -1, -1, n, 1700000000000LL, "seg", 30, KBUILD_NONE);
		kb_put64(b.buf, (uint64_t)base);
	}
	snprintf(leaf, sizeof(leaf), "%010d-%020lld.log", (int)epoch, (long long)base);
	write_file(dir, leaf, b.buf, b.len);
	kbuild_free(&b);
}

static ks_partition_stats stats_of(ks_partition *p)
{
	ks_partition_stats st;
	ks_partition_stats_get(p, &st);
	return st;
}

/* The guard of a test: answers 0 and no ceiling, except at the first step
 * whose name contains `at`, where it first runs `act` (something another
 * broker does meanwhile) and then answers rc and ceiling. */
typedef struct tguard {
	const char *at;
	void (*act)(struct tguard *g);
	int rc;
	int32_t ceiling;
	const char *dir;
	int calls, fired;
	char steps[2048];
} tguard;

static int tguard_fn(void *arg, int32_t epoch, const char *step, int32_t *ceiling)
{
	tguard *g = arg;
	(void)epoch;
	g->calls++;
	size_t l = strlen(g->steps);
	snprintf(g->steps + l, sizeof(g->steps) - l, "%s;", step);
	if (!g->at || g->fired || !strstr(step, g->at))
		return 0;
	g->fired = 1;
	if (g->act)
		g->act(g);
	if (g->ceiling)
		*ceiling = g->ceiling;
	return g->rc;
}

static int take_over_guarded(ks_partition *p, int32_t epoch, tguard *g)
{
	ks_takeover_opts o = {.guard = tguard_fn, .guard_arg = g};
	return ks_partition_take_over_opts(p, epoch, &o);
}

/* ---- a newer leader's files are never set aside ------------------------------------------------ */

/* The fault campaign's case: the leader of epoch 77 is paused; the
 * controller gives the partition to another broker at epoch 78, which takes
 * it over and acknowledges records in its own segment.  A broker that had
 * started a take-over at 77 (its ceiling: 77, read before it stopped) goes
 * on with it.  It must move nothing — the manifest and the active segment
 * of 78 stay where they are — and step down; the leader of 79 then serves
 * every record 78 acknowledged.  (It used to move both into quarantine/ as
 * "foreign": epoch 78 "above any issued (77)".) */
START_TEST(stale_take_over_leaves_the_newer_leaders_files_alone)
{
	ks_partition *old = open_part("sc", 1);
	ck_assert_int_eq(ks_partition_take_over(old, 77), 0);
	put_n(old, 10); /* offsets [0, 30) */
	ks_partition *next = open_part("sc", 0);
	ck_assert_int_eq(ks_partition_take_over(next, 78), 0);
	put_n(next, 5); /* [30, 45), acknowledged by 78 */
	char *before = tree("sc");
	char *man_before = read_file("sc", "manifest.json", NULL);
	ck_assert_ptr_nonnull(strstr(before, "0000000078-00000000000000000030.log"));

	ks_partition *stale = open_part("sc", 0);
	ck_assert_int_eq(ks_partition_take_over_bounded(stale, 77, 77), -ESTALE);
	char *after = tree("sc");
	ck_assert_str_eq(after, before);
	ck_assert(!has_quarantine("sc"));
	char *man_after = read_file("sc", "manifest.json", NULL);
	ck_assert_str_eq(man_after, man_before);
	ks_partition_stats st = stats_of(stale);
	ck_assert_uint_eq(st.takeovers_abandoned, 1);
	ck_assert_uint_eq(st.quarantined_files, 0);
	ck_assert_int_eq(ks_partition_state_of(stale, NULL), KAAS_PART_FOLLOWER);

	/* The next leader starts from everything 78 acknowledged. */
	ks_partition *later = open_part("sc", 0);
	ck_assert_int_eq(ks_partition_take_over(later, 79), 0);
	check_log_to(later, 45);
	ks_partition_close(later);
	ks_partition_close(stale);
	ks_partition_close(next);
	ks_partition_close(old);
	free(before);
	free(after);
	free(man_before);
	free(man_after);
}
END_TEST

/* The same rule for the producer snapshot: one of a newer epoch is that
 * leader's, not foreign. */
START_TEST(newer_producer_snapshot_is_not_set_aside)
{
	ks_partition *a = open_part("ps", 1);
	ck_assert_int_eq(ks_partition_take_over(a, 3), 0);
	put_n(a, 4);
	ck_assert_int_eq(ks_partition_relinquish(a), 0);
	/* Epoch 4 relinquished with its snapshot; then its segment's name
	 * and the manifest were mangled (by hand, a tool): only the snapshot
	 * still says 4, and that is enough to step down. */
	ks_partition *b = open_part("ps", 0);
	ck_assert_int_eq(ks_partition_take_over(b, 4), 0);
	h_put(b, 2, "idem", 10);
	ck_assert_int_eq(ks_partition_relinquish(b), 0);
	char *snap_before = read_file("ps", "producer-state.snapshot", NULL);
	char old_name[1024], new_name[1024];
	path_of(old_name, sizeof(old_name), "ps", "0000000004-00000000000000000012.log");
	path_of(new_name, sizeof(new_name), "ps", "0000000003-00000000000000000012.log");
	ck_assert_int_eq(rename(old_name, new_name), 0);
	write_file("ps", "manifest.json", "{}", 2); /* unreadable: no epoch from there either */
	ks_partition *c = open_part("ps", 0);
	ck_assert_int_eq(ks_partition_take_over(c, 3), -ESTALE);
	ck_assert(!has_quarantine("ps"));
	size_t n;
	char *snap_after = read_file("ps", "producer-state.snapshot", &n);
	ck_assert_str_eq(snap_after, snap_before);
	ck_assert_uint_eq(stats_of(c).takeovers_abandoned, 1);
	ks_partition_close(c);
	ks_partition_close(b);
	ks_partition_close(a);
	free(snap_before);
	free(snap_after);
}
END_TEST

/* A torn tail: segment 5-0 holds offsets [0, 10), 5-20 begins at 20.
 * Recovery sets 5-20 aside — unless, by the time it gets there, a newer
 * leader has appeared or the lease is gone. */
static void torn_tail(const char *dir)
{
	ks_partition_close(open_part(dir, 1)); /* the directory (and a fresh manifest) */
	write_segment(dir, 5, 0, 10);
	write_segment(dir, 5, 20, 5);
}

static void newer_leader_arrives(tguard *g)
{
	write_segment(g->dir, 7, 10, 0); /* its take-over cut the log at 10 */
}

START_TEST(newer_leader_appears_before_the_set_aside)
{
	torn_tail("tt");
	char *before = tree("tt");
	ks_partition *p = open_part("tt", 0);
	tguard g = {.at = "torn tail", .act = newer_leader_arrives, .dir = "tt"};
	/* The guard itself says "go on" (a lease that still looks valid): the
	 * directory listed again is what shows the newer leader. */
	ck_assert_int_eq(take_over_guarded(p, 6, &g), -ESTALE);
	ck_assert_int_eq(g.fired, 1);
	ck_assert(!has_quarantine("tt"));
	char *after = tree("tt");
	/* Only the newer leader's own segment was added. */
	ck_assert_ptr_nonnull(strstr(after, "0000000005-00000000000000000020.log"));
	ck_assert_ptr_nonnull(strstr(after, "0000000007-00000000000000000010.log 0"));
	ck_assert_uint_eq(strlen(after), strlen(before) + strlen("0000000007-00000000000000000010.log 0\n"));
	ck_assert_uint_eq(stats_of(p).takeovers_abandoned, 1);
	ck_assert_uint_eq(stats_of(p).quarantined_files, 0);
	ks_partition_close(p);
	free(before);
	free(after);
}
END_TEST

START_TEST(lease_lapses_mid_take_over)
{
	torn_tail("tl");
	char *before = tree("tl");
	ks_partition *p = open_part("tl", 0);
	tguard g = {.at = "torn tail", .rc = -ETIME};
	ck_assert_int_eq(take_over_guarded(p, 6, &g), -ETIME);
	char *after = tree("tl");
	ck_assert_str_eq(after, before);
	ck_assert(!has_quarantine("tl"));
	ck_assert_uint_eq(stats_of(p).takeovers_abandoned, 1);
	ck_assert_int_eq(ks_partition_state_of(p, NULL), KAAS_PART_FOLLOWER);
	/* With the lease back (a new incarnation) the same take-over sets the
	 * torn tail aside: the guard was all that held it. */
	tguard ok = {0};
	ck_assert_int_eq(take_over_guarded(p, 6, &ok), 0);
	ck_assert_ptr_nonnull(strstr(ok.steps, "set-aside of a torn tail"));
	ck_assert_ptr_nonnull(strstr(ok.steps, "manifest write"));
	ck_assert(has_quarantine("tl"));
	ck_assert_int_eq(file_size("tl", "0000000005-00000000000000000020.log"), -1);
	check_log_to(p, 10);
	ks_partition_close(p);
	free(before);
	free(after);
}
END_TEST

/* The guard reads the issued ceiling again from the volume: a newer epoch
 * issued meanwhile (no file of it yet) stops the manifest write. */
START_TEST(newer_epoch_issued_before_the_manifest_write)
{
	ks_partition *a = open_part("nc", 1);
	ck_assert_int_eq(ks_partition_take_over(a, 1), 0);
	put_n(a, 3);
	ck_assert_int_eq(ks_partition_relinquish(a), 0);
	ks_partition_close(a);
	char *man_before = read_file("nc", "manifest.json", NULL);
	ks_partition *p = open_part("nc", 0);
	tguard g = {.at = "manifest write", .ceiling = 3};
	ck_assert_int_eq(take_over_guarded(p, 2, &g), -ESTALE);
	ck_assert_str_eq(g.steps, "manifest write;"); /* the one change before it: an exclusive create */
	char *man_after = read_file("nc", "manifest.json", NULL);
	ck_assert_str_eq(man_after, man_before);
	ck_assert_uint_eq(stats_of(p).takeovers_abandoned, 1);
	/* Epoch 3's leader finds the log whole. */
	ks_partition *q = open_part("nc", 0);
	ck_assert_int_eq(ks_partition_take_over(q, 3), 0);
	check_log_to(q, 9);
	ks_partition_close(q);
	ks_partition_close(p);
	free(man_before);
	free(man_after);
}
END_TEST

/* ---- the relinquish record ---------------------------------------------------------- */

static const char *SEG1 = "0000000001-00000000000000000000.log";

/* A leader at epoch 1 that wrote 10 batches of 3 and relinquished. */
static void relinquished_log(const char *dir)
{
	ks_partition *a = open_part(dir, 1);
	ck_assert_int_eq(ks_partition_take_over(a, 1), 0);
	put_n(a, 10);
	ck_assert_int_eq(ks_partition_relinquish(a), 0);
	ks_partition_close(a);
}

START_TEST(matching_record_skips_the_scan)
{
	relinquished_log("rs");
	char *man = read_file("rs", "manifest.json", NULL);
	char want[256];
	snprintf(want, sizeof(want),
		 "\"relinquished\":{\"epoch\":1,\"end_offset\":30,\"segment_base\":0,\"segment_bytes\":%lld}",
		 (long long)file_size("rs", SEG1));
	ck_assert_msg(strstr(man, want), "manifest %s lacks %s", man, want);
	ks_partition *p = open_part("rs", 0);
	ck_assert_int_eq(ks_partition_take_over(p, 2), 0);
	ck_assert_uint_eq(stats_of(p).scans_skipped, 1);
	check_log_to(p, 30);
	/* A leader that goes on writes no record: only its relinquish does. */
	char *led = read_file("rs", "manifest.json", NULL);
	ck_assert_ptr_null(strstr(led, "relinquished"));
	ck_assert_int_eq(h_put(p, 2, "more", 10), 30);
	ck_assert_int_eq(ks_partition_flush(p, NULL), 0);
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 3), 0);
	ck_assert_uint_eq(stats_of(p).scans_skipped, 2);
	check_log_to(p, 32);
	/* Idempotent: a re-take of the same hand-off trusts the same record
	 * only while it is there; the take-over at 3 replaced it. */
	ks_partition_close(p);
	ks_partition *q = open_part("rs", 0);
	ck_assert_int_eq(ks_partition_take_over(q, 4), 0);
	ck_assert_uint_eq(stats_of(q).scans_skipped, 1); /* 3's close relinquished with a record */
	check_log_to(q, 32);
	ks_partition_close(q);
	free(man);
	free(led);
}
END_TEST

/* A zombie's late final manifest (its record names epoch 1) over a log
 * that epoch 2 has since written to: the record does not name the newest
 * epoch, so the successor scans and keeps 2's records. */
START_TEST(record_of_a_superseded_epoch_scans)
{
	relinquished_log("rz");
	size_t n;
	char *zombie = read_file("rz", "manifest.json", &n);
	ks_partition *b = open_part("rz", 0);
	ck_assert_int_eq(ks_partition_take_over(b, 2), 0);
	put_n(b, 5); /* [30, 45) acknowledged by 2, which then dies */
	write_file("rz", "manifest.json", zombie, n);
	ks_partition *c = open_part("rz", 0);
	ck_assert_int_eq(ks_partition_take_over(c, 3), 0);
	ck_assert_uint_eq(stats_of(c).scans_skipped, 0);
	check_log_to(c, 45);
	ks_partition_close(c);
	ks_partition_close(b);
	free(zombie);
}
END_TEST

START_TEST(record_with_another_size_scans)
{
	/* Shorter than recorded: the last batch was lost. */
	relinquished_log("rm");
	off_t sz = file_size("rm", SEG1);
	char path[1024];
	path_of(path, sizeof(path), "rm", SEG1);
	off_t batch = sz / 10; /* ten batches of one size */
	ck_assert_int_eq(truncate(path, sz - batch), 0);
	ks_partition *p = open_part("rm", 0);
	ck_assert_int_eq(ks_partition_take_over(p, 2), 0);
	ck_assert_uint_eq(stats_of(p).scans_skipped, 0);
	check_log_to(p, 27);
	ks_partition_close(p);
	/* Longer than recorded: bytes the record does not vouch for. */
	relinquished_log("rl");
	path_of(path, sizeof(path), "rl", SEG1);
	FILE *f = fopen(path, "ab");
	ck_assert_ptr_nonnull(f);
	fputs("not a batch", f);
	fclose(f);
	p = open_part("rl", 0);
	ck_assert_int_eq(ks_partition_take_over(p, 2), 0);
	ck_assert_uint_eq(stats_of(p).scans_skipped, 0);
	check_log_to(p, 30);
	ks_partition_close(p);
}
END_TEST

/* Replaces the first occurrence of `from` in dir's manifest by `to`. */
static void edit_manifest(const char *dir, const char *from, const char *to)
{
	size_t n;
	char *m = read_file(dir, "manifest.json", &n);
	char *at = strstr(m, from);
	ck_assert_msg(at != NULL, "%s not in %s", from, m);
	char out[4096];
	snprintf(out, sizeof(out), "%.*s%s%s", (int)(at - m), m, to, at + strlen(from));
	write_file(dir, "manifest.json", out, strlen(out));
	free(m);
}

START_TEST(damaged_record_scans)
{
	/* A manifest cut short: no record, no manifest. */
	relinquished_log("d1");
	size_t n;
	char *m = read_file("d1", "manifest.json", &n);
	write_file("d1", "manifest.json", m, n / 2);
	free(m);
	ks_partition *p = open_part("d1", 0);
	ck_assert_int_eq(ks_partition_take_over(p, 2), 0);
	ck_assert_uint_eq(stats_of(p).scans_skipped, 0);
	check_log_to(p, 30);
	ks_partition_close(p);
	/* A record field that is not a number: the record is ignored, the
	 * rest of the manifest still counts. */
	relinquished_log("d2");
	edit_manifest("d2", "\"segment_bytes\":", "\"segment_bytes\":\"many\",\"x\":");
	p = open_part("d2", 0);
	ck_assert_int_eq(ks_partition_take_over(p, 2), 0);
	ck_assert_uint_eq(stats_of(p).scans_skipped, 0);
	check_log_to(p, 30);
	ks_partition_close(p);
	/* A record naming another epoch than the manifest's. */
	relinquished_log("d3");
	edit_manifest("d3", "\"relinquished\":{\"epoch\":1", "\"relinquished\":{\"epoch\":0");
	p = open_part("d3", 0);
	ck_assert_int_eq(ks_partition_take_over(p, 2), 0);
	ck_assert_uint_eq(stats_of(p).scans_skipped, 0);
	check_log_to(p, 30);
	ks_partition_close(p);
	/* A record that does not name the epoch the caller takes over from. */
	relinquished_log("d4");
	p = open_part("d4", 0);
	ks_takeover_opts o = {.from_epoch = 5};
	ck_assert_int_eq(ks_partition_take_over_opts(p, 6, &o), 0);
	ck_assert_uint_eq(stats_of(p).scans_skipped, 0);
	check_log_to(p, 30);
	ks_partition_close(p);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "storage-takeover", .tcase = "takeover", .timeout = 60,
					  .setup = h_setup, .teardown = h_teardown },
			  KTEST_LIST(stale_take_over_leaves_the_newer_leaders_files_alone,
				     newer_producer_snapshot_is_not_set_aside,
				     newer_leader_appears_before_the_set_aside, lease_lapses_mid_take_over,
				     newer_epoch_issued_before_the_manifest_write, matching_record_skips_the_scan,
				     record_of_a_superseded_epoch_scans, record_with_another_size_scans,
				     damaged_record_scans));
}
