/*
 * fuzz_sasl.c — fuzz target: a SASL exchange as a client drives it (sasl.c,
 * scram.c).  The first byte picks the mechanism (PLAIN, SCRAM-SHA-256,
 * SCRAM-SHA-512) and the handshake version; then up to four tokens, each
 * a 2-byte big-endian length and its bytes, are fed in order while the
 * exchange asks for more.  The store holds RFC 7677's user ("user",
 * "pencil") for both SCRAM hashes and the server nonce is fixed, so the
 * RFC's messages authenticate and mutations of them reach the proof check.
 * Checked: an authenticated exchange names the store's user; a failure
 * asks for the connection to close; whatever the tokens, freeing the
 * exchange at any point leaves nothing behind (ASan's leak check).
 *
 * Built like fuzz_request.c: libFuzzer's main for `make fuzz`, or the
 * replay main over kaas/fuzz/corpus/sasl/ as a unit test.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/fuzz/replay.h"
#include "kaas/net/sasl.h"

static kb_user the_user;

static int lookup(void *arg, const char *name, kb_user *out, char *why, size_t whylen)
{
	(void)arg;
	(void)why;
	(void)whylen;
	if (strcmp(name, the_user.name) != 0)
		return -2; /* -ENOENT */
	*out = the_user;
	return 0;
}

static void init_user(void)
{
	static const uint8_t salt[16] = {0x5b, 0x6d, 0x99, 0x68, 0x9d, 0x12, 0x35, 0x8e,
					 0xec, 0xa0, 0x4b, 0x14, 0x12, 0x36, 0xfa, 0x81};
	if (the_user.name[0])
		return;
	snprintf(the_user.name, sizeof(the_user.name), "user");
	for (int m = 0; m < KB_SCRAM_N; m++)
		if (kb_scram_derive(m, "pencil", 6, salt, sizeof(salt), 4096, &the_user.scram[m]))
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	init_user();
	kn_sasl_env env;
	memset(&env, 0, sizeof(env));
	env.enabled[0] = env.enabled[1] = env.enabled[2] = 1;
	env.lookup = lookup;
	env.snonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
	int mech = data[0] % 3, version = (data[0] >> 2) & 1;
	static const char *const names[] = {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"};
	kn_sasl *x = kn_sasl_new();
	if (!x)
		return 0;
	if (kn_sasl_handshake(x, &env, version, names[mech], strlen(names[mech])) != 0)
		abort();
	size_t p = 1;
	for (int i = 0; i < 4 && p + 2 <= size; i++) {
		size_t n = (size_t)data[p] << 8 | data[p + 1];
		p += 2;
		if (n > size - p)
			n = size - p;
		uint8_t *tok = malloc(n ? n : 1); /* exact size: overreads are caught */
		memcpy(tok, data + p, n);
		p += n;
		uint8_t *out = NULL;
		size_t ol = 0;
		char msg[300];
		int rc = kn_sasl_step(x, &env, tok, n, &out, &ol, msg, sizeof(msg));
		free(tok);
		free(out);
		if (rc == 1 && strcmp(x->user, "user") != 0) {
			fprintf(stderr, "fuzz_sasl: authenticated as '%s'\n", x->user);
			abort();
		}
		if (rc < 0 && !x->close_after) {
			fprintf(stderr, "fuzz_sasl: a failure (%d) that keeps the connection\n", rc);
			abort();
		}
		if (rc != 0)
			break;
	}
	kn_sasl_free(x);
	return 0;
}

#ifndef KAAS_LIBFUZZER
int main(int argc, char **argv)
{
	return fz_replay_main(argc, argv, "kaas/fuzz/corpus/sasl", LLVMFuzzerTestOneInput);
}
#endif
