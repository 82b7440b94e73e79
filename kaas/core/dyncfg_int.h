/*
 * dyncfg_int.h — private to dyncfg.c and dynkeys.c: the version files'
 * names and codec.
 */
#ifndef KAAS_CORE_DYNCFG_INT_H
#define KAAS_CORE_DYNCFG_INT_H

#include <stddef.h>
#include <stdint.h>

#include "kaas/core/dyncfg.h"

#define DYN_DIR "configs/brokers"
#define DYN_FORMAT 1
#define DYN_FILE_MAX 16384
#define DYN_SEQ_DIGITS 20
#define DYN_SEQ_MAX 1000000000000000000LL /* names above are not ours: never written, never read */
#define NONCE_LEN 16

/* The numeric value of dynamic key k in c (booleans and enums 0/1). */
int64_t kb__dyn_field(const kb_config *c, int k);
/* "configs/brokers/default" or "configs/brokers/<id>"; "default" or "<id>". */
void kb__dyn_entity_dir(char *dst, size_t len, int32_t entity);
void kb__dyn_entity_name(char *dst, size_t len, int32_t entity);
/* "<seq:020>.json" -> seq in 1..DYN_SEQ_MAX, else -1 (not a version name). */
int64_t kb__dyn_seq_of_name(const char *n);
/* kb__dyn_parse, also giving the writer's id and nonce (either may be NULL). */
int kb__dyn_parse_full(const char *buf, size_t len, int32_t entity, int64_t seq, kb_dyn_set *s,
		       int32_t *writer, char nonce[NONCE_LEN + 1], char *why, size_t whylen);
/* The JSON text of a version (malloc'd), NULL out of memory. */
char *kb__dyn_encode(int32_t entity, int64_t seq, const kb_dyn_set *s, int32_t writer, const char *nonce);

#endif
