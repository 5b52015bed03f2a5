/* gemm_q8 — the int8 prefill product of a=llamacpp (gemm_q8.h).
 *
 * Work is cut by panels of output rows (up to 4 tiles of 16); a thread
 * writes a panel's codes into its scratch, as unsigned bytes code + 128
 * (vpdpbusd multiplies unsigned by signed bytes; the input's codes stay
 * signed and the 128s come off through the inputs' chunk sums), four
 * consecutive codes of each of the 16 rows side by side:
 *     word[k][r] = bytes 4k .. 4k + 3 of row r, k < in / 4
 * then multiplies it with every input, 64 inputs at a time (their codes
 * stay in L2), 8 inputs per pass over the tile's words. */
#include "backends/gemm_q8.h"
#include "backends/ggml_types.h"
#include "backends/matmul_impl.h"
#include "backends/parallel.h"
#include "backends/qcodes.h"
#include "backends/quant.h"
#include "backends/dequant.h"
#include "backends/simfmt.h"
#include "core/status.h"
#include "core/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include "backends/matmul_x86_impl.h"
#define GEMM_VNNI 1
#endif

enum { TILE = 16, NT = 8, TOKEN_BLOCK = 64, MAX_TILES = 4 };

/* the inputs, prepared in tiles of NT (the last one padded with copies of
 * the last input): tile i at base + i * tile_words 32-bit words,
 *     codes[k][NT]   4 codes of each input side by side, k < in / 4
 *     xo[c][NT]      -128 times the chunk's sum of codes (int32)
 *     dx[c][NT]      the scale of the input block holding the chunk
 *     mx[c][NT]      what the chunk's minimum multiplies (gemm_q8.h) */
struct gx {
    const struct matmul_q8 *a;
    uint32_t *base;
    size_t tile_words;
};

struct gjob {
    float *y;
    const struct wmat *W;
    const float *bias;
    float beta;
    int n, chunk, has_min, tiles;
    int sb;      /* Q8_K inputs: chunks per 256 (the two-level sum); Q8_0: 0 */
    int kq;      /* Q4_K, Q2_K where llama.cpp repacks (matmul_q8_blockwise): its order */
    int kq_part; /* kq: chunks per fused multiply-add of its GEMM (Q4_K 2, Q2_K 8) */
    int n4;      /* kq: the inputs in whole groups of 4 (its GEMM's), the rest its gemv's */
    int64_t nch;
    struct gx x;
    uint8_t *scratch;
    size_t per_thread; /* bytes */
    enum mv_isa isa;
};

static size_t up64(size_t b)
{
    return (b + 63) / 64 * 64;
}

/* bytes of one packed tile: the words, then s and m per chunk and row
 * (kq: the integer scales and minima), then d and dmin per 256 and row
 * (kq only) */
static size_t tile_bytes(int64_t in, int64_t nch)
{
    return up64((size_t)TILE * (size_t)in) + 2 * up64((size_t)TILE * (size_t)nch * sizeof(float)) +
           2 * up64((size_t)TILE * (size_t)(in / 256) * sizeof(float));
}

/* a packed tile's parts after its words: 0 s, 1 m, 2 d, 3 dmin */
static float *tile_part(uint8_t *p, int64_t in, int64_t nch, int part)
{
    const size_t w = up64((size_t)TILE * (size_t)in),
                 c = up64((size_t)TILE * (size_t)nch * sizeof(float)),
                 b = up64((size_t)TILE * (size_t)(in / 256) * sizeof(float));
    const size_t at = w + (part < 2 ? (size_t)part * c : 2 * c + (size_t)(part - 2) * b);
    return (float *)(void *)(p + at);
}

/* Q4_K's or Q2_K's stored row st into row r of a tile's parts: the
 * integer scale and minimum of each chunk (Q4_K 32 values, Q2_K 16) as
 * int32 in the places of s and m (ts, tm), d and dmin of each 256 (d,
 * dm) */
