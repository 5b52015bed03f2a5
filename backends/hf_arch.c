/* hf_arch — config.json and tensor names of the architectures a checkpoint
 * directory may hold (see the header). */
#include "backends/hf_arch.h"
#include "backends/ggml_types.h"
#include "backends/gguf.h"
#include "backends/hf_quant.h"
#include "backends/quant.h"
#include "backends/safetensors.h"
#include "core/status.h"
#include "core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a new tensor entry named gname of ne0 x ne1 x ne2 holding data */
static void entry(struct gguf_tensor *t, const char *gname, int type, int64_t ne0, int64_t ne1,
                  int64_t ne2, const void *data, uint64_t nbytes)
{
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", gname);
    t->type = (uint32_t)type;
    t->n_dims = ne2 > 1 ? 3 : ne1 > 1 ? 2 : 1;
    t->ne[0] = ne0, t->ne[1] = ne1, t->ne[2] = ne2, t->ne[3] = 1;
    t->data = data;
    t->nbytes = nbytes;
}

static int float_type(int dtype)
{
    return dtype == ST_F32    ? GGML_F32
           : dtype == ST_F16  ? GGML_F16
           : dtype == ST_BF16 ? GGML_BF16
                              : -1;
}

/* the stored tensor `hf`, a float of shape [ne1, ne0] (a vector: [ne0], or
 * [1, ne0] when row) */
static const struct st_tensor *stored(struct hf_owner *o, const char *hf, int64_t ne0, int64_t ne1,
                                      int row, char *err, size_t errlen)
{
    const struct st_tensor *s = hf_find(o, hf);
    if (!s) {
        qg_errf(err, errlen, QG_ERR_DATA, "tensor '%s' is missing", hf);
        return NULL;
    }
    if (float_type(s->dtype) < 0) {
        qg_errf(err, errlen, QG_ERR_DATA,
                "tensor '%s' is %s without a quantization scheme that explains it", hf,
                st_dtype_name(s->dtype));
        return NULL;
    }
    int two = ne1 > 1 || row;
    if (s->n_dims != 1 + two || s->shape[0] != (two ? ne1 : ne0) || (two && s->shape[1] != ne0)) {
        qg_errf(err, errlen, QG_ERR_DATA, "tensor '%s' is not of shape [%lld%s%lld]", hf,
                (long long)(two ? ne1 : ne0), two ? ", " : "", (long long)(two ? ne0 : 0));
        return NULL;
    }
    return s;
}

/* a stored tensor as the GGUF tensor `gname` (F32/F16/BF16 in place; an
 * unaligned one copied); plus1: the f32 1 + w of a gemma norm */
static int plain(struct hf_owner *o, const char *hf, const char *gname, int64_t ne0, int64_t ne1,
                 int row, int plus1, struct gguf_tensor *t, char *err, size_t errlen)
{
    const struct st_tensor *s = stored(o, hf, ne0, ne1, row, err, errlen);
    if (!s) return QG_ERR_DATA;
    entry(t, gname, float_type(s->dtype), ne0, ne1, 1, s->data, s->nbytes);
    if (plus1) {
        float *c = malloc((size_t)(ne0 * ne1) * sizeof *c);
        if (!c || hf_owner_keep(o, c)) return QG_ERR_NOMEM;
        for (int64_t i = 0; i < ne0 * ne1; i++)
            c[i] = 1.0f + hf_st_float(s, i); /* transformers: x * (1.0 + w.float()) */
        entry(t, gname, GGML_F32, ne0, ne1, 1, c, (uint64_t)(ne0 * ne1) * 4);
    } else if ((uintptr_t)s->data % st_dtype_size(s->dtype)) { /* the kernels read aligned values */
        void *c = malloc(s->nbytes ? s->nbytes : 1);
        if (!c || hf_owner_keep(o, c)) return QG_ERR_NOMEM;
        memcpy(c, s->data, s->nbytes);
        t->data = c;
    }
    return QG_OK;
}

static int is_float(const struct st_tensor *s)
{
    return s && float_type(s->dtype) >= 0;
}

/* n dequantized floats at *w narrowed in place to BF16 or F16 when every
 * one of them is exactly a value of that type (the libraries round their
 * dequantization to the model's dtype: half the memory, the same weights);
 * the type kept */
