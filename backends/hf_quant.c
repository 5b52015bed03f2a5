/* hf_quant — dequantizing Hugging Face quantized checkpoints (see the
 * header for each scheme's formula and packing). */
#include "backends/hf_quant.h"
#include "backends/ggml_types.h"
#include "backends/quant.h"
#include "backends/safetensors.h"
#include "core/status.h"
#include "core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float fp8_e4m3(uint8_t b)
{
    int e = (b >> 3) & 15, m = b & 7;
    if (e == 15 && m == 7) return NAN; /* E4M3FN: no infinities */
    float v = e ? ldexpf((float)(8 + m), e - 10) : ldexpf((float)m, -9);
    return (b & 0x80) ? -v : v;
}

static float bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float hf_st_float(const struct st_tensor *t, int64_t i)
{
    const uint8_t *p = t->data;
    uint16_t h;
    float f;
    switch (t->dtype) {
    case ST_F32:
        memcpy(&f, p + 4 * i, 4);
        return f;
    case ST_F16:
        memcpy(&h, p + 2 * i, 2);
        return quant_f16_to_f32(h);
    case ST_BF16:
        memcpy(&h, p + 2 * i, 2);
        return bf16_to_f32(h);
    case ST_F8_E4M3:
        return fp8_e4m3(p[i]);
    }
    return NAN;
}

/* x rounded to the dtype the library computes in (round to nearest even) */
static float round_dt(int dtype, float x)
{
    if (dtype == HF_DT_F16) return quant_f16_to_f32(quant_f32_to_f16(x));
    if (dtype == HF_DT_BF16 && isfinite(x)) {
        uint32_t u;
        memcpy(&u, &x, 4);
        u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000u;
        memcpy(&x, &u, 4);
    }
    return x;
}

static int32_t i32_at(const struct st_tensor *t, int64_t i)
{
    int32_t v;
    memcpy(&v, (const uint8_t *)t->data + 4 * i, 4);
    return v;
}

/* the tensor prefix.suffix, of dtype and numel (or shape checks by the caller) */
/* the tensor prefix.suffix of dtype (-1: any float type) and shape [d0, d1]
 * (d1 < 0: any shape of d0 values; d0 < 0: any) */
static int need(const struct hf_owner *o, const char *prefix, const char *suffix, int dtype,
                int64_t d0, int64_t d1, const struct st_tensor **out, char *err, size_t errlen)
{
    char name[512];
    snprintf(name, sizeof name, "%s.%s", prefix, suffix);
    const struct st_tensor *t = hf_find(o, name);
    if (!t) return qg_errf(err, errlen, QG_ERR_DATA, "tensor '%s' is missing", name);
    int ok = dtype >= 0 ? t->dtype == dtype
                        : (t->dtype == ST_F32 || t->dtype == ST_F16 || t->dtype == ST_BF16 ||
                           t->dtype == ST_F8_E4M3);
    if (!ok)
        return qg_errf(err, errlen, QG_ERR_DATA, "tensor '%s' is %s, not %s", name,
                       st_dtype_name(t->dtype), dtype >= 0 ? st_dtype_name(dtype) : "a float type");
    int shape_ok = d0 < 0 || (d1 < 0 ? t->numel == d0
                                     : t->n_dims == 2 && t->shape[0] == d0 && t->shape[1] == d1);
    if (!shape_ok)
        return qg_errf(err, errlen, QG_ERR_DATA, "tensor '%s' is not of shape [%lld, %lld]", name,
                       (long long)d0, (long long)(d1 < 0 ? 1 : d1));
    *out = t;
    return QG_OK;
}