static void kq_factors(uint32_t type, const uint8_t *st, int64_t in, float *ts, float *tm, float *d,
                       float *dm, int r)
{
    const int k4 = type == GGML_Q4_K, bs = k4 ? 144 : 84, per = k4 ? 8 : 16;
    for (int64_t b = 0; b < in / 256; b++, st += bs) {
        const int at = k4 ? 0 : 80; /* d, then dmin */
        d[b * TILE + r] = quant_f16_to_f32((uint16_t)(st[at] | st[at + 1] << 8));
        dm[b * TILE + r] = quant_f16_to_f32((uint16_t)(st[at + 2] | st[at + 3] << 8));
        for (int g = 0; g < per; g++) {
            int a = st[g] & 0xF, m = st[g] >> 4;
            if (k4) dequant_k4_scale_min(g, st + 4, &a, &m);
            const int64_t c = b * per + g;
            memcpy(ts + c * TILE + r, &(int32_t){a}, 4),
                memcpy(tm + c * TILE + r, &(int32_t){m}, 4);
        }
    }
}

/* bytes of a row's codes, scales and minima before they are packed */
static size_t row_bytes(int64_t in, int64_t nch)
{
    return up64((size_t)in) + 2 * up64((size_t)nch * sizeof(float));
}

/* input tile i's parts (struct gx) */
static uint32_t *x_codes(const struct gjob *j, int64_t i)
{
    return j->x.base + (size_t)i * j->x.tile_words;
}

static uint32_t *x_part(const struct gjob *j, int64_t i, int part) /* 0 xo, 1 dx, 2 mx */
{
    return x_codes(j, i) + (size_t)(j->W->in / 4) * NT + (size_t)part * (size_t)j->nch * NT;
}

/* input tiles [t0, t1) written (struct gx) */
static void prep_tiles(void *arg, int64_t t0, int64_t t1, int thread)
{
    (void)thread;
    const struct gjob *j = arg;
    const int64_t nch = j->nch, C = j->chunk, in = j->W->in;
    for (int64_t ti = t0; ti < t1; ti++)
        for (int i = 0; i < NT; i++) {
            const int t = (int)(ti * NT + i < j->n ? ti * NT + i : j->n - 1);
            const struct matmul_q8 *a = &j->x.a[t];
            const int64_t B = a->kind == GGML_Q8_K ? 256 : 32;
            const int q81 = j->has_min && a->kind == GGML_Q8_0;
            uint32_t *codes = x_codes(j, ti), *xo = x_part(j, ti, 0), *dx = x_part(j, ti, 1),
                     *mx = x_part(j, ti, 2);
            for (int64_t k = 0; k < in / 4; k++)
                memcpy(codes + k * NT + i, a->q + 4 * k, 4);
            for (int64_t c = 0; c < nch; c++) {
                const int64_t e = c * C;
                int32_t sum = a->sum16[e / 16] + (C == 32 ? a->sum16[e / 16 + 1] : 0),
                        o = -128 * sum;
                float d = a->d[e / B], f = q81        ? a->s[e / 32]
                                           : B == 256 ? (float)sum
                                                      : d * (float)sum;
                memcpy(xo + c * NT + i, &o, 4);
                memcpy(dx + c * NT + i, &d, 4);
                memcpy(mx + c * NT + i, &f, 4);
            }
        }
}

/* the inputs in tiles (struct gx), across the pool */
static int prep_inputs(struct gjob *j, int n_threads)
{
    const int64_t tiles = (j->n + NT - 1) / NT;
    j->x.tile_words = (size_t)(j->W->in / 4 + 3 * j->nch) * NT;
    j->x.base = qg_alloc_aligned((size_t)tiles * j->x.tile_words * sizeof *j->x.base);
    if (!j->x.base) return QG_ERR_NOMEM;
    parallel_for(parallel_threads_for(n_threads, (double)j->n * (double)j->W->in), tiles,
                 prep_tiles, j);
    return QG_OK;
}

#ifdef GEMM_VNNI
/* r[i] holds words 0..15 of row i; afterwards r[k] holds word k of rows
 * 0..15 (a 16 x 16 transpose of 32-bit words: pairs, quads, then 128-bit
 * lanes twice) */
