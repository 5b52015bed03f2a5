/* llama — Llama/Qwen2 forward pass: batched sgemm path and a double reference. */
#include "backends/llama.h"
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

enum { ATT_BLOCK = 128 }; /* query rows per attention block */

struct layer {
    float *attn_norm, *bq, *bk, *bv, *ffn_norm; /* vectors: f32 copies */
    struct wmat wq, wk, wv, wo, w_gate, w_up, w_down;
};

struct llama_model {
    struct llama_hparams hp;
    struct gguf *g;       /* owned: the matrices point into its mapping */
    struct wmat tok_embd; /* [n_vocab][dim] */
    float *out_norm;      /* [dim] */
    struct wmat output;   /* [n_vocab][dim]; the embedding when tied */
    struct layer *layers;
    size_t bytes;   /* weights as stored, vectors as f32 */
    int64_t max_in; /* widest matrix input */
    float **sim;    /* simulated matrices (llama_simulate_weights): owned f32 copies */
    int n_sim;
    char name[256]; /* the file, for messages */
};

struct llama_ctx {
    const struct llama_model *m;
    int n_ctx, pos;
    int n_threads; /* threads for attention heads and elementwise loops */
    int last_n;    /* rows of the last batch (their hidden states are in x) */
    float *k, *v;  /* [n_layers][n_ctx][kv_dim] */
    float *x, *xn, *q, *att, *gate, *up, *scores; /* batch buffers, n_ctx rows */
    float *scratch;   /* per thread: dequantized weight panels (matmul.h) */
    uint64_t perturb; /* 0, or the seed of last-bit rounding of the residual stream */
    int act;          /* enum llama_act: how matrix inputs are rounded */
    struct simfmt act_fmt;
    struct simfmt kv_fmt; /* K and V as written to the cache (SIMFMT_NONE: f32) */
    float *aq;            /* [n_ctx][max_in]: a matrix input after rounding */
};

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
static int64_t first_nonfinite(const float *p, int64_t n)
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
    int64_t bad = first_nonfinite(p, ne0);
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
                int64_t bad = first_nonfinite(buf, nr * w->in);
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

int llama_ctx_new(const struct llama_model *m, int n_ctx, struct llama_ctx **out)
{
    *out = NULL;
    const struct llama_hparams *h = &m->hp;
    if (n_ctx <= 0) return QG_ERR_USAGE;
    struct llama_ctx *c = calloc(1, sizeof *c);
    if (!c) return QG_ERR_NOMEM;
    size_t N = (size_t)n_ctx, kvd = (size_t)h->n_kv_heads * h->head_dim,
           qd = (size_t)h->n_heads * h->head_dim;
    c->m = m;
    c->n_ctx = n_ctx;
    c->k = qg_alloc_aligned((size_t)h->n_layers * N * kvd * sizeof(float));
    c->v = qg_alloc_aligned((size_t)h->n_layers * N * kvd * sizeof(float));
    c->x = qg_alloc_aligned(N * (size_t)h->dim * sizeof(float));
    c->xn = qg_alloc_aligned(N * (size_t)h->dim * sizeof(float));
    c->q = qg_alloc_aligned(N * qd * sizeof(float));
    c->att = qg_alloc_aligned(N * qd * sizeof(float));
    c->gate = qg_alloc_aligned(N * (size_t)h->ffn * sizeof(float));
    c->up = qg_alloc_aligned(N * (size_t)h->ffn * sizeof(float));
    c->n_threads = parallel_cpus();
    /* buffers 64-byte aligned: the kernels' 64-byte loads of x then never
     * straddle two cache lines; all threading is ours (see matmul): BLAS runs single-threaded */
    openblas_set_num_threads(1);
    c->scores = qg_alloc_aligned((size_t)c->n_threads * ATT_BLOCK * N * sizeof(float));
    c->scratch =
        qg_alloc_aligned((size_t)c->n_threads * matmul_scratch_floats(m->max_in) * sizeof(float));
    if (!c->k || !c->v || !c->x || !c->xn || !c->q || !c->att || !c->gate || !c->up || !c->scores ||
        !c->scratch) {
        llama_ctx_free(c);
        return QG_ERR_NOMEM;
    }
    *out = c;
    return QG_OK;
}

