/*
 * marker.c — every client of a run sees one volume: the run writes a marker
 * file with a random tag into its scratch directory, and every --mount and
 * every agent's root must read it back before a check starts (a mount of
 * another export, or of a stale copy, would otherwise be judged as a client
 * of this volume).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "conformance/agent.h"
#include "conformance/run.h"
#include "util/clock.h"

/* Every --mount and every --agent's root must show the volume of the URL,
 * else the checks would end in a puzzling set-up error (or, worse, an
 * agent on another volume would make every check pass vacuously on its
 * own).  A marker with a random nonce is written and closed through the
 * URL's handle (exclusive create, fsync) and read back through a fresh
 * handle on each mount, opened after that close (close-to-open), and by
 * each agent through the actor protocol, relative to its root.  Both names
 * are new, so no client can have cached them as absent; a slow client still
 * gets a few seconds before it counts as another volume. */
#define KC_MOUNT_MARKER_WAIT_MS 3000

int kc_marker_write(kc_run *r, char *marker, size_t mlen, size_t *n, char *err, size_t errlen)
{
	uint64_t nonce = 0;
	if (getrandom(&nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce))
		nonce = (uint64_t)ku_mono_ns();
	char path[128];
	snprintf(path, sizeof(path), "%s/" KC_MARKER_FILE, r->scratch);
	int m = snprintf(marker, mlen, "kaas-conform volume marker %s %016" PRIx64 "\n", r->scratch,
			 nonce);
	*n = (size_t)m;
	int rc = sub_create_excl(r->vfs, path, marker, *n);
	if (rc)
		snprintf(err, errlen, "%s: cannot write a marker file into the scratch directory: %s",
			 r->o->url, sub_strerror(rc));
	return rc;
}

/* One reader of the marker: a mount's handle, or (mv NULL) actor ai through
 * its read_small step.  0 when it read the marker; -ENOENT, -EBADMSG or
 * -ESTALE when it still did not at the deadline; another -errno when it
 * could not read (*why set for an actor's failure). */
static int read_marker(kc_run *r, sub_vfs *mv, int ai, const char *path, const char *marker,
		       size_t n)
{
	int64_t deadline = ku_mono_ms() + KC_MOUNT_MARKER_WAIT_MS;
	int rc;
	for (;;) {
		if (mv) {
			char *buf = NULL;
			size_t len = 0;
			rc = sub_read_file(mv, path, n + 1, &buf, &len);
			if (rc == 0 && (len != n || memcmp(buf, marker, len) != 0))
				rc = -EBADMSG;
			free(buf);
		} else {
			json_t *out = NULL;
			rc = kc_drv_call(&r->drv, ai, "read_small", json_pack("{s:s}", "path", path), &out);
			if (rc == 0) {
				rc = (int)json_integer_value(json_object_get(out, "rc"));
				const char *data = json_string_value(json_object_get(out, "data"));
				if (rc == 0 && (!data || strlen(data) != n || memcmp(data, marker, n) != 0))
					rc = -EBADMSG;
				if (rc == -EFBIG)
					rc = -EBADMSG;
			} else if (rc == -EINTR) {
				return rc;
			} else {
				json_decref(out);
				return rc < 0 ? rc : -EIO; /* the actor itself failed */
			}
			json_decref(out);
		}
		if (rc != -ENOENT && rc != -EBADMSG && rc != -ESTALE)
			return rc;
		if (kc__interrupted || ku_mono_ms() >= deadline)
			return kc__interrupted ? -EINTR : rc;
		usleep(100 * 1000);
	}
}

int kc_marker_verify_mounts(kc_run *r, const char *marker, size_t n, char *err, size_t errlen)
{
	const kc_opts *o = r->o;
	char path[128];
	snprintf(path, sizeof(path), "%s/" KC_MARKER_FILE, r->scratch);
	for (int i = 0; i < o->nmounts; i++) {
		sub_vfs *mv = NULL;
		char e[900] = "";
		int rc = sub_open_url(o->mounts[i], &mv, e, sizeof(e));
		if (rc) {
			snprintf(err, errlen, "--mount: %s", e);
			return rc;
		}
		rc = read_marker(r, mv, -1, path, marker, n);
		sub_destroy(mv);
		if (rc == -EINTR)
			return rc;
		if (rc == -ENOENT || rc == -EBADMSG || rc == -ESTALE)
			snprintf(err, errlen,
				 "--mount %s: not the volume of %s (a marker file written through %s into %s %s through the mount)",
				 o->mounts[i], o->url, o->url, r->scratch,
				 rc == -EBADMSG ? "reads back different" : "cannot be found");
		else if (rc)
			snprintf(err, errlen,
				 "--mount %s: cannot tell whether it is the volume of %s: reading the marker file %s through it: %s",
				 o->mounts[i], o->url, path, sub_strerror(rc));
		if (rc)
			return rc;
	}
	return 0;
}

/* The same for the agents, once they are connected: each reads the marker
 * relative to its own --root. */
int kc_marker_verify_agents(kc_run *r, const char *marker, size_t n, char *err, size_t errlen)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/" KC_MARKER_FILE, r->scratch);
	for (int i = 0; i < r->drv.n; i++) {
		kc_actor *a = &r->drv.a[i];
		r->drv.err[0] = '\0';
		int rc = read_marker(r, NULL, i, path, marker, n);
		if (rc == -EINTR)
			return rc;
		if (rc == -ENOENT || rc == -EBADMSG || rc == -ESTALE)
			snprintf(err, errlen,
				 "--agent %.200s: its root %.300s is not the volume of %s (a marker file written through %s into %s %s through it)",
				 a->agent, a->url, r->o->url, r->o->url, r->scratch,
				 rc == -EBADMSG ? "reads back different" : "cannot be found");
		else if (rc && r->drv.err[0])
			snprintf(err, errlen,
				 "--agent %.200s: cannot tell whether its root %.300s is the volume of %s: %.400s",
				 a->agent, a->url, r->o->url, r->drv.err);
		else if (rc)
			snprintf(err, errlen,
				 "--agent %.200s: cannot tell whether its root %.300s is the volume of %s: reading the marker file %s: %s",
				 a->agent, a->url, r->o->url, path, sub_strerror(rc));
		if (rc)
			return rc;
	}
	return 0;
}
