/* vecmath — elementwise loops, one C body per vector width. */

/* No fused multiply-add (fastmath.h's code too, hence first): built with
 * -ffp-contract=off, and clang told so again here, as it would fuse
 * x * y + z within a statement where the wide sets enable FMA */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#include "backends/vecmath.h"
#include "backends/fastmath.h"
#include "backends/matmul_impl.h"

/* the scalar max (compilers keep this loop scalar: NaN and signed zeros) */
static float max_base(const float *x, int64_t n, float m)
{
    for (int64_t i = 0; i < n; i++)
        m = x[i] > m ? x[i] : m;
    return m;
}

/* rows ahead whose lines weighted_ prefetches: attention's V rows lie a
 * whole cache row apart (all heads of a position), which the hardware's
 * streams follow late */
enum { VM_AHEAD = 16 };

/* The loops, written once; VM_SET stamps them out under a target. */
#define VM_SET(sfx, attr)                                                                          \
    attr static void exp_##sfx(float *y, const float *x, float shift, int64_t n)                   \
    {                                                                                              \
        for (int64_t i = 0; i < n; i++)                                                            \
            y[i] = qg_expf(x[i] - shift);                                                          \
    }                                                                                              \
    attr static void swiglu_##sfx(float *g, const float *u, int64_t n)                             \
    {                                                                                              \
        for (int64_t i = 0; i < n; i++)                                                            \
            g[i] = g[i] / (1.0f + qg_expf(-g[i])) * u[i];                                          \
    }                                                                                              \
    attr static void scale_##sfx(float *x, float s, int64_t n)                                     \
    {                                                                                              \
        for (int64_t i = 0; i < n; i++)                                                            \
            x[i] *= s;                                                                             \
    }                                                                                              \
    attr static void weighted_##sfx(float *o, const float *w, const float *v, int64_t T,           \
                                    int64_t stride, int64_t n)                                     \
    {                                                                                              \
        for (int64_t d = 0; d < n; d++)                                                            \
            o[d] = 0.0f;                                                                           \
        for (int64_t t = 0; t < T; t++) {                                                          \
            for (int64_t d = 0; t + VM_AHEAD < T && d < n; d += 16) /* rows a stride apart */      \
                __builtin_prefetch(v + (t + VM_AHEAD) * stride + d);                               \
            for (int64_t d = 0; d < n; d++)                                                        \
                o[d] += w[t] * v[t * stride + d];                                                  \
        }                                                                                          \
    }

VM_SET(base, )

struct vm_set {
    float (*max)(const float *x, int64_t n, float m);
    void (*exp)(float *y, const float *x, float shift, int64_t n);
    void (*swiglu)(float *g, const float *u, int64_t n);
    void (*scale)(float *x, float s, int64_t n);
    void (*weighted)(float *o, const float *w, const float *v, int64_t T, int64_t stride,
                     int64_t n);
};

#define VM_ENTRY(sfx)                                                                              \
    {                                                                                              \
        max_##sfx, exp_##sfx, swiglu_##sfx, scale_##sfx, weighted_##sfx                            \
    }

#if defined(__x86_64__) && defined(__GNUC__)
#ifdef __clang__
#define VM_AVX512 __attribute__((target("avx512f,avx512dq"), min_vector_width(512)))
#else
#define VM_AVX512 __attribute__((target("avx512f,avx512dq,prefer-vector-width=512")))
#endif
#include <immintrin.h>

VM_SET(avx2, __attribute__((target("avx2"))))
VM_SET(avx512, VM_AVX512)

/* The max by lanes: (v > m ? v : m) is what maxps computes, lane by lane;
 * the lanes then meet m in the scalar loop's form */
__attribute__((target("avx2"))) static float max_avx2(const float *x, int64_t n, float m)
{
    __m256 a = _mm256_set1_ps(m), b = a;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a = _mm256_max_ps(_mm256_loadu_ps(x + i), a);
        b = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), b);
    }
    float l[16];
    _mm256_storeu_ps(l, a);
    _mm256_storeu_ps(l + 8, b);
    return max_base(x + i, n - i, max_base(l, 16, m));
}

VM_AVX512 static float max_avx512(const float *x, int64_t n, float m)
{
    __m512 a = _mm512_set1_ps(m), b = a;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a = _mm512_max_ps(_mm512_loadu_ps(x + i), a);
        b = _mm512_max_ps(_mm512_loadu_ps(x + i + 16), b);
    }
    float l[32];
    _mm512_storeu_ps(l, a);
    _mm512_storeu_ps(l + 16, b);
    return max_base(x + i, n - i, max_base(l, 32, m));
}
/* weighted_'s sums held in nv registers of 16 (nv a constant where it is
 * inlined): the same operations on each element in the same order (0,
 * then + w[t] v[t][d] for t in order, unfused), without the store and
 * reload of o per key that the C loop makes (o might alias v there) */
VM_AVX512 static inline __attribute__((always_inline)) void
weighted_regs(float *o, const float *w, const float *v, int64_t T, int64_t stride, int nv)
{
    __m512 acc[16];
    for (int i = 0; i < nv; i++)
        acc[i] = _mm512_setzero_ps();
    for (int64_t t = 0; t < T; t++) {
        const float *row = v + t * stride;
        for (int i = 0; t + VM_AHEAD < T && i < nv; i++)
            _mm_prefetch((const char *)(row + VM_AHEAD * stride + 16 * i), _MM_HINT_T0);
        const __m512 wt = _mm512_set1_ps(w[t]);
        for (int i = 0; i < nv; i++)
            acc[i] = _mm512_add_ps(acc[i], _mm512_mul_ps(wt, _mm512_loadu_ps(row + 16 * i)));
    }
    for (int i = 0; i < nv; i++)
        _mm512_storeu_ps(o + 16 * i, acc[i]);
}

VM_AVX512 static void weighted512(float *o, const float *w, const float *v, int64_t T,
                                  int64_t stride, int64_t n)
{
    switch (n) {
    case 64:
        weighted_regs(o, w, v, T, stride, 4);
        return;
    case 128:
        weighted_regs(o, w, v, T, stride, 8);
        return;
    default:
        if (n % 16 || n > 256)
            weighted_avx512(o, w, v, T, stride, n);
        else
            weighted_regs(o, w, v, T, stride, (int)(n / 16));
    }
}

/* indexed by enum mv_isa */
static const struct vm_set sets[] = {
    VM_ENTRY(base),
    VM_ENTRY(avx2),
    {max_avx512, exp_avx512, swiglu_avx512, scale_avx512, weighted512},
    {max_avx512, exp_avx512, swiglu_avx512, scale_avx512, weighted512}};
#else
static const struct vm_set sets[] = {VM_ENTRY(base), VM_ENTRY(base), VM_ENTRY(base),
                                     VM_ENTRY(base)};
#endif

static const struct vm_set *set(void)
{
    return &sets[mv_isa_current()];
}

float vm_max(const float *x, int64_t n, float m)
{
    return set()->max(x, n, m);
}

void vm_exp_shifted(float *y, const float *x, float shift, int64_t n)
{
    set()->exp(y, x, shift, n);
}

void vm_swiglu(float *g, const float *u, int64_t n)
{
    set()->swiglu(g, u, n);
}

void vm_scale(float *x, float s, int64_t n)
{
    set()->scale(x, s, n);
}

void vm_weighted_rows(float *o, const float *w, const float *v, int64_t T, int64_t stride,
                      int64_t n)
{
    set()->weighted(o, w, v, T, stride, n);
}