void llama_ctx_free(struct llama_ctx *c)
{
    if (!c) return;
    free(c->aq);
    free(c->k);
    free(c->v);
    free(c->x);
    free(c->xn);
    free(c->q);
    free(c->att);
    free(c->gate);
    free(c->up);
    free(c->scores);
    free(c->scratch);
    free(c);
}

void llama_ctx_reset(struct llama_ctx *c)
{
    c->pos = 0;
}

void llama_ctx_set_perturb(struct llama_ctx *c, uint64_t seed)
{
    c->perturb = seed;
}

/* Moves every residual value of the batch by one ulp up or down, chosen
 * by a hash of (seed, position, sublayer, element): randomized rounding at
 * the last bit, as a different reduction order on another device would
 * round. Deterministic for a seed. */
static void perturb_rows(const struct llama_ctx *c, int n, int dim, int pos0, int sublayer)
{
    for (int i = 0; i < n; i++) {
        uint64_t st = c->perturb ^ ((uint64_t)(pos0 + i) << 20) ^ ((uint64_t)sublayer << 52);
        float *x = c->x + (size_t)i * dim;
        for (int j = 0; j < dim; j += 64) {
            uint64_t bits = rng_next(&st);
            for (int k = j; k < dim && k < j + 64; k++)
                x[k] = nextafterf(x[k], (bits >> (k - j)) & 1 ? INFINITY : -INFINITY);
        }
    }
}

void llama_ctx_set_threads(struct llama_ctx *c, int n)
{
    if (n > 0 && n <= parallel_cpus()) c->n_threads = n;
}
int llama_ctx_pos(const struct llama_ctx *c)
{
    return c->pos;
}

/* y[n][w] = rmsnorm(x[n][w]) * weight; the sum of squares in double as ggml */
static void rmsnorm(float *y, const float *x, const float *weight, int n, int w, float eps)
{
    for (int i = 0; i < n; i++) {
        const float *xi = x + (size_t)i * w;
        double sum = 0;
        for (int j = 0; j < w; j++)
            sum += (double)(xi[j] * xi[j]);
        float scale = 1.0f / sqrtf((float)(sum / w) + eps);
        float *yi = y + (size_t)i * w;
        for (int j = 0; j < w; j++)
            yi[j] = xi[j] * scale * weight[j];
    }
}

/* y[n][out] = x[n][in] . W^T (+ bias) (+ beta y), weights as stored */
static void matmul(const struct llama_ctx *c, float *y, const float *x, const struct wmat *W,
                   const float *bias, float beta, int n)
{
    if (c->act != LLAMA_ACT_NONE) { /* the input as the simulated arithmetic rounds it */
        memcpy(c->aq, x, (size_t)n * (size_t)W->in * sizeof *x);
        if (c->act == LLAMA_ACT_LLAMACPP)
            simfmt_llamacpp_act(W->type, c->aq, n, W->in);
        else
            simfmt_apply_act(&c->act_fmt, c->aq, n, W->in);
        x = c->aq;
    }
    matmul_w(y, x, W, bias, n, beta, c->n_threads, c->scratch);
}

/* the k products of one x (Q, K, V; gate, up): one fork-join in a decode
 * step, unless the simulated arithmetic rounds x by each matrix's type */
static void matmul_group(const struct llama_ctx *c, const struct matmul_part *parts, int k,
                         const float *x, int n)
{
    if (c->act != LLAMA_ACT_NONE) {
        for (int i = 0; i < k; i++)
            matmul(c, parts[i].y, x, parts[i].W, parts[i].bias, parts[i].beta, n);
        return;
    }
    matmul_w_group(parts, k, x, n, c->n_threads, c->scratch);
}

void llama_ctx_set_kv(struct llama_ctx *c, const struct simfmt *f)
{
    c->kv_fmt = *f;
}

