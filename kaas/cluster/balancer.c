/*
 * balancer.c — even, sticky, rack-aware placement of partitions and shards
 * (see balancer.h).
 */
#include "kaas/cluster/balancer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct item {
	int32_t prev_leader; /* -1 when the previous holder does not hold it any more */
	int32_t prev_epoch;
	int32_t floor;
	int32_t group;       /* topic index (spread within it across racks) */
	kcl_slot *out;
} item;

typedef struct pool {
	size_t nb;           /* eligible brokers, by id */
	const kcl_bbroker **b;
	int *rack;           /* rack index per eligible broker */
	size_t nracks;
	size_t *rack_size;
	size_t *count;       /* slots placed per broker */
	size_t *target;
	size_t *gcount;      /* slots of the current group per broker */
	size_t *grack;       /* slots of the current group per rack */
	int keep_all;        /* nobody eligible: leave every slot on its live holder */
} pool;

static int cmp_broker(const void *a, const void *b)
{
	const kcl_bbroker *x = *(const kcl_bbroker *const *)a, *y = *(const kcl_bbroker *const *)b;
	return x->id < y->id ? -1 : x->id > y->id;
}

static int cmp_topic(const void *a, const void *b)
{
	const kcl_btopic *x = *(const kcl_btopic *const *)a, *y = *(const kcl_btopic *const *)b;
	return strcmp(x->name, y->name);
}

static const char *rack_of(const kcl_bbroker *b)
{
	return b->rack ? b->rack : "";
}