AVX512VNNI static inline void transpose16(__m512i r[16])
{
    __m512i t[16], u[16], v[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) { /* u[i + c], lane L: rows i .. i + 3 of word 4 L + c */
        u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int c = 0; c < 4; c++) {
        v[c] = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88);
        v[4 + c] = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xdd);
        v[8 + c] = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88);
        v[12 + c] = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xdd);
    }
    for (int c = 0; c < 4; c++) {
        r[c] = _mm512_shuffle_i32x4(v[c], v[8 + c], 0x88);
        r[8 + c] = _mm512_shuffle_i32x4(v[c], v[8 + c], 0xdd);
        r[4 + c] = _mm512_shuffle_i32x4(v[4 + c], v[12 + c], 0x88);
        r[12 + c] = _mm512_shuffle_i32x4(v[4 + c], v[12 + c], 0xdd);
    }
}

/* the words of 16 decoded rows (rows + i rb), plus 128 a byte, 16 words
 * of each row at a time */
AVX512VNNI static void interleave_vnni(const uint8_t *rows, size_t rb, int64_t in, uint32_t *words)
{
    const __m512i flip = _mm512_set1_epi32((int)0x80808080u);
    for (int64_t k0 = 0; k0 < in / 4; k0 += 16) {
        const int cnt = in / 4 - k0 < 16 ? (int)(in / 4 - k0) : 16;
        const __mmask16 mk = (__mmask16)((1u << cnt) - 1);
        __m512i r[16];
        for (int i = 0; i < 16; i++)
            r[i] = _mm512_xor_si512(
                _mm512_maskz_loadu_epi32(mk, rows + (size_t)i * rb + 4 * (size_t)k0), flip);
        transpose16(r);
        for (int k = 0; k < cnt; k++)
            _mm512_store_si512(words + (size_t)(k0 + k) * TILE, r[k]);
    }
}
#endif

/* rows [r0, r0 + nr) of W (nr <= TILE; the rest zero codes, factors 0)
 * packed into tile at p: words, then s[c][16], then m[c][16]; rows holds
 * TILE rows of row_bytes each, where they are decoded first; gather, a
 * row as stored where W has decode's copy (matmul_row_codes) */
static void pack_tile(const struct gjob *j, int64_t r0, int nr, uint8_t *p, uint8_t *rows,
                      uint8_t *gather)
{
    const struct wmat *W = j->W;
    const int64_t in = W->in, nch = j->nch;
    const size_t rb = row_bytes(in, nch);
    uint32_t *words = (uint32_t *)(void *)p;
    float *ts = tile_part(p, in, nch, 0), *tm = tile_part(p, in, nch, 1);
    float *td = tile_part(p, in, nch, 2), *tdm = tile_part(p, in, nch, 3);
    for (int r = 0; r < TILE; r++) {
        int8_t *code = (int8_t *)(rows + (size_t)r * rb);
        float *s = (float *)(void *)((uint8_t *)code + up64((size_t)in));
        float *m = (float *)(void *)((uint8_t *)s + up64((size_t)nch * sizeof(float)));
        if (r < nr && j->kq) { /* the codes, and the integer factors as they are */
            const uint8_t *st = matmul_row(W, r0 + r, gather);
            qcodes_row(W->type, st, in, code, s, m);
            kq_factors(W->type, st, in, ts, tm, td, tdm, r);
            continue;
        }
        if (r < nr) {
            matmul_row_codes(W, r0 + r, gather, code, s, m);
        } else {
            memset(code, 0, (size_t)in);
            memset(s, 0, (size_t)nch * sizeof *s);
            memset(m, 0, (size_t)nch * sizeof *m);
            for (int64_t b = 0; j->kq && b < in / 256; b++)
                td[b * TILE + r] = tdm[b * TILE + r] = 0.0f;
        }
        for (int64_t c = 0; c < nch; c++) {
            ts[c * TILE + r] = s[c];
            tm[c * TILE + r] = m[c];
        }
    }
#ifdef GEMM_VNNI
    if (j->isa == MV_AVX512_VNNI) {
        interleave_vnni(rows, rb, in, words);
        return;
    }
#endif
    for (int r = 0; r < TILE; r++)
        for (int64_t k = 0; k < in / 4; k++) {
            uint32_t w;
            memcpy(&w, rows + (size_t)r * rb + 4 * (size_t)k, 4);
            words[k * TILE + r] = w ^ 0x80808080u;
        }
}

/* y for output row r, input t, from acc (gemm_q8.h's last step) */
static float finish(const struct gjob *j, float acc, int64_t r, int t)
{
    float *y = j->y + (size_t)t * (size_t)j->W->out + (size_t)r;
    float v = j->beta == 0.0f ? acc : j->beta * *y + acc;
    return j->bias ? v + j->bias[r] : v;
}

