/* iq1_copy — decode's decoded copy of IQ1_S and IQ1_M rows (matmul.h's
 * copy, second layout): each 256-value block with its 32 grid indices
 * looked up once, so that a=llamacpp's kernel reads 2-bit codes instead
 * of a 2048-entry table per 8 weights; and the stored block rebuilt from
 * it, bit for bit, for the readers of stored rows (matmul_row).
 *
 * A copy block (iq1_copy_block_bytes: 70 for IQ1_S, 76 for IQ1_M):
 * - bytes 0..63, the codes: value e of the block (its grid value g, -1, 0
 *   or 1) as the 2-bit code g + 1, in byte 16 (e / 64) + e % 16 at bit
 *   2 ((e % 64) / 16): a 64-value run's 16 bytes, shifted by 0, 2, 4 and
 *   6 bits, give its four 16-value quarters in order;
 * - IQ1_S, bytes 64..69: d as stored (fp16), then a 32-bit word whose
 *   nibble j (bits 4j..4j+3) is the top nibble of the stored qh[j] (the
 *   3-bit scale of values 32j..32j+31, and the sign of their delta in
 *   bit 3);
 * - IQ1_M, bytes 64..75: the 8 scale bytes as stored (the 3-bit scales
 *   and d), then a 32-bit word whose bit t is the sign of the delta of
 *   values 8t..8t+7 (bit 3 of the stored qh nibble t).
 * Both formats' grid is iq1s_grid, whose 2048 entries are 2048 distinct
 * patterns of -1, 0 and 1: the index of each run of 8 is recovered from
 * its codes. */
#ifndef QG_IQ1_COPY_H
#define QG_IQ1_COPY_H

#include <stddef.h>
#include <stdint.h>

enum { IQ1_COPY_S_BYTES = 70, IQ1_COPY_M_BYTES = 76 };

/* The bytes of a copy block for type (GGML_IQ1_S, GGML_IQ1_M), else 0. */
size_t iq1_copy_block_bytes(uint32_t type);

/* nb stored blocks of type at src into nb copy blocks at dst. */
void iq1_copy_blocks(uint32_t type, const uint8_t *src, uint8_t *dst, int64_t nb);

/* nb copy blocks of type at src back into the nb stored blocks they were
 * made from (the same bytes) at dst. */
void iq1_stored_blocks(uint32_t type, const uint8_t *src, uint8_t *dst, int64_t nb);

/* The int8 codes and scales of nb copy blocks of type at src, as
 * qcodes_row gives them from the stored blocks (qcodes.h: codes 8 g +- 1,
 * the delta's sign; scales per 32 values for IQ1_S, 16 for IQ1_M), into
 * code[256 nb] and s[8 nb or 16 nb]: prefill's packing reads the copy so,
 * not rebuilding the stored rows. */
void iq1_copy_codes(uint32_t type, const uint8_t *src, int64_t nb, int8_t *code, float *s);

#endif
