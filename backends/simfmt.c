/* simfmt — simulated number formats, bit-exact to their specifications. */
#include "backends/simfmt.h"
#include "backends/act8.h"
#include "backends/ggml_types.h"
#include "backends/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A minifloat: exponent and mantissa bits, bias, the largest finite code
 * (magnitude bits) and whether the all-ones code of E4M3FN kind is NaN. */
struct minifloat {
    int e, m, bias, max_code;
};

static const struct minifloat F_E4M3 = {4, 3, 7, 0x7E}, F_E5M2 = {5, 2, 15, 0x7B},
                              F_E3M2 = {3, 2, 3, 0x1F}, F_E2M1 = {2, 1, 1, 0x7};

/* |x| (finite, >= 0) as magnitude bits: round to nearest even, saturating */
static int mf_encode_mag(const struct minifloat *f, double a)
{
    int emin = 1 - f->bias;
    if (!(a > 0)) return 0;
    int k;
    frexp(a, &k);
    int exp = k - 1; /* a in [2^exp, 2^(exp+1)) */
    long code;
    if (exp < emin) { /* subnormal: steps of 2^(emin - m); may round up to the smallest normal */
        code = (long)nearbyint(ldexp(a, f->m - emin));
    } else {
        long r = (long)nearbyint(ldexp(a, f->m - exp)); /* in [2^m, 2^(m+1)] */
        code =
            ((long)(exp + f->bias) << f->m) + (r - (1L << f->m)); /* a carry moves the exponent */
    }
    return code > f->max_code ? f->max_code : (int)code;
}

static double mf_decode_mag(const struct minifloat *f, int code)
{
    int ef = code >> f->m, mant = code & ((1 << f->m) - 1);
    if (ef == 0) return ldexp((double)mant, 1 - f->bias - f->m);
    return ldexp(1.0 + ldexp((double)mant, -f->m), ef - f->bias);
}

static uint8_t mf_encode(const struct minifloat *f, float x)
{
    int sign = signbit(x) ? 1 : 0;
    double a = fabs((double)x);
    int mag = isinf(a) ? f->max_code : mf_encode_mag(f, a); /* saturate infinities too */
    return (uint8_t)(sign << (f->e + f->m) | mag);
}

static float mf_decode(const struct minifloat *f, uint8_t c)
{
    int sign = (c >> (f->e + f->m)) & 1;
    double v = mf_decode_mag(f, c & ((1 << (f->e + f->m)) - 1));
    return (float)(sign ? -v : v);
}

uint8_t fp8_e4m3_from_f32(float x)
{
    if (isnan(x)) return (uint8_t)(signbit(x) ? 0xFF : 0x7F);
    return mf_encode(&F_E4M3, x);
}

float fp8_e4m3_to_f32(uint8_t c)
{
    if ((c & 0x7F) == 0x7F) return (c & 0x80) ? -NAN : NAN;
    return mf_decode(&F_E4M3, c);
}

uint8_t fp8_e5m2_from_f32(float x)
{
    if (isnan(x)) return (uint8_t)(signbit(x) ? 0xFF : 0x7F);
    return mf_encode(&F_E5M2, x);
}

float fp8_e5m2_to_f32(uint8_t c)
{
    if ((c & 0x7C) == 0x7C) /* exponent all ones: infinity or NaN */
        return (c & 0x03) ? NAN : (c & 0x80) ? -INFINITY : INFINITY;
    return mf_decode(&F_E5M2, c);
}

/* E3M2 and E2M1 have no NaN: a NaN becomes the largest value */
uint8_t fp6_e3m2_from_f32(float x)
{
    return mf_encode(&F_E3M2, isnan(x) ? (signbit(x) ? -INFINITY : INFINITY) : x);
}

float fp6_e3m2_to_f32(uint8_t c)
{
    return mf_decode(&F_E3M2, c & 0x3F);
}

