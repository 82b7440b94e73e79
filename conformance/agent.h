/*
 * agent.h — actors on other hosts: `kaas-conform agent` serves one driver at
 * a time over TCP; `kaas-conform check --agent HOST:PORT ...` drives them.
 *
 * The wire is the actor protocol of actor.h, unchanged (one JSON message per
 * line), preceded by one greeting line from the agent:
 *
 *   {"ev":"agent","protocol":2,"version":"...","root":"<URL>",
 *    "host":"<hostname>","host_id":"<hostname>/<boot id>/netns:<inode>"}
 *   {"ev":"refused","reason":"busy"|"protocol","error":"..."}   then close
 *
 * After the greeting the agent is an ordinary actor: "hello" (without a URL
 * it opens the agent's --root), steps, barriers ("ready"/"go"), "stop",
 * "crash" (the session dies like a crashed client; the agent lives on and
 * accepts the driver's reconnect), "bye".  Each driver connection gets a
 * session process of its own that keeps its files open between steps until
 * the driver leaves; while it lives, other drivers are refused.  Keepalives
 * on both ends end a session whose peer vanished without closing.
 */
#ifndef KC_AGENT_H
#define KC_AGENT_H

#include <stddef.h>

#include "conformance/driver.h"

#define KC_AGENT_DEFAULT_KEEPALIVE_S 10
#define KC_AGENT_CONNECT_TIMEOUT_MS 10000

/* `kaas-conform agent --listen ADDR:PORT --root URL [--keepalive SECONDS]`
 * (argv[0] is "agent").  Runs until SIGTERM/SIGINT; returns an exit status. */
int kc_cmd_agent(int argc, char **argv);

/* Driver side: connects to n agents, one actor each (actor i = addrs[i]),
 * and says hello.  0, or -errno with d->err naming the agent and why (not
 * listening, refused because another driver is connected, protocol). */
int kc_drv_connect_agents(kc_driver *d, const char *const *addrs, int n);

/* Reconnects the actor slot of an agent whose session ended (after
 * kc_drv_crash), waiting a little for the agent to notice, and says hello. */
int kc_drv_reconnect_agent(kc_driver *d, int ai);

/* Sets TCP keepalive (idle, then 3 probes at idle/3) and a matching
 * TCP_USER_TIMEOUT on a connected socket, so a peer that vanished without
 * closing is noticed within about 2 * idle_s.  0 or -errno. */
int kc_tcp_keepalive(int fd, int idle_s);

/* Which machine and network this process runs in:
 * "<hostname>/<first 8 hex digits of the boot id>/netns:<inode>".  Actors in
 * different network namespaces of one machine share its kernel (same boot
 * id), and with it any kernel NFS mount. */
void kc_host_id(char *buf, size_t len);

#endif
