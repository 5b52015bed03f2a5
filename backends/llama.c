/* llama — Llama/Qwen2 models: loading (hyper-parameters, tensors checked
 * for shape and finite values), simulated weight formats, sizes;
 * llama_eval.c runs the forward pass and llama_ref.c the reference one. */
#include "backends/llama.h"
#include "backends/llama_impl.h"
#include "backends/simfmt.h"
#include "backends/quant.h"
#include "backends/dequant.h"
#include "backends/ggml_types.h"
#include "core/rng.h"
#include "core/status.h"
#include "core/util.h"
#include "backends/matmul.h"
#include "backends/parallel.h"
#include "backends/vecmath.h"

#include <cblas.h>
#include <math.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void llama_layer_view(const struct llama_model *m, int l, struct llama_layer_view *v)
{
    const struct layer *y = &m->layers[l];
    *v = (struct llama_layer_view){y->attn_norm, y->ffn_norm, y->bq,    y->bk,
                                   y->bv,        &y->wq,      &y->wk,   &y->wv,
                                   &y->wo,       &y->w_gate,  &y->w_up, &y->w_down};
}

const struct wmat *llama_tok_embd(const struct llama_model *m)
{
    return &m->tok_embd;
}

const struct wmat *llama_output_mat(const struct llama_model *m)
{
    return &m->output;
}

const float *llama_out_norm(const struct llama_model *m)
{
    return m->out_norm;
}

const struct llama_hparams *llama_hparams(const struct llama_model *m)
{
    return &m->hp;
}

size_t llama_weight_bytes(const struct llama_model *m)
{
    return m->bytes;
}

static int get_int(const struct gguf *g, const char *arch, const char *suffix, int64_t def,
                   int64_t *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int rc = gguf_get_int(g, key, out);
    if (rc == QG_ERR_NOTFOUND && def >= 0) {
        *out = def;
        return QG_OK;
    }
    return rc;
}

static int read_hparams(const struct gguf *g, const char *name, struct llama_hparams *hp, char *err,
                        size_t errlen)
{
    const char *a;
    size_t al;
    memset(hp, 0, sizeof *hp);
    if (gguf_get_str(g, "general.architecture", &a, &al) != QG_OK)
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: general.architecture is missing", name);
    if (!((al == 5 && memcmp(a, "llama", 5) == 0) || (al == 5 && memcmp(a, "qwen2", 5) == 0)))
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: architecture '%.*s' is not supported (qgate runs llama and qwen2)",
                       name, (int)(al < 32 ? al : 32), a);
    memcpy(hp->arch, a, al);
    hp->arch[al] = '\0';
    hp->qkv_bias = strcmp(hp->arch, "qwen2") == 0;
    hp->rope_neox = hp->qkv_bias;
    struct {
        const char *key;
        int64_t def;
        int *dst;
    } ints[] = {
        {"embedding_length", -1, &hp->dim},         {"block_count", -1, &hp->n_layers},
        {"attention.head_count", -1, &hp->n_heads}, {"feed_forward_length", -1, &hp->ffn},
        {"context_length", -1, &hp->ctx_train},
    };
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
        int64_t v;
        if (get_int(g, hp->arch, ints[i].key, ints[i].def, &v) != QG_OK || v <= 0 || v > (1 << 24))
            return qg_errf(err, errlen, QG_ERR_DATA, "%s: %s.%s is missing or out of range", name,
                           hp->arch, ints[i].key);
        *ints[i].dst = (int)v;
    }
    int64_t v;
    if (get_int(g, hp->arch, "attention.head_count_kv", hp->n_heads, &v) != QG_OK || v <= 0 ||
        hp->n_heads % v != 0)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: %s.attention.head_count_kv must divide head_count %d", name, hp->arch,
                       hp->n_heads);
    hp->n_kv_heads = (int)v;
    if (get_int(g, hp->arch, "attention.key_length", hp->dim / hp->n_heads, &v) != QG_OK ||
        v <= 0 || v > 4096)
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: bad attention.key_length", name);
    hp->head_dim = (int)v;
    if (hp->dim % hp->n_heads && hp->head_dim == hp->dim / hp->n_heads)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: embedding_length %d is not a multiple of head_count %d", name, hp->dim,
                       hp->n_heads);
    if (get_int(g, hp->arch, "rope.dimension_count", hp->head_dim, &v) != QG_OK || v <= 0 ||
        v > hp->head_dim || v % 2)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: rope.dimension_count must be even and <= head size %d", name,
                       hp->head_dim);
    hp->rope_dims = (int)v;
    char key[128];
    double d;
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", hp->arch);
    if (gguf_get_float(g, key, &d) != QG_OK || !(d > 0 && d < 1))
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: %s is missing or not in (0, 1)", name, key);
    hp->rms_eps = (float)d;
    snprintf(key, sizeof key, "%s.rope.freq_base", hp->arch);
    hp->rope_theta = gguf_get_float(g, key, &d) == QG_OK && d > 0 ? (float)d : 10000.0f;
    return QG_OK;
}