int llama_ctx_set_act(struct llama_ctx *c, int mode, const struct simfmt *f)
{
    if (mode != LLAMA_ACT_NONE && !c->aq) {
        int64_t rows = c->n_ctx > LLAMA_MAX_ROWS_HINT ? c->n_ctx : LLAMA_MAX_ROWS_HINT;
        c->aq = malloc((size_t)rows * (size_t)c->m->max_in * sizeof *c->aq);
        if (!c->aq) return QG_ERR_NOMEM;
    }
    c->act = mode;
    if (f) c->act_fmt = *f;
    return QG_OK;
}

/* Rotates n rows of `heads` heads (row stride `stride`) at positions pos0.. */
static void rope(float *x, int n, int stride, int heads, int hd, int pos0,
                 const struct llama_hparams *h)
{
    const int nd = h->rope_dims;
    const float theta_scale = powf(h->rope_theta, -2.0f / (float)nd);
    for (int i = 0; i < n; i++) {
        float cs[2048], sn[2048]; /* nd/2 <= 2048: head size is capped at 4096 */
        float theta = (float)(pos0 + i);
        for (int k = 0; k < nd / 2; k++) {
            cs[k] = cosf(theta);
            sn[k] = sinf(theta);
            theta *= theta_scale;
        }
        for (int hh = 0; hh < heads; hh++) {
            float *v = x + (size_t)i * stride + (size_t)hh * hd;
            for (int k = 0; k < nd / 2; k++) {
                int a = h->rope_neox ? k : 2 * k, b = h->rope_neox ? k + nd / 2 : 2 * k + 1;
                float x0 = v[a], x1 = v[b];
                v[a] = x0 * cs[k] - x1 * sn[k];
                v[b] = x0 * sn[k] + x1 * cs[k];
            }
        }
    }
}

/* Causal attention for the n new rows against the cached rows. Rows are
 * taken in blocks of ATT_BLOCK so that a block only multiplies against the
 * keys it may see (pos0 + end of block), not the masked upper triangle. */

struct att_job {
    struct llama_ctx *c;
    int l, n, pos0;
};

/* softmax of each of `rows` rows of s (row stride T), row i causal over
 * keys 0..last0 + i, the keys past it zero */
static void softmax_causal(const struct llama_ctx *c, float *scores, int rows, int T, int last0)
{
    for (int i = 0; i < rows; i++) {
        float *s = scores + (size_t)i * T;
        int last = last0 + i;
        float mx = vm_max(s, last + 1, -INFINITY);
        vm_exp_shifted(s, s, mx, last + 1);
        double sum = 0;
        for (int k = 0; k <= last; k++)
            sum += s[k];
        vm_scale(s, (float)(1.0 / sum), last + 1);
        for (int k = last + 1; k < T; k++)
            s[k] = 0.0f;
        if (c->act == LLAMA_ACT_LLAMACPP) quant_round_f16(s, last + 1); /* meets V in f16 */
    }
}

/* heads [h0, h1) of one layer; `thread` picks the scores buffer. One query
 * row (a decode step) takes dot products and sums of V's rows: sgemm's
 * packing would cost more than the product */
static void attention_heads(void *arg, int64_t h0, int64_t h1, int thread)
{
    const struct att_job *j = arg;
    struct llama_ctx *c = j->c;
    const struct llama_hparams *h = &c->m->hp;
    const int hd = h->head_dim, qd = h->n_heads * hd, kvd = h->n_kv_heads * hd, n = j->n,
              pos0 = j->pos0;
    const int group = h->n_heads / h->n_kv_heads;
    const float *K = c->k + (size_t)j->l * c->n_ctx * kvd,
                *V = c->v + (size_t)j->l * c->n_ctx * kvd;
    const float scale = 1.0f / sqrtf((float)hd);
    float *scores = c->scores + (size_t)thread * ATT_BLOCK * c->n_ctx;
    for (int64_t hh = h0; hh < h1; hh++) {
        int kh = (int)hh / group;
        for (int r0 = 0; r0 < n; r0 += ATT_BLOCK) {
            int rows = n - r0 < ATT_BLOCK ? n - r0 : ATT_BLOCK, T = pos0 + r0 + rows;
            const float *Q = c->q + (size_t)r0 * qd + (size_t)hh * hd, *Kh = K + (size_t)kh * hd,
                        *Vh = V + (size_t)kh * hd;
            float *O = c->att + (size_t)r0 * qd + (size_t)hh * hd;
            /* S[rows][T] = Q_h[r0..][hd] . K_h[T][hd]^T * scale */
            if (rows == 1)
                for (int t = 0; t < T; t++)
                    scores[t] = scale * matmul_dot(Q, Kh + (size_t)t * kvd, hd);
            else
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, T, hd, scale, Q, qd, Kh,
                            kvd, 0.0f, scores, T);
            softmax_causal(c, scores, rows, T, pos0 + r0);
            /* O_h[r0..][hd] = S[rows][T] . V_h[T][hd] */
            if (rows == 1) {
                vm_weighted_rows(O, scores, Vh, T, kvd, hd);
            } else {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hd, T, 1.0f, scores, T,
                            Vh, kvd, 0.0f, O, qd);
            }
        }
    }
}

