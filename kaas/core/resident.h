/*
 * resident.h — page-cache residency of file ranges a Fetch answer will
 * stream with sendfile(2) on the event loop.
 *
 * The loop thread must never wait for the disk: sendfile of a page that is
 * not in memory (or is still being read) blocks until it is there.  A
 * worker therefore calls kb_make_resident() on every range before handing
 * the answer to the loop.
 */
#ifndef KAAS_SERVER_RESIDENT_H
#define KAAS_SERVER_RESIDENT_H

#include <stdint.h>

/* Returns once every page of [pos, pos + len) of kernel descriptor fd is in
 * the page cache and filled: 0, or a negative errno when reading it failed.
 * Waits for the disk as needed: call it on a worker. */
int kb_make_resident(int fd, uint64_t pos, uint64_t len);

#endif