/* input t's parts in its tile (struct gx) */
struct xin {
    const int8_t *q;
    const int32_t *xo;
    const float *dx, *mx;
};

static struct xin x_in(const struct gjob *j, int t)
{
    const int64_t ti = t / NT;
    return (struct xin){(const int8_t *)x_codes(j, ti), (const int32_t *)x_part(j, ti, 0),
                        (const float *)x_part(j, ti, 1), (const float *)x_part(j, ti, 2)};
}

/* the exact integer of chunk c (C codes) of tile row r and input i of
 * an input tile (codes q, offsets xo): the weights' unsigned codes times
 * the input's, less the 128s */
static int32_t chunk_int(const uint8_t *p, const int8_t *q, const int32_t *xo, int64_t C, int64_t c,
                         int r, int i)
{
    int32_t I = xo[c * NT + i];
    for (int64_t e = c * C; e < c * C + C; e++)
        I += (int32_t)p[(e / 4 * TILE + r) * 4 + e % 4] * q[(e / 4 * NT + i) * 4 + e % 4];
    return I;
}

/* chunks per fused multiply-add of kq input t: llama.cpp's repacked GEMM
 * (4 inputs at a time) adds each 64 (Q4_K) or 128 (Q2_K) values, its gemv
 * (the n % 4 last) each 256 */
static int kq_every(const struct gjob *j, int t)
{
    return t < j->n4 ? j->kq_part : j->sb;
}

/* tile_c for kq: per kq_every chunks the integer I = sum of scale x chunk
 * sum and M = sum of minimum x the input's chunk sum, then
 * acc = fmaf(I, d dx, acc), accm = fmaf(M, dmin dx, accm); acc - accm */
static void kq_tile_c(const struct gjob *j, const uint8_t *p, const float *ts, const float *tm,
                      const float *td, const float *tdm, int64_t r0, int nr, int t0, int t1)
{
    const int64_t nch = j->nch, C = j->chunk;
    for (int t = t0; t < t1; t++) {
        const struct xin x = x_in(j, t);
        const int i = t % NT;
        for (int r = 0; r < nr; r++) {
            float acc = 0.0f, accm = 0.0f;
            int32_t I = 0, M = 0;
            for (int64_t c = 0; c < nch; c++) {
                const int32_t Ic = chunk_int(p, x.q, x.xo, C, c, r, i);
                int32_t sc, mn;
                memcpy(&sc, ts + c * TILE + r, 4), memcpy(&mn, tm + c * TILE + r, 4);
                I += Ic * sc;
                M += mn * (int32_t)x.mx[c * NT + i];
                if ((c + 1) % kq_every(j, t)) continue;
                const float d = x.dx[c * NT + i];
                acc = fmaf((float)I, td[c / j->sb * TILE + r] * d, acc);
                accm = fmaf((float)M, tdm[c / j->sb * TILE + r] * d, accm);
                I = M = 0;
            }
            j->y[(size_t)t * (size_t)j->W->out + (size_t)(r0 + r)] =
                finish(j, acc - accm, r0 + r, t);
        }
    }
}

/* the plain C product of a packed tile with inputs [t0, t1) (t0 a
 * multiple of NT): the reference, operation for operation what the
 * vector kernel does */
