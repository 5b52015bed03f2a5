/* flash_f16 — one query row of ggml's CPU flash attention (ops.cpp,
 * ggml_compute_forward_flash_attn_ext_f16_one_chunk), the way it computes a
 * batch of fewer than FA_TILE_ROWS queries: an online softmax over the keys
 * in order whose running sum of V rows is held in f16, rounded at every
 * step. a=llamacpp's decode steps attend this way.
 *
 * The AVX-512 sets hold the running sum in registers for head sizes of 16
 * to 256 in steps of 16; the other sets and sizes step through memory with
 * AVX2 + F16C or in C. Every set gives the same bits (flash_f16_sets_agree).
 */
#ifndef QG_FLASH_F16_H
#define QG_FLASH_F16_H

#include <stdint.h>

/* o[0..hd) = the softmax of scores[0..T) (already scaled; with cap > 0
 * first capped as cap tanh(s / cap)) times V's rows V + t stride, t < T,
 * in ggml's order: per key, a new maximum rescales the sum (o = f16(o ms)),
 * then o = f16(v vs + o) with one rounding of the fused product; o is
 * divided by the sum of the weights at the end (0 when that sum is 0). */
void flash_f16_row(float *o, const float *scores, const float *V, int T, int stride, int hd,
                   float cap);

/* The same with V's rows held as fp16 (llama.cpp's cache): the bits of
 * flash_f16_row on their f32 values, reading half the bytes. */
void flash_f16_row_h(float *o, const float *scores, const uint16_t *V, int T, int stride, int hd,
                     float cap);

#endif