static int fp8_linear(const struct hf_owner *o, const struct hf_quant *q, const char *prefix,
                      int64_t out, int64_t in, float *w, char *err, size_t errlen)
{
    const struct st_tensor *qw, *sc;
    int rc = need(o, prefix, "weight", ST_F8_E4M3, out, in, &qw, err, errlen);
    if (!rc) rc = need(o, prefix, "weight_scale", -1, -1, -1, &sc, err, errlen);
    if (rc) return rc;
    if (sc->numel != out && sc->numel != 1)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "tensor '%s.weight_scale' has %lld values (1 or %lld expected)", prefix,
                       (long long)sc->numel, (long long)out);
    for (int64_t r = 0; r < out; r++) {
        float s = hf_st_float(sc, sc->numel == 1 ? 0 : r);
        for (int64_t c = 0; c < in; c++)
            w[r * in + c] = fp8_e4m3(qw->data[r * in + c]) * s; /* exact in f32 */
    }
    return QG_OK;
}

/* an NVFP4 projection's codes, FP8 block scales and global scale, under
 * compressed-tensors' names (the global scale divides) or ModelOpt's
 * (scale_2 multiplies) */
static int nvfp4_tensors(const struct hf_owner *o, const struct hf_quant *q, const char *prefix,
                         int64_t out, int64_t in, const struct st_tensor **pk,
                         const struct st_tensor **sc, float *g, char *err, size_t errlen)
{
    const int mo = q->scheme == HF_MO_NVFP4;
    const char *gname = mo ? "weight_scale_2" : "weight_global_scale";
    const struct st_tensor *gs;
    if (in % 16)
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: %lld inputs are not whole groups of 16",
                       prefix, (long long)in);
    int rc = need(o, prefix, mo ? "weight" : "weight_packed", ST_U8, out, in / 2, pk, err, errlen);
    if (!rc) rc = need(o, prefix, "weight_scale", ST_F8_E4M3, out, in / 16, sc, err, errlen);
    if (!rc) rc = need(o, prefix, gname, -1, 1, -1, &gs, err, errlen);
    if (rc) return rc;
    *g = hf_st_float(gs, 0);
    return *g > 0 && isfinite(*g)
               ? QG_OK
               : qg_errf(err, errlen, QG_ERR_DATA, "tensor '%s.%s' is not positive", prefix, gname);
}

/* NVFP4: compressed-tensors dtype((fp4 x fp8 scale) / global), the product
 * exact in f32 and one rounding after the division; ModelOpt dtype(fp4 x
 * f32(fp8 scale x scale_2)) */
static int nvfp4_linear(const struct hf_owner *o, const struct hf_quant *q, const char *prefix,
                        int64_t out, int64_t in, float *w, char *err, size_t errlen)
{
    static const float e2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    const struct st_tensor *pk, *sc;
    float g;
    int rc = nvfp4_tensors(o, q, prefix, out, in, &pk, &sc, &g, err, errlen);
    if (rc) return rc;
    const int mo = q->scheme == HF_MO_NVFP4;
    for (int64_t r = 0; r < out; r++)
        for (int64_t c = 0; c < in; c++) {
            uint8_t b = pk->data[(r * in + c) / 2], nib = (uint8_t)(c & 1 ? b >> 4 : b & 15);
            float v = e2m1[nib & 7] * (nib & 8 ? -1.0f : 1.0f);
            float s = fp8_e4m3(sc->data[r * (in / 16) + c / 16]);
            w[r * in + c] = round_dt(q->dtype, mo ? v * (s * g) : v * s / g);
        }
    return QG_OK;
}

/* ModelOpt FP8: w = dtype(fp8 * dtype(scale)), the scale per tensor or
 * per output channel */
static int mo_fp8_linear(const struct hf_owner *o, const struct hf_quant *q, const char *prefix,
                         int64_t out, int64_t in, float *w, char *err, size_t errlen)
{
    const struct st_tensor *qw, *sc;
    int rc = need(o, prefix, "weight", ST_F8_E4M3, out, in, &qw, err, errlen);
    if (!rc) rc = need(o, prefix, "weight_scale", -1, -1, -1, &sc, err, errlen);
    if (rc) return rc;
    if (sc->numel != out && sc->numel != 1)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "tensor '%s.weight_scale' has %lld values (1 or %lld expected)", prefix,
                       (long long)sc->numel, (long long)out);
    for (int64_t r = 0; r < out; r++) {
        float s = round_dt(q->dtype, hf_st_float(sc, sc->numel == 1 ? 0 : r));
        for (int64_t c = 0; c < in; c++)
            w[r * in + c] = round_dt(q->dtype, fp8_e4m3(qw->data[r * in + c]) * s);
    }
    return QG_OK;
}

