/*
 * users_cli.c — `kaas users add|remove|list`: the SASL users of a cluster,
 * kept in its cluster directory (users.h).  A password is read from a file
 * or standard input, never from the command line (where ps and shell
 * history would show it), and only its salted, iterated SCRAM credentials
 * are written.  Brokers read a user's file at each authentication, so a
 * change applies to the next login on every broker, without a restart.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "kaas/core/users.h"
#include "util/clock.h"

#define PASSWORD_MAX 1024

static void usage(FILE *out)
{
	fprintf(out,
		"usage: kaas users add --cluster-dir DIR --user NAME [--password-file FILE]\n"
		"                      [--mechanism SCRAM-SHA-256,SCRAM-SHA-512] [--iterations N]\n"
		"       kaas users remove --cluster-dir DIR --user NAME\n"
		"       kaas users list --cluster-dir DIR\n"
		"\n"
		"add     create the user or replace its credentials.  The password is the first line\n"
		"        of FILE (- or no --password-file: standard input).  --mechanism: the SCRAM\n"
		"        credentials to store (default both); SASL/PLAIN logins are checked against\n"
		"        the SCRAM-SHA-512 credential, else the SCRAM-SHA-256 one.  --iterations:\n"
		"        %d to %d (default %d).\n"
		"remove  delete the user: its next login fails (connections already authenticated\n"
		"        stay until connections.max.reauth.ms ends their session)\n"
		"list    every user with the mechanisms it has; a damaged file is named (exit 1)\n"
		"--cluster-dir DIR is the broker's cluster directory (KAAS_CLUSTER_DIR; a path or\n"
		"substrate URL, as for kaas).  Safe while brokers run.\n",
		KB_SCRAM_MIN_ITER, KB_SCRAM_MAX_ITER, KB_SCRAM_DEFAULT_ITER);
}

/* The first line of path ("-": stdin), without its line end.  0 or 2. */
static int read_password(const char *path, char *pw, size_t cap, size_t *len)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
	if (!f) {
		fprintf(stderr, "kaas users: --password-file %s: %s\n", path, strerror(errno));
		return 2;
	}
	size_t n = fread(pw, 1, cap, f);
	int rerr = ferror(f);
	if (f != stdin)
		fclose(f);
	if (rerr) {
		fprintf(stderr, "kaas users: reading the password from %s: read error\n", path);
		return 2;
	}
	char *nl = memchr(pw, '\n', n);
	if (!nl && n == cap) {
		fprintf(stderr, "kaas users: the password is longer than %d bytes\n", PASSWORD_MAX);
		return 2;
	}
	if (nl)
		n = (size_t)(nl - pw);
	if (n && pw[n - 1] == '\r')
		n--;
	if (n == 0) {
		fprintf(stderr, "kaas users: the password from %s is empty\n", strcmp(path, "-") ? path : "stdin");
		return 2;
	}
	if (memchr(pw, 0, n)) {
		fprintf(stderr, "kaas users: the password holds a NUL byte (SASL/PLAIN cannot carry it)\n");
		return 2;
	}
	*len = n;
	return 0;
}

/* "SCRAM-SHA-256,SCRAM-SHA-512" -> which[] */
static int parse_mechs(const char *s, int which[KB_SCRAM_N])
{
	memset(which, 0, sizeof(int) * KB_SCRAM_N);
	int any = 0;
	for (const char *p = s;;) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		int m = kb_scram_mech(p, n);
		if (m < 0) {
			fprintf(stderr, "kaas users: --mechanism '%.*s': SCRAM-SHA-256 or SCRAM-SHA-512 (PLAIN logins "
				"are checked against the SCRAM credentials)\n", (int)n, p);
			return 2;
		}
		which[m] = any = 1;
		if (!e)
			break;
		p = e + 1;
	}
	return any ? 0 : 2;
}

static int do_add(sub_vfs *cl, const char *user, const char *pwfile, const int which[KB_SCRAM_N], int32_t iter)
{
	char pw[PASSWORD_MAX + 2];
	size_t pwlen = 0;
	int code = read_password(pwfile, pw, sizeof(pw) - 1, &pwlen);
	if (code)
		return code;
	kb_user u;
	memset(&u, 0, sizeof(u));
	snprintf(u.name, sizeof(u.name), "%s", user);
	u.updated_ms = ku_wall_ms();
	char mechs[64] = "";
	for (int m = 0; m < KB_SCRAM_N && !code; m++) {
		if (!which[m])
			continue;
		uint8_t salt[KB_SALT_LEN];
		if (RAND_bytes(salt, sizeof(salt)) != 1 ||
		    kb_scram_derive(m, pw, pwlen, salt, sizeof(salt), iter, &u.scram[m])) {
			fprintf(stderr, "kaas users: OpenSSL could not derive the %s credential\n", kb_scram_name(m));
			code = 1;
		}
		snprintf(mechs + strlen(mechs), sizeof(mechs) - strlen(mechs), "%s%s", *mechs ? ", " : "",
			 kb_scram_name(m));
	}
	OPENSSL_cleanse(pw, sizeof(pw));
	if (code)
		return code;
	kb_user old;
	char why[256];
	int existed = kb_users_get(cl, user, &old, why, sizeof(why)) != -ENOENT;
	int rc = kb_users_put(cl, &u);
	OPENSSL_cleanse(&u, sizeof(u));
	if (rc) {
		fprintf(stderr, "kaas users: writing the user %s: %s\n", user, sub_strerror(rc));
		return 1;
	}
	printf("%s user %s (%s; %d iterations)\n", existed ? "updated" : "added", user, mechs, iter);
	return 0;
}