static int narrow(float **w, size_t n)
{
    int bf = 1, hf = 1;
    for (size_t i = 0; i < n && (bf || hf); i++) {
        float x = (*w)[i];
        uint32_t u;
        memcpy(&u, &x, 4);
        bf = bf && (u & 0xFFFF) == 0;
        hf = hf && quant_f16_to_f32(quant_f32_to_f16(x)) == x;
    }
    if (!bf && !hf) return GGML_F32;
    uint16_t *h = (uint16_t *)(void *)*w;
    for (size_t i = 0; i < n; i++) {
        float x = (*w)[i];
        uint32_t u;
        memcpy(&u, &x, 4);
        h[i] = bf ? (uint16_t)(u >> 16) : quant_f32_to_f16(x); /* h[i] lies below w[i] */
    }
    float *s = realloc(*w, n * 2 + 4);
    if (s) *w = s;
    return bf ? GGML_BF16 : GGML_F16;
}

/* quantized projections prefix[0..n) as one tensor of qgate's blocks that
 * hold them as stored (hf_quant_block_type); QG_ERR_UNSUPPORTED when one
 * does not fit (dequantize instead) */
static int stored_blocks(struct hf_owner *o, const struct hf_quant *q, char (*prefix)[256], int n,
                         const char *gname, int64_t in, int64_t out, struct gguf_tensor *t,
                         char *err, size_t errlen)
{
    uint32_t type = hf_quant_block_type(q, in);
    const struct ggml_type_info *ti = ggml_type_get(type);
    size_t per = (size_t)(out * (in / ti->block)) * ti->type_size;
    uint8_t *b = malloc(per * (size_t)n);
    if (!b) return QG_ERR_NOMEM;
    int rc = QG_OK;
    for (int e = 0; e < n && !rc; e++)
        rc = hf_quant_blocks(o, q, prefix[e], out, in, b + per * (size_t)e, err, errlen);
    if (rc) {
        free(b);
        return rc;
    }
    if ((rc = hf_owner_keep(o, b))) return rc;
    entry(t, gname, (int)type, in, out, n, b, per * (size_t)n);
    return QG_OK;
}

/* projections prefix[0..n) ("<prefix>.weight" or its quantized parts),
 * each out x in, as one tensor `gname` of n x out rows: the one stored
 * float tensor in place (n = 1), floats of one dtype copied side by side,
 * or every one dequantized (f32, or BF16/F16 when exact: narrow) */
static int linears(struct hf_owner *o, const struct hf_quant *q, char (*prefix)[256], int n,
                   const char *gname, int64_t in, int64_t out, struct gguf_tensor *t, char *err,
                   size_t errlen)
{
    char hf[300];
    snprintf(hf, sizeof hf, "%s.weight", prefix[0]);
    const struct st_tensor *s0 = hf_find(o, hf);
    int flt = q->scheme == HF_PLAIN || is_float(s0);
    if (flt && n == 1) return plain(o, hf, gname, in, out, 0, 0, t, err, errlen);
    if (!flt && hf_quant_block_type(q, in)) { /* as stored, in qgate's blocks */
        int rc = stored_blocks(o, q, prefix, n, gname, in, out, t, err, errlen);
        if (rc != QG_ERR_UNSUPPORTED) return rc;
        err[0] = '\0';
    }
    size_t es = flt && s0 ? st_dtype_size(s0->dtype) : 4, one = (size_t)(in * out) * es;
    float *w = NULL;
    int rc = QG_OK;
    uint8_t *buf = n == 1 ? NULL : malloc(one * (size_t)n);
    if (n > 1 && !buf) return QG_ERR_NOMEM;
    for (int e = 0; e < n && !rc; e++) {
        snprintf(hf, sizeof hf, "%s.weight", prefix[e]);
        const struct st_tensor *s = flt ? stored(o, hf, in, out, 0, err, errlen) : NULL;
        if (flt && !s)
            rc = QG_ERR_DATA;
        else if (flt && s->dtype != s0->dtype)
            rc = qg_errf(err, errlen, QG_ERR_DATA, "tensor '%s' is %s, '%s.weight' %s", hf,
                         st_dtype_name(s->dtype), prefix[0], st_dtype_name(s0->dtype));
        else if (flt)
            memcpy(buf + one * (size_t)e, s->data, one);
        else if (!(rc = hf_quant_linear(o, q, prefix[e], out, in, &w, err, errlen)) && n > 1) {
            memcpy(buf + one * (size_t)e, w, one);
            free(w);
        }
    }
    if (rc) {
        free(buf);
        return rc;
    }
    if (n > 1) w = (float *)(void *)buf;
    int type = flt ? float_type(s0->dtype) : narrow(&w, (size_t)(in * out * n));
    if ((rc = hf_owner_keep(o, w))) return rc;
    entry(t, gname, type, in, out, n, w, (uint64_t)(in * out * n) * (type == GGML_F32 ? 4 : 2));
    return QG_OK;
}

