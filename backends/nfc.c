/* nfc — Normalization Form C over the generated tables (see the header). */
#include "backends/nfc.h"
#include "core/status.h"

#include <stdlib.h>
#include <string.h>

enum {
    S_BASE = 0xAC00,
    L_BASE = 0x1100,
    V_BASE = 0x1161,
    T_BASE = 0x11A7,
    L_COUNT = 19,
    V_COUNT = 21,
    T_COUNT = 28,
    N_COUNT = V_COUNT * T_COUNT,
    S_COUNT = L_COUNT * N_COUNT,
    RAW = 0x80000000u /* a byte that is not UTF-8: RAW | byte */
};

static int ccc(uint32_t c)
{
    int lo = 0, hi = nfc_n_cccs - 1;
    if (c & RAW || c < 0x300) return 0;
    while (lo <= hi) {
        int m = (lo + hi) / 2;
        if (c < nfc_cccs[m].lo)
            hi = m - 1;
        else if (c > nfc_cccs[m].hi)
            lo = m + 1;
        else
            return nfc_cccs[m].ccc;
    }
    return 0;
}

static const struct nfc_decomp *decomp_of(uint32_t c)
{
    int lo = 0, hi = nfc_n_decomps - 1;
    while (lo <= hi) {
        int m = (lo + hi) / 2;
        if (c < nfc_decomps[m].cp)
            hi = m - 1;
        else if (c > nfc_decomps[m].cp)
            lo = m + 1;
        else
            return &nfc_decomps[m];
    }
    return NULL;
}

/* the primary composite of a + b, or 0 */
static uint32_t compose(uint32_t a, uint32_t b)
{
    if (a >= L_BASE && a < L_BASE + L_COUNT && b >= V_BASE && b < V_BASE + V_COUNT)
        return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
    if (a >= S_BASE && a < S_BASE + S_COUNT && (a - S_BASE) % T_COUNT == 0 && b > T_BASE &&
        b < T_BASE + T_COUNT)
        return a + (b - T_BASE);
    int lo = 0, hi = nfc_n_comps - 1;
    while (lo <= hi) {
        int m = (lo + hi) / 2;
        const struct nfc_comp *p = &nfc_comps[m];
        if (a < p->a || (a == p->a && b < p->b))
            hi = m - 1;
        else if (a > p->a || b > p->b)
            lo = m + 1;
        else
            return p->cp;
    }
    return 0;
}

/* c fully decomposed onto out[*n] (room for 4 more: decompositions are at
 * most 4 deep in code points) */
static void decompose(uint32_t c, uint32_t *out, size_t *n)
{
    if (c >= S_BASE && c < S_BASE + S_COUNT) {
        uint32_t s = c - S_BASE, t = s % T_COUNT;
        out[(*n)++] = L_BASE + s / N_COUNT;
        out[(*n)++] = V_BASE + (s % N_COUNT) / T_COUNT;
        if (t) out[(*n)++] = T_BASE + t;
        return;
    }
    const struct nfc_decomp *d = c & RAW ? NULL : decomp_of(c);
    if (!d) {
        out[(*n)++] = c;
        return;
    }
    decompose(d->a, out, n);
    if (d->b) decompose(d->b, out, n);
}

