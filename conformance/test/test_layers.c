/*
 * test_layers.c — the parsers and rules behind preflight's view of stacked
 * mounts: mountinfo lines, overlay options, the mount-option table, the
 * per-layer rules (fed synthetic layer lists, as a host would resolve
 * them), and the options that choose how durability is proven.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/kc.h"
#include "conformance/layers.h"
#include "conformance/opts.h"
#include "conformance/preflight.h"
#include "util/test/ktest.h"

START_TEST(mountinfo_lines_parse)
{
	kc_mount m;
	/* A bind mount of one directory of a tmpfs, with optional fields. */
	ck_assert_int_eq(kc_mountinfo_parse("46 27 0:40 /u /var/tmp/b rw,relatime shared:5 master:1 - tmpfs x rw,size=10k\n", &m), 0);
	ck_assert_int_eq(m.id, 46);
	ck_assert_int_eq(m.parent, 27);
	ck_assert_uint_eq(m.major, 0);
	ck_assert_uint_eq(m.minor, 40);
	ck_assert_str_eq(m.root, "/u");
	ck_assert_str_eq(m.mountpoint, "/var/tmp/b");
	ck_assert_str_eq(m.fstype, "tmpfs");
	ck_assert_str_eq(m.source, "x");
	ck_assert_str_eq(m.options, "rw,relatime,rw,size=10k");
	/* Escaped spaces and backslashes in the root, mount point and source. */
	ck_assert_int_eq(kc_mountinfo_parse("45 27 7:0 /a\\040b /mnt/my\\040disk rw - ext4 /dev/loop0 rw,nobarrier", &m), 0);
	ck_assert_str_eq(m.root, "/a b");
	ck_assert_str_eq(m.mountpoint, "/mnt/my disk");
	ck_assert_uint_eq(m.major, 7);
	ck_assert_str_eq(m.options, "rw,rw,nobarrier");
	/* No superblock options at all. */
	ck_assert_int_eq(kc_mountinfo_parse("1 0 8:1 / / rw - ext4 /dev/sda1", &m), 0);
	ck_assert_str_eq(m.options, "rw");
	/* Malformed lines are rejected, not half-read. */
	ck_assert_int_eq(kc_mountinfo_parse("", &m), -EINVAL);
	ck_assert_int_eq(kc_mountinfo_parse("46 27 0:40 /u /b rw tmpfs x rw", &m), -EINVAL);
	ck_assert_int_eq(kc_mountinfo_parse("46 27 040 /u /b rw - tmpfs x rw", &m), -EINVAL);
	ck_assert_int_eq(kc_mountinfo_parse("x 27 0:40 /u /b rw - tmpfs x rw", &m), -EINVAL);
	ck_assert_int_eq(kc_mountinfo_parse("46 27 0:40 /u /b rw - tmpfs", &m), -EINVAL);
	ck_assert_int_eq(kc_mountinfo_parse("46 27 0:40 /u - tmpfs x rw", &m), -EINVAL);
	/* Prefixes stop at component boundaries. */
	ck_assert_uint_eq(kc_mount_prefix_len("/mnt/a", "/mnt/a/b"), 6);
	ck_assert_uint_eq(kc_mount_prefix_len("/mnt/a", "/mnt/ab"), 0);
	ck_assert_uint_eq(kc_mount_prefix_len("/", "/x"), 1);
}
END_TEST

