/* cols_copy — decode's "columns" copy (matmul.h's copy, first layout):
 * the matrices llama.cpp repacks (matmul_q8_blockwise: Q4_0, IQ4_NL,
 * MXFP4, Q4_K, Q2_K with a multiple of 8 rows), and IQ4_XS, Q3_K, Q4_1,
 * Q5_0, Q5_1, TQ1_0, TQ2_0 and the grid formats IQ1-IQ3 (cols_lanes8),
 * kept as groups
 * of 16 rows,
 * block i of the 16 rows together, so that a=llamacpp's decode kernels
 * (matmul_q8_cols.c, matmul_q8_lanes.c) add four products to 16 rows'
 * sums with one vpdpbusd and one broadcast of the input's codes.
 *
 * A group's block i (cols_block_bytes: 16 rows x 18 bytes for Q4_0 and
 * IQ4_NL, x 17 for MXFP4, x 84 for Q2_K, x 148 for Q4_K):
 * - the nibble bytes in slices of 64: slice k holds the stored bytes
 *   qs[4 k .. 4 k + 3] of each row j at 64 k + 4 j (16 bytes of qs, 4
 *   slices, for the 32-blocks; Q2_K 64 bytes, 16 slices; Q4_K 128
 *   bytes, 32 slices);
 * - Q4_0, IQ4_NL: then the 16 rows' fp16 d; MXFP4: their E8M0 bytes;
 * - Q2_K: then the 16 rows' scale bytes as stored (scale and minimum
 *   nibbles), group g of row j at 1024 + 16 g + j, fp16 d at 1280 and
 *   fp16 dmin at 1312 (the stored bytes, moved);
 * - Q4_K: then the 8 six-bit scales as bytes, sub-block s of row j at
 *   2048 + 16 s + j, the 8 minima likewise at 2176, the 16 rows' fp16 d
 *   at 2304 and fp16 dmin at 2336 (4 bytes a row more than stored: the
 *   scales unpacked).
 * - IQ4_XS: the 128 nibble bytes in 32 slices (run r's 16 bytes in
 *   slices 4 r .. 4 r + 3), then the 8 six-bit run scales as bytes, run r
 *   of row j at 2048 + 16 r + j, the 16 rows' fp16 d at 2176 (2 bytes a
 *   row more than stored);
 * - Q3_K: the 64 qs bytes in 16 slices, the 32 hmask bytes in 8 more (at
 *   1024), the 16 six-bit scales as bytes (less 32 gives the scale),
 *   scale g of row j at 1536 + 16 g + j, fp16 d at 1792 (4 bytes more);
 * - Q4_1, Q5_0, Q5_1: the 16 nibble bytes in 4 slices; Q5's 32 high
 *   bits as masks over the slices' bytes (slice t's low nibbles' at
 *   256 + 16 t, its high nibbles' at 256 + 16 t + 8: 4 bits a row, row j
 *   in nibble j); the fp16 d (at 256, Q5 at 320), then m (Q4_1, Q5_1);
 * - IQ1_S, IQ1_M (from iq_copy's decoded blocks): the codes g + 1 of the
 *   grid values g as 2 bits, in 64 chunks of 16 bytes, chunk c holding
 *   values 4 c .. 4 c + 3 of the 16 rows: byte n at bit 2 l those of row
 *   4 l + n / 4, value 4 c + n % 4 (one GFNI affine a chunk puts row j's
 *   4 codes in 32-bit lane j); then IQ1_S: run r's scale and delta sign
 *   (the stored qh[r]'s top nibble) of row j at 1024 + 16 r + j, fp16 d
 *   at 1152 (74 bytes a row); IQ1_M: its 16 three-bit scales as bytes,
 *   scale n of row j at 1024 + 16 n + j, the 32-bit word of delta signs
 *   (bit t: values 8 t ..) of row j at 1280 + 4 j, and the fp16 d its
 *   scale words' top nibbles make, at 1344 (86 bytes a row);
 * - TQ2_0, TQ1_0 (as TQ2_0: its trits as 2-bit codes, tq1_as_tq2): the
 *   codes value + 1 in IQ1's chunks, then the 16 rows' fp16 d at 1024 (66
 *   bytes a row: TQ2_0's size, 1.22x TQ1_0's);
 * - IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S (from iq_copy's decoded
 *   blocks): the 2-bit level codes in IQ1's chunks; 8 bytes a chunk of
 *   masks (bit 4 j + b: row j's value 4 c + b) of the negated values at
 *   1024 and, IQ3, of the levels' bit 2 at 1536; the 4-bit scales as
 *   bytes, scale n of row j at S + 16 n + j (S 1536, IQ3 2048; one a 32
 *   values, IQ2_XS and IQ2_S one a 16); the fp16 d after them (106, 114,
 *   114, 138, 138 bytes a row: 1.61x, 1.54x, 1.39x, 1.41x, 1.25x the
 *   file). Their stored rows are not rebuilt (cols_rebuilds).
 * The stored rows are rebuilt from it bit for bit where cols_rebuilds
 * (the packings of Q4_K's, IQ4_XS's and Q3_K's scales are one-to-one;
 * IQ1's through iq_copy's rebuild).
 *
 * The cols_lanes8 types, which llama.cpp does not repack, keep its
 * vec_dot's order: their kernels hold vec_dot's eight lane sums of each
 * row, 16 rows a register each. */
#ifndef QG_COLS_COPY_H
#define QG_COLS_COPY_H

#include <stddef.h>
#include <stdint.h>

/* the values a block holds (32, or 256 for the K-quants, IQ4_XS, TQ and
 * the grid formats)
 * and the bytes a group of 16
 * rows takes per block; 0 for a type without the layout */
int cols_block_values(uint32_t type);
/* whether type's copy serves vec_dot's order (IQ4_XS, Q3_K, Q4_1,
 * Q5_0, Q5_1, TQ1_0, TQ2_0, IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
 * IQ3_XXS, IQ3_S), not llama.cpp's repacked one */
int cols_lanes8(uint32_t type);
size_t cols_block_bytes(uint32_t type);

/* rows[j] (j < 16, row_bytes apart: `in` values each, stored as `type`)
 * into one group of the copy at dst (in / cols_block_values blocks) */
void cols_copy_group(uint32_t type, const uint8_t *rows, size_t row_bytes, int64_t in,
                     uint8_t *dst);

/* row j (j < 16) of the group at group, as stored, into buf, where
 * cols_rebuilds(type) */
void cols_stored_row(uint32_t type, const uint8_t *group, int64_t in, int j, uint8_t *buf);

/* TQ1_0, TQ2_0: block i of row j (j < 16) of the group at group as a
 * TQ2_0 block (66 bytes at blk: TQ1_0's values and d as TQ2_0 holds
 * them), whose codes prefill's packing reads */
void cols_tq2_block(uint32_t type, const uint8_t *group, int j, int64_t i, uint8_t *blk);

/* IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S: block i of row j
 * (j < 16) of the group at group as iq_copy's decoded block (iq_copy.h,
 * iq_copy_block_bytes at dec), whose codes prefill's packing reads
 * (iq_copy_codes) without the stored block's grid search */
void cols_iq_decoded(uint32_t type, const uint8_t *group, int j, int64_t i, uint8_t *dec);

/* whether cols_stored_row rebuilds type's stored rows (not TQ1_0's, IQ2's
 * or IQ3's: their rows are read from the file) */
int cols_rebuilds(uint32_t type);

#endif
