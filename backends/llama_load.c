/* llama_load — reading a model: hyper-parameters (llama_arch.c), then
 * every tensor its family uses, checked for shape, type and finite
 * vectors; matrices stay in the mapping as stored (fused and expert tensors
 * as row views), and a tensor the forward pass would not use is refused. */
#include "backends/llama.h"
#include "backends/llama_impl.h"
#include "backends/dequant.h"
#include "backends/ggml_types.h"
#include "core/status.h"
#include "core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What loading shares: the file, and which of its tensors were used (any
 * tensor left over is one the forward pass would ignore: refused). */
struct loader {
    struct llama_model *m;
    const struct gguf *g;
    const char *name;
    unsigned char *used; /* per tensor index */
    char *err;
    size_t errlen;
};

/* The tensor `tname` of shape ne0 x ne1 x ne2, or NULL with err set (NULL
 * and QG_OK when optional and absent); marks it used. */
static int find_tensor(struct loader *ld, const char *tname, int64_t ne0, int64_t ne1, int64_t ne2,
                       int optional, const struct gguf_tensor **out)
{
    const struct gguf_tensor *t = gguf_find_tensor(ld->g, tname);
    *out = NULL;
    if (!t) {
        if (optional) return QG_OK;
        return qg_errf(ld->err, ld->errlen, QG_ERR_DATA, "%s: tensor '%s' is missing", ld->name,
                       tname);
    }
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != ne2 || t->ne[3] != 1)
        return qg_errf(ld->err, ld->errlen, QG_ERR_DATA,
                       "%s: tensor '%s' has shape %lld x %lld x %lld, expected %lld x %lld x %lld",
                       ld->name, tname, (long long)t->ne[0], (long long)t->ne[1],
                       (long long)t->ne[2], (long long)ne0, (long long)ne1, (long long)ne2);
    if (!dequant_supported(t->type))
        return qg_errf(ld->err, ld->errlen, QG_ERR_DATA,
                       "%s: tensor '%s' is stored as %s, which qgate cannot decode", ld->name,
                       tname, ggml_type_name(t->type));
    int64_t i = 0;
    while (i < gguf_n_tensors(ld->g) && gguf_tensor_at(ld->g, i) != t)
        i++;
    if (i < gguf_n_tensors(ld->g)) ld->used[i] = 1;
    *out = t;
    return QG_OK;
}

/* The first non-finite value of n decoded ones: -1 when all are finite. */
int64_t lm_first_nonfinite(const float *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(p[i])) return i;
    return -1;
}

int lm_nonfinite_error(const char *name, const char *tname, float v, int64_t at, char *err,
                       size_t errlen)
{
    return qg_errf(err, errlen, QG_ERR_DATA,
                   "%s: tensor '%s' holds a non-finite weight (%s at element %lld): the file is "
                   "damaged or was quantized from a broken model",
                   name, tname, isnan(v) ? "NaN" : "Inf", (long long)at);
}

/* A vector (norm weights, biases): decoded to f32 now, checked finite. */
static int load_vec(struct loader *ld, const char *tname, int64_t ne0, int optional, float **out)
{
    const struct gguf_tensor *t;
    *out = NULL;
    int rc = find_tensor(ld, tname, ne0, 1, 1, optional, &t);
    if (rc || !t) return rc;
    float *p = malloc((size_t)ne0 * sizeof *p);
    if (!p)
        return qg_errf(ld->err, ld->errlen, QG_ERR_NOMEM, "%s: out of memory for '%s'", ld->name,
                       tname);
    dequant_row(t->type, t->data, p, ne0);
    int64_t bad = lm_first_nonfinite(p, ne0);
    if (bad >= 0) {
        rc = lm_nonfinite_error(ld->name, tname, p[bad], bad, ld->err, ld->errlen);
        free(p);
        return rc;
    }
    ld->m->bytes += (size_t)ne0 * sizeof *p;
    ld->m->vec_bytes += (size_t)ne0 * sizeof *p;
    *out = p;
    return QG_OK;
}

/* w = rows [r0, r0 + rows) of matrix k of tensor t (a view, as stored) */
/* a checkpoint directory's static input scale of matrix t (ModelOpt):
 * "<name less .weight>.input_scale", one positive f32 (marked used), or 0 */
