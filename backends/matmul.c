/* matmul — tiled prefill over stored weights, fused decode kernels. */
#include "backends/matmul.h"
#include "backends/dequant.h"
#include "backends/ggml_types.h"
#include "backends/parallel.h"
#include "backends/quant.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QG_X86 1
#endif

enum { PANEL_MAX_ROWS = 256, PANEL_MAX_FLOATS = 1 << 21 };

int matmul_panel_rows(int64_t in, int64_t out)
{
    int rows = PANEL_MAX_ROWS;
    while (rows > 16 && (out / rows < 4 || (int64_t)rows * in > PANEL_MAX_FLOATS))
        rows /= 2;
    return rows;
}

size_t matmul_scratch_floats(int64_t max_in)
{
    /* prefill: a panel; decode: a decode buffer, 256 outputs and x's
     * preparation (group sums and lanes, x_prep). The widest panel of any in <= max_in: 256 rows up
     * to the 8 MiB cap, at least 16 rows of max_in */
    size_t cap = (size_t)PANEL_MAX_ROWS * (size_t)max_in;
    if (cap > PANEL_MAX_FLOATS) cap = PANEL_MAX_FLOATS;
    size_t panel = cap > (size_t)16 * (size_t)max_in ? cap : (size_t)16 * (size_t)max_in,
           decode = 2048 + 256 + (size_t)max_in / 32 + (size_t)max_in;
    return panel > decode ? panel : decode;
}

/* ------------------------------------------------------------ prefill */

struct mm_job {
    float *y;
    const float *x, *bias;
    const struct wmat *W;
    int n;
    float beta;
    float *scratch;
    size_t per_thread;
};

static void add_bias(const struct mm_job *j, int o0, int o1)
{
    if (!j->bias) return;
    int out = (int)j->W->out;
    for (int i = 0; i < j->n; i++)
        for (int o = o0; o < o1; o++)
            j->y[(size_t)i * out + o] += j->bias[o];
}

/* panels [p0, p1) of y = x . W^T: panel p is output rows [p R, p R + R),
 * R = matmul_panel_rows(in, out). The panels depend on the matrix alone,
 * never on the thread count: OpenBLAS's rounding depends on the shape of
 * each call, so every thread count gives the same bits. */
static void tile_panels(void *arg, int64_t p0, int64_t p1, int thread)
{
    const struct mm_job *j = arg;
    const struct wmat *W = j->W;
    const int in = (int)W->in, out = (int)W->out, rows = matmul_panel_rows(in, out);
    float *panel = j->scratch + (size_t)thread * j->per_thread;
    for (int64_t p = p0; p < p1; p++) {
        int r0 = (int)p * rows, r1 = r0 + rows < out ? r0 + rows : out;
        const float *w = panel;
        if (W->type == GGML_F32) /* straight from the mapping */
            w = (const float *)(const void *)W->data + (size_t)r0 * in;
        else
            dequant_row(W->type, W->data + (size_t)r0 * W->row_bytes, panel,
                        (int64_t)(r1 - r0) * in);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, j->n, r1 - r0, in, 1.0f, j->x, in, w,
                    in, j->beta, j->y + r0, out);
        add_bias(j, r0, r1);
    }
}

/* ------------------------------------------------------------- decode */

typedef float (*dot_fn)(const float *a, const float *b, int64_t n);

static float dot_portable(const float *a, const float *b, int64_t n)
{
    float acc[8] = {0};
    int64_t k = 0;
    for (; k + 8 <= n; k += 8)
        for (int j = 0; j < 8; j++)
            acc[j] += a[k + j] * b[k + j];
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; k < n; k++)
        s += a[k] * b[k];
    return s;
}

