/* test_users.c — the credential store (users.c): strict base64, user names,
 * the file name encoding and its way back, every field of a user file
 * checked on the way in (files another host wrote), put/get/remove/list on a
 * real directory, and the cluster's secret created once. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kaas/core/users.h"
#include "util/test/ktest.h"

START_TEST(base64_strict)
{
	uint8_t b[64];
	char t[100];
	for (size_t n = 0; n < 10; n++) {
		uint8_t src[10] = {0xff, 0, 1, 2, 0xfe, 7, 8, 9, 10, 11};
		size_t tl = kb_b64_encode(src, n, t);
		ck_assert_int_eq(tl, 4 * ((n + 2) / 3));
		ck_assert_int_eq(kb_b64_decode(t, tl, b, sizeof(b)), (long)n);
		ck_assert(memcmp(b, src, n) == 0);
	}
	ck_assert_int_eq(kb_b64_decode("biws", 4, b, sizeof(b)), 3);
	ck_assert(memcmp(b, "n,,", 3) == 0);
	static const char *const bad[] = {"biw", "bi=s", "b!ws", "bg=x", "bh==", "====", "bg==bg==", "bi\nw"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(kb_b64_decode(bad[i], strlen(bad[i]), b, sizeof(b)) < 0, "%s", bad[i]);
	ck_assert_int_eq(kb_b64_decode("bg==", 4, b, sizeof(b)), 1);
	ck_assert_int_lt(kb_b64_decode("biws", 4, b, 2), 0); /* does not fit */
}
END_TEST

START_TEST(names_and_paths)
{
	char why[100], p[512];
	ck_assert_int_eq(kb_user_name_check("alice", 5, why, sizeof(why)), 0);
	ck_assert_int_eq(kb_user_name_check("J\xc3\xb6rg", 5, why, sizeof(why)), 0);
	ck_assert_int_eq(kb_user_name_check("", 0, why, sizeof(why)), -EINVAL);
	ck_assert_int_eq(kb_user_name_check("a\tb", 3, why, sizeof(why)), -EINVAL);
	ck_assert_int_eq(kb_user_name_check("a\xc3", 2, why, sizeof(why)), -EINVAL);     /* cut */
	ck_assert_int_eq(kb_user_name_check("\xc0\xaf", 2, why, sizeof(why)), -EINVAL);  /* overlong */
	ck_assert_int_eq(kb_user_name_check("\xed\xa0\x80", 3, why, sizeof(why)), -EINVAL); /* surrogate */
	ck_assert_int_eq(kb_user_name_check("\xc2\x85", 2, why, sizeof(why)), -EINVAL);  /* C1 control */
	char longn[KB_USER_MAX + 2];
	memset(longn, 'x', sizeof(longn));
	ck_assert_int_eq(kb_user_name_check(longn, KB_USER_MAX, why, sizeof(why)), 0);
	ck_assert_int_eq(kb_user_name_check(longn, KB_USER_MAX + 1, why, sizeof(why)), -EINVAL);
	ck_assert_int_eq(kb_user_path("alice", p, sizeof(p)), 0);
	ck_assert_str_eq(p, "users/alice.json");
	ck_assert_int_eq(kb_user_path(".hidden/../x y", p, sizeof(p)), 0);
	ck_assert_str_eq(p, "users/%2Ehidden%2F..%2Fx%20y.json");
	ck_assert_int_eq(sub_path_check(p), 0);
	memset(longn, 0xff, KB_USER_MAX);
	longn[KB_USER_MAX] = 0;
	ck_assert_int_eq(kb_user_path(longn, p, sizeof(p)), 0);
	ck_assert_int_lt(strlen(p) - strlen("users/"), 255);
}
END_TEST

static const char good[] = "{\"version\": 1, \"user\": \"alice\", \"updated_ms\": 5, \"scram\": {\"SCRAM-SHA-256\": "
			   "{\"salt\": \"AAAAAAAAAAAAAAAAAAAAAA==\", \"iterations\": 4096, "
			   "\"stored_key\": \"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\", "
			   "\"server_key\": \"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\"}}}";

/* good with `from` replaced by `to` must be refused. */
static void refused(const char *from, const char *to)
{
	char buf[2048], why[200];
	const char *at = strstr(good, from);
	ck_assert_msg(at, "%s", from);
	snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(at - good), good, to, at + strlen(from));
	kb_user u;
	ck_assert_msg(kb_user_parse(buf, strlen(buf), "alice", &u, why, sizeof(why)) == -EBADMSG, "accepted: %s", buf);
	ck_assert(!u.scram[0].present && !u.name[0]);
}

