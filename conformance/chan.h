/*
 * chan.h — the driver <-> actor channel: JSON messages over a byte stream.
 *
 * One message per line (compact JSON never contains a raw newline), at most
 * KC_CHAN_MAX bytes.  The same framing runs over the socketpair of a forked
 * actor and over the TCP connection of a remote agent, so an actor's executor
 * (actor.h) does not know which one it serves.  The message vocabulary is in
 * docs/conformance.md ("Actor protocol").
 */
#ifndef KC_CHAN_H
#define KC_CHAN_H

#include <jansson.h>
#include <stddef.h>

#define KC_CHAN_MAX (1u << 20)

typedef struct kc_chan {
	int fd;
	char *buf;
	size_t len, cap;
	int eof;
} kc_chan;

#define KC_CHAN_INIT {.fd = -1}

void kc_chan_init(kc_chan *c, int fd);
/* Frees the buffer and closes the descriptor; safe to repeat. */
void kc_chan_close(kc_chan *c);

/* Writes one message (blocking).  0 or -errno (-EPIPE when the peer is gone). */
int kc_chan_send(kc_chan *c, const json_t *msg);

/* Takes one complete message out of the buffer without reading: 0 and *msg,
 * -EAGAIN when none is complete, -EBADMSG / -EMSGSIZE on a malformed stream,
 * -EPIPE when the buffer is empty and the peer closed. */
int kc_chan_pop(kc_chan *c, json_t **msg);

/* One read() into the buffer: >0 bytes read, -EAGAIN, -EPIPE at end of
 * stream, -errno. */
int kc_chan_fill(kc_chan *c);

/* Waits up to timeout_ms (-1: forever, 0: poll) for one message:
 * 0, -ETIMEDOUT, -EPIPE, -EBADMSG, -EMSGSIZE, -EINTR (a signal arrived). */
int kc_chan_recv(kc_chan *c, json_t **msg, int timeout_ms);

/* Builds and sends a message from a json_pack format; the built value is
 * released. */
int kc_chan_sendf(kc_chan *c, const char *fmt, ...);

#endif
