/*
 * clock.h — time sources.  Liveness and timeouts use the monotonic clock of
 * the host that measures them; wall time is only ever stamped into records
 * and reports, never compared across hosts.
 */
#ifndef KAAS_CLOCK_H
#define KAAS_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t ku_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline int64_t ku_mono_ms(void) { return ku_mono_ns() / 1000000LL; }

static inline int64_t ku_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000LL + ts.tv_nsec / 1000000LL;
}

#endif