START_TEST(overlay_options_parse)
{
	char u[256], w[256], l[512];
	ck_assert_int_eq(kc_overlay_dirs("rw,lowerdir=/lo1:/lo2,upperdir=/t/u,workdir=/t/w,uuid=on",
					 u, sizeof(u), w, sizeof(w), l, sizeof(l)),
			 0);
	ck_assert_str_eq(u, "/t/u");
	ck_assert_str_eq(w, "/t/w");
	ck_assert_str_eq(l, "/lo1:/lo2");
	/* A comma inside a path is escaped and does not end the option. */
	ck_assert_int_eq(kc_overlay_dirs("rw,lowerdir=/l,upperdir=/a\\,b/u,workdir=/a\\,b/w", u,
					 sizeof(u), w, sizeof(w), l, sizeof(l)),
			 0);
	ck_assert_str_eq(u, "/a,b/u");
	ck_assert_str_eq(w, "/a,b/w");
	/* Layers added one at a time (6.7+). */
	ck_assert_int_eq(kc_overlay_dirs("rw,lowerdir+=/l1,lowerdir+=/l2,upperdir=/u,workdir=/w", u,
					 sizeof(u), w, sizeof(w), l, sizeof(l)),
			 0);
	ck_assert_str_eq(l, "/l1:/l2");
	/* A read-only overlay has no upper layer. */
	ck_assert_int_eq(kc_overlay_dirs("ro,lowerdir=/l1:/l2", u, sizeof(u), w, sizeof(w), l, sizeof(l)), 0);
	ck_assert_str_eq(u, "");
	ck_assert_str_eq(w, "");
	char small[4];
	ck_assert_int_eq(kc_overlay_dirs("upperdir=/long/path", small, sizeof(small), w, sizeof(w), l,
					 sizeof(l)),
			 -EINVAL);
	/* Options: the last occurrence wins, "soft" is not "softreval". */
	char v[32];
	ck_assert_int_eq(kc_find_option("rw,barrier=1,barrier=0", "barrier", v, sizeof(v)), 1);
	ck_assert_str_eq(v, "0");
	ck_assert_int_eq(kc_find_option("rw,softreval", "soft", NULL, 0), 0);
	ck_assert_int_eq(kc_find_option("rw,soft", "soft", v, sizeof(v)), 1);
	ck_assert_str_eq(v, "");
}
END_TEST

static int has(json_t *f, const char *code, const char *level)
{
	size_t i;
	json_t *x;
	json_array_foreach(f, i, x)
	{
		if (strcmp(json_string_value(json_object_get(x, "code")), code) == 0 &&
		    strcmp(json_string_value(json_object_get(x, "level")), level) == 0)
			return 1;
	}
	return 0;
}

static int opts(const char *fstype, const char *o, const char *cache, json_t **f)
{
	*f = json_array();
	return kc_option_findings(fstype, o, cache, "mount /m", *f);
}

START_TEST(option_table_names_the_option)
{
	json_t *f;
	/* Barriers off: refused over a volatile write cache, else a warning. */
	ck_assert_int_eq(opts("ext4", "rw,relatime,rw,nobarrier", "write back", &f), 2);
	ck_assert(has(f, "no-barrier", "REFUSED"));
	ck_assert_uint_eq(json_array_size(f), 1);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(f, 0), "option")), "nobarrier");
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(json_array_get(f, 0), "explain")),
				     "mount /m: write barriers off"));
	json_decref(f);
	ck_assert_int_eq(opts("ext4", "rw,barrier=0", "write through", &f), 1);
	ck_assert(has(f, "no-barrier", "WARN"));
	json_decref(f);
	ck_assert_int_eq(opts("ext3", "rw,barrier=0", NULL, &f), 1);
	json_decref(f);
	ck_assert_int_eq(opts("ext4", "rw,barrier=1", "write back", &f), 0);
	ck_assert_uint_eq(json_array_size(f), 0);
	json_decref(f);
	ck_assert_int_eq(opts("xfs", "rw,nobarrier", "write back", &f), 2);
	json_decref(f);
	ck_assert_int_eq(opts("btrfs", "rw,ssd,nobarrier", "write back", &f), 2);
	json_decref(f);
	ck_assert_int_eq(opts("f2fs", "rw,fsync_mode=nobarrier", "write back", &f), 2);
	json_decref(f);
	ck_assert_int_eq(opts("f2fs", "rw,fsync_mode=posix", "write back", &f), 0);
	json_decref(f);
	/* ext4's other journal options. */
	ck_assert_int_eq(opts("ext4", "rw,journal_async_commit", NULL, &f), 1);
	ck_assert(has(f, "journal-async-commit", "WARN"));
	json_decref(f);
	ck_assert_int_eq(opts("ext4", "rw,data=writeback", NULL, &f), 0);
	ck_assert(has(f, "data-writeback", "INFO"));
	json_decref(f);
	/* overlay's volatile, in both spellings. */
	ck_assert_int_eq(opts("overlay", "rw,lowerdir=/l,upperdir=/u,workdir=/w,volatile", NULL, &f), 2);
	ck_assert(has(f, "overlay-volatile", "REFUSED"));
	json_decref(f);
	ck_assert_int_eq(opts("overlay", "rw,upperdir=/u,uuid=on,fsync=volatile", NULL, &f), 2);
	json_decref(f);
	ck_assert_int_eq(opts("overlay", "rw,upperdir=/u,fsync=strict", NULL, &f), 0);
	json_decref(f);
	/* Network clients: explained, or warned where coherence goes. */
	ck_assert_int_eq(opts("nfs4", "rw,vers=4.2,async", NULL, &f), 0);
	ck_assert(has(f, "nfs-async", "INFO"));
	json_decref(f);
	ck_assert_int_eq(opts("9p", "rw,cache=loose", NULL, &f), 1);
	json_decref(f);
	ck_assert_int_eq(opts("ceph", "rw,recover_session=clean", NULL, &f), 1);
	json_decref(f);
	ck_assert_int_eq(opts("virtiofs", "rw", NULL, &f), 0);
	ck_assert(has(f, "virtiofs", "INFO"));
	json_decref(f);
	/* The same option on a filesystem it does not belong to means nothing. */
	ck_assert_int_eq(opts("nfs4", "rw,nobarrier", "write back", &f), 0);
	ck_assert_uint_eq(json_array_size(f), 0);
	json_decref(f);
}
END_TEST