int hf_quant_input_scale(const struct hf_owner *o, const char *prefix, float *s, char *err,
                         size_t errlen)
{
    const struct st_tensor *t;
    int rc = need(o, prefix, "input_scale", -1, 1, -1, &t, err, errlen);
    if (rc) return rc;
    *s = hf_st_float(t, 0);
    return *s > 0 && isfinite(*s) ? QG_OK
                                  : qg_errf(err, errlen, QG_ERR_DATA,
                                            "tensor '%s.input_scale' is not positive", prefix);
}

/* where an integer scheme's weights go: w[r][c] = round((u - zero) x s)
 * as floats, or the codes, zeros and scales into QG_I4_S32 blocks (the
 * weights of a block visited in column order; one that does not fit, a
 * scale or zero changing inside a block or a code over 15, sets bad) */
struct isink {
    float *w;
    uint8_t *blk;
    int64_t in;
    int dt, bad;
};

static void iput(struct isink *k, int64_t r, int64_t c, int u, int zero, float s)
{
    if (k->w) {
        k->w[r * k->in + c] = round_dt(k->dt, (float)(u - zero) * s);
        return;
    }
    uint8_t *b = k->blk + (size_t)(r * (k->in / 32) + c / 32) * 22;
    if (c % 32 == 0) {
        memcpy(b, &s, 4);
        b[4] = (uint8_t)(int8_t)zero;
        b[5] = (uint8_t)k->dt;
        memset(b + 6, 0, 16);
    }
    uint32_t b0, b1; /* the scale's bits: the same f32 (or one block holds two) */
    memcpy(&b0, b, 4);
    memcpy(&b1, &s, 4);
    if (u < 0 || u > 15 || zero < -128 || zero > 127 || (int8_t)b[4] != zero || b0 != b1)
        k->bad = 1;
    b[6 + (c % 32) / 2] |= (uint8_t)((u & 15) << (4 * (c & 1)));
}

/* GPTQ: qweight [in*bits/32][out] packed along inputs, qzeros
 * [groups][out*bits/32] along outputs, scales [groups][out], g_idx [in] */
static int gptq_linear(const struct hf_owner *o, const struct hf_quant *q, const char *prefix,
                       int64_t out, int64_t in, struct isink *k, char *err, size_t errlen)
{
    const int bits = q->bits, per = 32 / bits;
    const uint32_t mask = (1u << bits) - 1;
    const int64_t group = q->group > 0 ? q->group : in, ng = (in + group - 1) / group;
    if (in % per || out % per)
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: %lld x %lld does not pack %d per int32",
                       prefix, (long long)out, (long long)in, per);
    const struct st_tensor *qw, *qz, *sc, *gi = NULL;
    int rc = need(o, prefix, "qweight", ST_I32, in / per, out, &qw, err, errlen);
    if (!rc) rc = need(o, prefix, "qzeros", ST_I32, ng, out / per, &qz, err, errlen);
    if (!rc) rc = need(o, prefix, "scales", -1, ng, out, &sc, err, errlen);
    char gname[512];
    snprintf(gname, sizeof gname, "%s.g_idx", prefix);
    if (!rc && hf_find(o, gname)) rc = need(o, prefix, "g_idx", ST_I32, in, -1, &gi, err, errlen);
    if (rc) return rc;
    for (int64_t i = 0; i < in; i++) {
        int64_t g = gi ? i32_at(gi, i) : i / group;
        if (g < 0 || g >= ng)
            return qg_errf(err, errlen, QG_ERR_DATA, "tensor '%s' names group %lld of %lld", gname,
                           (long long)g, (long long)ng);
        for (int64_t c = 0; c < out; c++) {
            uint32_t qv = ((uint32_t)i32_at(qw, (i / per) * out + c) >> (bits * (i % per))) & mask;
            uint32_t zv =
                ((uint32_t)i32_at(qz, g * (out / per) + c / per) >> (bits * (c % per))) & mask;
            iput(k, c, i, (int)qv, (int)zv + q->gptq_zero_offset, hf_st_float(sc, g * out + c));
        }
    }
    return QG_OK;
}

