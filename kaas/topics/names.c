/*
 * names.c — topic names and topic IDs.
 *
 * A topic name becomes a directory name on the data volume and a file name
 * in the registry, so the check runs before anything touches either volume:
 * Kafka's alphabet has no '/', and "." and ".." are refused, so a valid name
 * can never leave its parent directory.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "kaas/topics/tconfig.h"
#include "util/hex.h"
#include "kaas/proto/kerr.h"

static int legal_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
	       c == '_' || c == '-';
}

int16_t kt_topic_name_check(const char *name, int32_t len, char *msg, size_t msglen)
{
	if (!name || len <= 0) {
		snprintf(msg, msglen, "Topic name is illegal, it can't be empty");
		return KERR_INVALID_TOPIC_EXCEPTION;
	}
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.')) {
		snprintf(msg, msglen, "Topic name cannot be \".\" or \"..\"");
		return KERR_INVALID_TOPIC_EXCEPTION;
	}
	if (len > KAAS_TOPIC_NAME_MAX) {
		snprintf(msg, msglen, "Topic name is illegal, it can't be longer than %d characters, topic name "
			 "has %d characters", KAAS_TOPIC_NAME_MAX, (int)len);
		return KERR_INVALID_TOPIC_EXCEPTION;
	}
	for (int32_t i = 0; i < len; i++) {
		if (!legal_char((unsigned char)name[i])) {
			snprintf(msg, msglen, "Topic name contains a character other than ASCII alphanumerics, '.', "
				 "'_' and '-' (at position %d)", (int)i);
			return KERR_INVALID_TOPIC_EXCEPTION;
		}
	}
	return KERR_NONE;
}

int kt_topic_names_collide(const char *a, const char *b)
{
	for (; *a && *b; a++, b++) {
		char x = *a == '.' ? '_' : *a, y = *b == '.' ? '_' : *b;
		if (x != y)
			return 0;
	}
	return *a == *b;
}

static void id_format(const uint8_t b[16], char out[KAAS_TOPIC_ID_LEN + 1])
{
	size_t j = 0;
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[j++] = '-';
		out[j++] = ku_hex_char(b[i] >> 4);
		out[j++] = ku_hex_char(b[i]);
	}
	out[j] = '\0';
}

int kt_topic_id_new(char out[KAAS_TOPIC_ID_LEN + 1], uint8_t bytes[16])
{
	uint8_t b[16];
	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		return -EIO;
	/* Version 4, RFC 4122 variant: never Kafka's reserved all-zero or
	 * "one" UUIDs. */
	b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
	b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
	memcpy(bytes, b, 16);
	id_format(b, out);
	return 0;
}

int kt_topic_id_parse(const char *s, char out[KAAS_TOPIC_ID_LEN + 1], uint8_t bytes[16])
{
	uint8_t b[16];
	if (!s || strlen(s) != KAAS_TOPIC_ID_LEN)
		return -EINVAL;
	size_t j = 0;
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10) {
			if (s[j++] != '-')
				return -EINVAL;
		}
		if (ku_hex_decode(s + j, 1, &b[i]))
			return -EINVAL;
		j += 2;
	}
	int zero = 1;
	for (int i = 0; i < 16; i++)
		zero &= b[i] == 0;
	if (zero)
		return -EINVAL;
	if (bytes)
		memcpy(bytes, b, 16);
	if (out)
		id_format(b, out);
	return 0;
}
