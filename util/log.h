/*
 * log.h — one line per event on stderr: time, level, component, message.
 * KAAS_LOG_LEVEL (error|warn|info|debug) picks the threshold.
 */
#ifndef KAAS_LOG_H
#define KAAS_LOG_H

enum { KAAS_LOG_ERROR = 0, KAAS_LOG_WARN, KAAS_LOG_INFO, KAAS_LOG_DEBUG };

extern int ku_log_level;

void ku_log_init_from_env(void);
void ku_log(int level, const char *component, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define KLOG_ERR(comp, ...) ku_log(KAAS_LOG_ERROR, comp, __VA_ARGS__)
#define KLOG_WARN(comp, ...) ku_log(KAAS_LOG_WARN, comp, __VA_ARGS__)
#define KLOG_INFO(comp, ...) ku_log(KAAS_LOG_INFO, comp, __VA_ARGS__)
#define KLOG_DEBUG(comp, ...)                                  \
	do {                                                   \
		if (ku_log_level >= KAAS_LOG_DEBUG)          \
			ku_log(KAAS_LOG_DEBUG, comp, __VA_ARGS__); \
	} while (0)

#endif