START_TEST(file_checked)
{
	kb_user u;
	char why[200];
	ck_assert_int_eq(kb_user_parse(good, strlen(good), "alice", &u, why, sizeof(why)), 0);
	ck_assert(u.scram[KB_SCRAM_SHA256].present && !u.scram[KB_SCRAM_SHA512].present);
	ck_assert_int_eq(u.scram[KB_SCRAM_SHA256].salt_len, 16);
	ck_assert_int_eq(kb_user_parse(good, strlen(good), "bob", &u, why, sizeof(why)), -EBADMSG);
	refused("\"version\": 1", "\"version\": 2");
	refused("\"version\": 1", "\"version\": \"1\"");
	refused("\"user\": \"alice\"", "\"user\": \"al\\tice\"");
	refused("\"user\": \"alice\"", "\"user\": \"al\\u0000ice\"");
	refused("\"user\": \"alice\"", "\"user\": 7");
	refused("\"updated_ms\": 5", "\"updated_ms\": -5");
	refused("SCRAM-SHA-256", "SCRAM-SHA-1");
	refused("4096", "4095");
	refused("4096", "16385");
	refused("4096", "1e9");
	refused("\"AAAAAAAAAAAAAAAAAAAAAA==\"", "\"AAAA\"");           /* salt too short */
	refused("\"AAAAAAAAAAAAAAAAAAAAAA==\"", "\"AAAAAAAAAAAAAAAAAAAAAA=\"");
	refused("\"server_key\": \"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\"",
		"\"server_key\": \"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\""); /* 36 bytes */
	refused("\"iterations\": 4096,", "\"iterations\": 4096, \"password\": \"x\",");
	refused("\"scram\": {", "\"scram\": {}, \"x\": {");
	refused("{\"version\": 1,", "{\"version\": 1, \"version\": 1,"); /* duplicate key */
	refused("}}}", "}}");
	/* and the writer's output reads back */
	ck_assert_int_eq(kb_user_parse(good, strlen(good), "alice", &u, why, sizeof(why)), 0);
	char *s = kb_user_format(&u);
	ck_assert_ptr_nonnull(s);
	kb_user v;
	ck_assert_int_eq(kb_user_parse(s, strlen(s), "alice", &v, why, sizeof(why)), 0);
	ck_assert(memcmp(&v.scram, &u.scram, sizeof(u.scram)) == 0);
	free(s);
}
END_TEST

START_TEST(store_on_a_directory)
{
	char dir[] = "/tmp/kaas-users-XXXXXX", err[200], why[300];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	sub_vfs *v = NULL;
	ck_assert_int_eq(sub_posix_open(dir, &v, err, sizeof(err)), 0);
	char **names;
	size_t n;
	ck_assert_int_eq(kb_users_list(v, &names, &n), 0); /* no users/ yet */
	ck_assert_int_eq(n, 0);
	kb_user u;
	memset(&u, 0, sizeof(u));
	uint8_t salt[KB_SALT_LEN] = {1, 2, 3};
	const char *const who[] = {"zed", "a,b=c", ".dot"};
	for (int i = 0; i < 3; i++) {
		snprintf(u.name, sizeof(u.name), "%s", who[i]);
		ck_assert_int_eq(kb_scram_derive(KB_SCRAM_SHA512, "pw", 2, salt, sizeof(salt), 4096, &u.scram[1]), 0);
		ck_assert_int_eq(kb_users_put(v, &u), 0);
	}
	ck_assert_int_eq(sub_write_atomic(v, "users/.zed.json.tmp.1", "x", 1), 0); /* not a user */
	ck_assert_int_eq(sub_write_atomic(v, "users/notes.txt", "x", 1), 0);
	ck_assert_int_eq(kb_users_list(v, &names, &n), 0);
	ck_assert_int_eq(n, 3);
	int seen = 0;
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < 3; k++)
			seen |= strcmp(names[i], who[k]) == 0 ? 1 << k : 0;
	ck_assert_int_eq(seen, 7);
	sub_names_free(names, n);
	kb_user got;
	ck_assert_int_eq(kb_users_get(v, "a,b=c", &got, why, sizeof(why)), 0);
	ck_assert_str_eq(got.name, "a,b=c");
	ck_assert_int_eq(kb_users_get(v, "nobody", &got, why, sizeof(why)), -ENOENT);
	ck_assert_int_eq(kb_users_get(v, "bad\tname", &got, why, sizeof(why)), -ENOENT);
	/* a file renamed to another user's name does not log that user in */
	char *buf;
	size_t len;
	ck_assert_int_eq(sub_read_file(v, "users/zed.json", 16384, &buf, &len), 0);
	ck_assert_int_eq(sub_write_atomic(v, "users/eve.json", buf, len), 0);
	free(buf);
	ck_assert_int_eq(kb_users_get(v, "eve", &got, why, sizeof(why)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "names another user"));
	ck_assert_int_eq(kb_users_remove(v, "zed"), 0);
	ck_assert_int_eq(kb_users_remove(v, "zed"), -ENOENT);
	/* the secret: created once, then the same */
	uint8_t s1[32], s2[32];
	ck_assert_int_eq(kb_users_secret(v, s1, why, sizeof(why)), 0);
	ck_assert_int_eq(kb_users_secret(v, s2, why, sizeof(why)), 0);
	ck_assert(memcmp(s1, s2, 32) == 0);
	ck_assert_int_eq(sub_write_atomic(v, "users/.secret.json", "", 0), 0);
	ck_assert_int_eq(kb_users_secret(v, s2, why, sizeof(why)), -EBADMSG);
	/* decoys: stable per name, different between names */
	kb_scram_cred d1, d2, d3;
	kb_users_decoy(s1, "x", 1, KB_SCRAM_SHA256, &d1);
	kb_users_decoy(s1, "x", 1, KB_SCRAM_SHA256, &d2);
	kb_users_decoy(s1, "y", 1, KB_SCRAM_SHA256, &d3);
	ck_assert(memcmp(d1.salt, d2.salt, KB_SALT_LEN) == 0 && memcmp(d1.salt, d3.salt, KB_SALT_LEN) != 0);
	ck_assert_int_eq(d1.iterations, KB_SCRAM_DEFAULT_ITER);
	sub_destroy(v);
	char cmd[100];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){.suite = "users", .timeout = 60},
			  KTEST_LIST(base64_strict, names_and_paths, file_checked, store_on_a_directory));
}