/* a quantized projection's static input scale (ModelOpt) as the tensor
 * "<gname less .weight>.input_scale": stacked experts take the largest,
 * as vLLM's ModelOpt MoE path does */
static int input_scale(struct hf_owner *o, char (*prefix)[256], int n, const char *gname,
                       struct gguf_tensor *t, char *err, size_t errlen)
{
    float *s = malloc(sizeof *s);
    if (!s || hf_owner_keep(o, s)) return QG_ERR_NOMEM;
    *s = 0;
    for (int e = 0; e < n; e++) {
        float v;
        int rc = hf_quant_input_scale(o, prefix[e], &v, err, errlen);
        if (rc) return rc;
        *s = fmaxf(*s, v);
    }
    char name[GGUF_MAX_NAME + 1];
    size_t gl = strlen(gname) - strlen(".weight");
    snprintf(name, sizeof name, "%.*s.input_scale", (int)gl, gname);
    entry(t, name, GGML_F32, 1, 1, 1, s, 4);
    return QG_OK;
}

/* a layer's tensor list being built */
struct build {
    struct hf_owner *o;
    const struct hf_cfg *h;
    const struct hf_quant *q;
    struct gguf_tensor *t;
    int n, l;
    char *err;
    size_t errlen;
};

/* the static input scale of quantized projections p[0..n) (ModelOpt) */
static int with_input_scale(struct build *b, char (*p)[256], int n, const char *gname)
{
    char hf[300];
    snprintf(hf, sizeof hf, "%s.weight", p[0]);
    if (!b->q->act_static || is_float(hf_find(b->o, hf))) return QG_OK;
    return input_scale(b->o, p, n, gname, &b->t[b->n++], b->err, b->errlen);
}

/* "model.layers.<l>.<hf>.weight" (and .bias with bias) as blk.<l>.<gg> */
static int proj(struct build *b, const char *hf, const char *gg, int64_t in, int64_t out, int bias)
{
    char p[1][256], name[320], gn[GGUF_MAX_NAME + 1];
    snprintf(p[0], sizeof p[0], "model.layers.%d.%s", b->l, hf);
    snprintf(gn, sizeof gn, "blk.%d.%s.weight", b->l, gg);
    int rc = linears(b->o, b->q, p, 1, gn, in, out, &b->t[b->n++], b->err, b->errlen);
    if (!rc) rc = with_input_scale(b, p, 1, gn);
    if (rc || !bias) return rc;
    snprintf(name, sizeof name, "%s.bias", p[0]);
    snprintf(gn, sizeof gn, "blk.%d.%s.bias", b->l, gg);
    return plain(b->o, name, gn, out, 1, 0, 0, &b->t[b->n++], b->err, b->errlen);
}

/* a norm of the layer (1 + w for gemma; with its bias for starcoder2) */
static int norm(struct build *b, const char *hf, const char *gg, int64_t n)
{
    unsigned fl = b->h->fam->flags;
    char name[320], gn[GGUF_MAX_NAME + 1];
    snprintf(name, sizeof name, "model.layers.%d.%s.weight", b->l, hf);
    snprintf(gn, sizeof gn, "blk.%d.%s.weight", b->l, gg);
    int rc = plain(b->o, name, gn, n, 1, 0, (fl & HA_NORM1) != 0, &b->t[b->n++], b->err, b->errlen);
    if (rc || !(fl & HA_STARCODER)) return rc;
    snprintf(name, sizeof name, "model.layers.%d.%s.bias", b->l, hf);
    snprintf(gn, sizeof gn, "blk.%d.%s.bias", b->l, gg);
    return plain(b->o, name, gn, n, 1, 0, 0, &b->t[b->n++], b->err, b->errlen);
}

/* routed experts stacked as llama.cpp's ffn_*_exps, the router, and
 * qwen2moe's shared expert */
