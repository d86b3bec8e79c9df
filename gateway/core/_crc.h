/*
 * CRC register updates for the C accelerators, raw (no initial or final inversion: the caller
 * adds them): CRC-32C for the record stream's checksum (_stuffing.h) and the bloom filter's
 * first hash (lsm/_bloom.c), in hardware when the CPU has SSE4.2; the slice-by-8 loop and its
 * tables for any reflected polynomial (the bloom's CRC-32, zlib's, fills its own). Every
 * function is static: each including module gets its own copy and calls crc_init() once from
 * its PyInit.
 */
#ifndef GATEWAY_CRC_H
#define GATEWAY_CRC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Fills the slice-by-8 tables of the reflected polynomial `poly`: t[0] the byte-at-a-time
 * table, t[k][i] the register after byte i and k zero bytes. */
static inline void
crc_fill(uint32_t t[8][256], uint32_t poly)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ poly : c >> 1;
		t[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int k = 1; k < 8; k++)
			t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFF];
}

/* The register of tables t after p[0..n), from crc: eight bytes a step, then bytes. */
static inline uint32_t
crc_slice8(const uint32_t t[8][256], uint32_t crc, const uint8_t *p, size_t n)
{
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		w ^= crc;
		crc = t[7][w & 0xFF] ^ t[6][(w >> 8) & 0xFF] ^ t[5][(w >> 16) & 0xFF] ^
		    t[4][(w >> 24) & 0xFF] ^ t[3][(w >> 32) & 0xFF] ^ t[2][(w >> 40) & 0xFF] ^
		    t[1][(w >> 48) & 0xFF] ^ t[0][w >> 56];
		p += 8;
		n -= 8;
	}
	while (n--)
		crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xFF];
	return crc;
}

static uint32_t crc_table[8][256]; /* CRC-32C */

/* Raw CRC-32C update (no inversions), slicing-by-8. */
static uint32_t
crc_sw(uint32_t crc, const uint8_t *p, size_t n)
{
	return crc_slice8(crc_table, crc, p, n);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <nmmintrin.h>
__attribute__((target("sse4.2"))) static uint32_t
crc_hw(uint32_t crc, const uint8_t *p, size_t n)
{
	uint64_t c = crc;
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		c = _mm_crc32_u64(c, w);
		p += 8;
		n -= 8;
	}
	crc = (uint32_t)c;
	while (n--)
		crc = _mm_crc32_u8(crc, *p++);
	return crc;
}
#define HAVE_CRC_HW 1
#endif

/* Raw CRC-32C update: crc_sw, or crc_hw once crc_init() found SSE4.2. */
static uint32_t (*crc_update)(uint32_t, const uint8_t *, size_t) = crc_sw;

/* Fills the CRC-32C tables and picks the hardware CRC when the CPU has it. */
static void
crc_init(void)
{
	crc_fill(crc_table, 0x82F63B78u);
#ifdef HAVE_CRC_HW
	__builtin_cpu_init();
	if (__builtin_cpu_supports("sse4.2"))
		crc_update = crc_hw;
#endif
}

#endif /* GATEWAY_CRC_H */
