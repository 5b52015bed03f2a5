/* llama — a loaded model's views, scans, simulated weight formats and
 * sizes; llama_load.c loads it, llama_eval.c and llama_ffn.c run the
 * forward pass and llama_ref.c the reference one. */
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

int lm_matrices(struct llama_model *m, struct wmat **out, int max)
{
    int k = 0;
#define ADD(w)                                                                                     \
    do {                                                                                           \
        if ((w)->data && k < max) out[k] = (w);                                                    \
        k += (w)->data != NULL;                                                                    \
    } while (0)
    ADD(&m->tok_embd);
    if (!m->hp.tied_output) ADD(&m->output);
    for (int l = 0; l < m->hp.n_layers; l++) {
        struct layer *L = &m->layers[l];
        struct wmat *ws[] = {&L->wq,     &L->wk,     &L->wv,      &L->wo,    &L->w_gate, &L->w_up,
                             &L->w_down, &L->router, &L->sh_gate, &L->sh_up, &L->sh_down};
        for (size_t i = 0; i < sizeof ws / sizeof *ws; i++)
            ADD(ws[i]);
        for (int e = 0; L->gate_exps && e < m->hp.n_expert; e++) {
            ADD(&L->gate_exps[e]);
            ADD(&L->up_exps[e]);
            ADD(&L->down_exps[e]);
        }
    }
#undef ADD
    return k;
}

/* the matrices of m, allocated (NULL when out of memory); *n their count */
static struct wmat **all_matrices(const struct llama_model *m, int *n)
{
    struct llama_model *mm = (struct llama_model *)m; /* lm_matrices lends, we only read */
    *n = lm_matrices(mm, NULL, 0);
    struct wmat **all = malloc((size_t)(*n + 1) * sizeof *all);
    if (all) lm_matrices(mm, all, *n);
    return all;
}

int llama_find_nonfinite(const struct llama_model *m, char *err, size_t errlen)
{
    enum { ROWS = 64 }; /* rows decoded at a time */
    int n;
    struct wmat **all = all_matrices(m, &n);
    float *buf = malloc((size_t)ROWS * (size_t)m->max_in * sizeof *buf);
    if (!buf || !all) {
        free(buf);
        free(all);
        return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    }
    int rc = QG_OK;
    for (int i = 0; i < n && !rc; i++) {
        const struct wmat *w = all[i];
        for (int64_t r0 = 0; r0 < w->out && !rc; r0 += ROWS) {
            int64_t nr = w->out - r0 < ROWS ? w->out - r0 : ROWS;
            dequant_row(w->type, w->data + (size_t)r0 * w->row_bytes, buf, nr * w->in);
            int64_t bad = lm_first_nonfinite(buf, nr * w->in);
            if (bad >= 0)
                rc = lm_nonfinite_error(m->name, w->name, buf[bad], r0 * w->in + bad, err, errlen);
        }
    }
    free(all);
    free(buf);
    return rc;
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
    w->copy = NULL; /* a copy of the stored rows would be stale (its block stays owned) */
    return QG_OK;
}

int llama_simulate_weights(struct llama_model *m, const struct simfmt *f, const char *keep,
                           int *n_done, char *err, size_t errlen)
{
    *n_done = 0;
    int n;
    struct wmat **all = all_matrices(m, &n);
    if (!all) return qg_errf(err, errlen, QG_ERR_NOMEM, "%s: out of memory", m->name);
    int rc = QG_OK;
    for (int i = 0; i < n && !rc; i++) {
        struct wmat *w = all[i];
        if (kept(keep, w->name)) continue;
        if (simulate_mat(m, w, f))
            rc = qg_errf(err, errlen, QG_ERR_NOMEM, "%s: out of memory simulating '%s'", m->name,
                         w->name);
        else
            (*n_done)++;
    }
    if (m->hp.tied_output) m->output = m->tok_embd; /* the same matrix */
    free(all);
    return rc;
}

