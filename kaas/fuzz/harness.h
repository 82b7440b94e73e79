/*
 * harness.h — an in-process kaas broker for the fuzz targets: the real topic
 * registry, partition table, coordinator and dispatch table on a scratch
 * directory, with the network server replaced by a few lines (a worker pool
 * for deferred work, timers cut short so that long polls and rebalances end
 * quickly, and a completion that hands the answer back to the caller).
 *
 * fz_request() does for one request frame what the server does between
 * reading it and writing the answer: header, dispatch-table lookup, version
 * check, handler, deferred completion.  It aborts on a broken handler
 * contract (a parse failure with no field named, an answer that ran out of
 * memory, a request completed twice), so the fuzzer reports it like a crash.
 */
#ifndef KAAS_PROTO_FUZZ_HARNESS_H
#define KAAS_PROTO_FUZZ_HARNESS_H

#include <stddef.h>
#include <stdint.h>

/* Starts the broker (once; later calls return 0).  0 or -errno. */
int fz_broker_open(void);

/* Stops it: answers parked requests, relinquishes partitions, removes the
 * scratch directory.  Safe to call when not open. */
void fz_broker_close(void);

/* Runs one request (header + body, without the size prefix).  A deferred
 * answer is waited for up to wait_ms; one that comes later is freed when it
 * comes.  Returns the handler's result, or 1 when the server would not have
 * dispatched the frame (short header, unknown API). */
int fz_request(const uint8_t *frame, size_t len, int wait_ms);

/* Requests handled since fz_broker_open(); a restart every so many keeps a
 * long fuzzing run from piling up topics and groups. */
uint64_t fz_requests(void);

#endif