/* Heads run on our threads, each with single-threaded BLAS calls. */
static void attention(struct llama_ctx *c, int l, int n, int pos0)
{
    struct att_job j = {c, l, n, pos0};
    const struct llama_hparams *h = &c->m->hp;
    double work = 4.0 * h->n_heads * h->head_dim * (double)n * (pos0 + n);
    parallel_for(parallel_threads_for(c->n_threads, work), h->n_heads, attention_heads, &j);
}

struct swiglu_job {
    float *gate;
    const float *up;
};

static void swiglu(void *arg, int64_t b, int64_t e, int thread)
{
    const struct swiglu_job *j = arg;
    (void)thread;
    vm_swiglu(j->gate + b, j->up + b, e - b);
}

int llama_eval(struct llama_ctx *c, const int32_t *tokens, int n, int logits_from, float *logits)
{
    const struct llama_model *m = c->m;
    const struct llama_hparams *h = &m->hp;
    if (n <= 0 || c->pos + n > c->n_ctx || logits_from < 0 || logits_from > n) return QG_ERR_USAGE;
    c->last_n = 0;
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= h->n_vocab) return QG_ERR_USAGE;
    const int dim = h->dim, hd = h->head_dim, qd = h->n_heads * hd, kvd = h->n_kv_heads * hd;
    const int pos0 = c->pos;
    for (int i = 0; i < n; i++)
        dequant_row(m->tok_embd.type, m->tok_embd.data + (size_t)tokens[i] * m->tok_embd.row_bytes,
                    c->x + (size_t)i * dim, dim);
    for (int l = 0; l < h->n_layers; l++) {
        const struct layer *L = &m->layers[l];
        float *Kl = c->k + ((size_t)l * c->n_ctx + pos0) * kvd,
              *Vl = c->v + ((size_t)l * c->n_ctx + pos0) * kvd;
        rmsnorm(c->xn, c->x, L->attn_norm, n, dim, h->rms_eps);
        const struct matmul_part qkv[] = {
            {c->q, &L->wq, L->bq, 0.0f}, {Kl, &L->wk, L->bk, 0.0f}, {Vl, &L->wv, L->bv, 0.0f}};
        matmul_group(c, qkv, 3, c->xn, n);
        rope(c->q, n, qd, h->n_heads, hd, pos0, h);
        rope(Kl, n, kvd, h->n_kv_heads, hd, pos0, h);
        if (c->act == LLAMA_ACT_LLAMACPP) { /* llama.cpp's f16 cache; Q meets it in f16 */
            quant_round_f16(c->q, (int64_t)n * qd);
            quant_round_f16(Kl, (int64_t)n * kvd);
            quant_round_f16(Vl, (int64_t)n * kvd);
        }
        if (c->kv_fmt.kind != SIMFMT_NONE) { /* K and V as a simulated cache stores them */
            simfmt_apply_kv(&c->kv_fmt, Kl, n, kvd, hd);
            simfmt_apply_kv(&c->kv_fmt, Vl, n, kvd, hd);
        }
        attention(c, l, n, pos0);
        matmul(c, c->x, c->att, &L->wo, NULL, 1.0f, n); /* x += att . Wo^T */
        if (c->perturb) perturb_rows(c, n, dim, pos0, 2 * l);
        rmsnorm(c->xn, c->x, L->ffn_norm, n, dim, h->rms_eps);
        const struct matmul_part ffn[] = {{c->gate, &L->w_gate, NULL, 0.0f},
                                          {c->up, &L->w_up, NULL, 0.0f}};
        matmul_group(c, ffn, 2, c->xn, n);
        struct swiglu_job sj = {c->gate, c->up};
        parallel_for(parallel_threads_for(c->n_threads, 20.0 * n * h->ffn), (int64_t)n * h->ffn,
                     swiglu, &sj);
        matmul(c, c->x, c->gate, &L->w_down, NULL, 1.0f, n); /* x += ffn */
        if (c->perturb) perturb_rows(c, n, dim, pos0, 2 * l + 1);
    }
    c->pos += n;
    c->last_n = n;
    /* a non-finite weight or an overflow: llama_find_nonfinite says which */
    if (first_nonfinite(c->x, (int64_t)n * dim) >= 0) return QG_ERR_DATA;
    return n > logits_from ? llama_output(c, logits_from, n - logits_from, logits) : QG_OK;
}