static void tile_c(const struct gjob *j, const uint8_t *p, int64_t r0, int nr, int t0, int t1)
{
    const int64_t in = j->W->in, nch = j->nch, C = j->chunk;
    uint8_t *pp = (uint8_t *)(uintptr_t)p; /* read only */
    const float *ts = tile_part(pp, in, nch, 0), *tm = tile_part(pp, in, nch, 1),
                *td = tile_part(pp, in, nch, 2), *tdm = tile_part(pp, in, nch, 3);
    if (j->kq) {
        kq_tile_c(j, p, ts, tm, td, tdm, r0, nr, t0, t1);
        return;
    }
    for (int t = t0; t < t1; t++) {
        const struct xin x = x_in(j, t);
        const int i = t % NT;
        for (int r = 0; r < nr; r++) {
            float acc = 0.0f, z = 0.0f;
            for (int64_t c = 0; c < nch; c++) {
                const int32_t I = chunk_int(p, x.q, x.xo, C, c, r, i);
                if (!j->sb) { /* Q8_0 inputs: a scale per 32 */
                    acc = fmaf((float)I, ts[c * TILE + r] * x.dx[c * NT + i], acc);
                    if (j->has_min) acc = fmaf(tm[c * TILE + r], x.mx[c * NT + i], acc);
                    continue;
                }
                z = fmaf((float)I, ts[c * TILE + r], z); /* Q8_K: one scale per 256 */
                if (j->has_min) z = fmaf(tm[c * TILE + r], x.mx[c * NT + i], z);
                if ((c + 1) % j->sb == 0) acc = fmaf(z, x.dx[c * NT + i], acc), z = 0.0f;
            }
            j->y[(size_t)t * (size_t)j->W->out + (size_t)(r0 + r)] = finish(j, acc, r0 + r, t);
        }
    }
}

#ifdef GEMM_VNNI
/* tile_vnni_t's kq step for chunk c: its integers I times the rows'
 * integer scales into Ib, the minima times the inputs' chunk sums into
 * Mb, and at each input's step (kq_every) the two fused multiply-adds */
AVX512VNNI static inline __attribute__((always_inline)) void
kq_chunk(const struct gjob *j, int64_t c, int t0, const int SB, const __m512i *I, const float *ts,
         const float *tm, const float *td, const float *tdm, const float *dx, const float *mx,
         __m512i *Ib, __m512i *Mb, __m512 *acc, __m512 *z)
{
    const __m512i scv = _mm512_load_si512(ts + c * TILE), mnv = _mm512_load_si512(tm + c * TILE);
    for (int i = 0; i < NT; i++) {
        Ib[i] = _mm512_add_epi32(Ib[i], _mm512_mullo_epi32(I[i], scv));
        Mb[i] = _mm512_add_epi32(
            Mb[i], _mm512_mullo_epi32(mnv, _mm512_set1_epi32((int32_t)mx[c * NT + i])));
    }
    if ((c + 1) % j->kq_part) return;
    const __m512 dv = _mm512_load_ps(td + c / SB * TILE), dmv = _mm512_load_ps(tdm + c / SB * TILE);
    for (int i = 0; i < NT; i++) {
        if ((c + 1) % kq_every(j, t0 + i)) continue;
        const __m512 d = _mm512_set1_ps(dx[c * NT + i]);
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(Ib[i]), _mm512_mul_ps(dv, d), acc[i]);
        z[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(Mb[i]), _mm512_mul_ps(dmv, d), z[i]);
        Ib[i] = Mb[i] = _mm512_setzero_si512();
    }
}

/* 16 rows times the NT inputs of tile t0 / NT (stores those below t1),
 * C and HM constants where inlined */