static int experts(struct build *b)
{
    const struct hf_cfg *h = b->h;
    int mix = (h->fam->flags & HA_MIXTRAL) != 0, E = (int)h->n_expert;
    const char *base = mix ? "block_sparse_moe" : "mlp";
    static const char *const mixn[3] = {"w1", "w3", "w2"}, *const qn[3] = {"gate_proj", "up_proj",
                                                                           "down_proj"};
    static const char *const gg[3] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    char(*p)[256] = malloc((size_t)E * sizeof *p), gn[GGUF_MAX_NAME + 1], name[320];
    if (!p) return QG_ERR_NOMEM;
    int64_t d = h->dim, ef = h->expert_ffn;
    snprintf(name, sizeof name, "model.layers.%d.%s.gate.weight", b->l, base);
    snprintf(gn, sizeof gn, "blk.%d.ffn_gate_inp.weight", b->l);
    int rc = plain(b->o, name, gn, d, E, E == 1, 0, &b->t[b->n++], b->err, b->errlen);
    for (int k = 0; k < 3 && !rc; k++) {
        for (int e = 0; e < E; e++)
            snprintf(p[e], sizeof p[e], "model.layers.%d.%s.experts.%d.%s", b->l, base, e,
                     mix ? mixn[k] : qn[k]);
        snprintf(gn, sizeof gn, "blk.%d.%s.weight", b->l, gg[k]);
        rc = linears(b->o, b->q, p, E, gn, k == 2 ? ef : d, k == 2 ? d : ef, &b->t[b->n++], b->err,
                     b->errlen);
        if (!rc) rc = with_input_scale(b, p, E, gn);
    }
    free(p);
    if (rc || !(h->fam->flags & HA_SHARED)) return rc;
    int64_t sf = h->shexp_ffn;
    rc = proj(b, "mlp.shared_expert.gate_proj", "ffn_gate_shexp", d, sf, 0);
    if (!rc) rc = proj(b, "mlp.shared_expert.up_proj", "ffn_up_shexp", d, sf, 0);
    if (!rc) rc = proj(b, "mlp.shared_expert.down_proj", "ffn_down_shexp", sf, d, 0);
    snprintf(name, sizeof name, "model.layers.%d.mlp.shared_expert_gate.weight", b->l);
    snprintf(gn, sizeof gn, "blk.%d.ffn_gate_inp_shexp.weight", b->l);
    return rc ? rc : plain(b->o, name, gn, d, 1, 1, 0, &b->t[b->n++], b->err, b->errlen);
}

/* projections that read the same input share the largest of their static
 * input scales, as vLLM's merged layers (qkv, gate_up, experts' w13) do */
static void share_input_scales(struct build *b, int first)
{
    static const char *const groups[][3] = {{"attn_q", "attn_k", "attn_v"},
                                            {"ffn_gate", "ffn_up", NULL},
                                            {"ffn_gate_exps", "ffn_up_exps", NULL},
                                            {"ffn_gate_shexp", "ffn_up_shexp", NULL}};
    for (size_t g = 0; g < sizeof groups / sizeof *groups; g++) {
        float *s[3] = {NULL, NULL, NULL}, mx = 0;
        for (int k = 0; k < 3 && groups[g][k]; k++) {
            char name[GGUF_MAX_NAME + 1];
            snprintf(name, sizeof name, "blk.%d.%s.input_scale", b->l, groups[g][k]);
            for (int i = first; i < b->n; i++)
                if (!strcmp(b->t[i].name, name)) s[k] = (float *)b->t[i].data;
            if (s[k]) mx = fmaxf(mx, *s[k]);
        }
        for (int k = 0; k < 3; k++)
            if (s[k]) *s[k] = mx;
    }
}