/* AWQ GEMM: qweight [in][out/8] and qzeros [groups][out/8] packed along
 * outputs in AWQ's order, scales [groups][out] */
static int awq_linear(const struct hf_owner *o, const struct hf_quant *q, const char *prefix,
                      int64_t out, int64_t in, struct isink *k, char *err, size_t errlen)
{
    static const int inv[8] = {0, 4, 1, 5, 2, 6, 3, 7}; /* column 8c+k is nibble inv[k] */
    const int64_t group = q->group > 0 ? q->group : in, ng = (in + group - 1) / group;
    if (out % 8)
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: %lld outputs do not pack 8 per int32", prefix,
                       (long long)out);
    const struct st_tensor *qw, *qz, *sc;
    int rc = need(o, prefix, "qweight", ST_I32, in, out / 8, &qw, err, errlen);
    if (!rc) rc = need(o, prefix, "qzeros", ST_I32, ng, out / 8, &qz, err, errlen);
    if (!rc) rc = need(o, prefix, "scales", -1, ng, out, &sc, err, errlen);
    if (rc) return rc;
    for (int64_t i = 0; i < in; i++) {
        int64_t g = i / group;
        for (int64_t c = 0; c < out; c++) {
            int sh = 4 * inv[c % 8];
            int qv = (int)(((uint32_t)i32_at(qw, i * (out / 8) + c / 8) >> sh) & 15);
            int zv = (int)(((uint32_t)i32_at(qz, g * (out / 8) + c / 8) >> sh) & 15);
            iput(k, c, i, qv, zv, hf_st_float(sc, g * out + c));
        }
    }
    return QG_OK;
}

/* compressed-tensors pack-quantized: weight_packed I32 [out, in*bits/32]
 * (code + 2^(bits-1), low bits first along inputs), weight_scale [out,
 * groups], weight_zero_point I32 [out*bits/32, groups] packed the same way
 * along outputs (asymmetric only), weight_shape [out, in] */
static int pack_linear(const struct hf_owner *o, const struct hf_quant *q, const char *prefix,
                       int64_t out, int64_t in, struct isink *k, char *err, size_t errlen)
{
    const int bits = q->bits, per = 32 / bits, off = 1 << (bits - 1);
    const uint32_t mask = (1u << bits) - 1;
    const int64_t group = q->group > 0 ? q->group : in, ng = (in + group - 1) / group;
    if (in % per || out % per)
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: %lld x %lld does not pack %d per int32",
                       prefix, (long long)out, (long long)in, per);
    const struct st_tensor *pk, *sc, *ws, *zp = NULL;
    int rc = need(o, prefix, "weight_packed", ST_I32, out, in / per, &pk, err, errlen);
    if (!rc) rc = need(o, prefix, "weight_scale", -1, out, ng, &sc, err, errlen);
    if (!rc) rc = need(o, prefix, "weight_shape", ST_I64, 2, -1, &ws, err, errlen);
    if (!rc && q->asym)
        rc = need(o, prefix, "weight_zero_point", ST_I32, out / per, ng, &zp, err, errlen);
    if (rc) return rc;
    /* compressed-tensors computes in the scale's dtype, whatever torch_dtype says */
    k->dt = sc->dtype == ST_BF16 ? HF_DT_BF16 : sc->dtype == ST_F16 ? HF_DT_F16 : HF_DT_F32;
    int64_t shape[2];
    memcpy(shape, ws->data, sizeof shape);
    if (shape[0] != out || shape[1] != in)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "tensor '%s.weight_shape' is [%lld, %lld], not "
                       "[%lld, %lld]",
                       prefix, (long long)shape[0], (long long)shape[1], (long long)out,
                       (long long)in);
    for (int64_t r = 0; r < out; r++)
        for (int64_t c = 0; c < in; c++) {
            int64_t g = c / group;
            /* codes and zeros stored + off: (u - off) - (zu - off) */
            int u = (int)(((uint32_t)i32_at(pk, r * (in / per) + c / per) >> (bits * (c % per))) &
                          mask),
                zu = zp ? (int)(((uint32_t)i32_at(zp, (r / per) * ng + g) >> (bits * (r % per))) &
                                mask)
                        : off;
            iput(k, r, c, u, zu, hf_st_float(sc, r * ng + g));
        }
    return QG_OK;
}

