/* llama_impl — the model and context as the llama files share them
 * (folder-private), and the helpers one file defines for the others (lm_
 * names). */
#ifndef QG_LLAMA_IMPL_H
#define QG_LLAMA_IMPL_H

#include "backends/llama.h"
#include "backends/matmul.h"
#include "backends/simfmt.h"

#include <stddef.h>
#include <stdint.h>

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

/* The first non-finite value of n decoded ones: -1 when all are finite. */
int64_t lm_first_nonfinite(const float *p, int64_t n);

#endif
