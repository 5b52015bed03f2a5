/* kld_ref — top-K references of a baseline's distributions. */
#include "metrics/kld_ref.h"
#include "metrics/kld.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { HEADER = 12 };

size_t kld_ref_size(int n, int k)
{
    return HEADER + (size_t)n * (8 + 8 * (size_t)k);
}

static void put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8), p[2] = (unsigned char)(v >> 16),
    p[3] = (unsigned char)(v >> 24);
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void putf(unsigned char *p, float f)
{
    uint32_t v;
    memcpy(&v, &f, 4);
    put32(p, v);
}

static float getf(const unsigned char *p)
{
    uint32_t v = get32(p);
    float f;
    memcpy(&f, &v, 4);
    return f;
}

/* the k largest of row (ids, values), largest first: a small sorted list */
static void top_k(const float *row, int V, int k, int32_t *ids, float *vals)
{
    int have = 0;
    for (int v = 0; v < V; v++) {
        float x = row[v];
        if (have == k && !(x > vals[k - 1])) continue;
        int j = have < k ? have++ : k - 1;
        while (j > 0 && x > vals[j - 1]) {
            vals[j] = vals[j - 1], ids[j] = ids[j - 1];
            j--;
        }
        vals[j] = x, ids[j] = v;
    }
}

void kld_ref_encode(const float *rows, int n_vocab, const int32_t *actual, int n, int k,
                    unsigned char *out)
{
    if (k > n_vocab) k = n_vocab;
    put32(out, KLD_REF_MAGIC);
    put32(out + 4, (uint32_t)k);
    put32(out + 8, (uint32_t)n);
    int32_t ids[KLD_REF_TOP_K * 4];
    float vals[KLD_REF_TOP_K * 4];
    unsigned char *p = out + HEADER;
    for (int i = 0; i < n; i++) {
        const float *row = rows + (size_t)i * (size_t)n_vocab;
        top_k(row, n_vocab, k, ids, vals);
        double mass = 0;
        for (int j = 0; j < k; j++)
            mass += exp((double)vals[j]);
        double rest = 1 - mass; /* the rest of the vocabulary, together */
        putf(p, row[actual[i]]);
        putf(p + 4, rest > 1e-30 ? (float)log(rest) : -INFINITY);
        for (int j = 0; j < k; j++) {
            put32(p + 8 + 4 * (size_t)j, (uint32_t)ids[j]);
            putf(p + 8 + 4 * (size_t)k + 4 * (size_t)j, vals[j]);
        }
        p += 8 + 8 * (size_t)k;
    }
}

int kld_ref_check(const unsigned char *blob, size_t len, int n, int *k)
{
    if (!blob || len < HEADER || get32(blob) != KLD_REF_MAGIC) return -1;
    uint32_t kk = get32(blob + 4), nn = get32(blob + 8);
    if (kk < 1 || kk > KLD_REF_TOP_K * 4 || nn != (uint32_t)n || len != kld_ref_size(n, (int)kk))
        return -1;
    *k = (int)kk;
    return 0;
}

static const unsigned char *position(const unsigned char *blob, int k, int i)
{
    return blob + HEADER + (size_t)i * (8 + 8 * (size_t)k);
}

/* One position's values: 0, or -1 with why. */
static int check_position(const unsigned char *p, int k, int n_vocab, char *why, size_t whylen)
{
    const double slack = 1e-3; /* float rounding of a log-prob <= 0 */
    double lp_x = getf(p), log_rest = getf(p + 4), mass = 0, prev = INFINITY;
    if (!isfinite(lp_x) || lp_x > slack)
        return snprintf(why, whylen, "the actual token's log-prob is %g", lp_x), -1;
    if (isnan(log_rest) || log_rest > slack)
        return snprintf(why, whylen, "the rest's log-prob is %g", log_rest), -1;
    for (int j = 0; j < k; j++) {
        int32_t v = (int32_t)get32(p + 8 + 4 * (size_t)j);
        double lb = getf(p + 8 + 4 * (size_t)k + 4 * (size_t)j);
        if (v < 0 || v >= n_vocab)
            return snprintf(why, whylen, "token id %d is outside the vocabulary (%d)", (int)v,
                            n_vocab),
                   -1;
        if (!isfinite(lb) || lb > slack || lb > prev + slack)
            return snprintf(why, whylen, "top-%d log-prob %g is not a sorted log-prob", j + 1, lb),
                   -1;
        prev = lb;
        mass += exp(lb);
    }
    mass += isfinite(log_rest) ? exp(log_rest) : 0;
    if (fabs(mass - 1) > 0.01)
        return snprintf(why, whylen, "its probabilities sum to %g, not 1", mass), -1;
    return 0;
}

int kld_ref_validate(const unsigned char *blob, int k, int n, int n_vocab, char *why, size_t whylen)
{
    for (int i = 0; i < n; i++) {
        char w[160];
        if (check_position(position(blob, k, i), k, n_vocab, w, sizeof w))
            return snprintf(why, whylen, "position %d: %s", i, w), -1;
    }
    return 0;
}

double kld_ref_lp_actual(const unsigned char *blob, int k, int i)
{
    return getf(position(blob, k, i));
}

double kld_ref_against(const unsigned char *blob, int k, int i, const float *cand_row, int n_vocab,
                       int32_t cand_top, int32_t actual, int *top1_agree, double *dp)
{
    const unsigned char *p = position(blob, k, i);
    double lp_x = getf(p), log_rest = getf(p + 4), kl = 0, cand_in = 0;
    for (int j = 0; j < k; j++) {
        int32_t v = (int32_t)get32(p + 8 + 4 * (size_t)j);
        double lb = getf(p + 8 + 4 * (size_t)k + 4 * (size_t)j);
        if (v < 0 || v >= n_vocab) continue;
        double lc = cand_row[v];
        kl += exp(lb) * (lb - lc);
        cand_in += exp(lc);
    }
    double cand_rest = 1 - cand_in;
    if (isfinite(log_rest) && cand_rest > 1e-30)
        kl += exp(log_rest) * (log_rest - log(cand_rest));
    else if (isfinite(log_rest)) /* the candidate puts no mass where the baseline has some */
        kl += exp(log_rest) * (log_rest - log(1e-30));
    *top1_agree = cand_top == (int32_t)get32(p + 8);
    *dp = kld_delta_p(lp_x, cand_row[actual]);
    return kl;
}