static long find_broker(const pool *p, int32_t id)
{
	size_t lo = 0, hi = p->nb;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->b[mid]->id == id)
			return (long)mid;
		if (p->b[mid]->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* Shares: floor(n/b) each, one more for the n % b brokers that already hold
 * the most (then lowest id): the fewest moves. */
static int set_targets(pool *p, const item *it, size_t n)
{
	if (p->nb == 0)
		return 0;
	if (p->keep_all) {
		for (size_t i = 0; i < p->nb; i++)
			p->target[i] = (size_t)-1;
		return 0;
	}
	size_t *held = calloc(p->nb, sizeof(*held));
	size_t *order = calloc(p->nb, sizeof(*order));
	if (!held || !order) {
		free(held);
		free(order);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		long k = it[i].prev_leader >= 0 ? find_broker(p, it[i].prev_leader) : -1;
		if (k >= 0)
			held[k]++;
	}
	/* rank of each broker within its rack (brokers are by id): the extras
	 * of a tie go round the racks, not all to the first one */
	size_t *rank = calloc(p->nb, sizeof(*rank));
	if (!rank) {
		free(held);
		free(order);
		return -ENOMEM;
	}
	for (size_t i = 0; i < p->nb; i++)
		for (size_t j = 0; j < i; j++)
			rank[i] += p->rack[j] == p->rack[i];
	for (size_t i = 0; i < p->nb; i++)
		order[i] = i;
	/* insertion sort by (held desc, rank asc, id asc): nb is small */
	for (size_t i = 1; i < p->nb; i++) {
		size_t x = order[i], j = i;
		while (j > 0) {
			size_t y = order[j - 1];
			int after = held[y] < held[x] ||
				    (held[y] == held[x] && (rank[y] > rank[x] || (rank[y] == rank[x] && y > x)));
			if (!after)
				break;
			order[j] = y;
			j--;
		}
		order[j] = x;
	}
	free(rank);
	size_t base = n / p->nb, extra = n % p->nb;
	for (size_t i = 0; i < p->nb; i++)
		p->target[order[i]] = base + (i < extra ? 1 : 0);
	free(held);
	free(order);
	return 0;
}

/* The broker for a slot that moves: least-loaded rack for its group (per
 * broker in the rack), then fewest of the group, then fewest overall, then
 * lowest id; only brokers below their share. */
static size_t choose(const pool *p)
{
	long best = -1;
	for (size_t i = 0; i < p->nb; i++) {
		if (p->count[i] >= p->target[i])
			continue;
		if (best < 0) {
			best = (long)i;
			continue;
		}
		size_t bi = (size_t)best;
		int ri = p->rack[i], rb = p->rack[bi];
		if (ri != rb) {
			/* grack[ri]/size[ri] vs grack[rb]/size[rb] */
			size_t l = p->grack[ri] * p->rack_size[rb], r = p->grack[rb] * p->rack_size[ri];
			if (l != r) {
				if (l < r)
					best = (long)i;
				continue;
			}
		}
		if (p->gcount[i] != p->gcount[bi]) {
			if (p->gcount[i] < p->gcount[bi])
				best = (long)i;
			continue;
		}
		if (p->count[i] != p->count[bi]) {
			if (p->count[i] < p->count[bi])
				best = (long)i;
			continue;
		}
		/* ids ascending: the earlier index wins ties */
	}
	return (size_t)best;
}

static void place(pool *p, item *it, size_t n, size_t *moved, size_t *kept, size_t *unled)
{
	if (p->nb == 0) {
		for (size_t i = 0; i < n; i++) {
			it[i].out->leader = -1;
			it[i].out->epoch = it[i].prev_epoch > it[i].floor ? it[i].prev_epoch : it[i].floor;
			if (it[i].out->epoch < 0)
				it[i].out->epoch = 0;
			(*unled)++;
		}
		return;
	}
	memset(p->count, 0, p->nb * sizeof(*p->count));
	/* Keep what may stay. */
	for (size_t i = 0; i < n; i++) {
		it[i].out->leader = -1;
		long k = it[i].prev_leader >= 0 ? find_broker(p, it[i].prev_leader) : -1;
		if (k >= 0 && p->count[k] < p->target[k] && it[i].prev_epoch >= 1 &&
		    it[i].prev_epoch > it[i].floor) {
			p->count[k]++;
			it[i].out->leader = it[i].prev_leader;
			it[i].out->epoch = it[i].prev_epoch;
			(*kept)++;
		}
	}
	/* Move the rest, one group at a time (items of a group are contiguous). */
	for (size_t s = 0; s < n;) {
		size_t e = s;
		while (e < n && it[e].group == it[s].group)
			e++;
		memset(p->gcount, 0, p->nb * sizeof(*p->gcount));
		memset(p->grack, 0, p->nracks * sizeof(*p->grack));
		for (size_t i = s; i < e; i++)
			if (it[i].out->leader >= 0) {
				long k = find_broker(p, it[i].out->leader);
				p->gcount[k]++;
				p->grack[p->rack[k]]++;
			}
		for (size_t i = s; i < e; i++) {
			if (it[i].out->leader >= 0)
				continue;
			size_t k = choose(p);
			int32_t base = it[i].prev_epoch > it[i].floor ? it[i].prev_epoch : it[i].floor;
			it[i].out->leader = p->b[k]->id;
			it[i].out->epoch = (base < 0 ? 0 : base) + 1;
			p->count[k]++;
			p->gcount[k]++;
			p->grack[p->rack[k]]++;
			(*moved)++;
		}
		s = e;
	}
}

/* The previous holder of a slot, if it still holds it: the same id with the
 * same incarnation as the previous assignment recorded. */
static int32_t holder(const kcl_assign *prev, const kcl_slot *ps, const kcl_bbroker *const *live,
		      size_t nlive)
{
	if (!prev || !ps || ps->leader < 0)
		return -1;
	const kcl_abroker *pb = kcl_assign_broker(prev, ps->leader);
	if (!pb)
		return -1;
	for (size_t i = 0; i < nlive; i++)
		if (live[i]->id == ps->leader)
			return kcl_incarn_cmp(live[i]->inc, pb->inc) == 0 ? ps->leader : -1;
	return -1;
}

int kcl_balance(const kcl_binput *in, kcl_assign *out, kcl_bstats *stats)
{
	kcl_bstats st = {0};
	pool p = {0};
	const kcl_bbroker **all = NULL;
	const kcl_btopic **tops = NULL;
	const char **racks = NULL;
	item *it = NULL;
	size_t total = 0;
	int rc = -EINVAL;
	memset(out, 0, sizeof(*out));
	if (in->nshards < 0 || in->nshards > KCL_SHARDS_MAX || in->nbrokers > KCL_BROKERS_MAX)
		return -EINVAL;
	rc = -ENOMEM;
	all = calloc(in->nbrokers ? in->nbrokers : 1, sizeof(*all));
	tops = calloc(in->ntopics ? in->ntopics : 1, sizeof(*tops));
	if (!all || !tops)
		goto out;
	for (size_t i = 0; i < in->nbrokers; i++)
		all[i] = &in->brokers[i];
	qsort(all, in->nbrokers, sizeof(*all), cmp_broker);
	for (size_t i = 0; i < in->ntopics; i++)
		tops[i] = &in->topics[i];
	qsort(tops, in->ntopics, sizeof(*tops), cmp_topic);
	rc = -EINVAL;
	for (size_t i = 0; i < in->nbrokers; i++)
		if (all[i]->id < 0 || (i && all[i]->id == all[i - 1]->id))
			goto out;
	for (size_t i = 0; i < in->ntopics; i++) {
		if (!tops[i]->name || tops[i]->partitions < 1 || tops[i]->partitions > KCL_PARTS_MAX ||
		    (i && strcmp(tops[i]->name, tops[i - 1]->name) == 0))
			goto out;
		total += (size_t)tops[i]->partitions;
	}
	if (total > KCL_TOTAL_PARTS_MAX)
		goto out;

	/* Eligible brokers: the non-draining ones, else whoever is left. */
	rc = -ENOMEM;
	p.b = calloc(in->nbrokers ? in->nbrokers : 1, sizeof(*p.b));
	p.rack = calloc(in->nbrokers ? in->nbrokers : 1, sizeof(*p.rack));
	racks = calloc(in->nbrokers ? in->nbrokers : 1, sizeof(*racks));
	p.rack_size = calloc(in->nbrokers ? in->nbrokers : 1, sizeof(*p.rack_size));
	p.grack = calloc(in->nbrokers ? in->nbrokers : 1, sizeof(*p.grack));
	p.count = calloc(in->nbrokers ? in->nbrokers : 1, sizeof(*p.count));
	p.target = calloc(in->nbrokers ? in->nbrokers : 1, sizeof(*p.target));
	p.gcount = calloc(in->nbrokers ? in->nbrokers : 1, sizeof(*p.gcount));
	if (!p.b || !p.rack || !racks || !p.rack_size || !p.grack || !p.count || !p.target || !p.gcount)
		goto out;
	for (size_t i = 0; i < in->nbrokers; i++)
		if (!all[i]->draining)
			p.b[p.nb++] = all[i];
	if (p.nb == 0) {
		for (size_t i = 0; i < in->nbrokers; i++)
			p.b[p.nb++] = all[i];
		p.keep_all = 1;
	}
	for (size_t i = 0; i < p.nb; i++) {
		size_t r = 0;
		while (r < p.nracks && strcmp(racks[r], rack_of(p.b[i])) != 0)
			r++;
		if (r == p.nracks)
			racks[p.nracks++] = rack_of(p.b[i]);
		p.rack[i] = (int)r;
		p.rack_size[r]++;
	}

	if ((rc = kcl_assign_alloc(out, in->nbrokers, in->ntopics, in->nshards)))
		goto out;
	out->gen = in->gen;
	out->controller = in->controller;
	for (size_t i = 0; i < in->nbrokers; i++) {
		out->brokers[i].id = all[i]->id;
		out->brokers[i].inc = all[i]->inc;
	}
	size_t nit = total > (size_t)in->nshards ? total : (size_t)in->nshards;
	it = calloc(nit ? nit : 1, sizeof(*it));
	if (!it) {
		rc = -ENOMEM;
		goto out;
	}

	/* Partitions. */
	size_t k = 0;
	for (size_t t = 0; t < in->ntopics; t++) {
		const kcl_btopic *bt = tops[t];
		if ((rc = kcl_atopic_alloc(&out->topics[t], bt->name, bt->topic_id, bt->partitions)))
			goto out;
		out->ntopics = t + 1;
		const kcl_atopic *pt = in->prev ? kcl_assign_topic(in->prev, bt->name) : NULL;
		/* Another incarnation of the name keeps nothing but its epochs. */
		int same = pt && (!bt->topic_id || !*bt->topic_id || !pt->topic_id[0] ||
				  strcmp(pt->topic_id, bt->topic_id) == 0);
		for (int32_t q = 0; q < bt->partitions; q++, k++) {
			const kcl_slot *ps = pt && q < pt->n ? &pt->parts[q] : NULL;
			it[k].prev_leader = same ? holder(in->prev, ps, all, in->nbrokers) : -1;
			it[k].prev_epoch = ps ? ps->epoch : 0;
			it[k].floor = bt->epoch_floor ? bt->epoch_floor[q] : 0;
			it[k].group = (int32_t)t;
			it[k].out = &out->topics[t].parts[q];
		}
	}
	if ((rc = set_targets(&p, it, total)))
		goto out;
	place(&p, it, total, &st.moved_parts, &st.kept_parts, &st.unled);

	/* Shards: one group. */
	for (int32_t s = 0; s < in->nshards; s++) {
		const kcl_slot *ps = in->prev && s < in->prev->nshards ? &in->prev->shards[s] : NULL;
		it[s].prev_leader = holder(in->prev, ps, all, in->nbrokers);
		it[s].prev_epoch = ps ? ps->epoch : 0;
		it[s].floor = 0;
		it[s].group = 0;
		it[s].out = &out->shards[s];
	}
	if ((rc = set_targets(&p, it, (size_t)in->nshards)))
		goto out;
	place(&p, it, (size_t)in->nshards, &st.moved_shards, &st.kept_shards, &st.unled);
	rc = 0;
out:
	if (rc)
		kcl_assign_free(out);
	else if (stats)
		*stats = st;
	free(it);
	free(all);
	free(tops);
	free(racks);
	free(p.b);
	free(p.rack);
	free(p.rack_size);
	free(p.grack);
	free(p.count);
	free(p.target);
	free(p.gcount);
	return rc;
}

/* ---- the inputs' digest ------------------------------------------------------------- */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 1099511628211ULL;
	return h;
}