/* the next code point of s[*i..n) (advancing *i), or RAW | byte */
static uint32_t next_cp(const unsigned char *s, size_t n, size_t *i)
{
    unsigned char b = s[*i];
    int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    uint32_t c = len == 1 ? b : len == 2 ? b & 31u : len == 3 ? b & 15u : b & 7u;
    for (int k = 1; k < len; k++) {
        if (*i + (size_t)k >= n || (s[*i + (size_t)k] & 0xC0) != 0x80) len = 0;
        if (len) c = c << 6 | (s[*i + (size_t)k] & 63u);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (len == 0 || c < min[len] || c > 0x10FFFF || (c >= 0xD800 && c < 0xE000)) {
        (*i)++;
        return RAW | b;
    }
    *i += (size_t)len;
    return c;
}

static size_t put_utf8(uint32_t c, char *o)
{
    if (c & RAW) return o[0] = (char)(c & 0xFF), 1;
    if (c < 0x80) return o[0] = (char)c, 1;
    if (c < 0x800) return o[0] = (char)(0xC0 | c >> 6), o[1] = (char)(0x80 | (c & 63)), 2;
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | c >> 12), o[1] = (char)(0x80 | (c >> 6 & 63));
        o[2] = (char)(0x80 | (c & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | c >> 18), o[1] = (char)(0x80 | (c >> 12 & 63));
    o[2] = (char)(0x80 | (c >> 6 & 63)), o[3] = (char)(0x80 | (c & 63));
    return 4;
}

/* canonical ordering: each run of non-starters stably sorted by class, in
 * linear time (a counting sort over the 255 classes: a run of alternating
 * marks is as long as the text, and an insertion sort of it quadratic);
 * k[] holds each code point's class, tmp room for n code points */
static void reorder(uint32_t *c, uint8_t *k, uint32_t *tmp, size_t n)
{
    for (size_t i = 0; i < n; i++)
        k[i] = (uint8_t)ccc(c[i]);
    for (size_t i = 0; i < n;) {
        if (!k[i]) {
            i++;
            continue;
        }
        size_t j = i, sorted = 1;
        while (j < n && k[j]) {
            sorted &= j == i || k[j - 1] <= k[j];
            j++;
        }
        if (!sorted) {
            size_t at[257] = {0};
            for (size_t p = i; p < j; p++)
                at[k[p] + 1]++;
            for (int b = 1; b < 257; b++)
                at[b] += at[b - 1];
            for (size_t p = i; p < j; p++)
                tmp[at[k[p]]++] = c[p];
            memcpy(c + i, tmp, (j - i) * sizeof *c);
        }
        i = j;
    }
}

/* canonical composition in place; the new length */
static size_t recompose(uint32_t *c, size_t n)
{
    if (!n) return 0;
    size_t starter = 0, w = 1;
    int last = ccc(c[0]) ? 256 : 0; /* a leading non-starter blocks */
    for (size_t i = 1; i < n; i++) {
        int k = ccc(c[i]);
        uint32_t p = (c[starter] & RAW) || (c[i] & RAW) ? 0 : compose(c[starter], c[i]);
        if (p && (last < k || last == 0)) {
            c[starter] = p;
            continue;
        }
        if (!k) starter = w;
        last = k;
        c[w++] = c[i];
    }
    return w;
}

int nfc_normalize(const char *text, size_t n, char **out, size_t *out_n)
{
    if (n > ((size_t)1 << 40)) return QG_ERR_NOMEM; /* 4 code points of 8 bytes per byte */
    size_t ascii = 0;
    while (ascii < n && (unsigned char)text[ascii] < 0x80)
        ascii++;
    size_t cap = ascii < n ? n * 4 + 4 : 0; /* code points: at most 4 per byte */
    uint32_t *c = cap ? malloc(cap * 2 * sizeof *c) : NULL;
    uint8_t *cls = cap ? malloc(cap) : NULL;
    char *o = malloc(ascii < n ? n * 4 + 1 : n + 1);
    if (!o || (cap && (!c || !cls))) {
        free(c), free(cls), free(o);
        return QG_ERR_NOMEM;
    }
    if (ascii == n) { /* ASCII is its own NFC */
        memcpy(o, text, n);
        o[n] = '\0';
        *out = o, *out_n = n;
        return QG_OK;
    }
    size_t m = 0;
    for (size_t i = 0; i < n;)
        decompose(next_cp((const unsigned char *)text, n, &i), c, &m);
    reorder(c, cls, c + cap, m);
    free(cls);
    m = recompose(c, m);
    size_t k = 0;
    for (size_t i = 0; i < m; i++)
        k += put_utf8(c[i], o + k);
    o[k] = '\0';
    free(c);
    *out = o, *out_n = k;
    return QG_OK;
}