static float input_scale(struct loader *ld, const struct gguf_tensor *t)
{
    char sn[GGUF_MAX_NAME + 1];
    size_t l = strlen(t->name);
    if (l < 7 || strcmp(t->name + l - 7, ".weight")) return 0;
    snprintf(sn, sizeof sn, "%.*s.input_scale", (int)(l - 7), t->name);
    const struct gguf_tensor *s = gguf_find_tensor(ld->g, sn);
    float v = 0;
    /* a malformed one stays unused: check_used refuses the file naming it */
    if (!s || s->type != GGML_F32 || gguf_tensor_nelements(s) != 1) return 0;
    memcpy(&v, s->data, 4);
    if (!(v > 0 && isfinite(v)) || find_tensor(ld, sn, 1, 1, 1, 1, &s)) return 0;
    return v;
}

static void mat_view(struct loader *ld, const struct gguf_tensor *t, int64_t k, int64_t r0,
                     int64_t rows, struct wmat *w)
{
    struct llama_model *m = ld->m;
    const struct ggml_type_info *ti = ggml_type_get(t->type);
    size_t rb = (size_t)(t->ne[0] / ti->block) * ti->type_size;
    *w = (struct wmat){.name = t->name,
                       .type = t->type,
                       .data = (const uint8_t *)t->data +
                               ((size_t)k * (size_t)t->ne[1] + (size_t)r0) * rb,
                       .in = t->ne[0],
                       .out = rows,
                       .row_bytes = rb,
                       .in_scale = input_scale(ld, t)};
    if (t->ne[0] > m->max_in) m->max_in = t->ne[0];
}

/* A matrix (ne2 > 1: a stack of experts) kept as stored in the mapping;
 * *out NULL when optional and absent. */
static int load_tensor(struct loader *ld, const char *tname, int64_t ne0, int64_t ne1, int64_t ne2,
                       int optional, const struct gguf_tensor **out)
{
    int rc = find_tensor(ld, tname, ne0, ne1, ne2, optional, out);
    if (rc || !*out) return rc;
    const struct ggml_type_info *ti = ggml_type_get((*out)->type);
    if (ne0 % ti->block)
        return qg_errf(ld->err, ld->errlen, QG_ERR_DATA,
                       "%s: tensor '%s' rows of %lld are not whole %s blocks of %u", ld->name,
                       tname, (long long)ne0, ti->name, ti->block);
    ld->m->bytes += (size_t)(*out)->nbytes;
    return QG_OK;
}

static int load_mat(struct loader *ld, const char *tname, int64_t ne0, int64_t ne1, int optional,
                    struct wmat *w)
{
    const struct gguf_tensor *t;
    memset(w, 0, sizeof *w);
    int rc = load_tensor(ld, tname, ne0, ne1, 1, optional, &t);
    if (!rc && t) mat_view(ld, t, 0, 0, ne1, w);
    return rc;
}

/* n experts' matrices of one 3-D tensor, as views */
static int load_exps(struct loader *ld, const char *tname, int64_t ne0, int64_t ne1, int n,
                     struct wmat **out)
{
    const struct gguf_tensor *t;
    int rc = load_tensor(ld, tname, ne0, ne1, n, 0, &t);
    if (rc) return rc;
    if (!(*out = calloc((size_t)n, sizeof **out)))
        return qg_errf(ld->err, ld->errlen, QG_ERR_NOMEM, "%s: out of memory", ld->name);
    for (int e = 0; e < n; e++) {
        mat_view(ld, t, e, 0, ne1, &(*out)[e]);
        (*out)[e].flags |= WMAT_EXPERT; /* llama.cpp's MUL_MAT_ID: one input at a time */
    }
    ld->m->exp_bytes += (size_t)t->nbytes;
    return QG_OK;
}

/* q, k and v: three tensors, or rows of one fused attn_qkv (phi3) */
static int load_qkv(struct loader *ld, struct layer *L, int l, int64_t qd, int64_t kvd)
{
    const struct llama_hparams *hp = &ld->m->hp;
    int64_t dim = hp->dim;
    char tn[GGUF_MAX_NAME + 1];
    const struct gguf_tensor *t;
    snprintf(tn, sizeof tn, "blk.%d.attn_qkv.weight", l);
    int fused = !strcmp(hp->arch, "phi3"); /* llama.cpp reads a fused QKV for phi3 */
    int rc = fused ? load_tensor(ld, tn, dim, qd + 2 * kvd, 1, 1, &t) : QG_OK;
    if (!fused) t = NULL;
    if (rc) return rc;
    if (t) {
        mat_view(ld, t, 0, 0, qd, &L->wq);
        mat_view(ld, t, 0, qd, kvd, &L->wk);
        mat_view(ld, t, 0, qd + kvd, kvd, &L->wv);
        return QG_OK;
    }
    const char *names[3] = {"attn_q", "attn_k", "attn_v"};
    struct wmat *w[3] = {&L->wq, &L->wk, &L->wv};
    float **b[3] = {&L->bq, &L->bk, &L->bv};
    int64_t rows[3] = {qd, kvd, kvd};
    for (int i = 0; i < 3 && !rc; i++) {
        snprintf(tn, sizeof tn, "blk.%d.%s.weight", l, names[i]);
        rc = load_mat(ld, tn, dim, rows[i], 0, w[i]);
        snprintf(tn, sizeof tn, "blk.%d.%s.bias", l, names[i]);
        if (!rc) rc = load_vec(ld, tn, rows[i], !hp->qkv_bias, b[i]);
    }
    return rc;
}