static int do_list(sub_vfs *cl)
{
	char **names = NULL;
	size_t n = 0;
	int rc = kb_users_list(cl, &names, &n), code = 0;
	if (rc) {
		fprintf(stderr, "kaas users: listing %s: %s\n", KB_USERS_DIR, sub_strerror(rc));
		return 1;
	}
	for (size_t i = 0; i < n; i++) {
		kb_user u;
		char why[300];
		rc = kb_users_get(cl, names[i], &u, why, sizeof(why));
		if (rc) {
			printf("%s\tDAMAGED: %s\n", names[i], rc == -EBADMSG ? why : sub_strerror(rc));
			code = 1;
			continue;
		}
		printf("%s\t", u.name);
		for (int m = 0, k = 0; m < KB_SCRAM_N; m++)
			if (u.scram[m].present)
				printf("%s%s(%d)", k++ ? "," : "", kb_scram_name(m), u.scram[m].iterations);
		printf("\n");
	}
	sub_names_free(names, n);
	return code;
}

int kb_users_main(int argc, char **argv)
{
	enum { O_CLUSTER = 256, O_USER, O_PWFILE, O_MECH, O_ITER, O_HELP };
	static const struct option opts[] = {
		{"cluster-dir", required_argument, 0, O_CLUSTER},
		{"user", required_argument, 0, O_USER},
		{"password-file", required_argument, 0, O_PWFILE},
		{"mechanism", required_argument, 0, O_MECH},
		{"iterations", required_argument, 0, O_ITER},
		{"help", no_argument, 0, O_HELP},
		{0, 0, 0, 0},
	};
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
		usage(stdout);
		return 0;
	}
	int add = strcmp(cmd, "add") == 0, rm = strcmp(cmd, "remove") == 0, ls = strcmp(cmd, "list") == 0;
	if (!add && !rm && !ls) {
		fprintf(stderr, "kaas users: unknown command '%s' (add, remove or list)\n", cmd);
		return 2;
	}
	const char *cluster = getenv("KAAS_CLUSTER_DIR"), *user = NULL, *pwfile = "-";
	int which[KB_SCRAM_N] = {1, 1};
	int32_t iter = KB_SCRAM_DEFAULT_ITER;
	int ac = argc - 1, c;
	char **av = argv + 1;
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(ac, av, "", opts, NULL)) != -1) {
		switch (c) {
		case O_CLUSTER:
			cluster = optarg;
			break;
		case O_USER:
			user = optarg;
			break;
		case O_PWFILE:
		case O_MECH:
		case O_ITER:
			if (!add) {
				fprintf(stderr, "kaas users: %s applies to add only\n", av[optind - 1]);
				return 2;
			}
			if (c == O_PWFILE) {
				pwfile = optarg;
			} else if (c == O_MECH) {
				if (parse_mechs(optarg, which))
					return 2;
			} else {
				char *end;
				errno = 0;
				long v = strtol(optarg, &end, 10);
				if (errno || *end || end == optarg || v < KB_SCRAM_MIN_ITER || v > KB_SCRAM_MAX_ITER) {
					fprintf(stderr, "kaas users: --iterations %s: a number from %d to %d\n", optarg,
						KB_SCRAM_MIN_ITER, KB_SCRAM_MAX_ITER);
					return 2;
				}
				iter = (int32_t)v;
			}
			break;
		case O_HELP:
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "kaas users: bad option %s (see kaas users --help)\n", av[optind - 1]);
			return 2;
		}
	}
	if (optind < ac) {
		fprintf(stderr, "kaas users: unexpected argument '%s' (the password is read from "
			"--password-file or stdin)\n", av[optind]);
		return 2;
	}
	if (!cluster || !*cluster) {
		fprintf(stderr, "kaas users: --cluster-dir is required (or KAAS_CLUSTER_DIR)\n");
		return 2;
	}
	char why[128];
	if (!ls && !user) {
		fprintf(stderr, "kaas users %s: --user is required\n", cmd);
		return 2;
	}
	if (ls && user) {
		fprintf(stderr, "kaas users list: takes no --user\n");
		return 2;
	}
	if (user && kb_user_name_check(user, strlen(user), why, sizeof(why))) {
		fprintf(stderr, "kaas users: --user: %s\n", why);
		return 2;
	}
	char err[512];
	sub_vfs *cl = NULL;
	int rc = sub_open_url(cluster, &cl, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "kaas users: --cluster-dir %s: %s\n", cluster, err);
		return 2;
	}
	int code;
	if (add) {
		code = do_add(cl, user, pwfile, which, iter);
	} else if (rm) {
		rc = kb_users_remove(cl, user);
		if (rc == -ENOENT)
			fprintf(stderr, "kaas users: no user %s\n", user);
		else if (rc)
			fprintf(stderr, "kaas users: removing the user %s: %s\n", user, sub_strerror(rc));
		else
			printf("removed user %s\n", user);
		code = rc == -ENOENT ? 2 : rc ? 1 : 0;
	} else {
		code = do_list(cl);
	}
	sub_destroy(cl);
	return code;
}
