/*
 * sub_fault_inject.c — the fault backend's error injection: the fail= and failpath=
 * rules (the n-th call of an operation, every call from the n-th on, every
 * call on a path matching a glob answers a chosen errno) and the crash point
 * of crash_after=.
 */
#include "substrates/sub_fault_int.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>

int sub__fault_crash_locked(fault_vfs *fv);

/* Counts the call, then answers -EIO after a crash or the injected errno of
 * the first matching rule; 0 lets the call proceed.  Lock held. */
int sub__fault_enter(fault_vfs *fv, int op, const char *path, const char *path2)
{
	fv->calls[op]++;
	if (fv->crashed)
		return -EIO;
	uint64_t c = fv->calls[op];
	for (fault_rule *r = fv->rules; r; r = r->next) {
		if (r->op != op)
			continue;
		switch (r->kind) {
		case RULE_NTH:
			if (c == r->n)
				return -r->err;
			break;
		case RULE_FROM:
			if (c >= r->n)
				return -r->err;
			break;
		case RULE_PATH:
			if ((path && fnmatch(r->glob, path, 0) == 0) ||
			    (path2 && fnmatch(r->glob, path2, 0) == 0))
				return -r->err;
			break;
		}
	}
	return 0;
}

/* Before a mutating call: with crash_after=N, the (N+1)-th does not happen. */
int sub__fault_crash_point(fault_vfs *fv)
{
	if (fv->has_crash_after && fv->mutations >= fv->crash_after) {
		sub__fault_crash_locked(fv);
		return -EIO;
	}
	return 0;
}

void sub__fault_rules_free(fault_vfs *fv)
{
	while (fv->rules) {
		fault_rule *r = fv->rules;
		fv->rules = r->next;
		free(r->glob);
		free(r);
	}
}