/* layer l's tensors */
static int layer_tensors(struct build *b)
{
    const struct hf_cfg *h = b->h;
    unsigned fl = h->fam->flags;
    const int64_t d = h->dim, qd = h->heads * h->head_dim, kvd = h->kv_heads * h->head_dim,
                  ff = h->ffn;
    int sc = (fl & HA_STARCODER) != 0, bias = sc || (fl & HA_QKV_BIAS), rc;
    if (fl & HA_FUSED) {
        rc = proj(b, "self_attn.qkv_proj", "attn_qkv", d, qd + 2 * kvd, 0);
    } else {
        rc = proj(b, "self_attn.q_proj", "attn_q", d, qd, bias);
        if (!rc) rc = proj(b, "self_attn.k_proj", "attn_k", d, kvd, bias);
        if (!rc) rc = proj(b, "self_attn.v_proj", "attn_v", d, kvd, bias);
    }
    if (!rc) rc = proj(b, "self_attn.o_proj", "attn_output", qd, d, sc);
    if (!rc && (fl & HA_QK_NORM)) rc = norm(b, "self_attn.q_norm", "attn_q_norm", h->head_dim);
    if (!rc && (fl & HA_QK_NORM)) rc = norm(b, "self_attn.k_norm", "attn_k_norm", h->head_dim);
    if (!rc) rc = norm(b, "input_layernorm", "attn_norm", d);
    if (fl & HA_POST_NORMS) {
        if (!rc) rc = norm(b, "post_attention_layernorm", "post_attention_norm", d);
        if (!rc) rc = norm(b, "pre_feedforward_layernorm", "ffn_norm", d);
        if (!rc) rc = norm(b, "post_feedforward_layernorm", "post_ffw_norm", d);
    } else if (!rc) {
        rc = norm(b, "post_attention_layernorm", "ffn_norm", d);
    }
    if (rc) return rc;
    if (h->n_expert) return experts(b);
    if (fl & HA_FUSED) { /* rows [0, ff) gate, [ff, 2 ff) up, as llama.cpp's fused ffn_up */
        rc = proj(b, "mlp.gate_up_proj", "ffn_up", d, 2 * ff, 0);
    } else if (sc) {
        rc = proj(b, "mlp.c_fc", "ffn_up", d, ff, 1);
        return rc ? rc : proj(b, "mlp.c_proj", "ffn_down", ff, d, 1);
    } else {
        rc = proj(b, "mlp.gate_proj", "ffn_gate", d, ff, 0);
        if (!rc) rc = proj(b, "mlp.up_proj", "ffn_up", d, ff, 0);
    }
    return rc ? rc : proj(b, "mlp.down_proj", "ffn_down", ff, d, 0);
}

/* an f32 vector tensor of n values (RoPE factors) */
static int factors(struct build *b, const char *gname, int64_t n, const cJSON *list)
{
    float *f = malloc((size_t)n * sizeof *f + 4);
    if (!f || hf_owner_keep(b->o, f)) return QG_ERR_NOMEM;
    if (list) {
        const cJSON *e;
        int i = 0;
        cJSON_ArrayForEach(e, list) f[i++] = (float)e->valuedouble;
    } else {
        hf_llama3_factors(b->h->theta, (int)b->h->head_dim, b->h->l3, f);
    }
    entry(&b->t[b->n++], gname, GGML_F32, n, 1, 1, f, (uint64_t)n * 4);
    return QG_OK;
}

int hf_arch_tensors(struct hf_owner *o, const struct hf_cfg *h, const struct hf_quant *q,
                    int64_t n_vocab, struct gguf_tensor **out, int *n, char *err, size_t errlen)
{
    struct build b = {o, h, q,   calloc((size_t)(h->layers * 40 + 8), sizeof *b.t),
                      0, 0, err, errlen};
    if (!b.t) return QG_ERR_NOMEM;
    unsigned fl = h->fam->flags;
    int rc = plain(o, "model.embed_tokens.weight", "token_embd.weight", h->dim, n_vocab, 0, 0,
                   &b.t[b.n++], err, errlen);
    if (!rc)
        rc = plain(o, "model.norm.weight", "output_norm.weight", h->dim, 1, 0, (fl & HA_NORM1) != 0,
                   &b.t[b.n++], err, errlen);
    if (!rc && (fl & HA_STARCODER))
        rc = plain(o, "model.norm.bias", "output_norm.bias", h->dim, 1, 0, 0, &b.t[b.n++], err,
                   errlen);
    if (!rc && !h->tied)
        rc = plain(o, "lm_head.weight", "output.weight", h->dim, n_vocab, 0, 0, &b.t[b.n++], err,
                   errlen);
    for (b.l = 0; b.l < h->layers && !rc; b.l++) {
        int first = b.n;
        rc = layer_tensors(&b);
        if (!rc) share_input_scales(&b, first);
    }
    if (!rc && h->llama3) /* the converter's rope_freqs.weight */
        rc = factors(&b, "rope_freqs.weight", h->head_dim / 2, NULL);
    if (!rc && h->longrope[0])
        rc = factors(&b, "rope_factors_long.weight", h->rope_dims / 2, h->longrope[0]);
    if (!rc && h->longrope[1])
        rc = factors(&b, "rope_factors_short.weight", h->rope_dims / 2, h->longrope[1]);
    if (rc) {
        free(b.t);
        return rc;
    }
    *out = b.t;
    *n = b.n;
    return QG_OK;
}