/* a row through chunks of up to ROW_CHUNK decoded elements (L1/L2-resident) */
enum { ROW_CHUNK = 2048 };
static float row_generic(const struct wmat *W, int64_t r, const float *x, float *buf, dot_fn dot)
{
    const struct ggml_type_info *ti = ggml_type_get(W->type);
    int64_t chunk = ti->block >= ROW_CHUNK ? ti->block : ROW_CHUNK / ti->block * ti->block;
    const uint8_t *p = W->data + (size_t)r * W->row_bytes;
    float s = 0;
    for (int64_t k = 0; k < W->in; k += chunk) {
        int64_t m = W->in - k < chunk ? W->in - k : chunk;
        dequant_row(W->type, p + (size_t)(k / ti->block) * ti->type_size, buf, m);
        s += dot(buf, x + k, m);
    }
    return s;
}

void matmul_rows_portable(float *y, const float *x, const struct wmat *W, int64_t r0, int64_t r1,
                          float *row)
{
    for (int64_t r = r0; r < r1; r++)
        y[r - r0] = row_generic(W, r, x, row, dot_portable);
}

#ifdef QG_X86
#define AVX2 __attribute__((target("avx2,fma,f16c")))

AVX2 static float h2f_f16c(const uint8_t *p)
{
    return _cvtsh_ss((unsigned short)(p[0] | p[1] << 8));
}

__attribute__((target("avx2,fma"))) static float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma"))) static float dot_avx2(const float *a, const float *b, int64_t n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= n; k += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8), _mm256_loadu_ps(b + k + 8), s1);
    }
    float s = hsum256(_mm256_add_ps(s0, s1));
    for (; k < n; k++)
        s += a[k] * b[k];
    return s;
}

/* 8 int8 -> 8 floats */
__attribute__((target("avx2,fma"))) static __m256 i8x8(const uint8_t *q)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)q)));
}

/* Q8_0: 32 int8 and an fp16 scale per block */
AVX2 static float row_q8_0_avx2(const struct wmat *W, int64_t r, const float *x)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0; k < W->in; k += 32, b += 34) {
        _mm_prefetch((const char *)b + 512, _MM_HINT_T0);
        __m256 d = _mm256_set1_ps(h2f_f16c(b));
        __m256 s0 = _mm256_mul_ps(i8x8(b + 2), _mm256_loadu_ps(x + k));
        __m256 s1 = _mm256_mul_ps(i8x8(b + 10), _mm256_loadu_ps(x + k + 8));
        s0 = _mm256_fmadd_ps(i8x8(b + 18), _mm256_loadu_ps(x + k + 16), s0);
        s1 = _mm256_fmadd_ps(i8x8(b + 26), _mm256_loadu_ps(x + k + 24), s1);
        acc = _mm256_fmadd_ps(d, _mm256_add_ps(s0, s1), acc);
    }
    return hsum256(acc);
}

/* Q4_0: y = (q - 8) d, low nibbles elements 0..15, high 16..31; with the
 * group sums of x, dot = sum_b d_b (q.x)_b - 8 d_b sum(x)_b */
AVX2 static float row_q4_0_avx2(const struct wmat *W, int64_t r, const float *x, const float *xg)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const __m256i m4 = _mm256_set1_epi32(0xF);
    __m256 acc = _mm256_setzero_ps();
    float mins = 0;
    for (int64_t k = 0; k < W->in; k += 32, b += 18) {
        _mm_prefetch((const char *)b + 512, _MM_HINT_T0);
        float d = h2f_f16c(b);
        __m256i v0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(b + 2)));
        __m256i v1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(b + 10)));
        __m256 s0 =
            _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_and_si256(v0, m4)), _mm256_loadu_ps(x + k));
        __m256 s1 =
            _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_and_si256(v1, m4)), _mm256_loadu_ps(x + k + 8));
        s0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(v0, 4)),
                             _mm256_loadu_ps(x + k + 16), s0);
        s1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(v1, 4)),
                             _mm256_loadu_ps(x + k + 24), s1);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_add_ps(s0, s1), acc);
        mins += 8 * d * xg[k / 32];
    }
    return hsum256(acc) - mins;
}

/* signed byte k of each 32-bit lane of v, as 8 floats */
AVX2 static inline __attribute__((always_inline)) __m256 lane_sbyte(__m256i v, int k)
{
    return _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(v, 24 - 8 * k), 24));
}

