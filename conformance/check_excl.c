/*
 * check_excl.c — guarantee 2: O_CREAT|O_EXCL is atomic across clients.
 *
 * Round after round, every actor is released at the same instant (barrier
 * through the driver) and creates the same fresh name.  Exactly one may win;
 * every loser must be told EEXIST — an EPERM (SFTP) or any other error is a
 * loser that cannot tell "someone else owns it" from a failure, so code that
 * re-drives a claim would never settle.  Then an actor other than the winner
 * reads the claim file and must find the winner's name in it, and every
 * loser told EEXIST reads it too and must not find its own name: a create
 * that reached the server, lost its reply and was sent again (an RPC
 * retransmission over a lossy link, a reconnect) answers EEXIST for the
 * caller's own file, and a controller election would then have a winner
 * that believes it lost.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "conformance/run.h"

int kc_check_excl(kc_run *r, kc_result *res, const char *dir)
{
	int n = r->drv.n;
	int as[KC_MAX_ACTORS];
	json_t *errnos = json_object();
	uint64_t tag = kc_run_tag(r, KC_CHK_EXCL, 0, "round");
	int rc = 0;
	res->iterations = r->o->iterations;
	kc_run_variant(r, "race");
	r->manual = 1;
	static const char *const zero[] = {"rounds", "one_winner", "multi_winner", "no_winner",
					   "loser_eexist", "loser_eperm", "loser_other",
					   "content_mismatch", "winner_write_errors", "loser_own_content"};
	for (size_t k = 0; k < sizeof(zero) / sizeof(zero[0]); k++)
		kc_result_count(res, zero[k], 0); /* every counter is in the report */
	kc_result_count(res, "racers", n);
	for (int i = 0; i < n; i++)
		as[i] = i;
	for (int64_t round = 1; round <= r->o->iterations; round++) {
		char path[256];
		snprintf(path, sizeof(path), "%s/r%lld", dir, (long long)round);
		for (int i = 0; i < n; i++) {
			rc = kc_drv_start(&r->drv, i, "excl_create",
					  json_pack("{s:s,s:I}", "path", path, "tag", (json_int_t)tag), 1);
			if (rc)
				goto fail;
		}
		if ((rc = kc_drv_release(&r->drv, as, n)))
			goto fail;
		int winners = 0, winner = -1, eexist[KC_MAX_ACTORS], neexist = 0;
		json_t *trace = json_array();
		for (int i = 0; i < n; i++) {
			json_t *out = NULL;
			if ((rc = kc_drv_wait(&r->drv, i, &out))) {
				json_decref(trace);
				goto fail;
			}
			const char *err = json_string_value(json_object_get(out, "err"));
			char line[512];
			snprintf(line, sizeof(line), "actor %d: open(%s, O_CREAT|O_EXCL) = %s", i, path,
				 err ? err : "?");
			json_array_append_new(trace, json_string(line));
			if (json_is_true(json_object_get(out, "won"))) {
				winners++;
				winner = i;
				const char *w = json_string_value(json_object_get(out, "write"));
				if (w && strcmp(w, "OK") != 0)
					kc_result_count(res, "winner_write_errors", 1);
			} else if (err && strcmp(err, "EEXIST") == 0) {
				kc_result_count(res, "loser_eexist", 1);
				eexist[neexist++] = i;
			} else {
				kc_result_count(res, err && strcmp(err, "EPERM") == 0 ? "loser_eperm"
										  : "loser_other",
						1);
				json_t *a = json_pack("{s:s,s:i,s:I,s:s}", "kind", "loser_errno", "actor", i,
						      "iteration", (json_int_t)round, "detail", "");
				char d[200];
				snprintf(d, sizeof(d), "the loser got %s instead of EEXIST", err ? err : "?");
				json_object_set_new(a, "detail", json_string(d));
				json_object_set_new(a, "trace", json_deep_copy(trace));
				json_t *one = json_array();
				json_array_append_new(one, a);
				kc_result_add_anomalies(res, NULL, one, 1);
				json_decref(one);
				r->manual_anomalies++;
			}
			if (err)
				json_object_set_new(errnos, err,
						    json_integer(json_integer_value(json_object_get(errnos, err)) + 1));
			json_decref(out);
		}
		kc_result_count(res, "rounds", 1);
		if (winners != 1) {
			kc_result_count(res, winners ? "multi_winner" : "no_winner", 1);
			char d[512];
			snprintf(d, sizeof(d), "%d actors created %s", winners, path);
			json_t *one = json_pack("[{s:s,s:i,s:I,s:s,s:O}]", "kind",
						winners ? "multi_winner" : "no_winner", "actor", winner,
						"iteration", (json_int_t)round, "detail", d, "trace", trace);
			kc_result_add_anomalies(res, NULL, one, 1);
			json_decref(one);
			r->manual_anomalies++;
		} else {
			kc_result_count(res, "one_winner", 1);
			/* Another client must see the winner's claim. */
			int reader = (winner + 1) % n;
			json_t *out = NULL;
			rc = kc_drv_call(&r->drv, reader, "read_small", json_pack("{s:s}", "path", path),
					 &out);
			if (rc) {
				json_decref(trace);
				goto fail;
			}
			char want[64];
			snprintf(want, sizeof(want), "actor %d tag %lld\n", winner, (long long)tag);
			const char *data = json_string_value(json_object_get(out, "data"));
			if (!data || strcmp(data, want) != 0) {
				kc_result_count(res, "content_mismatch", 1);
				char d[600];
				snprintf(d, sizeof(d), "actor %d read '%.60s' (%s) from the claim of actor %d",
					 reader, data ? data : "",
					 json_string_value(json_object_get(out, "err")), winner);
				json_t *one = json_pack("[{s:s,s:i,s:I,s:s,s:O}]", "kind", "content_mismatch",
							"actor", reader, "iteration", (json_int_t)round,
							"detail", d, "trace", trace);
				kc_result_add_anomalies(res, NULL, one, 1);
				json_decref(one);
				r->manual_anomalies++;
			}
			json_decref(out);
		}
		/* Each EEXIST must be about someone else's file. */
		for (int k = 0; k < neexist; k++) {
			int i = eexist[k];
			json_t *out = NULL;
			rc = kc_drv_call(&r->drv, i, "read_small", json_pack("{s:s}", "path", path), &out);
			if (rc) {
				json_decref(trace);
				goto fail;
			}
			char own[64];
			snprintf(own, sizeof(own), "actor %d tag %lld\n", i, (long long)tag);
			const char *data = json_string_value(json_object_get(out, "data"));
			if (data && strcmp(data, own) == 0) {
				kc_result_count(res, "loser_own_content", 1);
				char d[512];
				snprintf(d, sizeof(d),
					 "actor %d was told EEXIST, yet %s holds its own claim: its create succeeded and a retransmission of it answered EEXIST",
					 i, path);
				json_t *one = json_pack("[{s:s,s:i,s:I,s:s,s:O}]", "kind", "loser_own_content",
							"actor", i, "iteration", (json_int_t)round, "detail", d,
							"trace", trace);
				kc_result_add_anomalies(res, NULL, one, 1);
				json_decref(one);
				r->manual_anomalies++;
			}
			json_decref(out);
		}
		json_decref(trace);
		r->manual_done = round;
	}
	json_object_set_new(res->profile, "errnos", errnos);
	res->observation = "a racer's exclusive create in one round";
	res->observations = kc_result_get(res, "rounds");
	return 0;
fail:
	json_decref(errnos);
	kc_drv_abort(&r->drv);
	if (rc != -EINTR)
		kc_result_error(res, "%s", r->drv.err);
	return rc;
}
