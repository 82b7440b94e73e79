/*
 * group_int.h — what the two halves of the consumer-group protocol share:
 * group.c (the state machine, its members and the answers it sends) and
 * group_api.c (JoinGroup, SyncGroup, Heartbeat, LeaveGroup).  Private to
 * kaas/coord/; every function here runs with c->mu held.
 */
#ifndef KAAS_GROUP_INT_H
#define KAAS_GROUP_INT_H

#include "kaas/coord/coord_int.h"

/* A JoinGroup request as read off the wire (its strings point into it). */
typedef struct kg_join_req {
	kw_str group_id;
	int32_t session_timeout;
	int32_t rebalance_timeout;
	kw_str member_id;
	kw_str instance_id;
	kw_str protocol_type;
	int32_t nprotos;
	kw_str *pnames;
	kw_bytes *pmetas;
} kg_join_req;

/* ---- members ------------------------------------------------------------------ */

kg_member *kg__member_by_instance(kg_group *g, kw_str inst);
/* The group and member a SyncGroup or Heartbeat names (loading the group),
 * or the error to answer: UNKNOWN_MEMBER_ID for a group or member that is
 * not there, FENCED_INSTANCE_ID for a static member's older incarnation. */
int16_t kg__named_member(kg_coord *c, kw_str gid, kw_str member_id, kw_str inst, kg_group **g,
			 kg_member **m);
kg_pending *kg__pending_find(kg_group *g, kw_str id);
void kg__pending_remove(kg_group *g, kg_pending *p);
/* "<prefix>-<uuid4>", as Kafka builds member ids.  0 or -errno. */
int kg__new_member_id(kw_str prefix, kg_str *out);
int kg__member_set_protocols(kg_member *m, const kg_join_req *r);
int kg__member_same_protocols(const kg_member *m, const kg_join_req *r);
int kg__group_supports_protocols(const kg_group *g, const kg_join_req *r);

/* ---- answers ------------------------------------------------------------------ */

void kg__enc_join_error(kw_wr *w, int16_t v, int16_t err, kw_str member_id);
/* The answer to a member's JoinGroup for the current generation. */
void kg__enc_join_current(kw_wr *w, int16_t v, const kg_group *g, const kg_member *m);
void kg__enc_sync(kw_wr *w, int16_t v, int16_t err, const uint8_t *a, int32_t alen);
/* Answer a parked JoinGroup / SyncGroup of m, if there is one. */
void kg__answer_join_error(kg_member *m, int16_t err, kg_outbox *ob);
void kg__answer_sync(kg_member *m, int16_t err, kg_outbox *ob);

/* ---- transitions -------------------------------------------------------------- */

/* PreparingRebalance ends when every member has rejoined (and no handed-out
 * member id is still expected). */
void kg__group_try_complete_join(kg_coord *c, kg_group *g, int64_t now, kg_outbox *ob);
/* A member (re)joined: start a rebalance, or see whether the one under way
 * is complete. */
void kg__group_maybe_rebalance(kg_coord *c, kg_group *g, int64_t now, kg_outbox *ob);
/* Leave, session expiry, fencing: the member goes; the group rebalances. */
void kg__group_remove_member(kg_coord *c, kg_group *g, kg_member *m, int64_t now, kg_outbox *ob);

/* The invariants of one group, asserted (KAAS_ASSERT) after every change:
 * the member and pending counts match their lists, an Empty group has no
 * members, a parked JoinGroup exists only while PreparingRebalance and a
 * parked SyncGroup (or an assignment being written) only while
 * CompletingRebalance. */
void kg__group_check(const kg_group *g);

#endif