/* Q6_K: per 128 elements, quarter k (32 elements) takes the low (k < 2) or
 * high nibbles of ql[32 (k % 2) + l], bits 2k of qh[l] above them, minus
 * 32, times d and an int8 scale per 16. Read as x_prep's lanes: lanes 0..3
 * hold elements 0..15 of a quarter, lanes 4..7 elements 16..31, so the two
 * scales of a quarter are one vector */
AVX2 static float row_q6_k_avx2(const struct wmat *W, int64_t r, const float *xg)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const float *lanes = xg + W->in / 32;
    const __m256i m4 = _mm256_set1_epi8(0xF), m3 = _mm256_set1_epi8(3), c32 = _mm256_set1_epi8(32);
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    for (int64_t k = 0; k < W->in; k += 256, b += 210) {
        _mm_prefetch((const char *)b + 420, _MM_HINT_T0);
        _mm_prefetch((const char *)b + 484, _MM_HINT_T0);
        const float d = h2f_f16c(b + 208);
        float ds[16];
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)(b + 192));
        _mm256_storeu_ps(
            ds, _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc8))));
        _mm256_storeu_ps(ds + 8,
                         _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
                                                              _mm_srli_si128(sc8, 8)))));
        for (int n = 0; n < 2; n++) {
            const uint8_t *ql = b + 64 * n;
            const __m256i h = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * n));
            for (int q = 0; q < 4; q++) {
                __m256i v = _mm256_loadu_si256((const __m256i *)(ql + 32 * (q % 2)));
                __m256i lo = _mm256_and_si256(q < 2 ? v : _mm256_srli_epi16(v, 4), m4);
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(h, 2 * q), m3);
                __m256i x6 = _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), c32);
                const float *xl = lanes + k + 128 * n + 32 * q;
                __m256 s0 = _mm256_mul_ps(lane_sbyte(x6, 0), _mm256_loadu_ps(xl));
                __m256 s1 = _mm256_mul_ps(lane_sbyte(x6, 1), _mm256_loadu_ps(xl + 8));
                s0 = _mm256_fmadd_ps(lane_sbyte(x6, 2), _mm256_loadu_ps(xl + 16), s0);
                s1 = _mm256_fmadd_ps(lane_sbyte(x6, 3), _mm256_loadu_ps(xl + 24), s1);
                const float *sq = ds + 8 * n + 2 * q;
                __m256 sc = _mm256_setr_m128(_mm_broadcast_ss(sq), _mm_broadcast_ss(sq + 1));
                if (q % 2)
                    a1 = _mm256_fmadd_ps(sc, _mm256_add_ps(s0, s1), a1);
                else
                    a0 = _mm256_fmadd_ps(sc, _mm256_add_ps(s0, s1), a0);
            }
        }
    }
    return hsum256(_mm256_add_ps(a0, a1));
}

/* the 16 IQ4 (non-linear 4-bit) values ggml uses */
static const int8_t kvalues_iq4[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                       1,    13,   25,  38,  53,  69,  89,  113};

/* sum over 32 IQ4 elements (16 bytes at q: low nibbles first, then high)
 * of value x x, unscaled */
AVX2 static __m256 iq4_32(const uint8_t *q, const float *x)
{
    const __m128i table = _mm_loadu_si128((const __m128i *)kvalues_iq4), m4 = _mm_set1_epi8(0xF);
    __m128i bytes = _mm_loadu_si128((const __m128i *)q);
    __m128i lo = _mm_shuffle_epi8(table, _mm_and_si128(bytes, m4));
    __m128i hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(bytes, 4), m4));
    __m256 s0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), _mm256_loadu_ps(x));
    __m256 s1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))),
                              _mm256_loadu_ps(x + 8));
    s0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), _mm256_loadu_ps(x + 16), s0);
    s1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))),
                         _mm256_loadu_ps(x + 24), s1);
    return _mm256_add_ps(s0, s1);
}

/* IQ4_NL: blocks of 32, an fp16 scale and 16 bytes */
AVX2 static float row_iq4_nl_avx2(const struct wmat *W, int64_t r, const float *x)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0; k < W->in; k += 32, b += 18)
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f_f16c(b)), iq4_32(b + 2, x + k), acc);
    return hsum256(acc);
}

