/*
 * h_acls.c — CreateAcls, DescribeAcls and DeleteAcls, v0-v3 (flexible from
 * v2), served by every broker over the bindings of kaas/core/acl.h.
 *
 * As in Kafka: with no authorizer configured each answers SECURITY_DISABLED;
 * creating and deleting need ALTER on the cluster, describing DESCRIBE
 * (CLUSTER_AUTHORIZATION_FAILED otherwise, and nothing is read or written).
 * v0 knows only LITERAL patterns: a v0 creation is LITERAL, a v0 filter
 * matches LITERAL bindings only.  A creation Kafka would refuse (an UNKNOWN
 * or ANY field, an empty name, a CLUSTER not named kafka-cluster, a
 * principal that is not Type:name) gets INVALID_REQUEST with Kafka's
 * message, as do DELEGATION_TOKEN and USER resources, which kaas has not,
 * and hosts that are neither "*" nor an IP address (they could never match
 * a connection).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/core/acl.h"
#include "kaas/core/broker.h"
#include "kaas/net/handlers.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

#define NO_AUTHORIZER "No Authorizer is configured on the broker"

static kb_acl *authorizer(kb_req *req)
{
	return req->broker ? req->broker->acl : NULL;
}

int kn_h_create_acls(kb_req *req, kw_rd *body, kw_wr *resp)
{
	int16_t v = req->api_version;
	int flex = v >= 2;
	kb_acl *a = authorizer(req);
	int32_t n;
	KRD_ARRAY(body, flex, 9, &n);
	int allowed = a && kb_authorize_cluster(req, KB_OP_ALTER);
	kw_wr_i32(resp, 0); /* throttle_time_ms */
	kw_wr_array(resp, flex, n < 0 ? 0 : n);
	for (int32_t i = 0; i < n; i++) {
		int8_t rtype, pattern = KB_PAT_LITERAL, op, perm;
		kw_str name, principal, host;
		KRD_I8(body, &rtype);
		KRD_STR(body, flex, &name);
		if (v >= 1)
			KRD_I8(body, &pattern);
		KRD_STR(body, flex, &principal);
		KRD_STR(body, flex, &host);
		KRD_I8(body, &op);
		KRD_I8(body, &perm);
		KRD_TAGS(body, flex);
		int16_t err = KERR_NONE;
		char why[256] = "";
		kb_acl_binding b;
		if (!a) {
			err = KERR_SECURITY_DISABLED;
			snprintf(why, sizeof(why), NO_AUTHORIZER);
		} else if (!allowed) {
			err = KERR_CLUSTER_AUTHORIZATION_FAILED;
			snprintf(why, sizeof(why), "Cluster authorization failed.");
		} else if (kb_acl_binding_make(&b, rtype, pattern, name.s, name.len < 0 ? 0 : (size_t)name.len,
					       principal.s, principal.len < 0 ? 0 : (size_t)principal.len, host.s,
					       host.len < 0 ? 0 : (size_t)host.len, op, perm, why, sizeof(why))) {
			err = KERR_INVALID_REQUEST;
		} else {
			int rc = kb_acl_create(a, &b);
			if (rc) {
				err = KERR_UNKNOWN_SERVER_ERROR;
				snprintf(why, sizeof(why), "writing the ACL failed: %s", sub_strerror(rc));
				KLOG_WARN("acl", "%s: CreateAcls: %s", req->peer, why);
			} else {
				KLOG_INFO("acl", "%s (%s) created ACL %s %s %s:%s:%s for %s from %s", req->peer,
					  req->principal ? req->principal : "?", kb_acl_perm_name(b.perm),
					  kb_acl_op_name(b.op), kb_acl_rtype_name(b.rtype),
					  kb_acl_pattern_name(b.pattern), b.name, b.principal, b.host);
			}
		}
		kw_wr_i16(resp, err);
		kw_wr_str(resp, flex, err == KERR_NONE ? NULL : why);
		kw_wr_tags(resp, flex);
	}
	KRD_TAGS(body, flex);
	kw_wr_tags(resp, flex);
	return KAAS_HANDLED;
