/*
 * scratch.c — owner records of scratch directories, the sweep of leftovers
 * a killed run left behind, and `kaas-conform clean` (scratch.h).
 *
 * Never delete what cannot be proven garbage: a scratch directory on a
 * shared volume may belong to a run on another host that is still going.
 * Only a run on the same host can prove another run dead, by its pid and
 * that pid's start time (a reused pid is another process).
 */
#include "conformance/scratch.h"

#include <errno.h>
#include <stdarg.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conformance/agent.h"
#include "conformance/kc.h"
#include "util/clock.h"

uint64_t kc_pid_start(long pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* The command name may hold spaces and parentheses: fields count from
	 * the last ')'.  starttime is field 22, the 20th after it. */
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	p++;
	for (int field = 3; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return 0;
	}
	return strtoull(p + 1, NULL, 10);
}

json_t *kc_scratch_owner_self(void)
{
	char host_id[400];
	kc_host_id(host_id, sizeof(host_id));
	long pid = (long)getpid();
	return json_pack("{s:s,s:s,s:I,s:I,s:I}", "kind", KC_SCRATCH_KIND, "host_id", host_id, "pid",
			 (json_int_t)pid, "pid_start", (json_int_t)kc_pid_start(pid), "started_at_ms",
			 (json_int_t)ku_wall_ms());
}

/* The host id in a name every volume can store: bytes outside
 * [A-Za-z0-9._-] as =XX.  SMB refuses ':' and '|' in names (smbnetfs
 * answers EIO and drops its connection), and smbnetfs passes names on as
 * smb:// URLs, which decode %XX: '=' is left alone by both.  A
 * case-insensitive volume keeps the case of what it stores, which =XX
 * survives. */
static int portable(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
	       c == '_' || c == '-';
}

int kc_scratch_owner_name(const json_t *owner, char *buf, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	const char *host = json_string_value(json_object_get(owner, "host_id"));
	if (!host || !*host)
		return -EINVAL;
	int n = snprintf(buf, len, KC_SCRATCH_OWNER_PREFIX "%lld,%lld,%lld,",
			 (long long)json_integer_value(json_object_get(owner, "pid")),
			 (long long)json_integer_value(json_object_get(owner, "pid_start")),
			 (long long)json_integer_value(json_object_get(owner, "started_at_ms")));
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	size_t w = (size_t)n;
	for (const unsigned char *h = (const unsigned char *)host; *h; h++) {
		if (w + 4 > len)
			return -ENAMETOOLONG;
		if (portable(*h)) {
			buf[w++] = (char)*h;
		} else {
			buf[w++] = '=';
			buf[w++] = hex[*h >> 4];
			buf[w++] = hex[*h & 15];
		}
	}
	buf[w] = '\0';
	return w > 255 ? -ENAMETOOLONG : 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

json_t *kc_scratch_owner_parse(const char *name)
{
	size_t pl = strlen(KC_SCRATCH_OWNER_PREFIX);
	if (strncmp(name, KC_SCRATCH_OWNER_PREFIX, pl) != 0)
		return NULL;
	long long f[3];
	const char *p = name + pl;
	for (int i = 0; i < 3; i++) {
		char *end;
		if (*p < '0' || *p > '9')
			return NULL;
		errno = 0;
		f[i] = strtoll(p, &end, 10);
		if (errno || *end != ',')
			return NULL;
		p = end + 1;
	}
	if (!*p)
		return NULL;
	/* =XX as kc_scratch_owner_name writes it; '|' for '/' is how records
	 * were written before, still read so their leftovers are swept. */
	char host[400];
	size_t w = 0;
	for (; *p; p++) {
		if (w + 1 >= sizeof(host))
			return NULL;
		if (*p == '=') {
			int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);
			if (lo < 0 || (hi == 0 && lo == 0))
				return NULL;
			host[w++] = (char)(hi << 4 | lo);
			p += 2;
		} else {
			host[w++] = *p == '|' ? '/' : *p;
		}
	}
	host[w] = '\0';
	return json_pack("{s:s,s:s,s:I,s:I,s:I}", "kind", KC_SCRATCH_KIND, "host_id", host, "pid",
			 (json_int_t)f[0], "pid_start", (json_int_t)f[1], "started_at_ms", (json_int_t)f[2]);
}

