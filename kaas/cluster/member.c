/*
 * member.c — heartbeat files, exit certificates and the observer's view of
 * its peers (see member.h; the proof is in docs/cluster.md).
 */
#include "kaas/cluster/member.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/cluster/json.h"

#define BROKERS_DIR "brokers"

static const char *const state_names[] = {NULL, "running", "draining", "fenced", "stopped"};
static const char *const pred_names[] = {"none", "expired", "gone"};

const char *kcl_state_name(int state)
{
	return state >= KCL_ST_RUNNING && state <= KCL_ST_STOPPED ? state_names[state] : "?";
}

const char *kcl_live_name(int live)
{
	switch (live) {
	case KCL_LIVE_ALIVE: return "alive";
	case KCL_LIVE_EXPIRED: return "expired";
	case KCL_LIVE_GONE: return "gone";
	default: return "unknown";
	}
}

int kcl_gen_cmp(kcl_gen a, kcl_gen b)
{
	if (a.controller_epoch != b.controller_epoch)
		return a.controller_epoch < b.controller_epoch ? -1 : 1;
	if (a.generation != b.generation)
		return a.generation < b.generation ? -1 : 1;
	return 0;
}

int kcl_incarn_cmp(kcl_incarn a, kcl_incarn b)
{
	if (a.incarnation != b.incarnation)
		return a.incarnation < b.incarnation ? -1 : 1;
	if (a.nonce != b.nonce)
		return a.nonce < b.nonce ? -1 : 1;
	return 0;
}

uint64_t kcl_incarnation_next(uint64_t prev, int64_t wall_ms)
{
	uint64_t n = prev + 1;
	if (wall_ms > 0 && (uint64_t)wall_ms > n)
		n = (uint64_t)wall_ms;
	return n > (uint64_t)KCL_SEQ_MAX ? (uint64_t)KCL_SEQ_MAX : n;
}

/* ---- the heartbeat file --------------------------------------------------- */

static int hb_valid(const kcl_hb *hb)
{
	return hb->id >= 0 && hb->inc.incarnation >= 1 && hb->inc.incarnation <= (uint64_t)KCL_SEQ_MAX &&
	       hb->inc.nonce != 0 && hb->seq >= 1 && hb->seq <= KCL_SEQ_MAX &&
	       hb->state >= KCL_ST_RUNNING && hb->state <= KCL_ST_STOPPED &&
	       hb->released.controller_epoch >= 0 && hb->released.generation >= 0 &&
	       hb->pred_how >= KCL_PRED_NONE && hb->pred_how <= KCL_PRED_GONE &&
	       memchr(hb->endpoint, '\0', sizeof(hb->endpoint)) && hb->endpoint[0] &&
	       memchr(hb->rack, '\0', sizeof(hb->rack)) && memchr(hb->host_id, '\0', sizeof(hb->host_id));
}

/* "host:port" with a port of 1-65535 and a host of 1-255 bytes. */
static int parse_endpoint(const char *ep, kb_endpoint *e)
{
	const char *c = strrchr(ep, ':');
	char *end;
	if (!c || c == ep || (size_t)(c - ep) >= sizeof(e->host))
		return -EINVAL;
	errno = 0;
	long port = strtol(c + 1, &end, 10);
	if (errno || end == c + 1 || *end || port < 1 || port > 65535)
		return -EINVAL;
	memcpy(e->host, ep, (size_t)(c - ep));
	e->host[c - ep] = '\0';
	e->port = (int32_t)port;
	return 0;
}

/* A listener name as Kafka allows them: letters, digits, '_', '-', '.'. */
static int listener_name_ok(const char *n)
{
	size_t len = strlen(n);
	if (len == 0 || len >= sizeof(((kb_endpoint *)0)->name))
		return 0;
	for (size_t i = 0; i < len; i++)
		if (!isalnum((unsigned char)n[i]) && n[i] != '_' && n[i] != '-' && n[i] != '.')
			return 0;
	return 1;
}