/* The tensor `tname` of shape ne0 x ne1, or NULL with err set (NULL and
 * QG_OK when optional and absent). */
static int find_tensor(const struct gguf *g, const char *name, const char *tname, int64_t ne0,
                       int64_t ne1, int optional, const struct gguf_tensor **out, char *err,
                       size_t errlen)
{
    const struct gguf_tensor *t = gguf_find_tensor(g, tname);
    *out = NULL;
    if (!t) {
        if (optional) return QG_OK;
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: tensor '%s' is missing", name, tname);
    }
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: tensor '%s' has shape %lld x %lld x %lld, expected %lld x %lld", name,
                       tname, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                       (long long)ne0, (long long)ne1);
    if (!dequant_supported(t->type))
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: tensor '%s' is stored as %s, which qgate cannot decode", name, tname,
                       ggml_type_name(t->type));
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

static int nonfinite_error(const char *name, const char *tname, float v, int64_t at, char *err,
                           size_t errlen)
{
    return qg_errf(err, errlen, QG_ERR_DATA,
                   "%s: tensor '%s' holds a non-finite weight (%s at element %lld): the file is "
                   "damaged or was quantized from a broken model",
                   name, tname, isnan(v) ? "NaN" : "Inf", (long long)at);
}

/* A vector (norm weights, biases): decoded to f32 now, checked finite. */
static int load_vec(struct llama_model *m, const struct gguf *g, const char *name,
                    const char *tname, int64_t ne0, int optional, float **out, char *err,
                    size_t errlen)
{
    const struct gguf_tensor *t;
    *out = NULL;
    int rc = find_tensor(g, name, tname, ne0, 1, optional, &t, err, errlen);
    if (rc || !t) return rc;
    float *p = malloc((size_t)ne0 * sizeof *p);
    if (!p) return qg_errf(err, errlen, QG_ERR_NOMEM, "%s: out of memory for '%s'", name, tname);
    dequant_row(t->type, t->data, p, ne0);
    int64_t bad = lm_first_nonfinite(p, ne0);
    if (bad >= 0) {
        rc = nonfinite_error(name, tname, p[bad], bad, err, errlen);
        free(p);
        return rc;
    }
    m->bytes += (size_t)ne0 * sizeof *p;
    *out = p;
    return QG_OK;
}

/* A matrix: kept as stored, in the mapping (optional: w->data NULL). */
static int load_mat(struct llama_model *m, const struct gguf *g, const char *name,
                    const char *tname, int64_t ne0, int64_t ne1, int optional, struct wmat *w,
                    char *err, size_t errlen)
{
    const struct gguf_tensor *t;
    memset(w, 0, sizeof *w);
    int rc = find_tensor(g, name, tname, ne0, ne1, optional, &t, err, errlen);
    if (rc || !t) return rc;
    const struct ggml_type_info *ti = ggml_type_get(t->type);
    if (ne0 % ti->block)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: tensor '%s' rows of %lld are not whole %s blocks of %u", name, tname,
                       (long long)ne0, ti->name, ti->block);
    *w = (struct wmat){.name = t->name,
                       .type = t->type,
                       .data = t->data,
                       .in = ne0,
                       .out = ne1,
                       .row_bytes = (size_t)(ne0 / ti->block) * ti->type_size};
    m->bytes += (size_t)t->nbytes;
    if (ne0 > m->max_in) m->max_in = ne0;
    return QG_OK;
}