uint8_t fp4_e2m1_from_f32(float x)
{
    return mf_encode(&F_E2M1, isnan(x) ? (signbit(x) ? -INFINITY : INFINITY) : x);
}

float fp4_e2m1_to_f32(uint8_t c)
{
    return mf_decode(&F_E2M1, c & 0xF);
}

/* ---- MX ---- */

static const struct minifloat *elem_fmt(enum simfmt_elem e)
{
    return e == SIMFMT_E4M3 ? &F_E4M3 : e == SIMFMT_E3M2 ? &F_E3M2 : &F_E2M1;
}

static int elem_emax(enum simfmt_elem e)
{
    return e == SIMFMT_E4M3 ? 8 : e == SIMFMT_E3M2 ? 4 : 2;
}

static uint8_t elem_encode(enum simfmt_elem e, float x)
{
    return e == SIMFMT_E4M3 ? fp8_e4m3_from_f32(x) : mf_encode(elem_fmt(e), x);
}

static float elem_decode(enum simfmt_elem e, uint8_t c)
{
    return e == SIMFMT_E4M3 ? fp8_e4m3_to_f32(c) : mf_decode(elem_fmt(e), c);
}

void mx_block_encode(const float *x, int n, enum simfmt_elem e, uint8_t *scale, uint8_t *codes)
{
    float amax = 0;
    int nan = 0;
    for (int i = 0; i < n; i++) {
        nan |= isnan(x[i]);
        if (isfinite(x[i])) amax = fmaxf(amax, fabsf(x[i]));
    }
    int shared = -127;
    if (amax > 0) {
        int k;
        frexpf(amax, &k);
        shared = (k - 1) - elem_emax(e); /* floor(log2(amax)) - emax_elem */
        if (shared < -127) shared = -127;
        if (shared > 127) shared = 127;
    }
    *scale = nan ? 0xFF : (uint8_t)(shared + 127);
    for (int i = 0; i < n; i++)
        codes[i] = elem_encode(e, ldexpf(x[i], -shared));
}

float mx_value(uint8_t scale, uint8_t code, enum simfmt_elem e)
{
    if (scale == 0xFF) return NAN;
    return ldexpf(elem_decode(e, code), (int)scale - 127);
}

/* ---- NVFP4 ---- */

float nvfp4_tensor_scale(float amax)
{
    return amax > 0 && isfinite(amax) ? amax / (448.0f * 6.0f) : 1.0f;
}

void nvfp4_block_encode(const float *x, int n, float ts, uint8_t *scale, uint8_t *codes)
{
    float amax = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(x[i])) amax = fmaxf(amax, fabsf(x[i]));
    *scale = fp8_e4m3_from_f32(amax / 6.0f / ts);
    float sd = fp8_e4m3_to_f32(*scale) * ts;
    for (int i = 0; i < n; i++)
        codes[i] = sd > 0 ? fp4_e2m1_from_f32(x[i] / sd) : 0;
}

float nvfp4_value(uint8_t scale, uint8_t code, float ts)
{
    return fp4_e2m1_to_f32(code) * fp8_e4m3_to_f32(scale) * ts;
}

/* ---- formats by name ---- */

static const struct {
    const char *name;
    enum simfmt_kind kind;
} kinds[] = {{"fp8_e4m3", SIMFMT_FP8_E4M3}, {"fp8", SIMFMT_FP8_E4M3}, {"fp8_e5m2", SIMFMT_FP8_E5M2},
             {"int8", SIMFMT_INT8},         {"int4", SIMFMT_INT4},    {"mxfp8", SIMFMT_MXFP8},
             {"mxfp6", SIMFMT_MXFP6},       {"mxfp4", SIMFMT_MXFP4},  {"nvfp4", SIMFMT_NVFP4}};

#define KNOWN                                                                                      \
    "fp8_e4m3, fp8_e5m2, int8, int4 (with :tensor, :channel or :group:G, and :asym), mxfp8, "      \
    "mxfp6, mxfp4, nvfp4"

