/*
 * balancer.h — the controller's pure placement function.
 *
 * (live brokers with racks, topics with partition counts, shard count,
 *  previous assignment) -> next assignment, with:
 *   - even spread: every eligible broker leads floor(n/b) or ceil(n/b)
 *     partitions, and likewise shards (partitions and shards are spread
 *     separately);
 *   - minimal movement: a slot stays where it is while its leader is
 *     eligible, is the same incarnation the previous assignment named and
 *     is within its share; only the excess of over-full brokers and the
 *     slots of departed ones move, so a join moves about n/(b+1) slots and
 *     a leave exactly the leaver's;
 *   - racks: a slot that moves goes to the rack that leads the fewest of
 *     its topic's partitions per broker, then to the broker with the fewest
 *     of them, so a topic's leaders spread across racks;
 *   - epochs: a slot keeps its epoch while it stays and gets
 *     max(previous epoch, floor) + 1 whenever its leader (or the leader's
 *     incarnation) changes; a slot nobody can lead keeps its epoch with
 *     leader -1;
 *   - deterministic: the same input gives the same output, whatever the
 *     order of the input arrays.
 * Draining brokers are not eligible (their slots move away first) unless no
 * broker is eligible, in which case the live draining ones keep leading.
 */
#ifndef KAAS_CLUSTER_BALANCER_H
#define KAAS_CLUSTER_BALANCER_H

#include <stddef.h>
#include <stdint.h>

#include "kaas/cluster/assignment.h"
#include "kaas/cluster/member.h"

typedef struct kcl_bbroker {
	int32_t id;
	kcl_incarn inc;
	const char *rack;    /* NULL or "" when none */
	int draining;
} kcl_bbroker;

typedef struct kcl_btopic {
	const char *name;
	const char *topic_id;       /* NULL or "" when unknown */
	int32_t partitions;
	const int32_t *epoch_floor; /* NULL, or per partition: the next epoch must exceed it
				     * (the highest epoch on disk, for partitions an earlier
				     * single-broker run led) */
} kcl_btopic;

typedef struct kcl_binput {
	const kcl_bbroker *brokers; /* live brokers, any order, ids unique */
	size_t nbrokers;
	const kcl_btopic *topics;   /* any order, names unique */
	size_t ntopics;
	int32_t nshards;
	const kcl_assign *prev;     /* NULL when there is none */
	kcl_gen gen;                /* of the result */
	int32_t controller;
} kcl_binput;

typedef struct kcl_bstats {
	size_t moved_parts, moved_shards; /* slots whose leader changed (epoch bumped) */
	size_t kept_parts, kept_shards;
	size_t unled;                     /* slots with no leader */
} kcl_bstats;

/* Fills *out (free with kcl_assign_free).  0, -EINVAL for invalid input
 * (duplicate ids or names, bad counts), -ENOMEM. */
int kcl_balance(const kcl_binput *in, kcl_assign *out, kcl_bstats *stats);

/* A digest of everything kcl_balance reads except epoch floors and the
 * result's generation number: brokers (id, incarnation, rack, draining),
 * topics (name, ID, partition count), shard count, the previous
 * assignment's generation, the controller epoch and id.  Independent of
 * the order of the arrays.  Equal digests and an assignment found right
 * the last time mean a balance would change nothing: the controller skips
 * it (floors only matter for topics new to the previous assignment, which
 * change the digest when they appear). */
uint64_t kcl_balance_sig(const kcl_binput *in);

#endif