int kc_scratch_owner_dead(const json_t *owner, const char *my_host_id,
			  uint64_t (*start_of)(long pid))
{
	const char *kind = json_string_value(json_object_get(owner, "kind"));
	const char *host = json_string_value(json_object_get(owner, "host_id"));
	json_t *pid = json_object_get(owner, "pid"), *ps = json_object_get(owner, "pid_start");
	if (!kind || strcmp(kind, KC_SCRATCH_KIND) != 0 || !host || !json_is_integer(pid) ||
	    !json_is_integer(ps) || json_integer_value(pid) <= 0 || json_integer_value(ps) < 0)
		return -EINVAL;
	if (strcmp(host, my_host_id) != 0)
		return 0;
	uint64_t now = start_of((long)json_integer_value(pid));
	/* A recorded start of 0 (unreadable then) proves nothing about reuse:
	 * only a vanished pid counts. */
	if (now == 0)
		return 1;
	if (json_integer_value(ps) == 0)
		return 0;
	return now != (uint64_t)json_integer_value(ps);
}

typedef struct {
	char **names;
	size_t n;
} name_list;

static void say(FILE *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(FILE *out, const char *fmt, ...)
{
	if (!out)
		return;
	va_list ap;
	va_start(ap, fmt);
	vfprintf(out, fmt, ap);
	va_end(ap);
}

/* "3h12m", "45s": an age for people. */
static void age_text(int64_t ms, char *buf, size_t len)
{
	int64_t s = ms / 1000;
	if (s < 0)
		snprintf(buf, len, "unknown age");
	else if (s < 120)
		snprintf(buf, len, "%llds old", (long long)s);
	else if (s < 7200)
		snprintf(buf, len, "%lldm old", (long long)(s / 60));
	else if (s < 172800)
		snprintf(buf, len, "%lldh%02lldm old", (long long)(s / 3600), (long long)(s % 3600 / 60));
	else
		snprintf(buf, len, "%lldd old", (long long)(s / 86400));
}

int kc_scratch_sweep(sub_vfs *v, const char *skip, int remove_dead, int64_t remove_older_ms,
		     json_t *list, FILE *out)
{
	char **names = NULL;
	size_t n = 0;
	int rc = sub_list(v, "", &names, &n);
	if (rc)
		return rc;
	char my_host[400];
	kc_host_id(my_host, sizeof(my_host));
	for (size_t i = 0; i < n; i++) {
		const char *name = names[i];
		if (strncmp(name, KC_SCRATCH_PREFIX, strlen(KC_SCRATCH_PREFIX)) != 0 ||
		    (skip && strcmp(name, skip) == 0))
			continue;
		json_t *owner = NULL;
		char **sub = NULL;
		size_t nsub = 0;
		int orc = sub_list(v, name, &sub, &nsub);
		for (size_t k = 0; orc == 0 && k < nsub && !owner; k++)
			owner = kc_scratch_owner_parse(sub[k]);
		if (orc == 0)
			sub_names_free(sub, nsub);
		if (orc == 0 && !owner)
			orc = -ENOENT;
		int dead = owner ? kc_scratch_owner_dead(owner, my_host, kc_pid_start) : -EINVAL;
		const char *host = json_string_value(json_object_get(owner, "host_id"));
		json_int_t pid = json_integer_value(json_object_get(owner, "pid"));
		int64_t age = -1;
		if (dead != -EINVAL) {
			age = ku_wall_ms() - (int64_t)json_integer_value(json_object_get(owner, "started_at_ms"));
		} else {
			sub_stat st;
			if (sub_stat_path(v, name, &st) == 0)
				age = ku_wall_ms() - st.mtime_ns / 1000000;
		}
		const char *state = "left", *why;
		char whybuf[600];
		if (dead == 1) {
			why = "its run ended without removing it (same host, that process is gone)";
		} else if (dead == 0 && host && strcmp(host, my_host) == 0) {
			state = "live";
			why = "its run is still going on this host";
		} else if (dead == 0) {
			snprintf(whybuf, sizeof(whybuf), "owned by a run on host %.400s, which this host cannot see", host);
			why = whybuf;
		} else {
			why = orc == -ENOENT ? "it has no owner record (an older version, or killed at once)"
					     : "its contents cannot be listed";
		}
		int remove = strcmp(state, "live") != 0 &&
			     ((dead == 1 && remove_dead) || remove_older_ms == 0 ||
			      (remove_older_ms > 0 && age >= remove_older_ms));
		int rrc = 0;
		if (remove) {
			rrc = sub_remove_tree(v, name);
			if (rrc == 0 || rrc == -ENOENT)
				state = "removed";
		}
		char at[64];
		age_text(age, at, sizeof(at));
		if (strcmp(state, "removed") == 0)
			say(out, "removed leftover scratch directory %s (%s): %s\n", name, at, why);
		else if (rrc)
			say(out, "cannot remove leftover scratch directory %s (%s): %s\n", name, at, sub_strerror(rrc));
		else
			say(out, "leftover scratch directory %s (%s) not removed: %s%s\n", name, at, why,
			    strcmp(state, "live") == 0 ? "" : "; `kaas-conform clean URL --older-than DURATION` removes it");
		if (list) {
			json_t *o = json_pack("{s:s,s:s,s:I,s:s}", "name", name, "state", state, "age_ms",
					      (json_int_t)age, "why", why);
			if (host)
				json_object_set_new(o, "host_id", json_string(host));
			if (pid > 0)
				json_object_set_new(o, "pid", json_integer(pid));
			json_array_append_new(list, o);
		}
		json_decref(owner);
	}
	sub_names_free(names, n);
	return 0;
}

int kc_parse_duration_ms(const char *s, int64_t *ms)
{
	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	char *end = NULL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || s[0] == '-')
		return -EINVAL;
	int64_t mult = 1000;
	if (*end) {
		if (end[1])
			return -EINVAL;
		switch (*end) {
		case 's': mult = 1000; break;
		case 'm': mult = 60 * 1000; break;
		case 'h': mult = 3600 * 1000; break;
		case 'd': mult = 86400 * 1000; break;
		default: return -EINVAL;
		}
	}
	if (v > (unsigned long long)(INT64_MAX / mult))
		return -EINVAL;
	*ms = (int64_t)v * mult;
	return 0;
}