static int scaled_elementwise(enum simfmt_kind k)
{
    return k == SIMFMT_FP8_E4M3 || k == SIMFMT_FP8_E5M2 || k == SIMFMT_INT8 || k == SIMFMT_INT4;
}

/* the options after the name: ":tensor", ":channel", ":group:G", ":sym", ":asym" */
static int parse_options(const char *s, const char *full, struct simfmt *f, char *err,
                         size_t errlen)
{
    while (*s == ':') {
        s++;
        size_t len = strcspn(s, ":");
        if (len == 6 && !strncmp(s, "tensor", 6)) {
            f->gran = SIMFMT_TENSOR;
        } else if (len == 7 && !strncmp(s, "channel", 7)) {
            f->gran = SIMFMT_CHANNEL;
        } else if (len == 4 && !strncmp(s, "asym", 4) && f->kind >= SIMFMT_INT8) {
            f->asym = 1;
        } else if (len == 3 && !strncmp(s, "sym", 3)) {
            f->asym = 0;
        } else if (len == 5 && !strncmp(s, "group", 5) && s[5] == ':') {
            char *end;
            long g = strtol(s + 6, &end, 10);
            if (end == s + 6 || g < 1 || g > 1 << 20 || (*end && *end != ':')) {
                snprintf(err, errlen, "format '%s': group size must be 1..1048576", full);
                return -1;
            }
            f->gran = SIMFMT_GROUP;
            f->group = (int)g;
            s = end;
            continue;
        } else {
            snprintf(err, errlen,
                     "format '%s': unknown option '%.*s' (tensor, channel, group:G, "
                     "sym, asym)",
                     full, (int)len, s);
            return -1;
        }
        s += len;
    }
    if (*s) {
        snprintf(err, errlen, "format '%s': unexpected '%s'", full, s);
        return -1;
    }
    return 0;
}

int simfmt_parse(const char *s, struct simfmt *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    size_t len = strcspn(s, ":");
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        if (strlen(kinds[i].name) == len && !strncmp(s, kinds[i].name, len))
            f->kind = kinds[i].kind;
    if (f->kind == SIMFMT_NONE) {
        snprintf(err, errlen, "unknown format '%.*s' (known: %s)", (int)len, s, KNOWN);
        return -1;
    }
    f->gran = f->kind == SIMFMT_INT8 || f->kind == SIMFMT_INT4 ? SIMFMT_CHANNEL : SIMFMT_TENSOR;
    if (!scaled_elementwise(f->kind) && s[len]) {
        snprintf(err, errlen, "format '%s': block formats take no options", s);
        return -1;
    }
    if (f->kind != SIMFMT_INT8 && f->kind != SIMFMT_INT4 && strstr(s, "asym")) {
        snprintf(err, errlen, "format '%s': only int8 and int4 can be asymmetric", s);
        return -1;
    }
    return parse_options(s + len, s, f, err, errlen);
}

void simfmt_name(const struct simfmt *f, char *out, size_t n)
{
    const char *base = "none";
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        if (kinds[i].kind == f->kind) {
            base = kinds[i].name;
            break;
        }
    if (f->kind == SIMFMT_FP8_E4M3) base = "fp8_e4m3";
    if (!scaled_elementwise(f->kind)) {
        snprintf(out, n, "%s", base);
        return;
    }
    char g[32];
    snprintf(g, sizeof g, ":group:%d", f->group);
    snprintf(out, n, "%s%s%s", base,
             f->gran == SIMFMT_TENSOR    ? ":tensor"
             : f->gran == SIMFMT_CHANNEL ? ":channel"
                                         : g,
             f->asym ? ":asym" : "");
}

