/*
 * crc32c.h — CRC-32C (Castagnoli), the checksum of Kafka v2 record batches and
 * of every kaas binary file.  Backed by ISA-L, which uses the SSE4.2/PCLMUL
 * instructions where the CPU has them.
 */
#ifndef KAAS_CRC32C_H
#define KAAS_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Extends a running CRC: start with crc = 0, feed pieces in order. */
uint32_t ku_crc32c(uint32_t crc, const void *buf, size_t len);

#endif