/* IQ4_XS: superblocks of 256; 6-bit group scales (4 low bits in scales_l,
 * 2 high in scales_h), value scale d (ls - 32) */
AVX2 static float row_iq4_xs_avx2(const struct wmat *W, int64_t r, const float *x)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    for (int64_t k = 0; k < W->in; k += 256, b += 136) {
        _mm_prefetch((const char *)b + 408, _MM_HINT_T0);
        const float d = h2f_f16c(b);
        const unsigned sh = (unsigned)(b[2] | b[3] << 8);
        const uint8_t *sl = b + 4, *qs = b + 8;
        for (int ib = 0; ib < 8; ib += 2) {
            int ls0 = ((sl[ib / 2] >> 0) & 0xF) | (int)(((sh >> (2 * ib)) & 3) << 4);
            int ls1 = ((sl[ib / 2] >> 4) & 0xF) | (int)(((sh >> (2 * ib + 2)) & 3) << 4);
            a0 = _mm256_fmadd_ps(_mm256_set1_ps(d * (float)(ls0 - 32)),
                                 iq4_32(qs + 16 * ib, x + k + 32 * ib), a0);
            a1 = _mm256_fmadd_ps(_mm256_set1_ps(d * (float)(ls1 - 32)),
                                 iq4_32(qs + 16 * ib + 16, x + k + 32 * ib + 32), a1);
        }
    }
    return hsum256(_mm256_add_ps(a0, a1));
}

/* 8 F16 (F16C's conversion) or BF16 (the high half of an f32) at p */
AVX2 static inline __attribute__((always_inline)) __m256 half8(const uint8_t *p, int bf16)
{
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    if (!bf16) return _mm256_cvtph_ps(v);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
}

/* F16 and BF16 rows: 16 elements converted in registers and multiplied at
 * once; the tail through dequant's own conversion */
AVX2 static float row_half_avx2(const struct wmat *W, int64_t r, const float *x, int bf16)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    int64_t k = 0;
    for (; k + 16 <= W->in; k += 16) {
        _mm_prefetch((const char *)(b + 2 * k) + 512, _MM_HINT_T0);
        s0 = _mm256_fmadd_ps(half8(b + 2 * k, bf16), _mm256_loadu_ps(x + k), s0);
        s1 = _mm256_fmadd_ps(half8(b + 2 * k + 16, bf16), _mm256_loadu_ps(x + k + 8), s1);
    }
    float s = hsum256(_mm256_add_ps(s0, s1)), w;
    for (; k < W->in; k++) {
        dequant_row(W->type, b + 2 * k, &w, 1);
        s += w * x[k];
    }
    return s;
}

/* the scales of a Q4_K/Q5_K block b (d at b, dmin at b + 2, the 12 packed
 * 6-bit scales and mins at b + 4): d sc_g into ds[8]; returns the mins'
 * share, dmin m_g times the group sums of x (xg), as 8 partial sums. The
 * 12 bytes are unpacked as whole words into 8 scale bytes and 8 min bytes
 * (scales 0..3: bytes 0..3 & 63; 4..7: bytes 8..11 & 15 with the top 2 bits
 * of bytes 0..3 above; mins likewise from bytes 4..7 and 8..11 >> 4) */
AVX2 static inline __attribute__((always_inline)) __m256 k4_scales(const uint8_t *b,
                                                                   const float *xg, float ds[8])
{
    const uint32_t k1 = 0x3f3f3f3f, k2 = 0x0f0f0f0f, k3 = 0x03030303;
    uint32_t u[4];
    memcpy(u, b + 4, 12);
    u[3] = ((u[2] >> 4) & k2) | (((u[1] >> 6) & k3) << 4);
    const uint32_t mins_lo = u[1] & k1;
    u[1] = (u[2] & k2) | (((u[0] >> 6) & k3) << 4);
    u[2] = mins_lo;
    u[0] &= k1;
    __m128i v = _mm_loadu_si128((const __m128i *)u);
    __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)),
           mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)));
    _mm256_storeu_ps(ds, _mm256_mul_ps(_mm256_set1_ps(h2f_f16c(b)), sc));
    __m256 dm = _mm256_mul_ps(_mm256_set1_ps(h2f_f16c(b + 2)), mn);
    return _mm256_mul_ps(dm, _mm256_loadu_ps(xg));
}