int llama_find_nonfinite(const struct llama_model *m, char *err, size_t errlen)
{
    const struct wmat *all[7];
    enum { ROWS = 64 }; /* rows decoded at a time */
    float *buf = malloc((size_t)ROWS * (size_t)m->max_in * sizeof *buf);
    if (!buf) return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    int rc = QG_OK;
    for (int l = -1; l < m->hp.n_layers && !rc; l++) {
        int k = 0;
        if (l < 0) {
            all[k++] = &m->tok_embd;
            all[k++] = &m->output;
        } else {
            const struct layer *L = &m->layers[l];
            const struct wmat *ws[] = {&L->wq,     &L->wk,   &L->wv,    &L->wo,
                                       &L->w_gate, &L->w_up, &L->w_down};
            for (int i = 0; i < 7; i++)
                all[k++] = ws[i];
        }
        for (int i = 0; i < k && !rc; i++) {
            const struct wmat *w = all[i];
            for (int64_t r0 = 0; r0 < w->out && !rc; r0 += ROWS) {
                int64_t nr = w->out - r0 < ROWS ? w->out - r0 : ROWS;
                dequant_row(w->type, w->data + (size_t)r0 * w->row_bytes, buf, nr * w->in);
                int64_t bad = lm_first_nonfinite(buf, nr * w->in);
                if (bad >= 0)
                    rc = nonfinite_error(m->name, w->name, buf[bad], r0 * w->in + bad, err, errlen);
            }
        }
    }
    free(buf);
    return rc;
}

int llama_load(struct gguf *g, const char *name, struct llama_model **out, char *err, size_t errlen)
{
    *out = NULL;
    struct llama_model *m = calloc(1, sizeof *m);
    if (!m) {
        gguf_close(g);
        return qg_errf(err, errlen, QG_ERR_NOMEM, "%s: out of memory", name);
    }
    m->g = g;
    snprintf(m->name, sizeof m->name, "%s", name);
    struct llama_hparams *hp = &m->hp;
    int rc = read_hparams(g, name, hp, err, errlen);
    const struct gguf_tensor *emb = gguf_find_tensor(g, "token_embd.weight");
    if (!rc && !emb)
        rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: tensor 'token_embd.weight' is missing", name);
    if (!rc) {
        hp->n_vocab = (int)emb->ne[1];
        if (emb->ne[1] <= 0 || emb->ne[1] > (1 << 24))
            rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: bad vocabulary size", name);
    }
    int64_t dim = hp->dim, qd = (int64_t)hp->n_heads * hp->head_dim,
            kvd = (int64_t)hp->n_kv_heads * hp->head_dim;
    if (!rc)
        rc = load_mat(m, g, name, "token_embd.weight", dim, hp->n_vocab, 0, &m->tok_embd, err,
                      errlen);
    if (!rc) rc = load_vec(m, g, name, "output_norm.weight", dim, 0, &m->out_norm, err, errlen);
    if (!rc)
        rc = load_mat(m, g, name, "output.weight", dim, hp->n_vocab, 1, &m->output, err, errlen);
    if (!rc && !m->output.data) {
        hp->tied_output = 1;
        m->output = m->tok_embd;
    }
    if (!rc && !(m->layers = calloc((size_t)hp->n_layers, sizeof *m->layers))) rc = QG_ERR_NOMEM;
    for (int l = 0; l < hp->n_layers && !rc; l++) {
        struct layer *L = &m->layers[l];
        char tn[GGUF_MAX_NAME + 1];
#define V(field, suffix, ne0, opt)                                                                 \
    if (!rc) {                                                                                     \
        snprintf(tn, sizeof tn, "blk.%d." suffix, l);                                              \
        rc = load_vec(m, g, name, tn, ne0, opt, &L->field, err, errlen);                           \
    }
#define M(field, suffix, ne0, ne1)                                                                 \
    if (!rc) {                                                                                     \
        snprintf(tn, sizeof tn, "blk.%d." suffix, l);                                              \
        rc = load_mat(m, g, name, tn, ne0, ne1, 0, &L->field, err, errlen);                        \
    }
        V(attn_norm, "attn_norm.weight", dim, 0);
        M(wq, "attn_q.weight", dim, qd);
        M(wk, "attn_k.weight", dim, kvd);
        M(wv, "attn_v.weight", dim, kvd);
        M(wo, "attn_output.weight", qd, dim);
        V(bq, "attn_q.bias", qd, !hp->qkv_bias);
        V(bk, "attn_k.bias", kvd, !hp->qkv_bias);
        V(bv, "attn_v.bias", kvd, !hp->qkv_bias);
        V(ffn_norm, "ffn_norm.weight", dim, 0);
        M(w_gate, "ffn_gate.weight", dim, hp->ffn);
        M(w_up, "ffn_up.weight", dim, hp->ffn);
        M(w_down, "ffn_down.weight", hp->ffn, dim);
#undef V
#undef M
    }
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
        float *all[] = {L->attn_norm, L->bq, L->bk, L->bv, L->ffn_norm};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            free(all[i]);
    }
    free(m->layers);
    free(m->out_norm);
    for (int i = 0; i < m->n_sim; i++)
        free(m->sim[i]);
    free(m->sim);
    gguf_close(m->g);
    free(m);
}