/* routed experts, and the shared one where the file has it */
static int load_moe(struct loader *ld, struct layer *L, int l)
{
    struct llama_hparams *hp = &ld->m->hp;
    int64_t dim = hp->dim, ef = hp->expert_ffn, ne = hp->n_expert;
    char tn[GGUF_MAX_NAME + 1];
    snprintf(tn, sizeof tn, "blk.%d.ffn_gate_inp.weight", l);
    int rc = load_mat(ld, tn, dim, ne, 0, &L->router);
    const char *names[3] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    struct wmat **w[3] = {&L->gate_exps, &L->up_exps, &L->down_exps};
    for (int i = 0; i < 3 && !rc; i++) {
        snprintf(tn, sizeof tn, "blk.%d.%s.weight", l, names[i]);
        rc = load_exps(ld, tn, i == 2 ? ef : dim, i == 2 ? dim : ef, (int)ne, w[i]);
    }
    if (rc || strcmp(hp->arch, "qwen2moe")) return rc; /* the shared expert: qwen2moe's */
    snprintf(tn, sizeof tn, "blk.%d.ffn_up_shexp.weight", l);
    const struct gguf_tensor *t = gguf_find_tensor(ld->g, tn);
    if (!t)
        return qg_errf(ld->err, ld->errlen, QG_ERR_DATA, "%s: tensor '%s' is missing", ld->name,
                       tn);
    if (!hp->shexp_ffn && (t->ne[1] <= 0 || t->ne[1] > (1 << 24)))
        return qg_errf(ld->err, ld->errlen, QG_ERR_DATA, "%s: tensor '%s' has a bad shape",
                       ld->name, tn);
    if (!hp->shexp_ffn) hp->shexp_ffn = (int)t->ne[1];
    int64_t sf = hp->shexp_ffn;
    const char *sn[3] = {"ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp"};
    struct wmat *sw[3] = {&L->sh_gate, &L->sh_up, &L->sh_down};
    for (int i = 0; i < 3 && !rc; i++) {
        snprintf(tn, sizeof tn, "blk.%d.%s.weight", l, sn[i]);
        rc = load_mat(ld, tn, i == 2 ? sf : dim, i == 2 ? dim : sf, 0, sw[i]);
    }
    snprintf(tn, sizeof tn, "blk.%d.ffn_gate_inp_shexp.weight", l);
    if (!rc) rc = load_vec(ld, tn, dim, 0, &L->shexp_gate);
    return rc;
}

/* a dense FFN: gate/up/down, gate and up fused in one ffn_up (phi3), or
 * up/down alone (starcoder2's GELU MLP); biases where the file has them */
static int load_dense_ffn(struct loader *ld, struct layer *L, int l)
{
    const struct llama_hparams *hp = &ld->m->hp;
    int64_t dim = hp->dim, ff = hp->ffn;
    int lnb = hp->norm == LLAMA_NORM_LAYER;
    char tn[GGUF_MAX_NAME + 1];
    int rc = QG_OK;
    if (hp->ffn_act != LLAMA_FFN_GELU) {
        snprintf(tn, sizeof tn, "blk.%d.ffn_gate.weight", l);
        const struct gguf_tensor *t;
        if (!strcmp(hp->arch, "phi3")) { /* fused: rows [0, ff) gate, [ff, 2 ff) up */
            snprintf(tn, sizeof tn, "blk.%d.ffn_up.weight", l);
            if ((rc = load_tensor(ld, tn, dim, 2 * ff, 1, 0, &t))) return rc;
            mat_view(ld, t, 0, 0, ff, &L->w_gate);
            mat_view(ld, t, 0, ff, ff, &L->w_up);
        } else {
            rc = load_mat(ld, tn, dim, ff, 0, &L->w_gate);
            snprintf(tn, sizeof tn, "blk.%d.ffn_gate.bias", l);
            if (!rc) rc = load_vec(ld, tn, ff, 1, &L->b_gate);
        }
    }
    if (!rc && !L->w_up.data) {
        snprintf(tn, sizeof tn, "blk.%d.ffn_up.weight", l);
        rc = load_mat(ld, tn, dim, ff, 0, &L->w_up);
        snprintf(tn, sizeof tn, "blk.%d.ffn_up.bias", l);
        if (!rc) rc = load_vec(ld, tn, ff, !lnb, &L->b_up);
    }
    snprintf(tn, sizeof tn, "blk.%d.ffn_down.weight", l);
    if (!rc) rc = load_mat(ld, tn, ff, dim, 0, &L->w_down);
    snprintf(tn, sizeof tn, "blk.%d.ffn_down.bias", l);
    if (!rc) rc = load_vec(ld, tn, dim, !lnb, &L->b_down);
    return rc;
}

