/*
 * kc.c — verdict names and ordering, the check table, errno names.
 */
#include "conformance/kc.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char *const verdict_names[] = {"PASS", "UNPROVEN", "WARN", "REFUSED", "FAIL", "ERROR"};

const char *kc_verdict_name(kc_verdict v)
{
	if ((unsigned)v > KC_ERROR)
		return "ERROR";
	return verdict_names[v];
}

int kc_verdict_parse(const char *s, kc_verdict *out)
{
	for (int i = 0; i <= KC_ERROR; i++) {
		if (s && strcmp(s, verdict_names[i]) == 0) {
			*out = (kc_verdict)i;
			return 0;
		}
	}
	return -EINVAL;
}

kc_verdict kc_verdict_worst(kc_verdict a, kc_verdict b)
{
	return a > b ? a : b;
}

int kc_verdict_exit_code(kc_verdict v)
{
	switch (v) {
	case KC_PASS:
	case KC_UNPROVEN:
	case KC_WARN:
		return KC_EXIT_OK;
	case KC_FAIL:
		return KC_EXIT_FAIL;
	case KC_REFUSED:
		return KC_EXIT_REFUSED;
	case KC_ERROR:
	default:
		return KC_EXIT_ERROR;
	}
}

static const struct {
	const char *name;
	const char *guarantee;
} checks[KC_NCHECKS] = {
	[KC_CHK_PREFLIGHT] = {"preflight", "a durable filesystem of a qualifying kind"},
	[KC_CHK_RENAME] = {"rename", "atomic same-directory rename"},
	[KC_CHK_EXCL] = {"excl", "atomic O_CREAT|O_EXCL across clients"},
	[KC_CHK_CTO] = {"cto", "close-to-open consistency"},
	[KC_CHK_UNLINK] = {"unlink-open",
			   "a file deleted while open is released when its holder closes it"},
	[KC_CHK_FSYNC] = {"fsync", "fsync makes data durable"},
	[KC_CHK_RCOPY] = {"rename-copy", "rename moves a name, it does not copy data"},
	[KC_CHK_PERF] = {"perf", "append+fsync latency and metadata rates meet the targets given"},
	[KC_CHK_ENOSPC] = {"enospc",
			   "out of space is reported at write or fsync; what was reported written reads back whole"},
};

const char *kc_check_name(int id)
{
	return (id >= 0 && id < KC_NCHECKS) ? checks[id].name : "?";
}

const char *kc_check_guarantee(int id)
{
	return (id >= 0 && id < KC_NCHECKS) ? checks[id].guarantee : "?";
}

int kc_check_lookup(const char *name)
{
	for (int i = 0; i < KC_NCHECKS; i++)
		if (name && strcmp(name, checks[i].name) == 0)
			return i;
	return -1;
}

const char *kc_errname(int err)
{
	static __thread char buf[16];
	if (err < 0)
		err = -err;
	if (err == 0)
		return "OK";
	const char *n = strerrorname_np(err);
	if (n)
		return n;
	snprintf(buf, sizeof(buf), "E%d", err);
	return buf;
}