static int fp8_blocks(const struct hf_owner *o, const struct hf_quant *q, const char *prefix,
                      int64_t out, int64_t in, uint8_t *dst, char *err, size_t errlen)
{
    const struct st_tensor *qw, *sc;
    int rc = need(o, prefix, "weight", ST_F8_E4M3, out, in, &qw, err, errlen);
    if (!rc) rc = need(o, prefix, "weight_scale", -1, -1, -1, &sc, err, errlen);
    if (rc) return rc;
    if ((sc->numel != out && sc->numel != 1) || in % 32)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "tensor '%s.weight_scale' has %lld values (1 or %lld expected)", prefix,
                       (long long)sc->numel, (long long)out);
    /* compressed-tensors: the exact product; ModelOpt: dtype(fp8 x dtype(scale)) */
    int mo = q->scheme == HF_MO_FP8;
    for (int64_t r = 0; r < out; r++) {
        float s = hf_st_float(sc, sc->numel == 1 ? 0 : r);
        if (mo) s = round_dt(q->dtype, s);
        for (int64_t b = 0; b < in / 32; b++, dst += 37) {
            memcpy(dst, &s, 4);
            dst[4] = (uint8_t)(mo ? q->dtype : HF_DT_F32);
            memcpy(dst + 5, qw->data + r * in + 32 * b, 32);
        }
    }
    return QG_OK;
}

/* NVFP4 as stored (compressed-tensors or ModelOpt names): per 16, the
 * global scale, the FP8 block scale code, the mode, the 8 code bytes */
static int nvfp4_blocks(const struct hf_owner *o, const struct hf_quant *q, const char *prefix,
                        int64_t out, int64_t in, uint8_t *dst, char *err, size_t errlen)
{
    const struct st_tensor *pk, *sc;
    float g;
    int rc = nvfp4_tensors(o, q, prefix, out, in, &pk, &sc, &g, err, errlen);
    if (rc) return rc;
    const int mo = q->scheme == HF_MO_NVFP4;
    for (int64_t r = 0; r < out; r++)
        for (int64_t j = 0; j < in / 16; j++, dst += 14) {
            memcpy(dst, &g, 4);
            dst[4] = sc->data[r * (in / 16) + j];
            dst[5] = (uint8_t)(q->dtype | (mo ? 4 : 0));
            memcpy(dst + 6, pk->data + r * (in / 2) + 8 * j, 8);
        }
    return QG_OK;
}

uint32_t hf_quant_block_type(const struct hf_quant *q, int64_t in)
{
    if ((q->scheme == HF_CT_FP8 || q->scheme == HF_MO_FP8) && in % 32 == 0) return QG_F8_E4M3_S32;
    if ((q->scheme == HF_CT_NVFP4 || q->scheme == HF_MO_NVFP4) && in % 16 == 0) return QG_NVFP4_S16;
    if ((q->scheme == HF_GPTQ || q->scheme == HF_AWQ || q->scheme == HF_CT_PACK) && q->bits == 4 &&
        in % 32 == 0 && (q->group <= 0 || q->group % 32 == 0))
        return QG_I4_S32;
    return 0;
}