int llama_output(struct llama_ctx *c, int first, int count, float *logits)
{
    const struct llama_model *m = c->m;
    const struct llama_hparams *h = &m->hp;
    if (first < 0 || count <= 0 || first + count > c->last_n) return QG_ERR_USAGE;
    rmsnorm(c->xn, c->x + (size_t)first * h->dim, m->out_norm, count, h->dim, h->rms_eps);
    matmul(c, logits, c->xn, &m->output, NULL, 0.0f, count);
    return QG_OK;
}

/* ---- reference: one position at a time, double everywhere ---- */

static void ref_rmsnorm(double *y, const double *x, const float *w, int n, double eps)
{
    double ss = 0;
    for (int j = 0; j < n; j++)
        ss += x[j] * x[j];
    double s = 1.0 / sqrt(ss / n + eps);
    for (int j = 0; j < n; j++)
        y[j] = x[j] * s * w[j];
}

/* y[out] = W[out][in] . x[in] + b, row by row through a decoded row */
static void ref_matvec(double *y, const struct wmat *W, const float *b, const double *x, float *row)
{
    for (int64_t r = 0; r < W->out; r++) {
        double acc = b ? b[r] : 0.0;
        dequant_row(W->type, W->data + (size_t)r * W->row_bytes, row, W->in);
        for (int64_t k = 0; k < W->in; k++)
            acc += (double)row[k] * x[k];
        y[r] = acc;
    }
}

static void ref_rope(double *v, int heads, int hd, int pos, const struct llama_hparams *h)
{
    int nd = h->rope_dims;
    for (int hh = 0; hh < heads; hh++)
        for (int k = 0; k < nd / 2; k++) {
            double theta = pos * pow((double)h->rope_theta, -2.0 * k / nd);
            int a = h->rope_neox ? k : 2 * k, b = h->rope_neox ? k + nd / 2 : 2 * k + 1;
            double x0 = v[hh * hd + a], x1 = v[hh * hd + b];
            v[hh * hd + a] = x0 * cos(theta) - x1 * sin(theta);
            v[hh * hd + b] = x0 * sin(theta) + x1 * cos(theta);
        }
}

/* o = causal attention of query position i over K/V rows 0..i (one layer) */
static void ref_attention(double *o, const double *q, const double *K, const double *V, double *s,
                          int i, const struct llama_hparams *h)
{
    const int hd = h->head_dim, kvd = h->n_kv_heads * hd, group = h->n_heads / h->n_kv_heads;
    for (int hh = 0; hh < h->n_heads; hh++) {
        int kh = hh / group;
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j <= i; j++) {
            double d = 0;
            for (int k = 0; k < hd; k++)
                d += q[hh * hd + k] * K[(size_t)j * kvd + kh * hd + k];
            s[j] = d / sqrt((double)hd);
            if (s[j] > mx) mx = s[j];
        }
        for (int j = 0; j <= i; j++)
            sum += (s[j] = exp(s[j] - mx));
        for (int k = 0; k < hd; k++) {
            double acc = 0;
            for (int j = 0; j <= i; j++)
                acc += s[j] / sum * V[(size_t)j * kvd + kh * hd + k];
            o[hh * hd + k] = acc;
        }
    }
}

