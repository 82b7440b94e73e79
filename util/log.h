/*
 * log.h — one line per event on stderr: time, level, component, message.
 * KAAS_LOG_LEVEL (error|warn|info|debug) picks the threshold.
 */
#ifndef KAAS_LOG_H
#define KAAS_LOG_H

enum { KAAS_LOG_ERROR = 0, KAAS_LOG_WARN, KAAS_LOG_INFO, KAAS_LOG_DEBUG };

extern int kaas_log_level;

void kaas_log_init_from_env(void);
void kaas_log(int level, const char *component, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define KLOG_ERR(comp, ...) kaas_log(KAAS_LOG_ERROR, comp, __VA_ARGS__)
#define KLOG_WARN(comp, ...) kaas_log(KAAS_LOG_WARN, comp, __VA_ARGS__)
#define KLOG_INFO(comp, ...) kaas_log(KAAS_LOG_INFO, comp, __VA_ARGS__)
#define KLOG_DEBUG(comp, ...)                                  \
	do {                                                   \
		if (kaas_log_level >= KAAS_LOG_DEBUG)          \
			kaas_log(KAAS_LOG_DEBUG, comp, __VA_ARGS__); \
	} while (0)

#endif
