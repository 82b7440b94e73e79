/*
 * token.c — abstract Unix socket liveness tokens (see token.h).
 */
#include "kaas/cluster/token.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int kcl_host_id(char *dst, size_t dstlen)
{
	char host[256] = "", boot[64] = "";
	struct stat st;
	if (gethostname(host, sizeof(host) - 1) != 0)
		return -errno;
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	if (!f)
		return -errno;
	int ok = fgets(boot, sizeof(boot), f) != NULL;
	fclose(f);
	if (!ok)
		return -EIO;
	boot[strcspn(boot, "\n")] = '\0';
	if (stat("/proc/self/ns/net", &st) != 0)
		return -errno;
	int n = snprintf(dst, dstlen, "%s/%s/netns:%llu", host, boot, (unsigned long long)st.st_ino);
	return n < 0 || (size_t)n >= dstlen ? -ENAMETOOLONG : 0;
}

static int token_addr(const char *key, int32_t id, kcl_incarn inc, struct sockaddr_un *a,
		      socklen_t *len)
{
	if (!key || id < 0)
		return -EINVAL;
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	/* sun_path[0] = 0: the abstract namespace, no file anywhere. */
	int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1,
			 "kaas/%.40s/%" PRId32 "/%016" PRIx64 "-%016" PRIx64, key, id, inc.incarnation,
			 inc.nonce);
	if (n < 0 || (size_t)n >= sizeof(a->sun_path) - 1)
		return -ENAMETOOLONG;
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
	return 0;
}

int kcl_token_hold(const char *cluster_key, int32_t id, kcl_incarn inc, int *fd_out)
{
	struct sockaddr_un a;
	socklen_t len;
	int rc = token_addr(cluster_key, id, inc, &a, &len);
	if (rc)
		return rc;
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&a, len) != 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	*fd_out = fd;
	return 0;
}

int kcl_token_probe(const char *cluster_key, int32_t id, kcl_incarn inc)
{
	struct sockaddr_un a;
	socklen_t len;
	int rc = token_addr(cluster_key, id, inc, &a, &len);
	if (rc)
		return rc;
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 1; /* no verdict: alive as far as we know */
	int c = connect(fd, (struct sockaddr *)&a, len);
	int e = errno;
	close(fd);
	if (c == 0)
		return 1;
	return e == ECONNREFUSED ? 0 : 1;
}