int llama_eval_ref(const struct llama_model *m, const int32_t *tokens, int n, float *logits)
{
    const struct llama_hparams *h = &m->hp;
    const int dim = h->dim, hd = h->head_dim, qd = h->n_heads * hd, kvd = h->n_kv_heads * hd;
    const int L = h->n_layers;
    double *x = malloc(sizeof(double) * (size_t)dim), *xn = malloc(sizeof(double) * (size_t)dim);
    double *q = malloc(sizeof(double) * (size_t)qd), *o = malloc(sizeof(double) * (size_t)qd);
    double *tmp = malloc(sizeof(double) * (size_t)(dim > h->ffn ? dim : h->ffn));
    double *g = malloc(sizeof(double) * (size_t)h->ffn),
           *u = malloc(sizeof(double) * (size_t)h->ffn);
    double *K = malloc(sizeof(double) * (size_t)L * n * kvd),
           *V = malloc(sizeof(double) * (size_t)L * n * kvd);
    double *s = malloc(sizeof(double) * (size_t)n),
           *lg = malloc(sizeof(double) * (size_t)h->n_vocab);
    float *row = malloc(sizeof(float) * (size_t)m->max_in);
    int rc = x && xn && q && o && tmp && g && u && K && V && s && lg && row ? QG_OK : QG_ERR_NOMEM;
    for (int i = 0; i < n && !rc; i++) {
        if (tokens[i] < 0 || tokens[i] >= h->n_vocab) {
            rc = QG_ERR_USAGE;
            break;
        }
        dequant_row(m->tok_embd.type, m->tok_embd.data + (size_t)tokens[i] * m->tok_embd.row_bytes,
                    row, dim);
        for (int j = 0; j < dim; j++)
            x[j] = row[j];
        for (int l = 0; l < L; l++) {
            const struct layer *W = &m->layers[l];
            double *Ki = K + ((size_t)l * n + i) * kvd, *Vi = V + ((size_t)l * n + i) * kvd;
            ref_rmsnorm(xn, x, W->attn_norm, dim, h->rms_eps);
            ref_matvec(q, &W->wq, W->bq, xn, row);
            ref_matvec(Ki, &W->wk, W->bk, xn, row);
            ref_matvec(Vi, &W->wv, W->bv, xn, row);
            ref_rope(q, h->n_heads, hd, i, h);
            ref_rope(Ki, h->n_kv_heads, hd, i, h);
            ref_attention(o, q, K + (size_t)l * n * kvd, V + (size_t)l * n * kvd, s, i, h);
            ref_matvec(tmp, &W->wo, NULL, o, row);
            for (int j = 0; j < dim; j++)
                x[j] += tmp[j];
            ref_rmsnorm(xn, x, W->ffn_norm, dim, h->rms_eps);
            ref_matvec(g, &W->w_gate, NULL, xn, row);
            ref_matvec(u, &W->w_up, NULL, xn, row);
            for (int j = 0; j < h->ffn; j++)
                g[j] = g[j] / (1.0 + exp(-g[j])) * u[j];
            ref_matvec(tmp, &W->w_down, NULL, g, row);
            for (int j = 0; j < dim; j++)
                x[j] += tmp[j];
        }
        ref_rmsnorm(xn, x, m->out_norm, dim, h->rms_eps);
        ref_matvec(lg, &m->output, NULL, xn, row);
        for (int j = 0; j < h->n_vocab; j++)
            logits[(size_t)i * h->n_vocab + j] = (float)lg[j];
    }
    free(x);
    free(xn);
    free(q);
    free(o);
    free(tmp);
    free(g);
    free(u);
    free(K);
    free(V);
    free(s);
    free(lg);
    free(row);
    return rc;
}