/* 1 when w gets decode's copy: a type with a kernel on one, not done yet,
 * and multiplied (an untied embedding is looked up, never multiplied) */
static int gets_copy(const struct llama_model *m, const struct wmat *w)
{
    return matmul_copy_bytes(w) && !w->copy && (w != &m->tok_embd || m->hp.tied_output);
}

struct span {
    const uint8_t *lo;
    size_t n;
};

static int span_cmp(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The copied rows' file pages, let go (gguf_drop_range) as each matrix
 * was copied, kept from coming back: the spans, sorted and joined across
 * gaps under 64 KiB (norms and biases, read at load), are marked for
 * random access, so that a read beside them (an embedding's row, a
 * matrix of another type) maps none of them back in (the kernel's
 * fault-around: 2 of a test model's 3 MB came back so); joined, so that
 * the marks split the mapping's area some times a layer, not a matrix
 * (the kernel's map count is limited: a 128-expert model has some 10^4
 * matrices); then let go again, as the copying's own reads may have
 * brought some back */
static void keep_dropped(const struct gguf *g, struct span *sp, int n)
{
    qsort(sp, (size_t)n, sizeof *sp, span_cmp);
    for (int i = 0; i < n;) {
        const uint8_t *lo = sp[i].lo, *hi = sp[i].lo + sp[i].n;
        int j = i + 1;
        for (; j < n && sp[j].lo <= hi + (64 << 10); j++)
            if (sp[j].lo + sp[j].n > hi) hi = sp[j].lo + sp[j].n;
        gguf_random_range(g, lo, (size_t)(hi - lo));
        for (; i < j; i++)
            gguf_drop_range(g, sp[i].lo, sp[i].n);
    }
}

int llama_pack_decode(struct llama_model *m, int n_threads)
{
    int n;
    struct wmat **all = all_matrices(m, &n);
    struct span *sp = all ? malloc((size_t)(n + 1) * sizeof *sp) : NULL;
    if (!sp) {
        free(all);
        return QG_ERR_NOMEM;
    }
    size_t total = 0;
    for (int i = 0; i < n; i++)
        if (gets_copy(m, all[i])) total += (matmul_copy_bytes(all[i]) + 63) / 64 * 64;
    int rc = QG_OK, k = 0;
    uint8_t **grow = total ? realloc(m->packed, (size_t)(m->n_packed + 1) * sizeof *grow) : NULL;
    if (grow) m->packed = grow;
    uint8_t *at = grow ? qg_alloc_aligned(total) : NULL;
    if (total && !at) rc = QG_ERR_NOMEM;
    if (at) m->packed[m->n_packed++] = at;
    for (int i = 0; at && i < n; i++) {
        struct wmat *w = all[i];
        if (!gets_copy(m, w)) continue;
        const size_t size = matmul_copy_bytes(w);
        matmul_copy(w, at, n_threads);
        w->copy = at;
        at += (size + 63) / 64 * 64;
        /* what reads these rows under a=llamacpp reads the copy now (decode,
         * prefill's packing: matmul_row_codes; a tied embedding's lookup:
         * matmul_row, which reads the file for the decoded types and
         * TQ1_0), so the file's pages of them go, matrix by matrix (the
         * peak is the file and one matrix), and the copy takes their place
         * (the interleaved copy and most columns ones cost no memory in
         * all; Q4_K's, IQ4_XS's and Q3_K's columns 2-4 %, IQ1's 48-54 %,
         * TQ1_0's 22 %, a decoded one its excess over the rows); a reader
         * of the file (another kernel set, the float path, that lookup)
         * has them read back in */
        const size_t held = (size_t)matmul_copy_rows(w) * w->row_bytes; /* of the file */
        gguf_drop_range(m->g, w->data, held);
        sp[k++] = (struct span){w->data, held};
    }
    keep_dropped(m->g, sp, k);
    if (m->hp.tied_output) m->output = m->tok_embd; /* the same matrix, the same copy */
    free(sp);
    free(all);
    return rc;
}

int llama_no_repack(struct llama_model *m)
{
    int n;
    struct wmat **all = all_matrices(m, &n);
    if (!all) return QG_ERR_NOMEM;
    for (int i = 0; i < n; i++)
        all[i]->flags |= WMAT_NO_REPACK;
    m->tok_embd.flags |= WMAT_NO_REPACK; /* whether listed or not (tied) */
    m->output.flags |= WMAT_NO_REPACK;
    free(all);
    return QG_OK;
}

size_t llama_decode_bytes(const struct llama_model *m)
{
    const struct llama_hparams *h = &m->hp;
    size_t emb = m->tok_embd.row_bytes * (size_t)m->tok_embd.out;
    /* of the experts, a token reads the chosen ones */
    size_t unread =
        h->n_expert ? m->exp_bytes / (size_t)h->n_expert * (size_t)(h->n_expert - h->n_expert_used)
                    : 0;
    return m->bytes - m->vec_bytes - (h->tied_output ? 0 : emb) - unread;
}

double llama_flops(const struct llama_model *m, int n, int n_logits)
{
    const struct llama_hparams *h = &m->hp;
    double qd = (double)h->n_heads * h->head_dim, kvd = (double)h->n_kv_heads * h->head_dim;
    double ffn =
        h->ffn_act == LLAMA_FFN_GELU ? 2.0 * 2 * h->dim * h->ffn : 2.0 * 3 * h->dim * h->ffn;
    if (h->n_expert)
        ffn = 2.0 * h->dim * h->n_expert + 2.0 * 3 * h->dim * h->expert_ffn * h->n_expert_used +
              2.0 * 3 * h->dim * h->shexp_ffn;
    double per_tok = 2.0 * h->dim * (qd + 2 * kvd) + 2.0 * qd * h->dim + ffn;
    /* attention: QK^T and SV over the causal triangle, all heads */
    double attn = 2.0 * 2 * h->n_heads * h->head_dim * ((double)n * (n + 1) / 2);
    return h->n_layers * (per_tok * n + attn) + 2.0 * h->dim * h->n_vocab * n_logits;
}

const char *llama_declared_act(const struct llama_model *m)
{
    return m->declared_act[0] ? m->declared_act : NULL;
}

const float *lm_rope_factors(const struct llama_model *m, int n_ctx)
{
    if (m->rope_freqs) return m->rope_freqs;
    if (m->rope_long) return n_ctx > m->hp.ctx_orig ? m->rope_long : m->rope_short;
    return NULL;
}

int llama_is_basic(const struct llama_model *m, const char **why)
{
    const struct llama_hparams *h = &m->hp;
    const char *w = NULL;
    if (h->n_expert)
        w = "experts";
    else if (h->norm != LLAMA_NORM_RMS)
        w = "LayerNorm";
    else if (h->ffn_act != LLAMA_FFN_SWIGLU)
        w = "a GELU FFN";
    else if (h->post_norms || h->qk_norm)
        w = "extra norms";
    else if (h->embd_scale != 1.0f)
        w = "a scaled embedding";
    else if (h->attn_softcap > 0 || h->final_softcap > 0)
        w = "soft-capping";
    else if (h->swa_window)
        w = "a sliding window";
    else if (h->rope_freq_scale != 1.0f || h->rope_factors || h->rope_mscale != 1.0f)
        w = "RoPE scaling";
    else if (h->attn_scale != 1.0f / sqrtf((float)h->head_dim))
        w = "an attention scale";
    for (int l = 0; !w && l < h->n_layers; l++) {
        const struct layer *L = &m->layers[l];
        if (L->bo || L->b_up || L->b_gate || L->b_down) w = "output or FFN biases";
    }
    if (why) *why = w;
    return w == NULL;
}