double simfmt_bits(const struct simfmt *f)
{
    switch (f->kind) {
    case SIMFMT_FP8_E4M3:
    case SIMFMT_FP8_E5M2:
    case SIMFMT_INT8:
    case SIMFMT_INT4: {
        double b = f->kind == SIMFMT_INT4 ? 4 : 8;
        if (f->gran == SIMFMT_GROUP) b += (16.0 + (f->asym ? 16.0 : 0.0)) / f->group;
        return b;
    }
    case SIMFMT_MXFP8:
        return 8 + 8.0 / MX_BLOCK;
    case SIMFMT_MXFP6:
        return 6 + 8.0 / MX_BLOCK;
    case SIMFMT_MXFP4:
        return 4 + 8.0 / MX_BLOCK;
    case SIMFMT_NVFP4:
        return 4 + 8.0 / NVFP4_BLOCK;
    default:
        return 32;
    }
}

/* ---- fake quantization ---- */

/* one group of scaled elements (fp8 with a scale, or integers) in place */
static void apply_group(const struct simfmt *f, float *x, int64_t n)
{
    float mn = 0, mx = 0, amax = 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(x[i])) {
            mn = fminf(mn, x[i]);
            mx = fmaxf(mx, x[i]);
            amax = fmaxf(amax, fabsf(x[i]));
        }
    if (f->kind == SIMFMT_FP8_E4M3 || f->kind == SIMFMT_FP8_E5M2) {
        int e4 = f->kind == SIMFMT_FP8_E4M3;
        float s = amax > 0 ? amax / (e4 ? 448.0f : 57344.0f) : 1.0f;
        for (int64_t i = 0; i < n; i++)
            x[i] = (e4 ? fp8_e4m3_to_f32(fp8_e4m3_from_f32(x[i] / s))
                       : fp8_e5m2_to_f32(fp8_e5m2_from_f32(x[i] / s))) *
                   s;
        return;
    }
    int bits = f->kind == SIMFMT_INT8 ? 8 : 4;
    if (!f->asym) {
        float qmax = (float)((1 << (bits - 1)) - 1), s = amax / qmax;
        for (int64_t i = 0; i < n; i++)
            x[i] = s > 0 ? fminf(qmax, fmaxf(-qmax, nearbyintf(x[i] / s))) * s : 0.0f;
        return;
    }
    float levels = (float)((1 << bits) - 1), s = (mx - mn) / levels;
    float zero = s > 0 ? fminf(levels, fmaxf(0, nearbyintf(-mn / s))) : 0;
    for (int64_t i = 0; i < n; i++)
        x[i] = s > 0 ? (fminf(levels, fmaxf(0, nearbyintf(x[i] / s) + zero)) - zero) * s : 0.0f;
}

static void apply_blocks(const struct simfmt *f, float *row, int64_t cols, float ts)
{
    int bs = f->kind == SIMFMT_NVFP4 ? NVFP4_BLOCK : MX_BLOCK;
    enum simfmt_elem e = f->kind == SIMFMT_MXFP8   ? SIMFMT_E4M3
                         : f->kind == SIMFMT_MXFP6 ? SIMFMT_E3M2
                                                   : SIMFMT_E2M1;
    uint8_t scale, codes[MX_BLOCK];
    for (int64_t j = 0; j < cols; j += bs) {
        int n = (int)(cols - j < bs ? cols - j : bs);
        if (f->kind == SIMFMT_NVFP4) {
            nvfp4_block_encode(row + j, n, ts, &scale, codes);
            for (int i = 0; i < n; i++)
                row[j + i] = nvfp4_value(scale, codes[i], ts);
        } else {
            mx_block_encode(row + j, n, e, &scale, codes);
            for (int i = 0; i < n; i++)
                row[j + i] = mx_value(scale, codes[i], e);
        }
    }
}