static uint64_t fnv_str(uint64_t h, const char *s)
{
	h = fnv(h, s ? s : "", s ? strlen(s) : 0);
	return fnv(h, "", 1); /* the terminator: "ab"+"c" is not "a"+"bc" */
}

static uint64_t fnv_i64(uint64_t h, int64_t x)
{
	return fnv(h, &x, sizeof(x));
}

/* Items are hashed one by one and combined by addition, so the order of
 * the arrays does not matter. */
uint64_t kcl_balance_sig(const kcl_binput *in)
{
	const uint64_t basis = 1469598103934665603ULL;
	uint64_t h = basis, sum = 0;
	h = fnv_i64(h, in->nshards);
	h = fnv_i64(h, in->gen.controller_epoch);
	h = fnv_i64(h, in->controller);
	h = fnv_i64(h, in->prev ? in->prev->gen.controller_epoch : 0);
	h = fnv_i64(h, in->prev ? in->prev->gen.generation : 0);
	h = fnv_i64(h, (int64_t)in->nbrokers);
	h = fnv_i64(h, (int64_t)in->ntopics);
	for (size_t i = 0; i < in->nbrokers; i++) {
		const kcl_bbroker *b = &in->brokers[i];
		uint64_t x = fnv_i64(basis ^ 0xb0, b->id);
		x = fnv_i64(x, (int64_t)b->inc.incarnation);
		x = fnv_i64(x, (int64_t)b->inc.nonce);
		x = fnv_i64(x, !!b->draining);
		x = fnv_str(x, b->rack);
		sum += x;
	}
	for (size_t i = 0; i < in->ntopics; i++) {
		const kcl_btopic *t = &in->topics[i];
		uint64_t x = fnv_str(basis ^ 0x70, t->name);
		x = fnv_str(x, t->topic_id);
		x = fnv_i64(x, t->partitions);
		sum += x;
	}
	return fnv_i64(h, (int64_t)sum);
}
