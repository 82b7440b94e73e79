/*
 * log.c — stderr logging.  One fprintf per line so lines from several threads
 * do not interleave mid-line.
 */
#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int ku_log_level = KAAS_LOG_INFO;

void ku_log_init_from_env(void)
{
	const char *s = getenv("KAAS_LOG_LEVEL");
	if (!s)
		return;
	if (strcmp(s, "error") == 0)
		ku_log_level = KAAS_LOG_ERROR;
	else if (strcmp(s, "warn") == 0)
		ku_log_level = KAAS_LOG_WARN;
	else if (strcmp(s, "info") == 0)
		ku_log_level = KAAS_LOG_INFO;
	else if (strcmp(s, "debug") == 0)
		ku_log_level = KAAS_LOG_DEBUG;
}

void ku_log(int level, const char *component, const char *fmt, ...)
{
	static const char *names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
	if (level > ku_log_level)
		return;
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s: %s\n", tm.tm_year + 1900,
		tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
		names[level < 0 ? 0 : level > 3 ? 3 : level], component, msg);
}