int simfmt_apply(const struct simfmt *f, float *w, int64_t rows, int64_t cols)
{
    if (f->kind == SIMFMT_NONE) return -1;
    if (!scaled_elementwise(f->kind)) {
        float amax = 0;
        for (int64_t i = 0; f->kind == SIMFMT_NVFP4 && i < rows * cols; i++)
            if (isfinite(w[i])) amax = fmaxf(amax, fabsf(w[i]));
        float ts = nvfp4_tensor_scale(amax);
        for (int64_t r = 0; r < rows; r++)
            apply_blocks(f, w + r * cols, cols, ts);
        return 0;
    }
    if (f->gran == SIMFMT_TENSOR) {
        apply_group(f, w, rows * cols);
        return 0;
    }
    int64_t g = f->gran == SIMFMT_CHANNEL ? cols : f->group;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j += g)
            apply_group(f, w + r * cols + j, cols - j < g ? cols - j : g);
    return 0;
}

int simfmt_apply_act(const struct simfmt *f, float *x, int64_t n, int64_t in)
{
    struct simfmt g = *f;
    if (scaled_elementwise(g.kind) && g.gran == SIMFMT_TENSOR) g.gran = SIMFMT_CHANNEL;
    return simfmt_apply(&g, x, n, in);
}

int simfmt_apply_act_static(const struct simfmt *f, float *x, int64_t n, int64_t in, float scale)
{
    if (f->kind == SIMFMT_NVFP4) {
        for (int64_t r = 0; r < n; r++)
            apply_blocks(f, x + r * in, in, scale);
        return 0;
    }
    if (f->kind == SIMFMT_FP8_E4M3) {
        for (int64_t i = 0; i < n * in; i++)
            x[i] = fp8_e4m3_to_f32(fp8_e4m3_from_f32(x[i] / scale)) * scale;
        return 0;
    }
    return simfmt_apply_act(f, x, n, in);
}

int simfmt_apply_kv(const struct simfmt *f, float *x, int64_t n, int64_t dim, int64_t head_dim)
{
    struct simfmt g = *f;
    if (scaled_elementwise(g.kind) && g.gran != SIMFMT_GROUP) { /* per head and token */
        g.gran = SIMFMT_GROUP;
        g.group = (int)head_dim;
    }
    return simfmt_apply(&g, x, n, dim);
}

static float round_bf16(float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    if ((u & 0x7fffffff) > 0x7f800000) return v; /* NaN */
    u = (u + (0x7fff + ((u >> 16) & 1))) & 0xffff0000u;
    memcpy(&v, &u, 4);
    return v;
}

uint32_t simfmt_llamacpp_act_class(uint32_t wtype)
{
    switch (wtype) {
    case GGML_F32:
    case GGML_F16:
    case GGML_BF16:
        return wtype;
    case GGML_Q4_0:
    case GGML_Q4_1:
    case GGML_Q5_0:
    case GGML_Q5_1:
    case GGML_Q8_0:
    case GGML_IQ4_NL:
    case GGML_MXFP4:
        return GGML_Q8_0;
    default:
        return GGML_Q8_K; /* k-quants, IQ and TQ types */
    }
}

void simfmt_llamacpp_act(uint32_t wtype, float *x, int64_t n, int64_t in)
{
    for (int64_t r = 0; r < n; r++) {
        float *row = x + r * in;
        switch (simfmt_llamacpp_act_class(wtype)) {
        case GGML_F32:
            break;
        case GGML_F16:
            quant_round_f16(row, in);
            break;
        case GGML_BF16:
            for (int64_t j = 0; j < in; j++)
                row[j] = round_bf16(row[j]);
            break;
        case GGML_Q8_0:
            act8_q8_0(row, in, NULL);
            break;
        default:
            act8_q8_k(row, in, NULL);
            break;
        }
    }
}

int simfmt_llamacpp_codes(uint32_t wtype, float *x, int64_t in, const struct simfmt_codes *c)
{
    switch (simfmt_llamacpp_act_class(wtype)) {
    case GGML_Q8_0:
        return act8_q8_0(x, in, c);
    case GGML_Q8_K:
        return act8_q8_k(x, in, c);
    default:
        simfmt_llamacpp_act(wtype, x, 1, in);
        return -1;
    }
}