/* byte k of each 32-bit lane of v, as 8 floats */
AVX2 static inline __attribute__((always_inline)) __m256 lane_byte(__m256i v, int k)
{
    const __m256i m = _mm256_set1_epi32(0xFF);
    return _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(v, 8 * k), m));
}

/* sum over a 32-element group of q x: q in the bytes of v (byte l is
 * element l), x as x_prep's lanes */
AVX2 static inline __attribute__((always_inline)) __m256 lanes_dot(__m256i v, const float *xl)
{
    __m256 s0 = _mm256_mul_ps(lane_byte(v, 0), _mm256_loadu_ps(xl));
    __m256 s1 = _mm256_mul_ps(lane_byte(v, 1), _mm256_loadu_ps(xl + 8));
    s0 = _mm256_fmadd_ps(lane_byte(v, 2), _mm256_loadu_ps(xl + 16), s0);
    s1 = _mm256_fmadd_ps(lane_byte(v, 3), _mm256_loadu_ps(xl + 24), s1);
    return _mm256_add_ps(s0, s1);
}

/* Q4_K: y = d sc q - dmin m per 32; dot = sum_g d sc_g (x.q)_g - dmin m_g sum(x)_g,
 * with the group sums and lanes of x prepared once per product (xg) */
AVX2 static float row_q4_k_avx2(const struct wmat *W, int64_t r, const float *xg)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const float *lanes = xg + W->in / 32;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, accm = a0;
    for (int64_t k = 0; k < W->in; k += 256, b += 144) {
        _mm_prefetch((const char *)b + 576, _MM_HINT_T0); /* 4 blocks ahead */
        _mm_prefetch((const char *)b + 640, _MM_HINT_T0);
        float ds[8];
        accm = _mm256_add_ps(accm, k4_scales(b, xg + k / 32, ds));
        /* pairs of groups share 32 bytes: low nibbles are group 2p, high
         * 2p + 1; each group summed unscaled and scaled once */
        for (int p = 0; p < 4; p++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(b + 16 + 32 * p));
            __m256i lo = _mm256_and_si256(v, m4),
                    hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            const float *xl = lanes + k + 64 * p;
            a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(ds + 2 * p), lanes_dot(lo, xl), a0);
            a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(ds + 2 * p + 1), lanes_dot(hi, xl + 32), a1);
        }
    }
    return hsum256(_mm256_add_ps(a0, a1)) - hsum256(accm);
}

/* Q5_K: Q4_K's layout (176 bytes: d, dmin, scales, then 32 bytes qh before
 * the 128 of nibbles) with a fifth bit per element: bit 2p of qh[l] for
 * element l of group 2p, bit 2p + 1 for group 2p + 1 */
AVX2 static float row_q5_k_avx2(const struct wmat *W, int64_t r, const float *xg)
{
    const uint8_t *b = W->data + (size_t)r * W->row_bytes;
    const float *lanes = xg + W->in / 32;
    const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, accm = a0;
    for (int64_t k = 0; k < W->in; k += 256, b += 176) {
        _mm_prefetch((const char *)b + 704, _MM_HINT_T0);
        _mm_prefetch((const char *)b + 768, _MM_HINT_T0);
        float ds[8];
        accm = _mm256_add_ps(accm, k4_scales(b, xg + k / 32, ds));
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(b + 16));
        for (int p = 0; p < 4; p++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(b + 48 + 32 * p));
            /* within 16-bit lanes: a shift by 2p < 8 brings nothing of the
             * high byte into bit 0 of the low one */
            __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * p), one),
                    h1 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * p + 1), one);
            __m256i lo = _mm256_or_si256(_mm256_and_si256(v, m4), _mm256_slli_epi16(h0, 4)),
                    hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4),
                                         _mm256_slli_epi16(h1, 4));
            const float *xl = lanes + k + 64 * p;
            a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(ds + 2 * p), lanes_dot(lo, xl), a0);
            a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(ds + 2 * p + 1), lanes_dot(hi, xl + 32), a1);
        }
    }
    return hsum256(_mm256_add_ps(a0, a1)) - hsum256(accm);
}

