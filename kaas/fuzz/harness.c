/*
 * harness.c — the in-process broker of harness.h.
 *
 * Start-up follows kaas/main.c (volumes, topic registry, partition table,
 * coordinator) without the qualification gate and without sockets.  The
 * server operations are replaced: work and timers go to a kn_pool (as in
 * the server), timers are cut to at most TIMER_CAP_MS so that a long poll or
 * a JoinGroup waiting for absent members ends within the fuzz run, and the
 * completion of a deferred request either wakes the caller or, if the caller
 * stopped waiting, frees the request.
 */
#include "kaas/fuzz/harness.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "kaas/coord/coord.h"
#include "kaas/proto/header.h"
#include "kaas/core/broker.h"
#include "kaas/net/pool.h"
#include "kaas/core/ptable.h"
#include "kaas/net/server.h"
#include "kaas/core/splice.h"
#include "kaas/topics/admin.h"
#include "kaas/topics/topics.h"
#include "util/log.h"

#define TIMER_CAP_MS 20
#define DRAIN_WAIT_MS 30000

typedef struct fz_req {
	kb_req pub; /* first: handlers get &pub */
	uint8_t *frame;
	kw_wr resp;
	int completed;
	int abandoned;
	pthread_cond_t cv;
} fz_req;

static struct {
	int open;
	char dir[256];
	kb_broker b;
	kn_pool *pool;
	kb_server_ops ops;
	pthread_mutex_t mu; /* completions, outstanding */
	pthread_cond_t idle;
	int outstanding;    /* requests handed to a handler and not completed */
	uint64_t requests;
} H = {.mu = PTHREAD_MUTEX_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER};

/* The file ranges a Fetch spliced into its answer must lie inside their
 * files: the server would sendfile() them. */
static void check_splices(const fz_req *r)
{
	const struct kb_splices *s = r->pub.splices;
	static __thread uint8_t buf[1 << 16];
	for (int i = 0; s && i < s->n; i++) {
		const kb_splice *sp = &s->v[i];
		uint64_t pos = sp->pos, left = sp->len;
		while (left > 0) {
			size_t n = left < sizeof(buf) ? (size_t)left : sizeof(buf);
			ssize_t got = pread(sp->fd, buf, n, (off_t)pos);
			if (got <= 0) {
				fprintf(stderr, "fuzz harness: %s v%d: spliced range [%llu, +%u) of fd %d is not readable (%zd)\n",
					r->pub.api_key == 1 ? "Fetch" : "api", r->pub.api_version,
					(unsigned long long)sp->pos, sp->len, sp->fd, got);
				abort();
			}
			pos += (uint64_t)got;
			left -= (uint64_t)got;
		}
	}
}

static void fz_req_free(fz_req *r)
{
	check_splices(r);
	kw_wr_free(&r->resp);
	pthread_cond_destroy(&r->cv);
	kb_splices_free(r->pub.splices);
	free(r->frame);
	free(r);
}

static void op_complete(void *server, kb_req *req, kw_wr *resp)
{
	(void)server;
	fz_req *r = (fz_req *)req;
	pthread_mutex_lock(&H.mu);
	if (r->completed) {
		fprintf(stderr, "fuzz harness: api %d v%d completed twice\n", req->api_key, req->api_version);
		abort();
	}
	r->completed = 1;
	if (resp->oom) {
		fprintf(stderr, "fuzz harness: api %d v%d: deferred answer ran out of memory\n", req->api_key,
			req->api_version);
		abort();
	}
	kw_wr_free(&r->resp);
	r->resp = *resp;
	memset(resp, 0, sizeof(*resp));
	H.outstanding--;
	int abandoned = r->abandoned;
	pthread_cond_broadcast(&r->cv);
	pthread_cond_broadcast(&H.idle);
	pthread_mutex_unlock(&H.mu);
	if (abandoned)
		fz_req_free(r);
}

static int op_run(void *server, kb_work_fn fn, void *arg)
{
	(void)server;
	return kn_pool_run(H.pool, fn, arg);
}