int hf_quant_blocks(const struct hf_owner *o, const struct hf_quant *q, const char *prefix,
                    int64_t out, int64_t in, uint8_t *dst, char *err, size_t errlen)
{
    uint32_t t = hf_quant_block_type(q, in);
    if (t == QG_F8_E4M3_S32) return fp8_blocks(o, q, prefix, out, in, dst, err, errlen);
    if (t == QG_NVFP4_S16) return nvfp4_blocks(o, q, prefix, out, in, dst, err, errlen);
    if (t != QG_I4_S32) return QG_ERR_UNSUPPORTED;
    struct isink k = {NULL, dst, in, q->dtype, 0};
    int rc = q->scheme == HF_GPTQ  ? gptq_linear(o, q, prefix, out, in, &k, err, errlen)
             : q->scheme == HF_AWQ ? awq_linear(o, q, prefix, out, in, &k, err, errlen)
                                   : pack_linear(o, q, prefix, out, in, &k, err, errlen);
    return rc ? rc : k.bad ? QG_ERR_UNSUPPORTED : QG_OK;
}

int hf_quant_linear(const struct hf_owner *o, const struct hf_quant *q, const char *prefix,
                    int64_t out, int64_t in, float **w, char *err, size_t errlen)
{
    *w = malloc((size_t)out * (size_t)in * sizeof **w);
    if (!*w) return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory for '%s'", prefix);
    struct isink k = {*w, NULL, in, q->dtype, 0};
    int rc = q->scheme == HF_CT_FP8     ? fp8_linear(o, q, prefix, out, in, *w, err, errlen)
             : q->scheme == HF_CT_NVFP4 ? nvfp4_linear(o, q, prefix, out, in, *w, err, errlen)
             : q->scheme == HF_GPTQ     ? gptq_linear(o, q, prefix, out, in, &k, err, errlen)
             : q->scheme == HF_AWQ      ? awq_linear(o, q, prefix, out, in, &k, err, errlen)
             : q->scheme == HF_CT_PACK  ? pack_linear(o, q, prefix, out, in, &k, err, errlen)
             : q->scheme == HF_MO_NVFP4 ? nvfp4_linear(o, q, prefix, out, in, *w, err, errlen)
             : q->scheme == HF_MO_FP8   ? mo_fp8_linear(o, q, prefix, out, in, *w, err, errlen)
                                        : QG_ERR_INTERNAL;
    if (rc) {
        free(*w);
        *w = NULL;
    }
    return rc;
}

/* a whole number field, 0 when absent or not a number */
static int ival(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) && v->valuedouble > -1e9 && v->valuedouble < 1e9 ? (int)v->valuedouble
                                                                              : 0;
}