/* Layer lists as a host would resolve them. */
static json_t *mount_layer(int depth, const char *role, const char *path, const char *fstype,
			   const char *magic, const char *options, const char *root)
{
	return json_pack("{s:s,s:i,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:b}", "role", role, "depth", depth,
			 "path", path, "mountpoint", path, "fstype", fstype, "source", "src", "options",
			 options, "mount_root", root, "device", "0:1", "fs_magic", magic, "bind",
			 strcmp(root, "/") != 0);
}

static json_t *device_layer(int depth, const char *name, const char *kind, const char *cache)
{
	return json_pack("{s:s,s:i,s:s,s:s,s:s,s:s}", "role", "block device", "depth", depth, "path",
			 "/dev/x", "device", name, "kind", kind, "write_cache", cache);
}

START_TEST(every_layer_is_judged)
{
	char decided[1200];
	json_t *f = json_array();
	/* overlay over a tmpfs upper: refused, and the upper layer decided. */
	json_t *l = json_pack("[o,o,o]",
			      mount_layer(0, "mount", "/o", "overlay", "0x794c7630", "rw,upperdir=/t/u,workdir=/t/w", "/"),
			      mount_layer(1, "overlay upperdir", "/t/u", "tmpfs", "0x1021994", "rw", "/"),
			      mount_layer(1, "overlay workdir", "/t/w", "tmpfs", "0x1021994", "rw", "/"));
	ck_assert_int_eq(kc_preflight_layers(l, f, decided, sizeof(decided)), KC_REFUSED);
	ck_assert_ptr_nonnull(strstr(decided, "overlay upperdir /t/u"));
	ck_assert(has(f, "not-durable", "REFUSED"));
	ck_assert(has(f, "overlay", "INFO"));
	json_decref(l);
	json_decref(f);
	/* ext4 on a loop image on ext4 on a disk: nothing refused. */
	f = json_array();
	l = json_pack("[o,o,o,o]", mount_layer(0, "mount", "/m", "ext4", "0xef53", "rw", "/"),
		      device_layer(1, "loop0", "loop", "write back"),
		      mount_layer(2, "loop backing file", "/img", "ext4", "0xef53", "rw", "/"),
		      device_layer(3, "vda", "disk", "write back"));
	ck_assert_int_eq(kc_preflight_layers(l, f, decided, sizeof(decided)), KC_PASS);
	ck_assert_str_eq(decided, "");
	json_decref(l);
	json_decref(f);
	/* The same with the image on tmpfs: the backing file's layer decides. */
	f = json_array();
	l = json_pack("[o,o,o]", mount_layer(0, "mount", "/m", "ext4", "0xef53", "rw", "/"),
		      device_layer(1, "loop0", "loop", "write back"),
		      mount_layer(2, "loop backing file", "/dev/shm/img", "tmpfs", "0x1021994", "rw", "/"));
	ck_assert_int_eq(kc_preflight_layers(l, f, decided, sizeof(decided)), KC_REFUSED);
	ck_assert_ptr_nonnull(strstr(decided, "loop backing file /dev/shm/img"));
	json_decref(l);
	json_decref(f);
	/* ext4 on a RAM disk, and on zram. */
	const char *ram[] = {"ram", "zram"};
	for (int i = 0; i < 2; i++) {
		f = json_array();
		l = json_pack("[o,o]", mount_layer(0, "mount", "/m", "ext4", "0xef53", "rw", "/"),
			      device_layer(1, "ram0", ram[i], "write through"));
		ck_assert_int_eq(kc_preflight_layers(l, f, decided, sizeof(decided)), KC_REFUSED);
		ck_assert(has(f, "ram-device", "REFUSED"));
		ck_assert_ptr_nonnull(strstr(decided, "block device ram0"));
		json_decref(l);
		json_decref(f);
	}
	/* Barriers off: the device right below decides between refusal and
	 * warning, and the finding names the mount it is on. */
	f = json_array();
	l = json_pack("[o,o]", mount_layer(0, "mount", "/m", "ext4", "0xef53", "rw,nobarrier", "/"),
		      device_layer(1, "loop0", "loop", "write back"));
	ck_assert_int_eq(kc_preflight_layers(l, f, decided, sizeof(decided)), KC_REFUSED);
	ck_assert(has(f, "no-barrier", "REFUSED"));
	ck_assert_ptr_nonnull(strstr(decided, "mount /m"));
	json_decref(l);
	json_decref(f);
	f = json_array();
	l = json_pack("[o,o]", mount_layer(0, "mount", "/m", "ext4", "0xef53", "rw,nobarrier", "/"),
		      device_layer(1, "vda", "disk", "write through"));
	ck_assert_int_eq(kc_preflight_layers(l, f, decided, sizeof(decided)), KC_WARN);
	json_decref(l);
	json_decref(f);
	/* A FUSE passthrough over a tmpfs directory, and a bind mount: the
	 * layer's own rules apply, the bind is explained. */
	f = json_array();
	l = json_pack("[o,o]", mount_layer(0, "mount", "/f", "fuse.kaas-lyingfs", "0x65735546", "rw", "/"),
		      mount_layer(1, "FUSE backing directory", "/t/back", "tmpfs", "0x1021994", "rw", "/back"));
	ck_assert_int_eq(kc_preflight_layers(l, f, decided, sizeof(decided)), KC_REFUSED);
	ck_assert_ptr_nonnull(strstr(decided, "FUSE backing directory /t/back"));
	ck_assert_ptr_nonnull(strstr(decided, "a bind mount of /back"));
	size_t i;
	json_t *x;
	int layer1 = 0;
	json_array_foreach(f, i, x)
		if (json_integer_value(json_object_get(x, "layer")) == 1 &&
		    strcmp(json_string_value(json_object_get(x, "level")), "REFUSED") == 0)
			layer1 = 1;
	ck_assert(layer1);
	json_decref(l);
	json_decref(f);
	/* The top layer being tmpfs is the identity's finding, not repeated. */
	f = json_array();
	l = json_pack("[o]", mount_layer(0, "mount", "/t", "tmpfs", "0x1021994", "rw", "/"));
	ck_assert_int_eq(kc_preflight_layers(l, f, decided, sizeof(decided)), KC_PASS);
	json_decref(l);
	json_decref(f);
}
END_TEST