static json_t *listeners_json(const kcl_hb *hb)
{
	json_t *a = json_array();
	for (int i = 0; a && i < hb->nlst; i++) {
		char ep[300];
		snprintf(ep, sizeof(ep), "%s:%d", hb->lst[i].host, hb->lst[i].port);
		if (json_array_append_new(a, json_pack("{s:s,s:s}", "name", hb->lst[i].name, "endpoint", ep))) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* "listeners" (optional: an older kaas wrote none): at most
 * KB_MAX_LISTENERS {"name", "endpoint"} objects, names unique. */
static int decode_listeners(json_t *doc, kcl_hb *hb, char *err, size_t errlen)
{
	json_t *a = json_object_get(doc, "listeners");
	if (!a)
		return 0;
	if (!json_is_array(a) || json_array_size(a) > KB_MAX_LISTENERS)
		return kcl__fail(err, errlen, -EINVAL, "field 'listeners' is not an array of at most %d",
				 KB_MAX_LISTENERS);
	for (size_t i = 0; i < json_array_size(a); i++) {
		json_t *o = json_array_get(a, i);
		kb_endpoint *e = &hb->lst[i];
		char ep[300], sub[128];
		int rc;
		if (!json_is_object(o))
			return kcl__fail(err, errlen, -EINVAL, "listeners[%zu] is not an object", i);
		if ((rc = kcl__str(o, "name", sizeof(e->name) - 1, 0, e->name, sizeof(e->name), sub, sizeof(sub))) ||
		    (rc = kcl__str(o, "endpoint", sizeof(ep) - 1, 0, ep, sizeof(ep), sub, sizeof(sub))))
			return kcl__fail(err, errlen, rc, "listeners[%zu]: %s", i, sub);
		if (!listener_name_ok(e->name))
			return kcl__fail(err, errlen, -EINVAL, "listeners[%zu]: name '%s' is not a listener name", i,
					 e->name);
		if (parse_endpoint(ep, e))
			return kcl__fail(err, errlen, -EINVAL, "listeners[%zu]: endpoint '%s' is not host:port", i, ep);
		for (size_t j = 0; j < i; j++)
			if (strcmp(hb->lst[j].name, e->name) == 0)
				return kcl__fail(err, errlen, -EINVAL, "listeners[%zu]: name '%s' given twice", i,
						 e->name);
		hb->nlst = (int)i + 1;
	}
	return 0;
}

int kcl_hb_encode(const kcl_hb *hb, char **out, size_t *len)
{
	if (!hb_valid(hb))
		return -EINVAL;
	char nonce[17], pnonce[17];
	kcl__hex64_fmt(hb->inc.nonce, nonce);
	kcl__hex64_fmt(hb->pred.nonce, pnonce);
	json_t *pred = hb->pred_how == KCL_PRED_NONE
			       ? json_pack("{s:s}", "how", "none")
			       : json_pack("{s:s,s:I,s:s,s:I}", "how", pred_names[hb->pred_how],
					   "incarnation", (json_int_t)hb->pred.incarnation, "nonce", pnonce,
					   "seq", (json_int_t)hb->pred_seq);
	json_t *doc = json_pack("{s:i,s:i,s:I,s:s,s:I,s:s,s:s,s:s,s:s,s:{s:I,s:I},s:I,s:o}",
				"version", KCL_HB_VERSION, "id", (int)hb->id,
				"incarnation", (json_int_t)hb->inc.incarnation, "nonce", nonce,
				"seq", (json_int_t)hb->seq, "state", state_names[hb->state],
				"endpoint", hb->endpoint, "rack", hb->rack, "host_id", hb->host_id,
				"released", "controller_epoch", (json_int_t)hb->released.controller_epoch,
				"generation", (json_int_t)hb->released.generation,
				"wall_ms", (json_int_t)hb->wall_ms, "predecessor", pred);
	if (!doc)
		return -ENOMEM;
	if (hb->nlst > 0 && json_object_set_new(doc, "listeners", listeners_json(hb))) {
		json_decref(doc);
		return -ENOMEM;
	}
	int rc = kcl__dump(doc, out, len);
	json_decref(doc);
	return rc;
}

static int name_index(const char *s, const char *const *names, int lo, int hi)
{
	for (int i = lo; i <= hi; i++)
		if (names[i] && strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

int kcl_hb_decode(const char *buf, size_t len, kcl_hb *out, char *err, size_t errlen)
{
	json_t *doc = NULL;
	kcl_hb hb;
	memset(&hb, 0, sizeof(hb));
	int64_t ver, x;
	char tmp[32], sub[128];
	int rc = kcl__parse(buf, len, "heartbeat", &doc, err, errlen);
	if (rc)
		return rc;
	if ((rc = kcl__version(doc, "heartbeat", KCL_HB_VERSION, &ver, err, errlen)))
		goto out;
	if ((rc = kcl__int(doc, "id", 0, KCL_ID_MAX, &x, err, errlen)))
		goto out;
	hb.id = (int32_t)x;
	if ((rc = kcl__int(doc, "incarnation", 1, KCL_SEQ_MAX, &x, err, errlen)))
		goto out;
	hb.inc.incarnation = (uint64_t)x;
	if ((rc = kcl__hex64(doc, "nonce", &hb.inc.nonce, err, errlen)))
		goto out;
	if (hb.inc.nonce == 0) {
		rc = kcl__fail(err, errlen, -ERANGE, "field 'nonce' is zero");
		goto out;
	}
	if ((rc = kcl__int(doc, "seq", 1, KCL_SEQ_MAX, &hb.seq, err, errlen)))
		goto out;
	if ((rc = kcl__str(doc, "state", 16, 0, tmp, sizeof(tmp), err, errlen)))
		goto out;
	if ((hb.state = name_index(tmp, state_names, KCL_ST_RUNNING, KCL_ST_STOPPED)) < 0) {
		rc = kcl__fail(err, errlen, -EINVAL, "field 'state' = '%s' is not a known state", tmp);
		goto out;
	}
	if ((rc = kcl__str(doc, "endpoint", sizeof(hb.endpoint) - 1, 0, hb.endpoint,
			   sizeof(hb.endpoint), err, errlen)))
		goto out;
	if ((rc = decode_listeners(doc, &hb, err, errlen)))
		goto out;
	if ((rc = kcl__str(doc, "rack", sizeof(hb.rack) - 1, 1, hb.rack, sizeof(hb.rack), err,
			   errlen)))
		goto out;
	if ((rc = kcl__str(doc, "host_id", sizeof(hb.host_id) - 1, 1, hb.host_id,
			   sizeof(hb.host_id), err, errlen)))
		goto out;
	if ((rc = kcl__int(doc, "wall_ms", INT64_MIN, INT64_MAX, &hb.wall_ms, err, errlen)))
		goto out;
	json_t *rel = json_object_get(doc, "released");
	if (!json_is_object(rel)) {
		rc = kcl__fail(err, errlen, -EINVAL, "field 'released' missing or not an object");
		goto out;
	}
	if ((rc = kcl__int(rel, "controller_epoch", 0, 9999999999LL, &hb.released.controller_epoch,
			   sub, sizeof(sub))) ||
	    (rc = kcl__int(rel, "generation", 0, KCL_SEQ_MAX, &hb.released.generation, sub,
			   sizeof(sub)))) {
		kcl__fail(err, errlen, rc, "released: %s", sub);
		goto out;
	}
	json_t *pred = json_object_get(doc, "predecessor");
	if (!json_is_object(pred)) {
		rc = kcl__fail(err, errlen, -EINVAL, "field 'predecessor' missing or not an object");
		goto out;
	}
	if ((rc = kcl__str(pred, "how", 16, 0, tmp, sizeof(tmp), sub, sizeof(sub)))) {
		kcl__fail(err, errlen, rc, "predecessor: %s", sub);
		goto out;
	}
	if ((hb.pred_how = name_index(tmp, pred_names, 0, 2)) < 0) {
		rc = kcl__fail(err, errlen, -EINVAL, "predecessor: 'how' = '%s' is not known", tmp);
		goto out;
	}
	if (hb.pred_how != KCL_PRED_NONE) {
		if ((rc = kcl__int(pred, "incarnation", 1, KCL_SEQ_MAX, &x, sub, sizeof(sub))) ||
		    (rc = kcl__hex64(pred, "nonce", &hb.pred.nonce, sub, sizeof(sub))) ||
		    (rc = kcl__int(pred, "seq", 1, KCL_SEQ_MAX, &hb.pred_seq, sub, sizeof(sub)))) {
			kcl__fail(err, errlen, rc, "predecessor: %s", sub);
			goto out;
		}
		hb.pred.incarnation = (uint64_t)x;
		/* A predecessor is older by definition; anything else is a lie. */
		if (kcl_incarn_cmp(hb.pred, hb.inc) >= 0) {
			rc = kcl__fail(err, errlen, -ERANGE,
				       "predecessor incarnation %" PRIu64 " is not older than %" PRIu64,
				       hb.pred.incarnation, hb.inc.incarnation);
			goto out;
		}
	}
	*out = hb;
out:
	json_decref(doc);
	return rc;
}

int kcl_hb_path(int32_t id, char *dst, size_t dstlen)
{
	if (id < 0)
		return -EINVAL;
	int n = snprintf(dst, dstlen, BROKERS_DIR "/%" PRId32 ".json", id);
	return n < 0 || (size_t)n >= dstlen ? -ENAMETOOLONG : 0;
}

int kcl_hb_write(sub_vfs *v, const kcl_hb *hb)
{
	char path[64], *buf = NULL;
	size_t len;
	int rc = kcl_hb_path(hb->id, path, sizeof(path));
	if (rc || (rc = kcl_hb_encode(hb, &buf, &len)))
		return rc;
	rc = sub_write_atomic(v, path, buf, len);
	if (rc == -ENOENT && (rc = sub_mkdirs(v, BROKERS_DIR, 0755)) == 0)
		rc = sub_write_atomic(v, path, buf, len);
	free(buf);
	return rc;
}

int kcl_hb_read(sub_vfs *v, int32_t id, kcl_hb *out, char *err, size_t errlen)
{
	char path[64], *buf = NULL;
	size_t len = 0;
	int rc = kcl_hb_path(id, path, sizeof(path));
	if (rc)
		return kcl__fail(err, errlen, rc, "broker id %" PRId32 " is invalid", id);
	rc = sub_read_file(v, path, KCL_HB_MAX_BYTES, &buf, &len);
	if (rc == -EFBIG)
		return kcl__fail(err, errlen, -ERANGE, "%s: longer than %d bytes", path,
				 KCL_HB_MAX_BYTES);
	if (rc)
		return kcl__fail(err, errlen, rc, "%s: %s", path, sub_strerror(rc));
	char why[256];
	rc = kcl_hb_decode(buf, len, out, why, sizeof(why));
	free(buf);
	if (rc)
		return kcl__fail(err, errlen, rc, "%s: %s", path, why);
	if (out->id != id)
		return kcl__fail(err, errlen, -EINVAL, "%s: claims to be broker %" PRId32, path,
				 out->id);
	return 0;
}

/* ---- exit certificates ------------------------------------------------------ */

int kcl_gone_path(int32_t id, kcl_incarn inc, char *dst, size_t dstlen)
{
	if (id < 0)
		return -EINVAL;
	int n = snprintf(dst, dstlen, BROKERS_DIR "/%" PRId32 "-%016" PRIx64 "-%016" PRIx64 ".gone",
			 id, inc.incarnation, inc.nonce);
	return n < 0 || (size_t)n >= dstlen ? -ENAMETOOLONG : 0;
}

/* Only letters, digits and a few separators go into a certificate or come
 * out of one into the log: it is written by another host. */
static void clean_word(char *dst, size_t dstlen, const char *src)
{
	size_t n = 0;
	for (; src && *src && n + 1 < dstlen; src++)
		dst[n++] = isalnum((unsigned char)*src) || strchr(" -_.:,()", *src) ? *src : '?';
	if (dstlen)
		dst[n] = 0;
}

int kcl_gone_write(sub_vfs *v, int32_t id, kcl_incarn inc, const char *by)
{
	return kcl_gone_write_how(v, id, inc, by, NULL);
}

int kcl_gone_write_how(sub_vfs *v, int32_t id, kcl_incarn inc, const char *by, const char *how)
{
	char path[96], body[200], b[KCL_GONE_BY_MAX + 1], h[KCL_GONE_HOW_MAX + 1];
	int rc = kcl_gone_path(id, inc, path, sizeof(path));
	if (rc)
		return rc;
	clean_word(b, sizeof(b), by);
	clean_word(h, sizeof(h), how);
	int n = h[0] ? snprintf(body, sizeof(body), "{\"version\":1,\"by\":\"%s\",\"how\":\"%s\"}", b, h)
		     : snprintf(body, sizeof(body), "{\"version\":1,\"by\":\"%s\"}", b);
	rc = sub_create_excl(v, path, body, (size_t)n);
	if (rc == -ENOENT && (rc = sub_mkdirs(v, BROKERS_DIR, 0755)) == 0)
		rc = sub_create_excl(v, path, body, (size_t)n);
	/* The name is the whole fact: an existing certificate says the same. */
	return rc == -EEXIST ? 0 : rc;
}

int kcl_gone_read(sub_vfs *v, int32_t id, kcl_incarn inc, char *by, size_t bylen, char *how,
		  size_t howlen)
{
	char path[96], err[160];
	char *buf = NULL;
	size_t len = 0;
	json_t *doc = NULL;
	int rc = kcl_gone_path(id, inc, path, sizeof(path));
	if (rc)
		return rc;
	snprintf(by, bylen, "?");
	snprintf(how, howlen, "%s", "");
	rc = sub_read_file(v, path, 1024, &buf, &len);
	if (rc == -ENOENT)
		return 0;
	if (rc == -EFBIG || rc == -E2BIG)
		return 1; /* the name is the fact; the content says nothing */
	if (rc)
		return rc;
	/* The content is informational: anything unreadable in it still leaves
	 * a certificate (an older writer left it empty). */
	char b[KCL_GONE_BY_MAX + 1], h[KCL_GONE_HOW_MAX + 1];
	if (len && kcl__parse(buf, len, path, &doc, err, sizeof(err)) == 0) {
		if (kcl__str(doc, "by", KCL_GONE_BY_MAX, 0, b, sizeof(b), err, sizeof(err)) == 0)
			clean_word(by, bylen, b);
		if (json_object_get(doc, "how") &&
		    kcl__str(doc, "how", KCL_GONE_HOW_MAX, 1, h, sizeof(h), err, sizeof(err)) == 0)
			clean_word(how, howlen, h);
	}
	json_decref(doc);
	free(buf);
	return 1;
}

int kcl_gone_parse_name(const char *name, int32_t *id, kcl_incarn *inc)
{
	uint64_t v[3] = {0, 0, 0};
	const char *p = name;
	for (int k = 0; k < 3; k++) {
		int base = k == 0 ? 10 : 16, nd = 0;
		for (;; p++, nd++) {
			int d = *p >= '0' && *p <= '9' ? *p - '0' : base == 16 && *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
			if (d < 0)
				break;
			if (nd >= (k == 0 ? 10 : 16))
				return -EINVAL;
			v[k] = v[k] * (uint64_t)base + (uint64_t)d;
		}
		if (nd == 0 || (k > 0 && nd != 16) || *p != (k < 2 ? '-' : '.'))
			return -EINVAL;
		p++;
	}
	if (strcmp(p, "gone") != 0 || v[0] > KCL_ID_MAX)
		return -EINVAL;
	*id = (int32_t)v[0];
	inc->incarnation = v[1];
	inc->nonce = v[2];
	return 0;
}

int kcl_gone_exists(sub_vfs *v, int32_t id, kcl_incarn inc)
{
	char path[96];
	sub_stat st;
	int rc = kcl_gone_path(id, inc, path, sizeof(path));
	if (rc)
		return rc;
	rc = sub_stat_path(v, path, &st);
	return rc == 0 ? 1 : rc == -ENOENT ? 0 : rc;
}

/* ---- the observer's view ---------------------------------------------------- */

void kcl_view_init(kcl_view *v, int64_t session_ms, int64_t now_ns)
{
	memset(v, 0, sizeof(*v));
	v->session_ns = session_ms * 1000000LL;
	v->started_ns = now_ns;
}

void kcl_view_free(kcl_view *v)
{
	free(v->peers);
	memset(v, 0, sizeof(*v));
}

static kcl_peer *find(const kcl_view *v, int32_t id, kcl_incarn inc)
{
	for (size_t i = 0; i < v->n; i++)
		if (v->peers[i].id == id && kcl_incarn_cmp(v->peers[i].inc, inc) == 0)
			return &v->peers[i];
	return NULL;
}

static kcl_peer *add(kcl_view *v, int32_t id, kcl_incarn inc)
{
	if (v->n == v->cap) {
		size_t nc = v->cap ? v->cap * 2 : 8;
		kcl_peer *np = realloc(v->peers, nc * sizeof(*np));
		if (!np)
			return NULL;
		v->peers = np;
		v->cap = nc;
	}
	kcl_peer *p = &v->peers[v->n++];
	memset(p, 0, sizeof(*p));
	p->id = id;
	p->inc = inc;
	return p;
}

static int terminal(const kcl_peer *p)
{
	return p->live == KCL_LIVE_EXPIRED || p->live == KCL_LIVE_GONE;
}

int kcl_view_observe(kcl_view *v, const kcl_hb *hb, int64_t read_start_ns, int64_t read_end_ns)
{
	/* What the new incarnation says of its predecessor holds for every
	 * observer: that lease ended before the new one first wrote. */
	if (hb->pred_how != KCL_PRED_NONE) {
		kcl_peer *pp = find(v, hb->id, hb->pred);
		if (!pp && !(pp = add(v, hb->id, hb->pred)))
			return -ENOMEM;
		pp->superseded = 1;
		if (!terminal(pp))
			pp->live = hb->pred_how == KCL_PRED_GONE ? KCL_LIVE_GONE : KCL_LIVE_EXPIRED;
	}
	kcl_peer *p = find(v, hb->id, hb->inc);
	if (!p) {
		if (!(p = add(v, hb->id, hb->inc)))
			return -ENOMEM;
		p->seq = hb->seq;
		p->changed_ns = read_end_ns;
		p->live = KCL_LIVE_ALIVE;
	} else if (hb->seq != p->seq) {
		/* Moved (a lower seq than before is a writer gone wrong; still a
		 * change, and change only ever delays a verdict). */
		p->seq = hb->seq;
		p->changed_ns = read_end_ns;
		if (!terminal(p))
			p->live = KCL_LIVE_ALIVE;
	} else if (!terminal(p) && read_start_ns - p->changed_ns >= v->session_ns) {
		p->live = KCL_LIVE_EXPIRED;
	}
	p->state = hb->state;
	p->released = hb->released;
	snprintf(p->endpoint, sizeof(p->endpoint), "%s", hb->endpoint);
	p->nlst = hb->nlst;
	memcpy(p->lst, hb->lst, sizeof(p->lst));
	snprintf(p->rack, sizeof(p->rack), "%s", hb->rack);
	/* Written only after its acknowledgement gate closed for good. */
	if (hb->state == KCL_ST_STOPPED || hb->state == KCL_ST_FENCED)
		p->live = KCL_LIVE_GONE;
	/* Every other incarnation of the id is older or newer than this one. */
	for (size_t i = 0; i < v->n; i++) {
		kcl_peer *q = &v->peers[i];
		if (q->id == hb->id && kcl_incarn_cmp(q->inc, hb->inc) < 0)
			q->superseded = 1;
	}
	for (size_t i = 0; i < v->n; i++) {
		kcl_peer *q = &v->peers[i];
		if (q->id == hb->id && kcl_incarn_cmp(q->inc, hb->inc) > 0) {
			p->superseded = 1;
			break;
		}
	}
	return 0;
}

void kcl_view_unreadable(kcl_view *v, int32_t id, int64_t read_end_ns)
{
	for (size_t i = 0; i < v->n; i++)
		if (v->peers[i].id == id && !terminal(&v->peers[i]))
			v->peers[i].changed_ns = read_end_ns;
}

void kcl_view_proven_gone(kcl_view *v, int32_t id, kcl_incarn inc)
{
	kcl_peer *p = find(v, id, inc);
	if (!p && !(p = add(v, id, inc)))
		return; /* not recorded: only a faster verdict is lost */
	p->live = KCL_LIVE_GONE;
}

const kcl_peer *kcl_view_get(const kcl_view *v, int32_t id, kcl_incarn inc)
{
	return find(v, id, inc);
}

const kcl_peer *kcl_view_current(const kcl_view *v, int32_t id)
{
	const kcl_peer *best = NULL;
	for (size_t i = 0; i < v->n; i++)
		if (v->peers[i].id == id && (!best || kcl_incarn_cmp(v->peers[i].inc, best->inc) > 0))
			best = &v->peers[i];
	return best;
}

int kcl_view_settled(const kcl_view *v, int64_t now_ns)
{
	return now_ns - v->started_ns >= v->session_ns;
}

int kcl_view_clear_for(const kcl_view *v, kcl_incarn self, int32_t self_id, kcl_gen moved_in,
		       int64_t now_ns)
{
	if (!kcl_view_settled(v, now_ns))
		return 0;
	for (size_t i = 0; i < v->n; i++) {
		const kcl_peer *p = &v->peers[i];
		if (p->id == self_id && kcl_incarn_cmp(p->inc, self) == 0)
			continue;
		if (terminal(p))
			continue;
		if (kcl_gen_cmp(p->released, moved_in) >= 0)
			continue;
		return 0;
	}
	return 1;
}

void kcl_view_prune(kcl_view *v)
{
	size_t w = 0;
	for (size_t i = 0; i < v->n; i++) {
		const kcl_peer *p = &v->peers[i];
		if (terminal(p) && p->superseded)
			continue;
		v->peers[w++] = *p;
	}
	v->n = w;
}
