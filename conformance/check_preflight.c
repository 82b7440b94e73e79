/*
 * check_preflight.c — the identity of every mount the actors use, classified
 * (preflight.h).  No filesystem traffic beyond what hello already did.
 */
#include <stdio.h>
#include <string.h>

#include "conformance/preflight.h"
#include "conformance/run.h"
#include "qualify/stamp.h"

int kc_check_preflight(kc_run *r, kc_result *res, const char *dir)
{
	(void)dir;
	kc_verdict v = KC_PASS;
	json_t *ids = json_array(), *findings = json_array();
	char seen[KC_MAX_ACTORS + 1][1200];
	int nseen = 0;
	res->iterations = 1;
	kc_run_variant(r, "identity");
	/* The driver's view of URL first, then each distinct actor mount. */
	for (int i = -1; i < r->drv.n; i++) {
		sub_identity id;
		const char *url;
		if (i < 0) {
			id = r->ident;
			url = r->o->url;
		} else {
			json_t *h = r->drv.a[i].hello;
			if (kq_identity_from_json(json_object_get(h, "identity"), &id) != 0)
				continue;
			url = r->drv.a[i].url;
		}
		char key[1200];
		snprintf(key, sizeof(key), "%.400s|%.400s|%.300s", url, id.mountpoint, id.fsid);
		int dup = 0;
		for (int k = 0; k < nseen; k++)
			if (strcmp(seen[k], key) == 0)
				dup = 1;
		if (dup)
			continue;
		snprintf(seen[nseen++], sizeof(seen[0]), "%s", key);
		json_t *f = json_array();
		char summary[768];
		kc_verdict iv = kc_preflight_classify(&id, f, summary, sizeof(summary));
		json_t *ij = kq_identity_json(&id);
		json_object_set_new(ij, "url", json_string(url));
		json_object_set_new(ij, "verdict", json_string(kc_verdict_name(iv)));
		json_array_append_new(ids, ij);
		size_t k;
		json_t *fi;
		json_array_foreach(f, k, fi)
		{
			json_object_set_new(fi, "url", json_string(url));
			json_array_append(findings, fi);
		}
		json_decref(f);
		if (i < 0 || iv > v) {
			if (iv >= v)
				snprintf(res->summary, sizeof(res->summary), "%s", summary);
		}
		v = kc_verdict_worst(v, iv);
		if (iv == KC_REFUSED)
			kc_result_count(res, "refused", 1);
		else if (iv == KC_WARN)
			kc_result_count(res, "warnings", 1);
	}
	kc_result_count(res, "refused", 0);
	kc_result_count(res, "warnings", 0);
	json_object_set_new(res->profile, "identities", ids);
	json_object_set_new(res->profile, "findings", findings);
	res->verdict = v;
	return 0;
}