static kb_timer *op_timer_start(void *server, int64_t delay_ms, kb_work_fn fn, void *arg)
{
	(void)server;
	return kn_pool_timer(H.pool, delay_ms < TIMER_CAP_MS ? delay_ms : TIMER_CAP_MS, fn, arg);
}

static int op_timer_cancel(void *server, kb_timer *t)
{
	(void)server;
	return kn_pool_timer_cancel(H.pool, t);
}

static int ensure_topic(const char *name, int32_t partitions)
{
	kt_topic_spec spec;
	memset(&spec, 0, sizeof(spec));
	spec.name.s = name;
	spec.name.len = (int32_t)strlen(name);
	spec.partitions = partitions;
	spec.replication_factor = 1;
	char msg[256];
	int16_t err = kt_topics_create(H.b.topics, &spec, 0, NULL, msg, sizeof(msg));
	return err == 0 || err == 36 /* TOPIC_ALREADY_EXISTS */ ? 0 : -EIO;
}

int fz_broker_open(void)
{
	if (H.open)
		return 0;
	/* Partitions hold descriptors; a fuzzer creates many. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (!getenv("KAAS_LOG_LEVEL"))
		setenv("KAAS_LOG_LEVEL", "error", 0);
	ku_log_init_from_env();
	snprintf(H.dir, sizeof(H.dir), "%s/kaas-fuzz-XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	if (!mkdtemp(H.dir))
		return -errno;

	kb_broker *b = &H.b;
	memset(b, 0, sizeof(*b));
	kb_config_defaults(&b->cfg);
	b->cfg.group_initial_rebalance_delay_ms = 0;
	b->cfg.trust_unqualified = 1;
	b->cfg.num_partitions = 2;
	b->id = b->cfg.broker_id;
	b->host = "127.0.0.1";
	b->port = 9092;
	snprintf(b->cluster_id, sizeof(b->cluster_id), "fuzz-cluster");
	char err[512], path[512];
	int rc = sub_open_url(H.dir, &b->data, err, sizeof(err));
	if (!rc)
		rc = sub_mkdirs(b->data, "__cluster", 0755);
	snprintf(path, sizeof(path), "%s/__cluster", H.dir);
	if (!rc)
		rc = sub_open_url(path, &b->cluster, err, sizeof(err));
	if (rc)
		goto fail;

	kt_topics_options to;
	kt_topics_options_init(&to);
	to.cluster = b->cluster;
	to.data = b->data;
	to.defaults = b->cfg.log;
	to.num_partitions = b->cfg.num_partitions;
	to.default_replication_factor = b->cfg.default_replication_factor;
	to.reserved_name = "__cluster";
	kt_topics_ptable_hooks(b, &to.hooks);
	if ((rc = kt_topics_open(&to, &b->topics)) || (rc = kb_ptable_create(b, &b->parts)) ||
	    (rc = kb_ptable_start(b->parts, NULL, 0)))
		goto fail;
	if ((rc = kn_pool_create(4, &H.pool)))
		goto fail;
	H.ops = (kb_server_ops){op_complete, op_run, op_timer_start, op_timer_cancel};
	b->ops = &H.ops;
	b->server = &H;
	if ((rc = kg_coord_open(b, &b->coord)))
		goto fail;
	/* The topic the seed corpus names, so produce/fetch reach a partition. */
	if ((rc = ensure_topic("kreq", 2)))
		goto fail;
	H.open = 1;
	H.requests = 0;
	return 0;
fail:
	H.open = 1;
	fz_broker_close();
	return rc < 0 ? rc : -EIO;
}