static const char *cstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* compressed-tensors: one config group whose weights are FP8 or NVFP4 */
static int read_ct(const cJSON *qc, const char *file, struct hf_quant *q, char *err, size_t errlen)
{
    const cJSON *kv = cJSON_GetObjectItemCaseSensitive(qc, "kv_cache_scheme"),
                *ign = cJSON_GetObjectItemCaseSensitive(qc, "ignore"), *x;
    if (kv && !cJSON_IsNull(kv))
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: kv_cache_scheme is set: a quantized KV cache is not implemented "
                       "(simulate one with kv=FORMAT)",
                       file);
    cJSON_ArrayForEach(x, ign)
    {
        if (!cJSON_IsString(x) || strcmp(x->valuestring, "lm_head"))
            return qg_errf(err, errlen, QG_ERR_DATA,
                           "%s: ignore lists '%.60s': only lm_head may stay unquantized", file,
                           cJSON_IsString(x) ? x->valuestring : "?");
    }
    const char *fmt = cstr(qc, "format");
    const cJSON *groups = cJSON_GetObjectItemCaseSensitive(qc, "config_groups"),
                *g0 = cJSON_GetArrayItem(groups, 0),
                *wt = cJSON_GetObjectItemCaseSensitive(g0, "weights"),
                *ia = cJSON_GetObjectItemCaseSensitive(g0, "input_activations");
    if (cJSON_GetArraySize(groups) != 1 || !fmt)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: compressed-tensors with %d config groups (qgate reads one)", file,
                       cJSON_GetArraySize(groups));
    if (cJSON_IsObject(ia)) { /* the inputs: dynamic per-token FP8 is what qgate applies */
        const char *at = cstr(ia, "type"), *as = cstr(ia, "strategy");
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ia, "dynamic")) || !at ||
            strcmp(at, "float") || ival(ia, "num_bits") != 8 || !as || strcmp(as, "token"))
            return qg_errf(err, errlen, QG_ERR_DATA,
                           "%s: input_activations other than dynamic per-token FP8 (static "
                           "scales, %s %d-bit by %s) are not implemented",
                           file, at ? at : "?", ival(ia, "num_bits"), as ? as : "?");
    }
    q->act_fp8_dynamic = cJSON_IsObject(ia); /* validated above */
    const char *type = cstr(wt, "type"), *strat = cstr(wt, "strategy");
    int nb = ival(wt, "num_bits");
    if (!strcmp(fmt, "pack-quantized") && type && !strcmp(type, "int") && (nb == 4 || nb == 8) &&
        strat && (!strcmp(strat, "group") || !strcmp(strat, "channel")) &&
        (!cJSON_GetObjectItemCaseSensitive(wt, "actorder") ||
         cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(wt, "actorder")))) {
        q->scheme = HF_CT_PACK;
        q->bits = nb;
        q->group = !strcmp(strat, "group") ? ival(wt, "group_size") : 0;
        q->asym = !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(wt, "symmetric"));
        if (!strcmp(strat, "group") && q->group <= 0)
            return qg_errf(err, errlen, QG_ERR_DATA, "%s: group strategy without a group_size",
                           file);
        char by[32] = "channel";
        if (q->group) snprintf(by, sizeof by, "group %d", q->group);
        snprintf(q->label, sizeof q->label, "compressed-tensors int%d (%s, %s)", nb, by,
                 q->asym ? "zero points" : "symmetric");
        return QG_OK;
    }
    if (!strcmp(fmt, "float-quantized") && type && !strcmp(type, "float") && nb == 8 && strat &&
        (!strcmp(strat, "channel") || !strcmp(strat, "tensor")) &&
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(wt, "symmetric"))) {
        q->scheme = HF_CT_FP8;
        snprintf(q->label, sizeof q->label, "compressed-tensors FP8 E4M3 (%s scales%s)", strat,
                 q->act_fp8_dynamic ? ", dynamic FP8 activations" : "");
        return QG_OK;
    }
    if (!strcmp(fmt, "nvfp4-pack-quantized") && nb == 4 && strat &&
        !strcmp(strat, "tensor_group") && ival(wt, "group_size") == 16) {
        q->scheme = HF_CT_NVFP4;
        snprintf(q->label, sizeof q->label, "compressed-tensors NVFP4 (FP4 E2M1, FP8 scales / 16)");
        return QG_OK;
    }
    return qg_errf(err, errlen, QG_ERR_DATA,
                   "%s: compressed-tensors format '%s' with %s %d-bit %s weights is not supported "
                   "(qgate reads float-quantized FP8, nvfp4-pack-quantized and int4/int8 "
                   "pack-quantized)",
                   file, fmt, type ? type : "?", nb, strat ? strat : "?");
}

/* ModelOpt: quant_algo NVFP4 (static NVFP4 activations), W4A16_NVFP4
 * (weights only) or FP8 (static FP8 activations); no quantized KV cache */