__attribute__((target("avx512f"))) static float dot_avx512(const float *a, const float *b,
                                                           int64_t n)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 32 <= n; k += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k), _mm512_loadu_ps(b + k), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k + 16), _mm512_loadu_ps(b + k + 16), s1);
    }
    float s = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    for (; k < n; k++)
        s += a[k] * b[k];
    return s;
}
#endif

enum kernel { K_PORTABLE, K_AVX2, K_AVX512 };

static enum kernel kernel_detect(void)
{
#ifdef QG_X86
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && quant_has_f16c();
    if (avx2 && __builtin_cpu_supports("avx512f")) return K_AVX512;
    if (avx2) return K_AVX2;
#endif
    return K_PORTABLE;
}

static enum kernel kernel_pick(void)
{
    static int picked = -1; /* every thread computes the same answer */
    int k = __atomic_load_n(&picked, __ATOMIC_RELAXED);
    if (k < 0) {
        k = (int)kernel_detect();
        __atomic_store_n(&picked, k, __ATOMIC_RELAXED);
    }
    return (enum kernel)k;
}

const char *matmul_kernel_name(void)
{
    static const char *const names[] = {"portable", "avx2", "avx512"};
    return names[kernel_pick()];
}

/* What the 4-bit kernels need of x, once per product: at prep, the sums of
 * x over 32-element groups (Q4_0's offset, the K formats' minimums), then at
 * prep + n / 32 x with each 32-element group transposed as 8 x 4 ->
 * 4 x 8 (lanes[32 g + 8 k + i] = x[32 g + 4 i + k]): a 32-bit lane i of
 * 32 loaded bytes holds bytes 4i..4i+3, so shifting the lanes by 8k puts
 * byte 4i + k of every lane in place, with no shuffles. */
/* 1 when the kernel of `type` reads x_prep's sums or lanes */
static int uses_prep(uint32_t type)
{
    return type == GGML_Q4_0 || type == GGML_Q4_K || type == GGML_Q5_K || type == GGML_Q6_K;
}

static void x_prep(const float *x, int64_t n, float *prep)
{
    float *lanes = prep + n / 32;
    for (int64_t g = 0; g < n / 32; g++) {
        float s = 0;
        for (int j = 0; j < 32; j++)
            s += x[32 * g + j];
        prep[g] = s;
        for (int k = 0; k < 4; k++)
            for (int i = 0; i < 8; i++)
                lanes[32 * g + 8 * k + i] = x[32 * g + 4 * i + k];
    }
}

