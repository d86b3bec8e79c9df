/*
 * The stuffed record stream's encoder and decoder core (CRC-32C, word stuffing, one record),
 * shared by the C accelerators that write or read records: gateway.core._recordstream (the
 * stream itself) and gateway.core.lsm._block (whole runs of SSTable data blocks). Every
 * function is static: each including module gets its own copy and calls stuffing_init()
 * once from its PyInit. records.py and stuffing.py are the specification; the format is in
 * docs/formats/record-stream.md:
 *
 *   record  = stuff(crc:u32le | generation:u32le | payload) FE FD
 *   crc     = CRC-32C, initial state 0, no final inversion, over the unstuffed record with
 *             the crc field set to FF FF FF FF
 *   stuff   = runs of literals, each preceded by its length (first: 1 byte <= 252, later:
 *             2 bytes little-endian radix 253 <= 64008); a run shorter than its maximum is
 *             implicitly followed by FE FD; the input is implicitly followed by one FE FD.
 */
#ifndef GATEWAY_STUFFING_H
#define GATEWAY_STUFFING_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_crc.h"

#define RADIX 253u
#define MAX_INITIAL_RUN (RADIX - 1)
#define MAX_REMAINING_RUN (RADIX * RADIX - 1)
#define HEADER_SIZE 8

/* ---------------------------------------------------------------- CRC-32C: _crc.h */

/* CRC of the unstuffed record `rec` (n >= 8 bytes) with its crc field read as FF FF FF FF. */
static inline uint32_t
record_crc(const uint8_t *rec, size_t n)
{
	static const uint8_t fill[4] = { 0xFF, 0xFF, 0xFF, 0xFF };
	return crc_update(crc_update(0, fill, 4), rec + 4, n - 4);
}

/* ---------------------------------------------------------------- stuffing */

/* First FE FD at or after p within [p, p + n); returns p + n if none. */
static inline const uint8_t *
find_sep(const uint8_t *p, size_t n)
{
	const uint8_t *end = p + n;
	if (n < 2)
		return end;
	const uint8_t *last = end - 1; /* an FE here cannot start a full sequence */
	while (p < last) {
		const uint8_t *fe = memchr(p, 0xFE, (size_t)(last - p));
		if (fe == NULL)
			return end;
		if (fe[1] == 0xFD)
			return fe;
		p = fe + 1;
	}
	return end;
}

static size_t
stuffed_bound(size_t n)
{
	return n + 1 + 2 * (2 + n / MAX_REMAINING_RUN);
}

/* Encode src[0..n) into dst (at least stuffed_bound(n) bytes); returns bytes written. */
static size_t
stuff_into(uint8_t *dst, const uint8_t *src, size_t n)
{
	uint8_t *out = dst;
	int first = 1;
	for (;;) {
		size_t limit = first ? MAX_INITIAL_RUN : MAX_REMAINING_RUN;
		size_t window = n < limit ? n : limit;
		const uint8_t *hit = find_sep(src, window);
		size_t run = (size_t)(hit - src);
		if (first) {
			*out++ = (uint8_t)run;
		} else {
			*out++ = (uint8_t)(run % RADIX);
			*out++ = (uint8_t)(run / RADIX);
		}
		memcpy(out, src, run);
		out += run;
		src += run;
		n -= run;
		if (run < limit) {
			if (n == 0)
				break;
			src += 2;
			n -= 2;
		}
		first = 0;
	}
	return (size_t)(out - dst);
}

/* Decode; returns decoded size or -1 if malformed. dst must hold n bytes. */
static Py_ssize_t
unstuff_into(uint8_t *dst, const uint8_t *src, size_t n)
{
	uint8_t *out = dst;
	int first = 1;
	for (;;) {
		size_t limit, run;
		if (first) {
			if (n < 1)
				return -1;
			run = src[0];
			src++;
			n--;
			limit = MAX_INITIAL_RUN;
		} else {
			if (n < 2)
				return -1;
			run = src[0] + RADIX * (size_t)src[1];
			src += 2;
			n -= 2;
			limit = MAX_REMAINING_RUN;
		}
		if (run > limit || n < run)
			return -1;
		memcpy(out, src, run);
		out += run;
		src += run;
		n -= run;
		if (run < limit) {
			if (n == 0)
				break;
			if (n < 2)
				return -1;
			*out++ = 0xFE;
			*out++ = 0xFD;
		}
		first = 0;
	}
	return (Py_ssize_t)(out - dst);
}

/*
 * Encode the record whose payload already sits at scratch + HEADER_SIZE (n bytes): fills in the
 * header, stuffs it into out (at least stuffed_bound(n + HEADER_SIZE) + 2 bytes); returns bytes
 * written incl. FE FD.
 */
static size_t
encode_in_place(uint8_t *out, uint8_t *scratch, size_t n, uint32_t gen)
{
	uint32_t crc;
	scratch[4] = (uint8_t)gen;
	scratch[5] = (uint8_t)(gen >> 8);
	scratch[6] = (uint8_t)(gen >> 16);
	scratch[7] = (uint8_t)(gen >> 24);
	crc = record_crc(scratch, n + HEADER_SIZE);
	scratch[0] = (uint8_t)crc;
	scratch[1] = (uint8_t)(crc >> 8);
	scratch[2] = (uint8_t)(crc >> 16);
	scratch[3] = (uint8_t)(crc >> 24);
	size_t w = stuff_into(out, scratch, n + HEADER_SIZE);
	out[w] = 0xFE;
	out[w + 1] = 0xFD;
	return w + 2;
}

/* Build header+payload in scratch, then stuff into out; returns bytes written incl. FE FD. */
static inline size_t
encode_one(uint8_t *out, uint8_t *scratch, const uint8_t *payload, size_t n, uint32_t gen)
{
	memcpy(scratch + HEADER_SIZE, payload, n);
	return encode_in_place(out, scratch, n, gen);
}

/*
 * The payload of one stuffed chunk p[0..n) (the bytes between separators): its length, with
 * *payload pointing at it -- into p itself when the chunk is one run (no copy), else into
 * scratch (at least n bytes) -- and *gen set; -1 when the chunk is not a valid record
 * (malformed stuffing, shorter than a header, or a CRC mismatch).
 */
static Py_ssize_t
record_payload(const uint8_t *p, size_t n, uint8_t *scratch, const uint8_t **payload,
    uint32_t *gen)
{
	const uint8_t *rec;
	size_t m;
	uint32_t crc;
	if (n < 9)
		return -1;
	if (n <= MAX_INITIAL_RUN && p[0] == n - 1) {
		rec = p + 1; /* one terminal run: the record is p[1..n) */
		m = n - 1;
	} else {
		Py_ssize_t got = unstuff_into(scratch, p, n);
		if (got < HEADER_SIZE)
			return -1;
		rec = scratch;
		m = (size_t)got;
	}
	memcpy(&crc, rec, 4);
	if (record_crc(rec, m) != crc)
		return -1;
	memcpy(gen, rec + 4, 4);
	*payload = rec + HEADER_SIZE;
	return (Py_ssize_t)(m - HEADER_SIZE);
}

/* Fills the CRC tables and picks the hardware CRC when the CPU has it. */
static void
stuffing_init(void)
{
	crc_init();
}

#endif /* GATEWAY_STUFFING_H */