void fz_broker_close(void)
{
	if (!H.open)
		return;
	kb_broker *b = &H.b;
	b->stopping = 1;
	if (b->coord)
		kg_coord_drain(b->coord);
	if (b->parts)
		kb_ptable_wake_all(b->parts);
	/* Every request handed to a handler is answered before anything closes. */
	pthread_mutex_lock(&H.mu);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += DRAIN_WAIT_MS / 1000;
	while (H.outstanding > 0)
		if (pthread_cond_timedwait(&H.idle, &H.mu, &until) == ETIMEDOUT)
			break;
	int left = H.outstanding;
	pthread_mutex_unlock(&H.mu);
	if (left > 0) {
		fprintf(stderr, "fuzz harness: %d deferred request(s) never answered\n", left);
		abort();
	}
	kg_coord_close(b->coord);
	b->coord = NULL;
	if (b->parts)
		kb_ptable_shutdown(b->parts);
	if (H.pool) {
		kn_pool_stop(H.pool);
		kn_pool_destroy(H.pool);
		H.pool = NULL;
	}
	kt_topics_close(b->topics);
	b->topics = NULL;
	kb_ptable_destroy(b->parts);
	b->parts = NULL;
	sub_destroy(b->cluster);
	b->cluster = NULL;
	if (b->data) {
		sub_remove_tree(b->data, "");
		sub_destroy(b->data);
		b->data = NULL;
	}
	rmdir(H.dir);
	H.open = 0;
}

uint64_t fz_requests(void) { return H.requests; }

int fz_request(const uint8_t *data, size_t len, int wait_ms)
{
	kw_rd rd;
	kw_req_header h;
	fz_req *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	/* An exact-size copy, so that reading past the frame is caught. */
	r->frame = malloc(len ? len : 1);
	if (!r->frame) {
		free(r);
		return -ENOMEM;
	}
	memcpy(r->frame, data, len);
	pthread_cond_init(&r->cv, NULL);
	H.requests++;

	kw_rd_init(&rd, r->frame, len);
	if (kw_req_header_prefix(&rd, &h)) {
		fz_req_free(r);
		return 1;
	}
	const kw_api *api = kw_api_find(kn_dispatch_table, kn_dispatch_table_len, h.api_key);
	if (!api || !api->handler) {
		fz_req_free(r);
		return 1;
	}
	kw_wr w = KAAS_WR_INIT;
	if (h.api_version < api->min || h.api_version > api->max) {
		/* What the server answers: UNSUPPORTED_VERSION. */
		if (api->key == KAAS_API_API_VERSIONS)
			kw_api_versions_write(&w, h.api_version, 35, kn_dispatch_table, kn_dispatch_table_len);
		else
			kw_wr_i16(&w, 35);
		kw_wr_free(&w);
		fz_req_free(r);
		return 0;
	}
	int flex = kw_api_flexible(api, h.api_version);
	if (kw_req_header_rest(&rd, flex, &h)) {
		fz_req_free(r);
		return 1;
	}
	r->pub.broker = &H.b;
	r->pub.api_key = h.api_key;
	r->pub.api_version = h.api_version;
	r->pub.correlation_id = h.correlation_id;
	r->pub.client_id = h.client_id;
	r->pub.flex = flex;
	r->pub.conn_id = H.requests;
	r->pub.peer = "127.0.0.1:40000";
	pthread_mutex_lock(&H.mu);
	H.outstanding++;
	pthread_mutex_unlock(&H.mu);

	int rc = api->handler(&r->pub, &rd, &w);
	if (rc == -EBADMSG && !rd.err) {
		fprintf(stderr, "fuzz harness: %s v%d: parse failure without a field name\n", api->name,
			h.api_version);
		abort();
	}
	if (rc != KAAS_DEFERRED) {
		if (rc == KAAS_HANDLED && w.oom) {
			fprintf(stderr, "fuzz harness: %s v%d: answer ran out of memory\n", api->name, h.api_version);
			abort();
		}
		kw_wr_free(&w);
		pthread_mutex_lock(&H.mu);
		H.outstanding--;
		pthread_cond_broadcast(&H.idle);
		pthread_mutex_unlock(&H.mu);
		fz_req_free(r);
		return rc;
	}
	kw_wr_free(&w);
	/* Deferred: wait a while; a later answer frees the request itself. */
	pthread_mutex_lock(&H.mu);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += wait_ms / 1000;
	until.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	while (!r->completed)
		if (pthread_cond_timedwait(&r->cv, &H.mu, &until) == ETIMEDOUT)
			break;
	int done = r->completed;
	if (!done)
		r->abandoned = 1;
	pthread_mutex_unlock(&H.mu);
	if (done)
		fz_req_free(r);
	return rc;
}
