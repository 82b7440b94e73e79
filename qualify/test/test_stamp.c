/*
 * test_stamp.c — the qualification stamp: volume keys, the pass/identity
 * rules of kq_stamp_check, a write/verify round trip on a real directory,
 * and the broker's self-check.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qualify/stamp.h"
#include "substrates/sub.h"
#include "util/test/ktest.h"
#include "substrates/test/scratch.h"

static void ident(sub_identity *id, const char *backend, const char *fstype, const char *source,
		  const char *fsid, const char *mp)
{
	memset(id, 0, sizeof(*id));
	snprintf(id->backend, sizeof(id->backend), "%s", backend);
	snprintf(id->fstype, sizeof(id->fstype), "%s", fstype);
	snprintf(id->source, sizeof(id->source), "%s", source);
	snprintf(id->fsid, sizeof(id->fsid), "%s", fsid);
	snprintf(id->mountpoint, sizeof(id->mountpoint), "%s", mp);
	snprintf(id->root, sizeof(id->root), "%s/data", mp);
}

START_TEST(volume_key_prefers_what_every_host_sees)
{
	sub_identity a, b, c;
	char ka[1200], kb[1200], kc[1200];
	/* The same export mounted on two hosts: different fsid and mount point. */
	ident(&a, "posix", "nfs4", "srv.example:/export/", "0000002a00000000", "/mnt/a");
	ident(&b, "posix", "nfs4", "srv.example:/export", "0000003100000000", "/var/lib/kaas");
	a.fs_magic = b.fs_magic = 0x6969;
	ck_assert_int_eq(kq_volume_key(&a, ka, sizeof(ka)), 0);
	ck_assert_int_eq(kq_volume_key(&b, kb, sizeof(kb)), 0);
	ck_assert_str_eq(ka, "nfs:srv.example:/export");
	ck_assert_str_eq(ka, kb);
	/* Qualified through the userspace client, mounted by the kernel. */
	ident(&c, "nfs", "nfs4-server", "srv.example:/export", "srv.example:/export", "");
	ck_assert_int_eq(kq_volume_key(&c, kc, sizeof(kc)), 0);
	ck_assert_str_eq(kc, ka);
	/* Another export of the same server is another volume. */
	ident(&c, "posix", "nfs4", "srv.example:/other", "0000002a00000000", "/mnt/a");
	ck_assert_int_eq(kq_volume_key(&c, kc, sizeof(kc)), 0);
	ck_assert_str_ne(kc, ka);
	/* A device source binds to the device, not the mount point. */
	ident(&a, "posix", "ext4", "/dev/vda", "0470de5d72a87212", "/");
	ck_assert_int_eq(kq_volume_key(&a, ka, sizeof(ka)), 0);
	ck_assert_str_eq(ka, "ext4:/dev/vda");
	/* A source that names nothing falls back to the fsid of that mount. */
	ident(&a, "posix", "tmpfs", "tmpfs", "00000abc00000000", "/run/x");
	ident(&b, "posix", "tmpfs", "tmpfs", "00000abd00000000", "/run/y");
	ck_assert_int_eq(kq_volume_key(&a, ka, sizeof(ka)), 0);
	ck_assert_int_eq(kq_volume_key(&b, kb, sizeof(kb)), 0);
	ck_assert_str_eq(ka, "tmpfs:fsid:00000abc00000000");
	ck_assert_str_ne(ka, kb);
	ident(&a, "posix", "", "", "", "");
	ck_assert_int_eq(kq_volume_key(&a, ka, sizeof(ka)), -EINVAL);
}
END_TEST

START_TEST(identity_json_round_trip)
{
	sub_identity a, b;
	ident(&a, "posix", "fuse.sshfs", "user@host:/srv", "00ff", "/mnt/s");
	a.fs_magic = 0x65735546;
	snprintf(a.options, sizeof(a.options), "rw,nosuid");
	json_t *j = kq_identity_json(&a);
	ck_assert_str_eq(json_string_value(json_object_get(j, "fs_magic")), "0x65735546");
	ck_assert_str_eq(json_string_value(json_object_get(j, "volume_key")),
			 "fuse.sshfs:user@host:/srv");
	ck_assert_int_eq(kq_identity_from_json(j, &b), 0);
	ck_assert_int_eq(memcmp(&a, &b, sizeof(a)), 0);
	json_decref(j);
	ck_assert_int_eq(kq_identity_from_json(NULL, &b), -EINVAL);
}
END_TEST