static void rows_fused(float *y, const float *x, const struct wmat *W, int64_t r0, int64_t r1,
                       float *row, const float *xg)
{
    enum kernel k = kernel_pick();
#ifdef QG_X86
    if (k != K_PORTABLE && W->type == GGML_Q8_0) {
        for (int64_t r = r0; r < r1; r++)
            y[r - r0] = row_q8_0_avx2(W, r, x);
        return;
    }
    if (k != K_PORTABLE && (W->type == GGML_IQ4_NL || W->type == GGML_IQ4_XS)) {
        for (int64_t r = r0; r < r1; r++)
            y[r - r0] =
                W->type == GGML_IQ4_NL ? row_iq4_nl_avx2(W, r, x) : row_iq4_xs_avx2(W, r, x);
        return;
    }
    if (k != K_PORTABLE && (W->type == GGML_F16 || W->type == GGML_BF16)) {
        for (int64_t r = r0; r < r1; r++)
            y[r - r0] = row_half_avx2(W, r, x, W->type == GGML_BF16);
        return;
    }
    if (k != K_PORTABLE && W->type == GGML_Q6_K && xg) {
        for (int64_t r = r0; r < r1; r++)
            y[r - r0] = row_q6_k_avx2(W, r, xg);
        return;
    }
    if (k != K_PORTABLE && W->type == GGML_Q4_0 && xg) {
        for (int64_t r = r0; r < r1; r++)
            y[r - r0] = row_q4_0_avx2(W, r, x, xg);
        return;
    }
    if (k != K_PORTABLE && (W->type == GGML_Q4_K || W->type == GGML_Q5_K) && xg) {
        for (int64_t r = r0; r < r1; r++)
            y[r - r0] = W->type == GGML_Q4_K ? row_q4_k_avx2(W, r, xg) : row_q5_k_avx2(W, r, xg);
        return;
    }
    dot_fn dot = k == K_AVX512 ? dot_avx512 : k == K_AVX2 ? dot_avx2 : dot_portable;
#else
    (void)xg;
    dot_fn dot = dot_portable;
#endif
    if (W->type == GGML_F32) {
        for (int64_t r = r0; r < r1; r++)
            y[r - r0] =
                dot((const float *)(const void *)(W->data + (size_t)r * W->row_bytes), x, W->in);
        return;
    }
    for (int64_t r = r0; r < r1; r++)
        y[r - r0] = row_generic(W, r, x, row, dot);
}

void matmul_rows_fused(float *y, const float *x, const struct wmat *W, int64_t r0, int64_t r1,
                       float *row)
{
    float *xg = W->in % 32 == 0 && uses_prep(W->type)
                    ? malloc((size_t)(W->in / 32 + W->in) * sizeof *xg)
                    : NULL;
    if (xg) x_prep(x, W->in, xg);
    rows_fused(y, x, W, r0, r1, row, xg);
    free(xg);
}

struct mv_job {
    float *y;
    const float *x, *bias, *xg;
    const struct wmat *W;
    float beta;
    float *scratch;
    size_t per_thread;
};

static void mv_rows(void *arg, int64_t c0, int64_t c1, int thread)
{
    const struct mv_job *j = arg;
    int64_t r0 = c0 * 16, r1 = c1 * 16 < j->W->out ? c1 * 16 : j->W->out;
    float *buf = j->scratch + (size_t)thread * j->per_thread, *tmp = buf + ROW_CHUNK;
    for (int64_t a = r0; a < r1; a += 256) {
        int64_t b = a + 256 < r1 ? a + 256 : r1;
        rows_fused(tmp, j->x, j->W, a, b, buf, j->xg);
        for (int64_t r = a; r < b; r++)
            j->y[r] = tmp[r - a] + (j->beta != 0.0f ? j->beta * j->y[r] : 0.0f) +
                      (j->bias ? j->bias[r] : 0.0f);
    }
}

void matmul_w(float *y, const float *x, const struct wmat *W, const float *bias, int n, float beta,
              int n_threads, float *scratch)
{
    size_t per = matmul_scratch_floats(W->in);
    if (n == 1) {
        /* scratch of thread 0 ends with x_prep's sums and lanes; each
         * thread: a decode buffer and 256 outputs */
        float *xg = NULL;
        size_t prep = (size_t)(W->in / 32 + W->in);
        if (W->in % 32 == 0 && uses_prep(W->type) && per >= ROW_CHUNK + 256 + prep) {
            xg = scratch + per - prep;
            x_prep(x, W->in, xg);
        }
        struct mv_job j = {y, x, bias, xg, W, beta, scratch, per};
        parallel_for(parallel_threads_for(n_threads, 2.0 * (double)W->in * (double)W->out),
                     (W->out + 15) / 16, mv_rows, &j);
        return;
    }
    struct mm_job j = {y, x, bias, W, n, beta, scratch, per};
    int rows = matmul_panel_rows(W->in, W->out);
    parallel_for(parallel_threads_for(n_threads, 2.0 * n * (double)W->in * (double)W->out),
                 (W->out + rows - 1) / rows, tile_panels, &j);
}
