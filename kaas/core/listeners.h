/*
 * listeners.h — the parser behind the listener settings (broker.h has the
 * public kb_listeners_resolve): one list of NAME://HOST:PORT entries.
 */
#ifndef KAAS_CORE_LISTENERS_H
#define KAAS_CORE_LISTENERS_H

#include <stddef.h>

#include "kaas/core/broker.h"

/* Fills out[0..*n) with the names, hosts and ports of a comma-separated
 * list; protocol is set for names that are protocols, else -1.  At least one
 * entry, at most KB_MAX_LISTENERS, names unique.  0 or -1 with why. */
int kb__listener_list_parse(const char *s, kb_listener *out, int *n, char *why, size_t whylen);

#endif
