/*
 * agent_int.h — internals shared by agent.c, agent_client.c and
 * agent_net.c.
 */
#ifndef KC_AGENT_INT_H
#define KC_AGENT_INT_H

#include <stddef.h>

/* "host:port" or "[v6]:port" into its parts.  0 or -EINVAL. */
int kc_split_hostport(const char *s, char *host, size_t hostlen, char *port, size_t portlen);

#endif