static int load_layer(struct loader *ld, int l)
{
    const struct llama_hparams *hp = &ld->m->hp;
    struct layer *L = &ld->m->layers[l];
    int64_t dim = hp->dim, qd = (int64_t)hp->n_heads * hp->head_dim,
            kvd = (int64_t)hp->n_kv_heads * hp->head_dim;
    int lnb = hp->norm == LLAMA_NORM_LAYER;
    char tn[GGUF_MAX_NAME + 1];
    int rc = QG_OK;
#define V(field, suffix, ne0, opt)                                                                 \
    if (!rc) {                                                                                     \
        snprintf(tn, sizeof tn, "blk.%d." suffix, l);                                              \
        rc = load_vec(ld, tn, ne0, opt, &L->field);                                                \
    }
    V(attn_norm, "attn_norm.weight", dim, 0);
    if (lnb) V(attn_norm_b, "attn_norm.bias", dim, 0);
    if (!rc) rc = load_qkv(ld, L, l, qd, kvd);
    if (hp->qk_norm) {
        V(q_norm, "attn_q_norm.weight", hp->head_dim, 0);
        V(k_norm, "attn_k_norm.weight", hp->head_dim, 0);
    }
    snprintf(tn, sizeof tn, "blk.%d.attn_output.weight", l);
    if (!rc) rc = load_mat(ld, tn, qd, dim, 0, &L->wo);
    V(bo, "attn_output.bias", dim, !lnb);
    if (hp->post_norms) V(post_attn_norm, "post_attention_norm.weight", dim, 0);
    V(ffn_norm, "ffn_norm.weight", dim, 0);
    if (lnb) V(ffn_norm_b, "ffn_norm.bias", dim, 0);
    if (hp->post_norms) V(post_ffn_norm, "post_ffw_norm.weight", dim, 0);
#undef V
    if (!rc) rc = hp->n_expert ? load_moe(ld, L, l) : load_dense_ffn(ld, L, l);
    return rc;
}

/* the embedding, the output head and its norm, RoPE factors */
static int load_globals(struct loader *ld)
{
    struct llama_model *m = ld->m;
    struct llama_hparams *hp = &m->hp;
    const struct gguf_tensor *emb = gguf_find_tensor(ld->g, "token_embd.weight");
    if (!emb)
        return qg_errf(ld->err, ld->errlen, QG_ERR_DATA,
                       "%s: tensor 'token_embd.weight' is missing", ld->name);
    hp->n_vocab = (int)emb->ne[1];
    if (emb->ne[1] <= 0 || emb->ne[1] > (1 << 24))
        return qg_errf(ld->err, ld->errlen, QG_ERR_DATA, "%s: bad vocabulary size", ld->name);
    int64_t dim = hp->dim;
    int rc = load_mat(ld, "token_embd.weight", dim, hp->n_vocab, 0, &m->tok_embd);
    if (!rc) rc = load_vec(ld, "output_norm.weight", dim, 0, &m->out_norm);
    if (!rc && hp->norm == LLAMA_NORM_LAYER)
        rc = load_vec(ld, "output_norm.bias", dim, 0, &m->out_norm_b);
    /* llama.cpp reads no output.weight for these (gemma3 may have one) */
    int gemma = !strcmp(hp->arch, "gemma") || !strcmp(hp->arch, "gemma2");
    if (!rc) rc = load_mat(ld, "output.weight", dim, hp->n_vocab, 1, &m->output);
    if (!rc && gemma && m->output.data)
        rc = qg_errf(ld->err, ld->errlen, QG_ERR_DATA,
                     "%s: a %s model with its own output.weight is not implemented", ld->name,
                     hp->arch);
    if (!rc && !m->output.data) {
        hp->tied_output = 1;
        m->output = m->tok_embd;
    }
    if (!rc && !strcmp(hp->arch, "llama"))
        rc = load_vec(ld, "rope_freqs.weight", hp->rope_dims / 2, 1, &m->rope_freqs);
    if (!rc && !strcmp(hp->arch, "phi3")) { /* LongRoPE: both or neither */
        rc = load_vec(ld, "rope_factors_long.weight", hp->rope_dims / 2, 1, &m->rope_long);
        if (!rc)
            rc = load_vec(ld, "rope_factors_short.weight", hp->rope_dims / 2, !m->rope_long,
                          &m->rope_short);
        if (!rc && m->rope_short && !m->rope_long)
            rc =
                qg_errf(ld->err, ld->errlen, QG_ERR_DATA,
                        "%s: rope_factors_short.weight without rope_factors_long.weight", ld->name);
    }
    const float *fs[3] = {m->rope_freqs, m->rope_long, m->rope_short};
    const char *fn[3] = {"rope_freqs", "rope_factors_long", "rope_factors_short"};
    for (int k = 0; k < 3 && !rc; k++) {
        if (fs[k]) hp->rope_factors = 1;
        for (int i = 0; fs[k] && i < hp->rope_dims / 2; i++)
            if (!(fs[k][i] > 0))
                return qg_errf(ld->err, ld->errlen, QG_ERR_DATA,
                               "%s: %s.weight[%d] is not positive", ld->name, fn[k], i);
    }
    return rc;
}

