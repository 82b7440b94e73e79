/*
 * check_preflight.c — the identity of every mount the actors use, classified
 * (preflight.h).  No filesystem traffic beyond what hello already did.
 */
#include <stdio.h>
#include <string.h>

#include "conformance/layers.h"
#include "conformance/preflight.h"
#include "conformance/run.h"
#include "qualify/stamp.h"

/* A directory on this host whose layers an actor did not report (an agent
 * of an older version): said, not guessed. */
static void add_unresolved(json_t *f, const char *url)
{
	char e[1200];
	snprintf(e, sizeof(e),
		 "the actor did not report the layers below its mount; what stores the bytes of %.1000s was not resolved",
		 url);
	json_array_append_new(f, json_pack("{s:s,s:s,s:s}", "level", "INFO", "code", "layers-unknown",
					   "explain", e));
}

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
		/* What stores the bytes, as the host of this mount sees it: the
		 * driver resolves its own URL, an actor says it in its hello. */
		json_t *layers = NULL;
		if (i >= 0)
			layers = json_incref(json_object_get(r->drv.a[i].hello, "layers"));
		else if (id.root[0] == '/')
			layers = kc_layers_resolve(id.root);
		char decided[1200] = "";
		kc_verdict lv = KC_PASS;
		if (layers)
			lv = kc_preflight_layers(layers, f, decided, sizeof(decided));
		else if (id.root[0] == '/')
			add_unresolved(f, url);
		if (lv > iv) {
			/* A layer decided: its first finding at that level says why. */
			size_t k;
			json_t *fi;
			json_array_foreach(f, k, fi)
			{
				const char *lvl = json_string_value(json_object_get(fi, "level"));
				if (lvl && strcmp(lvl, kc_verdict_name(lv)) == 0) {
					snprintf(summary, sizeof(summary), "%s",
						 json_string_value(json_object_get(fi, "explain")));
					break;
				}
			}
			iv = lv;
		}
		json_t *ij = kq_identity_json(&id);
		json_object_set_new(ij, "url", json_string(url));
		json_object_set_new(ij, "verdict", json_string(kc_verdict_name(iv)));
		json_object_set_new(ij, "layers", layers ? layers : json_array());
		json_object_set_new(ij, "decided_by",
				    json_string(lv >= iv && decided[0] ? decided : iv == KC_PASS ? "" : "mount"));
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
