/*
 * acl_int.h — what acl.c and acl_store.c share: a host's canonical text and
 * the principal check, both as CreateAcls and the files use them.
 */
#ifndef KAAS_CORE_ACL_INT_H
#define KAAS_CORE_ACL_INT_H

#include <stddef.h>

/* "*" or an IP address in its canonical text (IPv4-mapped IPv6 as IPv4);
 * [brackets] around IPv6 are dropped.  0 or -EINVAL. */
int kb__acl_host_norm(const char *h, size_t n, char *out, size_t outlen);
/* "Type:name", both parts non-empty, UTF-8, at most KB_ACL_PRINCIPAL_MAX. */
int kb__acl_principal_ok(const char *p, size_t n);

#endif
