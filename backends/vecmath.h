/* vecmath — the forward pass's elementwise loops (max, exp, SiLU gating,
 * scaling) as wide as the CPU's vectors, with the scalar code's bits.
 *
 * Each function is one C loop compiled once per kernel set (portable,
 * AVX2, AVX-512; the set matmul_kernel_name() names, avx512vnni running
 * the AVX-512 one). The file is built
 * with -ffp-contract=off (and tells clang the same by pragma), so no
 * multiply and add are fused: every width performs the scalar operations
 * of fastmath.h lane by lane, and the results are the same bits whatever
 * the set (tests compare them bit for bit).
 */
#ifndef QG_VECMATH_H
#define QG_VECMATH_H

#include <stdint.h>

/* The largest of m and x[0..n) by `x[i] > m ? x[i] : m` in order: a NaN in
 * x is passed over, a NaN m stays. When the largest is a zero, which sign
 * of it comes back may differ from the loop's: x - max then can differ in
 * the sign of a zero result, which changes no exp and no sum. */
float vm_max(const float *x, int64_t n, float m);

/* y[i] = qg_expf(x[i] - shift) for i in [0, n); y may be x. */
void vm_exp_shifted(float *y, const float *x, float shift, int64_t n);

/* g[i] = silu(g[i]) * u[i] = g[i] / (1 + qg_expf(-g[i])) * u[i]. */
void vm_swiglu(float *g, const float *u, int64_t n);

/* x[i] *= s. */
void vm_scale(float *x, float s, int64_t n);

/* o[d] = sum over t in [0, T) of w[t] v[t stride + d], d in [0, n): each
 * o[d] summed in t order from 0 (one query row's attention output). */
void vm_weighted_rows(float *o, const float *w, const float *v, int64_t T, int64_t stride,
                      int64_t n);

#endif
