/*
 * check_util.c — what the checks share: stream tags, progress state, and a
 * concurrent phase (barrier start, run, stop the loops, collect).
 */
#include <errno.h>
#include <string.h>

#include "conformance/payload.h"
#include "conformance/run.h"
#include "util/clock.h"

uint64_t kc_run_tag(const kc_run *r, int check, int actor, const char *variant)
{
	uint64_t h = kc_seed_mix(r->seed, (uint64_t)check * 1000003u + (uint64_t)actor);
	for (const char *p = variant ? variant : ""; *p; p++)
		h = kc_seed_mix(h, (unsigned char)*p);
	return h & ((1ULL << 62) - 1);
}

void kc_run_variant(kc_run *r, const char *variant)
{
	snprintf(r->variant, sizeof(r->variant), "%s", variant ? variant : "");
	r->variant_t0_ms = ku_mono_ms();
	r->manual = 0;
	r->manual_done = r->manual_anomalies = 0;
}

int kc_run_phase(kc_run *r, kc_part *parts, int np, json_t **results)
{
	int as[KC_MAX_ACTORS] = {0};
	int rc = 0;
	if (np > KC_MAX_ACTORS)
		return -EINVAL;
	for (int i = 0; i < np; i++)
		results[i] = NULL;
	for (int i = 0; i < np; i++) {
		as[i] = parts[i].actor;
		rc = kc_drv_start(&r->drv, parts[i].actor, parts[i].op, parts[i].args, 1);
		parts[i].args = NULL;
		if (rc) {
			for (int k = i + 1; k < np; k++) {
				json_decref(parts[k].args);
				parts[k].args = NULL;
			}
			goto fail;
		}
	}
	if ((rc = kc_drv_release(&r->drv, as, np)))
		goto fail;
	for (int i = 0; i < np; i++) {
		if (parts[i].loop)
			continue;
		if ((rc = kc_drv_wait(&r->drv, parts[i].actor, &results[i])))
			goto fail;
	}
	for (int i = 0; i < np; i++)
		if (parts[i].loop)
			kc_drv_stop(&r->drv, parts[i].actor);
	for (int i = 0; i < np; i++) {
		if (!parts[i].loop)
			continue;
		if ((rc = kc_drv_wait(&r->drv, parts[i].actor, &results[i])))
			goto fail;
	}
	return 0;
fail:
	/* Collect the failing actor's own message if it answered, then end the
	 * rest so no step is left running into the next phase. */
	if (rc == -ECANCELED) {
		for (int i = 0; i < np; i++) {
			kc_actor *a = &r->drv.a[parts[i].actor];
			if (a->busy == 0 && a->reply) {
				json_t *res = NULL;
				rc = kc_drv_wait(&r->drv, parts[i].actor, &res);
				json_decref(res);
				if (rc)
					break;
			}
		}
		if (rc == 0)
			rc = -EPROTO;
	}
	kc_drv_abort(&r->drv);
	for (int i = 0; i < np; i++) {
		json_decref(results[i]);
		results[i] = NULL;
	}
	return rc;
}