static int read_modelopt(const cJSON *qc, const char *file, struct hf_quant *q, char *err,
                         size_t errlen)
{
    const char *algo = cstr(qc, "quant_algo"), *kv = cstr(qc, "kv_cache_quant_algo");
    const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(qc, "kv_cache_scheme");
    if (kv || (kvs && !cJSON_IsNull(kvs)))
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: ModelOpt kv_cache_quant_algo is set: a quantized KV cache is not "
                       "implemented (simulate one with kv=FORMAT)",
                       file);
    int gs = ival(qc, "group_size");
    if (algo && (!strcmp(algo, "NVFP4") || !strcmp(algo, "W4A16_NVFP4")) && (gs == 0 || gs == 16)) {
        q->scheme = HF_MO_NVFP4;
        q->act_static = !strcmp(algo, "NVFP4") ? "nvfp4" : NULL;
    } else if (algo && !strcmp(algo, "FP8")) {
        q->scheme = HF_MO_FP8;
        q->act_static = "fp8_e4m3";
    } else {
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: ModelOpt quant_algo '%s' (group_size %d) is not supported (qgate reads "
                       "NVFP4, W4A16_NVFP4 with groups of 16, and FP8)",
                       file, algo ? algo : "?", gs);
    }
    snprintf(q->label, sizeof q->label, "ModelOpt %s%s", algo,
             q->act_static ? " (static activation scales)" : " (weights only)");
    return QG_OK;
}

static int read_dtype(const cJSON *config, const char *file, struct hf_quant *q, char *err,
                      size_t errlen)
{
    const char *dt = cstr(config, "torch_dtype");
    if (!dt) dt = cstr(config, "dtype");
    if (!dt || !strcmp(dt, "float32"))
        q->dtype = HF_DT_F32;
    else if (!strcmp(dt, "float16"))
        q->dtype = HF_DT_F16;
    else if (!strcmp(dt, "bfloat16"))
        q->dtype = HF_DT_BF16;
    else
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: torch_dtype '%s' is not supported", file, dt);
    return QG_OK;
}

int hf_quant_read(const cJSON *config, const char *file, struct hf_quant *q, char *err,
                  size_t errlen)
{
    memset(q, 0, sizeof *q);
    int rc = read_dtype(config, file, q, err, errlen);
    const cJSON *qc = cJSON_GetObjectItemCaseSensitive(config, "quantization_config");
    if (rc || !qc || cJSON_IsNull(qc)) return rc;
    const char *m = cstr(qc, "quant_method");
    if (m && !strcmp(m, "compressed-tensors")) return read_ct(qc, file, q, err, errlen);
    if (m && !strcmp(m, "modelopt")) return read_modelopt(qc, file, q, err, errlen);
    q->bits = ival(qc, "bits");
    q->group = ival(qc, "group_size");
    const char *cf = cstr(qc, "checkpoint_format");
    if (m && !strcmp(m, "gptq") && (q->bits == 4 || q->bits == 8) &&
        (!cf || !strcmp(cf, "gptq") || !strcmp(cf, "gptq_v2"))) {
        q->scheme = HF_GPTQ;
        q->gptq_zero_offset = !(cf && !strcmp(cf, "gptq_v2"));
        snprintf(q->label, sizeof q->label, "GPTQ int%d, group %d%s", q->bits, q->group,
                 cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(qc, "desc_act")) ? ", desc_act"
                                                                                : "");
        return QG_OK;
    }
    const char *ver = cstr(qc, "version");
    if (m && !strcmp(m, "awq") && q->bits == 4 && ver && !strcmp(ver, "gemm") &&
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(qc, "zero_point"))) {
        q->scheme = HF_AWQ;
        snprintf(q->label, sizeof q->label, "AWQ GEMM int4, group %d", q->group);
        return QG_OK;
    }
    return qg_errf(err, errlen, QG_ERR_DATA,
                   "%s: quant_method '%s' is not supported with these settings (bits %d; qgate "
                   "reads compressed-tensors FP8/NVFP4, GPTQ 4/8-bit, AWQ GEMM 4-bit, ModelOpt "
                   "NVFP4/FP8)",
                   file, m ? m : "?", q->bits);
}
