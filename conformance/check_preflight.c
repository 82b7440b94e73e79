/*
 * check_preflight.c — the identity of every mount the actors use, classified
 * (preflight.h).  No filesystem traffic beyond what hello already did.
 */
#include <errno.h>
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

/* One mount's identity and the layers below it (NULL: not resolved),
 * judged: the findings (each naming url) appended to findings, the identity
 * with its verdict and deciding layer in *ij, a one-line summary. */
static kc_verdict judge_identity(const sub_identity *id, const char *url, json_t *layers,
				 json_t *findings, json_t **ij_out, char *summary, size_t slen)
{
	json_t *f = json_array();
	kc_verdict iv = kc_preflight_classify(id, f, summary, slen);
	char decided[1200] = "";
	kc_verdict lv = KC_PASS;
	if (layers)
		lv = kc_preflight_layers(layers, f, decided, sizeof(decided));
	else if (id->root[0] == '/')
		add_unresolved(f, url);
	if (lv > iv) {
		/* A layer decided: its first finding at that level says why. */
		size_t k;
		json_t *fi;
		json_array_foreach(f, k, fi)
		{
			const char *lvl = json_string_value(json_object_get(fi, "level"));
			if (lvl && strcmp(lvl, kc_verdict_name(lv)) == 0) {
				snprintf(summary, slen, "%s", json_string_value(json_object_get(fi, "explain")));
				break;
			}
		}
		iv = lv;
	}
	json_t *ij = kq_identity_json(id);
	json_object_set_new(ij, "url", json_string(url));
	json_object_set_new(ij, "verdict", json_string(kc_verdict_name(iv)));
	json_object_set_new(ij, "layers", layers ? layers : json_array());
	json_object_set_new(ij, "decided_by",
			    json_string(lv >= iv && decided[0] ? decided : iv == KC_PASS ? "" : "mount"));
	size_t k;
	json_t *fi;
	json_array_foreach(f, k, fi)
	{
		json_object_set_new(fi, "url", json_string(url));
		json_array_append(findings, fi);
	}
	json_decref(f);
	*ij_out = ij;
	return iv;
}

/* --cluster-dir on another volume than the URL: the broker keeps its
 * cluster state there (assignments, the controller's lease, producer-ID
 * blocks), so it is held to the data volume's layer and option rules.
 * The behavioural checks run on the URL only; the cluster directory's
 * identity and its verdict go into the report and the stamp, which the
 * broker's gate compares with the directory it is given. */
static kc_verdict preflight_cluster_dir(kc_run *r, json_t *ids, json_t *findings, char *summary,
					size_t slen)
{
	sub_vfs *cv = NULL;
	char e[900] = "";
	sub_identity cid;
	summary[0] = '\0';
	if (sub_open_url(r->o->cluster_dir, &cv, e, sizeof(e)) != 0 ||
	    sub_identity_of(cv, &cid) != 0) {
		sub_destroy(cv);
		snprintf(summary, slen, "--cluster-dir %.700s: cannot identify it", r->o->cluster_dir);
		return KC_ERROR;
	}
	sub_destroy(cv);
	char dkey[1200] = "", ckey[1200] = "";
	kq_volume_key(&r->ident, dkey, sizeof(dkey));
	kq_volume_key(&cid, ckey, sizeof(ckey));
	r->cluster_ident = cid;
	r->cluster_separate = !(dkey[0] && strcmp(dkey, ckey) == 0);
	if (!r->cluster_separate) {
		r->cluster_preflight = kq_identity_json(&cid);
		json_object_set_new(r->cluster_preflight, "url", json_string(r->o->cluster_dir));
		json_object_set_new(r->cluster_preflight, "verdict", json_string("PASS"));
		json_object_set_new(r->cluster_preflight, "same_volume", json_true());
		return KC_PASS;
	}
	json_t *layers = cid.root[0] == '/' ? kc_layers_resolve(cid.root) : NULL;
	json_t *ij = NULL;
	kc_verdict v = judge_identity(&cid, r->o->cluster_dir, layers, findings, &ij, summary, slen);
	json_object_set_new(ij, "role", json_string("cluster-dir"));
	json_object_set_new(ij, "same_volume", json_false());
	r->cluster_preflight = json_incref(ij);
	json_array_append_new(ids, ij);
	char tmp[768];
	snprintf(tmp, sizeof(tmp), "the cluster directory: %.700s", summary);
	snprintf(summary, slen, "%s", tmp);
	return v;
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
		char summary[768];
		json_t *layers = NULL;
		if (i >= 0)
			layers = json_incref(json_object_get(r->drv.a[i].hello, "layers"));
		else if (id.root[0] == '/')
			layers = kc_layers_resolve(id.root);
		json_t *ij = NULL;
		kc_verdict iv = judge_identity(&id, url, layers, findings, &ij, summary, sizeof(summary));
		json_array_append_new(ids, ij);
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
	if (r->o->cluster_dir) {
		char summary[768];
		kc_verdict cv = preflight_cluster_dir(r, ids, findings, summary, sizeof(summary));
		if (cv == KC_ERROR) {
			json_decref(ids);
			json_decref(findings);
			kc_result_error(res, "%s", summary);
			return -EIO;
		}
		if (cv > v)
			snprintf(res->summary, sizeof(res->summary), "%s", summary);
		v = kc_verdict_worst(v, cv);
		if (cv == KC_REFUSED)
			kc_result_count(res, "refused", 1);
		else if (cv == KC_WARN)
			kc_result_count(res, "warnings", 1);
	}
	kc_result_count(res, "refused", 0);
	kc_result_count(res, "warnings", 0);
	json_object_set_new(res->profile, "identities", ids);
	json_object_set_new(res->profile, "findings", findings);
	res->verdict = v;
	return 0;
}