err_parse:
	return -EBADMSG;
}

/* One filter of DescribeAcls or DeleteAcls; strings are slices of the frame. */
static int read_filter(kw_rd *body, int16_t v, int flex, kb_acl_filter *f)
{
	kw_str name, principal, host;
	memset(f, 0, sizeof(*f));
	f->pattern = KB_PAT_LITERAL;
	KRD_I8(body, &f->rtype);
	KRD_STR(body, flex, &name);
	if (v >= 1)
		KRD_I8(body, &f->pattern);
	KRD_STR(body, flex, &principal);
	KRD_STR(body, flex, &host);
	KRD_I8(body, &f->op);
	KRD_I8(body, &f->perm);
	if (name.len >= 0) {
		f->name = name.s ? name.s : "";
		f->name_len = (size_t)name.len;
	}
	if (principal.len >= 0) {
		f->principal = principal.s ? principal.s : "";
		f->principal_len = (size_t)principal.len;
	}
	if (host.len >= 0) {
		f->host = host.s ? host.s : "";
		f->host_len = (size_t)host.len;
	}
	return 0;
err_parse:
	return -EBADMSG;
}

static int same_resource(const kb_acl_binding *x, const kb_acl_binding *y)
{
	return x->rtype == y->rtype && x->pattern == y->pattern && strcmp(x->name, y->name) == 0;
}

static int by_resource(const void *pa, const void *pb)
{
	const kb_acl_binding *x = pa, *y = pb;
	if (x->rtype != y->rtype)
		return x->rtype - y->rtype;
	if (x->pattern != y->pattern)
		return x->pattern - y->pattern;
	int c = strcmp(x->name, y->name);
	if (c)
		return c;
	if ((c = strcmp(x->principal, y->principal)))
		return c;
	if ((c = strcmp(x->host, y->host)))
		return c;
	return x->op != y->op ? x->op - y->op : x->perm - y->perm;
}

int kn_h_describe_acls(kb_req *req, kw_rd *body, kw_wr *resp)
{
	int16_t v = req->api_version;
	int flex = v >= 2;
	kb_acl *a = authorizer(req);
	kb_acl_filter f;
	if (read_filter(body, v, flex, &f))
		goto err_parse;
	KRD_TAGS(body, flex);
	kw_wr_i32(resp, 0); /* throttle_time_ms */
	char why[160];
	kb_acl_binding *list = NULL;
	size_t n = 0;
	int16_t err = KERR_NONE;
	if (!a) {
		err = KERR_SECURITY_DISABLED;
		snprintf(why, sizeof(why), NO_AUTHORIZER);
	} else if (!kb_authorize_cluster(req, KB_OP_DESCRIBE)) {
		err = KERR_CLUSTER_AUTHORIZATION_FAILED;
		snprintf(why, sizeof(why), "Cluster authorization failed.");
	} else if (kb_acl_filter_check(&f, why, sizeof(why))) {
		err = KERR_INVALID_REQUEST;
	} else if (kb_acl_describe(a, &f, &list, &n)) {
		return -ENOMEM;
	}
	kw_wr_i16(resp, err);
	kw_wr_str(resp, flex, err == KERR_NONE ? NULL : why);
	qsort(list, n, sizeof(*list), by_resource);
	int32_t nres = 0;
	for (size_t i = 0; i < n; i++)
		nres += i == 0 || !same_resource(&list[i - 1], &list[i]);
	kw_wr_array(resp, flex, nres);
	for (size_t i = 0; i < n;) {
		size_t j = i;
		while (j < n && same_resource(&list[i], &list[j]))
			j++;
		kw_wr_i8(resp, list[i].rtype);
		kw_wr_str(resp, flex, list[i].name);
		if (v >= 1)
			kw_wr_i8(resp, list[i].pattern);
		kw_wr_array(resp, flex, (int32_t)(j - i));
		for (size_t k = i; k < j; k++) {
			kw_wr_str(resp, flex, list[k].principal);
			kw_wr_str(resp, flex, list[k].host);
			kw_wr_i8(resp, list[k].op);
			kw_wr_i8(resp, list[k].perm);
			kw_wr_tags(resp, flex);
		}
		kw_wr_tags(resp, flex);
		i = j;
	}
	kw_wr_tags(resp, flex);
	free(list);
	return KAAS_HANDLED;
err_parse:
	return -EBADMSG;
}