AVX512VNNI static inline __attribute__((always_inline)) void
tile_vnni_t(const struct gjob *j, const uint8_t *p, int64_t r0, int nr, int t0, int t1, const int C,
            const int HM, const int SB, const int KQ)
{
    const int64_t in = j->W->in, nch = j->nch;
    const __m512i *w = (const __m512i *)(const void *)p;
    uint8_t *pp = (uint8_t *)(uintptr_t)p; /* read only */
    const float *ts = tile_part(pp, in, nch, 0), *tm = tile_part(pp, in, nch, 1),
                *td = tile_part(pp, in, nch, 2), *tdm = tile_part(pp, in, nch, 3);
    const int32_t *q = (const int32_t *)x_codes(j, t0 / NT),
                  *xo = (const int32_t *)x_part(j, t0 / NT, 0);
    const float *dx = (const float *)x_part(j, t0 / NT, 1),
                *mx = (const float *)x_part(j, t0 / NT, 2);
    __m512 acc[NT], z[NT]; /* KQ: z the minima's sum */
    __m512i Ib[NT], Mb[NT];
    for (int i = 0; i < NT; i++)
        acc[i] = z[i] = _mm512_setzero_ps(), Ib[i] = Mb[i] = _mm512_setzero_si512();
    for (int64_t c = 0; c < nch; c++, q += C / 4 * NT) {
        __m512i I[NT];
        for (int i = 0; i < NT; i++)
            I[i] = _mm512_set1_epi32(xo[c * NT + i]);
        for (int g = 0; g < C / 4; g++) {
            const __m512i wv = _mm512_load_si512(w + c * (C / 4) + g);
            for (int i = 0; i < NT; i++)
                I[i] = _mm512_dpbusd_epi32(I[i], wv, _mm512_set1_epi32(q[g * NT + i]));
        }
        if (KQ) { /* integer scales and minima; a fused multiply-add per kq_every */
            kq_chunk(j, c, t0, SB, I, ts, tm, td, tdm, dx, mx, Ib, Mb, acc, z);
            continue;
        }
        const __m512 sv = _mm512_load_ps(ts + c * TILE);
        if (!SB) { /* Q8_0 inputs: a scale per 32 */
            for (int i = 0; i < NT; i++)
                acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I[i]),
                                         _mm512_mul_ps(sv, _mm512_set1_ps(dx[c * NT + i])), acc[i]);
            if (HM) {
                const __m512 mv = _mm512_load_ps(tm + c * TILE);
                for (int i = 0; i < NT; i++)
                    acc[i] = _mm512_fmadd_ps(mv, _mm512_set1_ps(mx[c * NT + i]), acc[i]);
            }
            continue;
        }
        for (int i = 0; i < NT; i++) /* Q8_K: one scale per 256 */
            z[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I[i]), sv, z[i]);
        if (HM) {
            const __m512 mv = _mm512_load_ps(tm + c * TILE);
            for (int i = 0; i < NT; i++)
                z[i] = _mm512_fmadd_ps(mv, _mm512_set1_ps(mx[c * NT + i]), z[i]);
        }
        if ((c + 1) % SB == 0)
            for (int i = 0; i < NT; i++) {
                acc[i] = _mm512_fmadd_ps(z[i], _mm512_set1_ps(dx[c * NT + i]), acc[i]);
                z[i] = _mm512_setzero_ps();
            }
    }
    const __mmask16 k = (__mmask16)((1u << nr) - 1);
    for (int i = 0; i < NT && t0 + i < t1; i++) {
        float *y = j->y + (size_t)(t0 + i) * (size_t)j->W->out + (size_t)r0;
        __m512 v = KQ ? _mm512_sub_ps(acc[i], z[i]) : acc[i];
        if (j->beta != 0.0f)
            v = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(j->beta), _mm512_maskz_loadu_ps(k, y)),
                              v);
        if (j->bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, j->bias + r0));
        _mm512_mask_storeu_ps(y, k, v);
    }
}

AVX512VNNI static void tile_vnni(const struct gjob *j, const uint8_t *p, int64_t r0, int nr, int t0,
                                 int t1)
{
    for (int t = t0; t < t1; t += NT) {
        const int te = t + NT < t1 ? t + NT : t1;
        if (j->kq) /* Q4_K, Q2_K in llama.cpp's repacked order */
            j->chunk == 32 ? tile_vnni_t(j, p, r0, nr, t, te, 32, 1, 8, 1)
                           : tile_vnni_t(j, p, r0, nr, t, te, 16, 1, 16, 1);
        else if (!j->sb) /* Q8_0 inputs: the 32-element formats */
            j->has_min ? tile_vnni_t(j, p, r0, nr, t, te, 32, 1, 0, 0)
                       : tile_vnni_t(j, p, r0, nr, t, te, 32, 0, 0, 0);
        else if (j->chunk == 32)
            j->has_min ? tile_vnni_t(j, p, r0, nr, t, te, 32, 1, 8, 0)
                       : tile_vnni_t(j, p, r0, nr, t, te, 32, 0, 8, 0);
        else
            j->has_min ? tile_vnni_t(j, p, r0, nr, t, te, 16, 1, 16, 0)
                       : tile_vnni_t(j, p, r0, nr, t, te, 16, 0, 16, 0);
    }
}
#endif