static json_t *passing_stamp(const sub_identity *vol)
{
	json_t *checks = json_array();
	for (const char *const *c = kq_stamp_required_checks; *c; c++)
		json_array_append_new(checks, json_pack("{s:s,s:s}", "name", *c, "verdict", "PASS"));
	return json_pack("{s:s,s:i,s:s,s:o,s:o}", "kind", KC_STAMP_KIND, "schema_version",
			 KC_STAMP_SCHEMA, "verdict", "PASS", "volume", kq_identity_json(vol), "checks",
			 checks);
}

START_TEST(stamp_check_rules)
{
	sub_identity vol, other;
	char why[512];
	ident(&vol, "posix", "nfs", "10.0.0.5:/kaas", "01", "/data");
	ident(&other, "posix", "nfs", "10.0.0.5:/scratch", "01", "/data");
	json_t *s = passing_stamp(&vol);
	ck_assert_int_eq(kq_stamp_check(s, &vol, why, sizeof(why)), 0);
	why[0] = '\0';
	ck_assert_int_eq(kq_stamp_check(s, &other, why, sizeof(why)), -EXDEV);
	ck_assert_ptr_nonnull(strstr(why, "nfs:10.0.0.5:/kaas"));
	ck_assert_ptr_nonnull(strstr(why, "nfs:10.0.0.5:/scratch"));

	json_object_set_new(s, "verdict", json_string("FAIL"));
	ck_assert_int_eq(kq_stamp_check(s, &vol, why, sizeof(why)), -EPERM);
	json_object_set_new(s, "verdict", json_string("PASS"));

	/* A stamp from a partial run, or with one check not passing. */
	json_t *checks = json_object_get(s, "checks");
	json_object_set_new(json_array_get(checks, 3), "verdict", json_string("WARN"));
	ck_assert_int_eq(kq_stamp_check(s, &vol, why, sizeof(why)), -EPERM);
	ck_assert_ptr_nonnull(strstr(why, "cto"));
	json_array_remove(checks, 3);
	ck_assert_int_eq(kq_stamp_check(s, &vol, why, sizeof(why)), -EPERM);
	json_decref(s);

	s = passing_stamp(&vol);
	json_object_set_new(s, "schema_version", json_integer(KC_STAMP_SCHEMA + 1));
	ck_assert_int_eq(kq_stamp_check(s, &vol, why, sizeof(why)), -EBADMSG);
	json_object_set_new(s, "schema_version", json_integer(0));
	ck_assert_int_eq(kq_stamp_check(s, &vol, why, sizeof(why)), -EBADMSG);
	/* Stamps of schema 1 (before durability was recorded) still qualify. */
	json_object_set_new(s, "schema_version", json_integer(1));
	ck_assert_int_eq(kq_stamp_check(s, &vol, why, sizeof(why)), 0);
	json_object_set_new(s, "schema_version", json_integer(KC_STAMP_SCHEMA));
	json_object_set_new(s, "kind", json_string("something-else"));
	ck_assert_int_eq(kq_stamp_check(s, &vol, why, sizeof(why)), -EBADMSG);
	json_decref(s);

	/* Durability not disproven (no power-loss hook) qualifies; UNPROVEN
	 * is accepted from the fsync check only. */
	s = passing_stamp(&vol);
	json_object_set_new(s, "verdict", json_string("UNPROVEN"));
	checks = json_object_get(s, "checks");
	size_t i;
	json_t *c;
	json_array_foreach(checks, i, c)
		if (strcmp(json_string_value(json_object_get(c, "name")), "fsync") == 0)
			json_object_set_new(c, "verdict", json_string("UNPROVEN"));
	ck_assert_int_eq(kq_stamp_check(s, &vol, why, sizeof(why)), 0);
	json_object_set_new(json_array_get(checks, 1), "verdict", json_string("UNPROVEN"));
	ck_assert_int_eq(kq_stamp_check(s, &vol, why, sizeof(why)), -EPERM);
	ck_assert_ptr_nonnull(strstr(why, "rename"));
	json_decref(s);
}
END_TEST