int kc_cmd_clean(int argc, char **argv)
{
	const char *url = NULL;
	int64_t older = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--older-than") == 0 && i + 1 < argc) {
			if (kc_parse_duration_ms(argv[++i], &older) != 0) {
				fprintf(stderr, "kaas-conform: --older-than: '%s' is not a duration (like 90s, 15m, 2h, 3d)\n",
					argv[i]);
				return KC_EXIT_ERROR;
			}
		} else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			printf("usage: kaas-conform clean URL [--older-than DURATION]\n"
			       "Removes the scratch directories (~kaas-conform-*) earlier runs left in URL's root,\n"
			       "except those of runs still going on this host; with --older-than only those at\n"
			       "least that old (a run on another host may still be using a younger one).\n");
			return 0;
		} else if (argv[i][0] == '-' || url) {
			fprintf(stderr, "kaas-conform: clean: unexpected argument '%s' (usage: kaas-conform clean URL [--older-than DURATION])\n",
				argv[i]);
			return KC_EXIT_ERROR;
		} else {
			url = argv[i];
		}
	}
	if (!url) {
		fprintf(stderr, "kaas-conform: clean: a URL is required (usage: kaas-conform clean URL [--older-than DURATION])\n");
		return KC_EXIT_ERROR;
	}
	sub_vfs *v = NULL;
	char err[1024] = "";
	if (sub_open_url(url, &v, err, sizeof(err)) != 0) {
		fprintf(stderr, "kaas-conform: %s\n", err);
		return KC_EXIT_ERROR;
	}
	json_t *list = json_array();
	int rc = kc_scratch_sweep(v, NULL, 1, older, list, stdout);
	int status = 0;
	if (rc) {
		fprintf(stderr, "kaas-conform: %s: cannot list the root: %s\n", url, sub_strerror(rc));
		status = KC_EXIT_ERROR;
	} else {
		size_t i, removed = 0, left = 0;
		json_t *o;
		json_array_foreach(list, i, o)
		{
			if (strcmp(json_string_value(json_object_get(o, "state")), "removed") == 0)
				removed++;
			else
				left++;
		}
		printf("%zu removed, %zu left\n", removed, left);
	}
	json_decref(list);
	sub_destroy(v);
	return status;
}