/* 1 when name matches one of the comma-separated glob patterns of keep */
static int kept(const char *keep, const char *name)
{
    char pat[256];
    for (const char *p = keep; p && *p;) {
        size_t n = strcspn(p, ",");
        snprintf(pat, sizeof pat, "%.*s", (int)(n < 255 ? n : 255), p);
        if (n && (fnmatch(pat, name, 0) == 0 || !strcmp(pat, name))) return 1;
        /* "output" and "token_embd" name their tensors with or without ".weight" */
        char full[300];
        snprintf(full, sizeof full, "%s.weight", pat);
        if (n && fnmatch(full, name, 0) == 0) return 1;
        p += n + (p[n] == ',');
    }
    return 0;
}

/* One matrix: dequantized to an owned f32 copy, quantized and dequantized
 * in the simulated format. */
static int simulate_mat(struct llama_model *m, struct wmat *w, const struct simfmt *f)
{
    size_t n = (size_t)w->in * (size_t)w->out;
    float *x = malloc(n * sizeof *x),
          **grow = realloc(m->sim, (size_t)(m->n_sim + 1) * sizeof *grow);
    if (grow) m->sim = grow;
    if (!x || !grow) {
        free(x);
        return QG_ERR_NOMEM;
    }
    m->sim[m->n_sim++] = x;
    for (int64_t r = 0; r < w->out; r++)
        dequant_row(w->type, w->data + (size_t)r * w->row_bytes, x + (size_t)r * (size_t)w->in,
                    w->in);
    simfmt_apply(f, x, w->out, w->in);
    m->bytes += n * sizeof *x;
    w->data = (const uint8_t *)x;
    w->type = GGML_F32;
    w->row_bytes = (size_t)w->in * sizeof *x;
    return QG_OK;
}

int llama_simulate_weights(struct llama_model *m, const struct simfmt *f, const char *keep,
                           int *n_done, char *err, size_t errlen)
{
    *n_done = 0;
    int tied = m->output.data == m->tok_embd.data;
    for (int l = -1; l < m->hp.n_layers; l++) {
        struct wmat *all[7];
        int k = 0;
        if (l < 0) {
            all[k++] = &m->tok_embd;
            if (!tied) all[k++] = &m->output;
        } else {
            struct layer *L = &m->layers[l];
            struct wmat *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
            for (int i = 0; i < 7; i++)
                all[k++] = ws[i];
        }
        for (int i = 0; i < k; i++) {
            struct wmat *w = all[i];
            if (!w->data || kept(keep, w->name)) continue;
            if (simulate_mat(m, w, f))
                return qg_errf(err, errlen, QG_ERR_NOMEM, "%s: out of memory simulating '%s'",
                               m->name, w->name);
            if (l < 0 && i == 0 && tied) m->output = m->tok_embd; /* the same matrix */
            (*n_done)++;
        }
    }
    return QG_OK;
}

size_t llama_decode_bytes(const struct llama_model *m)
{
    size_t emb = m->tok_embd.row_bytes * (size_t)m->tok_embd.out, vec = 0;
    /* the vectors: norms and biases, f32 */
    vec += (size_t)m->hp.dim * 4 * (size_t)(2 * m->hp.n_layers + 1);
    return m->bytes - vec - (m->hp.tied_output ? 0 : emb);
}

double llama_flops(const struct llama_model *m, int n, int n_logits)
{
    const struct llama_hparams *h = &m->hp;
    double qd = (double)h->n_heads * h->head_dim, kvd = (double)h->n_kv_heads * h->head_dim;
    double per_tok = 2.0 * h->dim * (qd + 2 * kvd) + 2.0 * qd * h->dim + 2.0 * 3 * h->dim * h->ffn;
    /* attention: QK^T and SV over the causal triangle, all heads */
    double attn = 2.0 * 2 * h->n_heads * h->head_dim * ((double)n * (n + 1) / 2);
    return h->n_layers * (per_tok * n + attn) + 2.0 * h->dim * h->n_vocab * n_logits;
}
