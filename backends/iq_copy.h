/* iq_copy — decode's decoded copy of the grid formats IQ1_S, IQ1_M,
 * IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S (matmul.h's copy, second
 * layout): each
 * 256-value block with its grid indices looked up once, so that
 * a=llamacpp's kernels read 2-bit codes instead of a table per 8 weights;
 * the codes prefill's packing multiplies (qcodes.h's) read from it; and,
 * for IQ1, the stored block rebuilt from it, bit for bit, for the readers
 * of stored rows (matmul_row; IQ2's and IQ3's are read from the file).
 * Since session 26 matmul's copy of these types is the columns one
 * (cols_copy.h), made from and read back through these decoded blocks.
 *
 * A copy block (iq_copy_block_bytes: IQ1_S 70, IQ1_M 76, IQ2_XXS 102,
 * IQ2_XS and IQ2_S 106, IQ3_XXS and IQ3_S 134):
 * - bytes 0..63, the codes: value e of the block as a 2-bit code c in
 *   byte 16 (e / 64) + e % 16 at bit 2 ((e % 64) / 16): a 64-value run's
 *   16 bytes, shifted by 0, 2, 4 and 6 bits, give its four 16-value
 *   quarters in order. IQ1: c = g + 1 for its grid value g (-1, 0, 1);
 *   IQ2: the level of its magnitude (8, 25, 43: c = magnitude / 16);
 *   IQ3: the low 2 bits of the level of its magnitude (IQ3_XXS 4, 12,
 *   .., 52, 62: magnitude / 8; IQ3_S 1, 3, .., 15: magnitude / 2);
 * - IQ1_S, bytes 64..69: d as stored (fp16), then a 32-bit word whose
 *   nibble j (bits 4j..4j+3) is the top nibble of the stored qh[j] (the
 *   3-bit scale of values 32j..32j+31, and the sign of their delta in
 *   bit 3);
 * - IQ1_M, bytes 64..75: the 8 scale bytes as stored (the 3-bit scales
 *   and d), then a 32-bit word whose bit t is the sign of the delta of
 *   values 8t..8t+7 (bit 3 of the stored qh nibble t);
 * - IQ2, bytes 64..95: bit e % 8 of byte 64 + e / 8 set where value e is
 *   negated; bytes 96, 97: d as stored; then the 4-bit scales: IQ2_XXS 4
 *   bytes, nibble j (low first) that of values 32j..32j+31; IQ2_XS, IQ2_S
 *   the 8 scale bytes as stored (byte j: values 32j..32j+15 in its low
 *   nibble, the next 16 in its high);
 * - IQ3, bytes 64..95: bit e % 8 of byte 64 + e / 8 the level's bit 2;
 *   bytes 96..127 the negation bits as IQ2's; bytes 128, 129: d as
 *   stored; bytes 130..133: nibble j (low first) the 4-bit scale of values
 *   32j..32j+31 (IQ3_XXS: the top nibble of the sub-block's sign word).
 * IQ1's grid is iq1s_grid, whose 2048 entries are 2048 distinct patterns
 * of -1, 0 and 1: the index of each run of 8 is recovered from its
 * codes. */
#ifndef QG_IQ_COPY_H
#define QG_IQ_COPY_H

#include <stddef.h>
#include <stdint.h>

enum {
    IQ1_COPY_S_BYTES = 70,
    IQ1_COPY_M_BYTES = 76,
    IQ2_COPY_XXS_BYTES = 102,
    IQ2_COPY_XS_BYTES = 106, /* and IQ2_S */
    IQ3_COPY_BYTES = 134     /* IQ3_XXS, IQ3_S */
};

/* The bytes of a copy block for type (the seven above), else 0. */
size_t iq_copy_block_bytes(uint32_t type);

/* nb stored blocks of type at src into nb copy blocks at dst. */
void iq_copy_blocks(uint32_t type, const uint8_t *src, uint8_t *dst, int64_t nb);

/* nb copy blocks of type (IQ1_S or IQ1_M) at src back into the nb stored
 * blocks they were made from (the same bytes) at dst. */
void iq_stored_blocks(uint32_t type, const uint8_t *src, uint8_t *dst, int64_t nb);

/* The int8 codes and scales of nb copy blocks of type at src, as
 * qcodes_row gives them from the stored blocks (qcodes.h: IQ1 codes 8 g
 * +- 1, the delta's sign, IQ2, IQ3 the signed magnitudes; scales per 32
 * values (IQ1_S, IQ2_XXS, IQ3) or 16 (IQ1_M, IQ2_XS, IQ2_S)), into code[256 nb] and
 * s[8 nb or 16 nb]: prefill's packing reads the copy so. */
void iq_copy_codes(uint32_t type, const uint8_t *src, int64_t nb, int8_t *code, float *s);

#endif