static scratch scr;
static sub_vfs *vfs; /* scr.vfs */

static void setup(void)
{
	scratch_open(&scr, "stamp");
	vfs = scr.vfs;
}

static void teardown(void)
{
	scratch_close(&scr);
	vfs = NULL;
}

START_TEST(write_then_verify_on_a_directory)
{
	sub_identity vol, other;
	char why[512];
	ck_assert_int_eq(sub_identity_of(vfs, &vol), 0);
	ck_assert_int_eq(kq_stamp_verify_at(vfs, "__cluster", &vol, why, sizeof(why)), -ENOENT);
	ck_assert_ptr_nonnull(strstr(why, "no qualification stamp"));

	json_t *s = passing_stamp(&vol);
	ck_assert_int_eq(kq_stamp_write(vfs, "__cluster", s), 0);
	json_decref(s);
	ck_assert_int_eq(kq_stamp_verify_at(vfs, "__cluster", &vol, why, sizeof(why)), 0);

	/* The broker's form: a vfs rooted at the cluster directory. */
	char cdir[300], err[256];
	sub_vfs *cv = NULL;
	snprintf(cdir, sizeof(cdir), "%s/__cluster", scr.dir);
	ck_assert_int_eq(sub_open_url(cdir, &cv, err, sizeof(err)), 0);
	ck_assert_int_eq(kq_stamp_verify(cv, &vol, why, sizeof(why)), 0);
	other = vol;
	snprintf(other.source, sizeof(other.source), "/dev/not-this-one");
	ck_assert_int_eq(kq_stamp_verify(cv, &other, why, sizeof(why)), -EXDEV);
	sub_destroy(cv);

	/* Written atomically: nothing but the stamp in the directory. */
	char **names;
	size_t n;
	ck_assert_int_eq(sub_list(vfs, "__cluster", &names, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(names[0], KC_STAMP_FILE);
	sub_names_free(names, n);

	/* A damaged stamp is rejected, not trusted. */
	ck_assert_int_eq(sub_write_atomic(vfs, "__cluster/" KC_STAMP_FILE, "{\"kind\":", 8), 0);
	ck_assert_int_eq(kq_stamp_verify_at(vfs, "__cluster", &vol, why, sizeof(why)), -EBADMSG);
}
END_TEST

START_TEST(selfcheck_passes_and_cleans_up)
{
	char why[512] = "";
	ck_assert_int_eq(sub_mkdir(vfs, "scratch", 0755), 0);
	for (int i = 0; i < 5; i++)
		ck_assert_msg(kq_selfcheck(vfs, "scratch", why, sizeof(why)) == 0, "%s", why);
	char **names;
	size_t n;
	ck_assert_int_eq(sub_list(vfs, "scratch", &names, &n), 0);
	ck_assert_uint_eq(n, 0);
	sub_names_free(names, n);
	ck_assert_int_eq(kq_selfcheck(vfs, "", why, sizeof(why)), 0);
	/* A scratch directory that is not there is an error with a reason. */
	why[0] = '\0';
	ck_assert_int_eq(kq_selfcheck(vfs, "missing", why, sizeof(why)), -ENOENT);
	ck_assert_ptr_nonnull(strstr(why, "self-check"));
}
END_TEST

/* Each primitive broken in turn makes the self-check fail, naming it, and
 * leaves nothing behind. */
START_TEST(selfcheck_fails_on_broken_primitives)
{
	static const struct {
		const char *opts, *needle;
	} broken[] = {
		{"excl=broken", "2 winners"},
		{"excl=eperm", "Operation not permitted"},
		{"failpath=*/target:rename:EXDEV", "rename over an existing file"},
		{"failpath=*/target:pread:EIO", "after rename the target reads"},
	};
	for (size_t i = 0; i < sizeof(broken) / sizeof(broken[0]); i++) {
		char url[400], err[256] = "", why[512] = "";
		sub_vfs *fv = NULL;
		snprintf(url, sizeof(url), "fault:%s?%s", scr.dir, broken[i].opts);
		ck_assert_int_eq(sub_open_url(url, &fv, err, sizeof(err)), 0);
		ck_assert_int_ne(kq_selfcheck(fv, "", why, sizeof(why)), 0);
		ck_assert_msg(strstr(why, broken[i].needle) != NULL, "%s: %s", broken[i].opts, why);
		sub_destroy(fv);
		char **names;
		size_t n;
		ck_assert_int_eq(sub_list(vfs, "", &names, &n), 0);
		ck_assert_msg(n == 0, "%s left %s behind", broken[i].opts, n ? names[0] : "");
		sub_names_free(names, n);
	}
}
END_TEST

/* A cluster directory on another volume needs its own record in the stamp. */
START_TEST(cluster_dir_must_be_qualified_when_separate)
{
	sub_identity data, disk, ram;
	char why[512];
	ident(&data, "posix", "ext4", "/dev/vda", "aa", "/");
	ident(&disk, "posix", "ext4", "/dev/vdb", "bb", "/srv");
	ident(&ram, "posix", "tmpfs", "tmpfs", "cc", "/run/x");
	json_t *st = json_pack("{s:s}", "verdict", "PASS");
	/* On the data volume: qualified with it, no record needed. */
	ck_assert_int_eq(kq_stamp_check_cluster(st, &data, &data, why, sizeof(why)), 0);
	/* Separate, no record. */
	ck_assert_int_eq(kq_stamp_check_cluster(st, &data, &disk, why, sizeof(why)), -EPERM);
	ck_assert_ptr_nonnull(strstr(why, "the stamp does not qualify it"));
	/* Separate, recorded as PASS (and as WARN). */
	json_t *cd = kq_identity_json(&disk);
	json_object_set_new(cd, "verdict", json_string("PASS"));
	json_object_set_new(st, "cluster_dir", cd);
	ck_assert_int_eq(kq_stamp_check_cluster(st, &data, &disk, why, sizeof(why)), 0);
	json_object_set_new(cd, "verdict", json_string("WARN"));
	ck_assert_int_eq(kq_stamp_check_cluster(st, &data, &disk, why, sizeof(why)), 0);
	/* Another volume's record: the stamp was copied next to a tmpfs. */
	ck_assert_int_eq(kq_stamp_check_cluster(st, &data, &ram, why, sizeof(why)), -EXDEV);
	ck_assert_ptr_nonnull(strstr(why, "this one is on 'tmpfs:fsid:cc'"));
	/* Recorded as refused (a hand-made stamp) or with no verdict. */
	json_object_set_new(cd, "verdict", json_string("REFUSED"));
	ck_assert_int_eq(kq_stamp_check_cluster(st, &data, &disk, why, sizeof(why)), -EPERM);
	ck_assert_ptr_nonnull(strstr(why, "as REFUSED"));
	json_object_del(cd, "verdict");
	ck_assert_int_eq(kq_stamp_check_cluster(st, &data, &disk, why, sizeof(why)), -EPERM);
	/* A cluster directory that cannot be identified. */
	sub_identity none;
	memset(&none, 0, sizeof(none));
	ck_assert_int_eq(kq_stamp_check_cluster(st, &data, &none, why, sizeof(why)), -EINVAL);
	json_decref(st);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("stamp");
	const struct ktest pure = { .tcase = "pure" };
	ktest_add(s, pure, KTEST_LIST(volume_key_prefers_what_every_host_sees,
				      identity_json_round_trip, stamp_check_rules,
				      cluster_dir_must_be_qualified_when_separate));
	const struct ktest files = { .tcase = "files", .setup = setup, .teardown = teardown };
	ktest_add(s, files, KTEST_LIST(write_then_verify_on_a_directory,
				       selfcheck_passes_and_cleans_up,
				       selfcheck_fails_on_broken_primitives));
	return ktest_run(s);
}