/* every tensor of the file was used */
static int check_used(struct loader *ld)
{
    for (int64_t i = 0; i < gguf_n_tensors(ld->g); i++)
        if (!ld->used[i])
            return qg_errf(ld->err, ld->errlen, QG_ERR_DATA,
                           "%s: tensor '%s' is not implemented by qgate's %s forward pass "
                           "(refused rather than computed without it)",
                           ld->name, gguf_tensor_at(ld->g, i)->name, ld->m->hp.arch);
    return QG_OK;
}

int llama_load(struct gguf *g, const char *name, struct llama_model **out, char *err, size_t errlen)
{
    *out = NULL;
    struct llama_model *m = calloc(1, sizeof *m);
    unsigned char *used = calloc((size_t)gguf_n_tensors(g) + 1, 1);
    if (!m || !used) {
        free(m);
        free(used);
        gguf_close(g);
        return qg_errf(err, errlen, QG_ERR_NOMEM, "%s: out of memory", name);
    }
    m->g = g;
    snprintf(m->name, sizeof m->name, "%s", name);
    struct loader ld = {m, g, name, used, err, errlen};
    int rc = lm_read_hparams(g, name, &m->hp, err, errlen);
    const char *da;
    size_t dl;
    if (gguf_get_str(g, "qgate.hf.act", &da, &dl) == QG_OK && dl < sizeof m->declared_act)
        memcpy(m->declared_act, da, dl);
    if (!rc) rc = load_globals(&ld);
    if (!rc && !(m->layers = calloc((size_t)m->hp.n_layers, sizeof *m->layers))) rc = QG_ERR_NOMEM;
    for (int l = 0; l < m->hp.n_layers && !rc; l++)
        rc = load_layer(&ld, l);
    if (!rc) rc = check_used(&ld);
    free(used);
    if (rc) {
        if (rc == QG_ERR_NOMEM && !err[0]) qg_errf(err, errlen, rc, "%s: out of memory", name);
        llama_free(m);
        return rc;
    }
    *out = m;
    return QG_OK;
}

void llama_free(struct llama_model *m)
{
    if (!m) return;
    for (int l = 0; m->layers && l < m->hp.n_layers; l++) {
        struct layer *L = &m->layers[l];
        float *all[] = {L->attn_norm,
                        L->attn_norm_b,
                        L->bq,
                        L->bk,
                        L->bv,
                        L->bo,
                        L->ffn_norm,
                        L->ffn_norm_b,
                        L->post_attn_norm,
                        L->post_ffn_norm,
                        L->q_norm,
                        L->k_norm,
                        L->b_up,
                        L->b_gate,
                        L->b_down,
                        L->shexp_gate};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            free(all[i]);
        free(L->gate_exps);
        free(L->up_exps);
        free(L->down_exps);
    }
    free(m->layers);
    free(m->out_norm);
    free(m->out_norm_b);
    free(m->rope_freqs);
    free(m->rope_long);
    free(m->rope_short);
    for (int i = 0; i < m->n_sim; i++)
        free(m->sim[i]);
    free(m->sim);
    for (int i = 0; i < m->n_packed; i++)
        free(m->packed[i]);
    free(m->packed);
    gguf_close(m->g);
    free(m);
}