/* panels [p0, p1): each up to j->tiles tiles of 16 rows */
static void run_panels(void *arg, int64_t p0, int64_t p1, int thread)
{
    const struct gjob *j = arg;
    const int64_t in = j->W->in, out = j->W->out, R = (int64_t)TILE * j->tiles;
    uint8_t *base = j->scratch + (size_t)thread * j->per_thread;
    uint8_t *row = base, *tiles = base + TILE * row_bytes(in, j->nch);
    const size_t tb = tile_bytes(in, j->nch);
    uint8_t *gather = tiles + (size_t)j->tiles * tb; /* up64(W->row_bytes) where W has a copy */
    for (int64_t p = p0; p < p1; p++) {
        const int64_t r0 = p * R, r1 = r0 + R < out ? r0 + R : out;
        const int nt = (int)((r1 - r0 + TILE - 1) / TILE);
        for (int i = 0; i < nt; i++) {
            int64_t a = r0 + (int64_t)i * TILE;
            pack_tile(j, a, (int)(r1 - a < TILE ? r1 - a : TILE), tiles + (size_t)i * tb, row,
                      gather);
        }
        for (int t0 = 0; t0 < j->n; t0 += TOKEN_BLOCK) {
            const int t1 = t0 + TOKEN_BLOCK < j->n ? t0 + TOKEN_BLOCK : j->n;
            for (int i = 0; i < nt; i++) {
                const int64_t a = r0 + (int64_t)i * TILE;
                const int nr = (int)(r1 - a < TILE ? r1 - a : TILE);
#ifdef GEMM_VNNI
                if (j->isa == MV_AVX512_VNNI) {
                    tile_vnni(j, tiles + (size_t)i * tb, a, nr, t0, t1);
                    continue;
                }
#endif
                tile_c(j, tiles + (size_t)i * tb, a, nr, t0, t1);
            }
        }
    }
}

/* 1 when W's type has codes and its rows are whole blocks and chunks */
static int takes(const struct wmat *W)
{
    const int C = qcodes_chunk(W->type);
    const struct ggml_type_info *ti = ggml_type_get(W->type);
    return C && ti && W->in > 0 && W->in % C == 0 && W->in % ti->block == 0 && W->in % 32 == 0;
}

int gemm_q8_fast(const struct wmat *W)
{
    return takes(W) && mv_isa_current() == MV_AVX512_VNNI;
}

int gemm_q8(float *y, const struct wmat *W, const float *bias, float beta,
            const struct matmul_q8 *a, int n, int n_threads, float *scratch)
{
    if (!takes(W)) return QG_ERR_UNSUPPORTED;
    const int C = qcodes_chunk(W->type);
    for (int t = 0; t < n; t++) /* Q8_K's 256 come with the types that need them */
        if (a[t].kind != simfmt_llamacpp_act_class(W->type)) return QG_ERR_UNSUPPORTED;
    if (n <= 0) return QG_OK;
    struct gjob j = {.y = y,
                     .W = W,
                     .bias = bias,
                     .beta = beta,
                     .n = n,
                     .chunk = C,
                     .has_min = qcodes_has_min(W->type),
                     .nch = W->in / C,
                     .x = {.a = a},
                     .scratch = (uint8_t *)scratch,
                     .isa = mv_isa_current(),
                     .sb = simfmt_llamacpp_act_class(W->type) == GGML_Q8_K ? 256 / C : 0,
                     .kq = (W->type == GGML_Q4_K || W->type == GGML_Q2_K) && matmul_q8_blockwise(W),
                     .kq_part = W->type == GGML_Q4_K ? 2 : 8,
                     .n4 = W->flags & WMAT_EXPERT ? 0 : n / 4 * 4};
    j.per_thread = matmul_scratch_floats(W->in) * sizeof(float);
    const size_t rb = row_bytes(W->in, j.nch), tb = tile_bytes(W->in, j.nch),
                 fixed = TILE * rb + (W->copy ? up64(W->row_bytes) : 0);
    j.tiles = j.per_thread < fixed + tb ? 0 : (int)((j.per_thread - fixed) / tb);
    if (j.tiles > MAX_TILES) j.tiles = MAX_TILES;
    int rc = j.tiles ? prep_inputs(&j, n_threads) : QG_ERR_UNSUPPORTED;
    if (rc == QG_OK) {
        const int64_t R = (int64_t)TILE * j.tiles;
        parallel_for(parallel_threads_for(n_threads, 2.0 * n * (double)W->in * (double)W->out),
                     (W->out + R - 1) / R, run_panels, &j);
    }
    free(j.x.base);
    return rc;
}
