/* fastmath — a branch-free expf the compiler can vectorise.
 *
 * exp(x) = 2^n * e^r with n = round(x / ln 2), r = x - n ln 2 (Cody-Waite
 * split of ln 2), e^r by its degree-6 Taylor polynomial on |r| <= ln2/2
 * (truncation error < 1.3e-7 relative, about 1 ulp). Inputs are clamped to
 * [-87, 88], so exp of very negative numbers is ~1e-38 rather than 0: use it
 * where that is harmless (softmax terms, SiLU), not where exact zeros matter.
 * NaN in, NaN out (with no undefined conversion on the way).
 */
#ifndef QG_FASTMATH_H
#define QG_FASTMATH_H

#include <stdint.h>
#include <string.h>

static inline float qg_expf(float x)
{
    /* xn: clamped, NaN becoming -87 (the exponent stays defined); x:
     * clamped, NaN kept, so that a NaN input gives a NaN result */
    float xn = x > -87.0f ? x : -87.0f;
    xn = xn < 88.0f ? xn : 88.0f;
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    const float magic = 12582912.0f; /* 1.5 * 2^23: rounds to an integer */
    float n = (xn * 1.44269504088896341f + magic) - magic;
    float r = x - n * 0.693145751953125f - n * 1.428606765330187e-06f;
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (0.166666667f +
                                                  r * (0.0416666667f + r * (0.00833333333f +
                                                                            r * 0.00138888889f)))));
    uint32_t e = (uint32_t)((int32_t)n + 127) << 23;
    float s;
    memcpy(&s, &e, 4);
    return p * s;
}

#endif
