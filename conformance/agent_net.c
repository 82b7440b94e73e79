/*
 * agent_net.c — what the agent and the driver share about the network:
 * HOST:PORT parsing, keepalives, and the host identity an actor reports.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conformance/agent.h"
#include "conformance/agent_int.h"

int kc_split_hostport(const char *s, char *host, size_t hostlen, char *port, size_t portlen)
{
	if (!s || !*s)
		return -EINVAL;
	const char *colon, *h = s, *hend;
	if (*s == '[') {
		const char *rb = strchr(s, ']');
		if (!rb || rb[1] != ':')
			return -EINVAL;
		h = s + 1;
		hend = rb;
		colon = rb + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon || strchr(s, ':') != colon)
			return -EINVAL; /* none, or an IPv6 address without brackets */
		hend = colon;
	}
	size_t hn = (size_t)(hend - h), pn = strlen(colon + 1);
	if (hn == 0 || hn >= hostlen || pn == 0 || pn >= portlen)
		return -EINVAL;
	for (size_t i = 0; i < pn; i++)
		if (colon[1 + i] < '0' || colon[1 + i] > '9')
			return -EINVAL;
	long p = 0;
	for (size_t i = 0; i < pn && p <= 65535; i++)
		p = p * 10 + (colon[1 + i] - '0');
	if (p < 1 || p > 65535)
		return -EINVAL;
	memcpy(host, h, hn);
	host[hn] = '\0';
	memcpy(port, colon + 1, pn);
	port[pn] = '\0';
	return 0;
}

int kc_tcp_keepalive(int fd, int idle_s)
{
	int one = 1, idle = idle_s, intvl = idle_s / 3 > 0 ? idle_s / 3 : 1, cnt = 3;
	unsigned int user_timeout = (unsigned int)idle_s * 2000u;
	if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) != 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) != 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl)) != 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt)) != 0 ||
	    /* Data that stays unacknowledged (the peer is gone while we send)
	     * ends the connection too; keepalive covers the idle case. */
	    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout)) != 0)
		return -errno;
	/* Barrier releases and small answers must not wait for Nagle. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}

void kc_host_id(char *buf, size_t len)
{
	char host[256] = "unknown", boot[64] = "";
	if (gethostname(host, sizeof(host) - 1) != 0)
		snprintf(host, sizeof(host), "unknown");
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (f) {
		if (!fgets(boot, sizeof(boot), f))
			boot[0] = '\0';
		fclose(f);
	}
	boot[strcspn(boot, "\n")] = '\0';
	struct stat st;
	unsigned long long netns = stat("/proc/self/ns/net", &st) == 0 ? (unsigned long long)st.st_ino : 0;
	snprintf(buf, len, "%s/%.8s/netns:%llu", host, boot[0] ? boot : "noboot", netns);
}