static int parse(const char *line, kc_opts *o, char *err, size_t len)
{
	char buf[1024];
	char *argv[32];
	int argc = 0;
	snprintf(buf, sizeof(buf), "%s", line);
	for (char *t = strtok(buf, " "); t && argc < 32; t = strtok(NULL, " "))
		argv[argc++] = t;
	return kc_opts_parse_check(argc, argv, o, err, len);
}

START_TEST(durability_options)
{
	kc_opts o;
	char err[512];
	ck_assert_int_eq(parse("check /d --power-loss-cmd true --require-power-loss", &o, err, sizeof(err)), 0);
	ck_assert_str_eq(o.power_loss_cmd, "true");
	ck_assert_int_eq(o.require_power_loss, 1);
	ck_assert_ptr_null(o.crash_cmd);
	ck_assert_int_eq(parse("check /d --crash-cmd true --power-loss-cmd true", &o, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "--power-loss-cmd"));
	ck_assert_int_eq(parse("check /d --require-power-loss --checks rename", &o, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "fsync"));
	ck_assert_int_eq(parse("check /d --power-loss-cmd=", &o, err, sizeof(err)), -EINVAL);
	/* Requiring proof without a hook is allowed: the run says UNPROVEN. */
	ck_assert_int_eq(parse("check /d --require-power-loss --crash-cmd true", &o, err, sizeof(err)), 0);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "layers", .tcase = "logic" },
			  KTEST_LIST(mountinfo_lines_parse, overlay_options_parse,
				     option_table_names_the_option, every_layer_is_judged,
				     durability_options));
}