int kn_h_delete_acls(kb_req *req, kw_rd *body, kw_wr *resp)
{
	int16_t v = req->api_version;
	int flex = v >= 2;
	kb_acl *a = authorizer(req);
	int32_t n;
	KRD_ARRAY(body, flex, 9, &n);
	int allowed = a && kb_authorize_cluster(req, KB_OP_ALTER);
	kw_wr_i32(resp, 0); /* throttle_time_ms */
	kw_wr_array(resp, flex, n < 0 ? 0 : n);
	for (int32_t i = 0; i < n; i++) {
		kb_acl_filter f;
		if (read_filter(body, v, flex, &f))
			goto err_parse;
		KRD_TAGS(body, flex);
		char why[160];
		kb_acl_binding *gone = NULL;
		size_t ngone = 0;
		int16_t err = KERR_NONE;
		if (!a) {
			err = KERR_SECURITY_DISABLED;
			snprintf(why, sizeof(why), NO_AUTHORIZER);
		} else if (!allowed) {
			err = KERR_CLUSTER_AUTHORIZATION_FAILED;
			snprintf(why, sizeof(why), "Cluster authorization failed.");
		} else if (kb_acl_filter_check(&f, why, sizeof(why))) {
			err = KERR_INVALID_REQUEST;
		} else {
			int rc = kb_acl_delete(a, &f, &gone, &ngone);
			if (rc == -ENOMEM && !gone)
				return -ENOMEM;
			if (rc) {
				err = KERR_UNKNOWN_SERVER_ERROR;
				snprintf(why, sizeof(why), "removing ACLs failed after %zu: %s", ngone, sub_strerror(rc));
				KLOG_WARN("acl", "%s: DeleteAcls: %s", req->peer, why);
			}
			for (size_t k = 0; k < ngone; k++)
				KLOG_INFO("acl", "%s (%s) deleted ACL %s %s %s:%s:%s for %s from %s", req->peer,
					  req->principal ? req->principal : "?", kb_acl_perm_name(gone[k].perm),
					  kb_acl_op_name(gone[k].op), kb_acl_rtype_name(gone[k].rtype),
					  kb_acl_pattern_name(gone[k].pattern), gone[k].name, gone[k].principal,
					  gone[k].host);
		}
		kw_wr_i16(resp, err);
		kw_wr_str(resp, flex, err == KERR_NONE ? NULL : why);
		kw_wr_array(resp, flex, (int32_t)ngone);
		for (size_t k = 0; k < ngone; k++) {
			kw_wr_i16(resp, KERR_NONE);
			kw_wr_str(resp, flex, NULL);
			kw_wr_i8(resp, gone[k].rtype);
			kw_wr_str(resp, flex, gone[k].name);
			if (v >= 1)
				kw_wr_i8(resp, gone[k].pattern);
			kw_wr_str(resp, flex, gone[k].principal);
			kw_wr_str(resp, flex, gone[k].host);
			kw_wr_i8(resp, gone[k].op);
			kw_wr_i8(resp, gone[k].perm);
			kw_wr_tags(resp, flex);
		}
		kw_wr_tags(resp, flex);
		free(gone);
	}
	KRD_TAGS(body, flex);
	kw_wr_tags(resp, flex);
	return KAAS_HANDLED;
err_parse:
	return -EBADMSG;
}
