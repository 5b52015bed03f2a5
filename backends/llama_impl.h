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
/* a=llamacpp: ggml's CPU flash attention takes batches of at least this many
 * queries through its f32 tiles, shorter ones through f16 (GGML_FA_TILE_Q) */
enum { FA_TILE_ROWS = 64 };

struct layer {
    /* vectors: f32 copies; NULL where the family has none */
    float *attn_norm, *attn_norm_b, *bq, *bk, *bv, *bo, *ffn_norm, *ffn_norm_b;
    float *post_attn_norm, *post_ffn_norm; /* gemma2 */
    float *q_norm, *k_norm;                /* qwen3: [head_dim] */
    float *b_up, *b_gate, *b_down;
    float *shexp_gate; /* [dim]: qwen2moe's shared-expert gate */
    /* matrices as stored; q/k/v may be row views of one fused attn_qkv and
     * gate/up of one fused ffn_up (phi3); w_gate.data NULL without a gate */
    struct wmat wq, wk, wv, wo, w_gate, w_up, w_down;
    struct wmat router;                           /* ffn_gate_inp: [n_expert][dim] */
    struct wmat *gate_exps, *up_exps, *down_exps; /* [n_expert] views of the 3-D tensors */
    struct wmat sh_gate, sh_up, sh_down;          /* the shared expert */
};

struct llama_model {
    struct llama_hparams hp;
    struct gguf *g;                /* owned: the matrices point into its mapping */
    struct wmat tok_embd;          /* [n_vocab][dim] */
    float *out_norm;               /* [dim] */
    float *out_norm_b;             /* [dim]: LayerNorm's bias, or NULL */
    struct wmat output;            /* [n_vocab][dim]; the embedding when tied */
    float *rope_freqs;             /* [rope_dims / 2] (Llama 3), or NULL */
    float *rope_long, *rope_short; /* [rope_dims / 2] LongRoPE factors (phi3), or NULL */
    struct layer *layers;
    size_t bytes;     /* weights as stored, vectors as f32 */
    size_t vec_bytes; /* of which vectors */
    size_t exp_bytes; /* of which routed experts */
    int64_t max_in;   /* widest matrix input */
    float **sim;      /* simulated matrices (llama_simulate_weights): owned f32 copies */
    int n_sim;
    uint8_t **packed; /* decode's copies (llama_pack_decode, matmul_copy): owned */
    int n_packed;
    char name[256];        /* the file, for messages */
    char declared_act[32]; /* qgate.hf.act: a checkpoint's declared activations, or "" */
};

struct llama_ctx {
    const struct llama_model *m;
    int n_ctx, pos;
    int n_threads;       /* threads for attention heads and elementwise loops */
    int last_n;          /* rows of the last batch (their hidden states are in x) */
    float *k, *v;        /* [n_layers][n_ctx][kv_dim] */
    uint16_t *k16, *v16; /* a=llamacpp: the same cache in fp16, as llama.cpp holds it, which
                          * decode reads (half the bytes); NULL where it could not be had */
    int kv16_upto;       /* k16 and v16 hold positions [0, kv16_upto) as k and v do */
    int kv16_off;        /* llama_ctx_set_kv16(c, 0): neither written nor read */
    float *x, *xn, *q, *att, *gate, *up, *scores; /* batch buffers, n_ctx rows */
    float *tmp;            /* [n_ctx][dim]: a sublayer's output before its norm or sum */
    float *moe_x, *moe_y;  /* MoE: gathered rows [n_ctx][dim] and their expert outputs */
    float *moe_w;          /* [n_ctx][n_expert]: router probabilities */
    float *moe_sw;         /* [n_ctx][n_expert_used]: the chosen experts' weights */
    int *moe_sel;          /* [n_ctx][n_expert_used]: the chosen experts */
    int *moe_rows;         /* [n_ctx]: (row, slot) pairs routed to one expert */
    float *scratch;        /* per thread: dequantized weight panels (matmul.h) */
    uint64_t perturb;      /* 0, or the seed of last-bit rounding of the residual stream */
    int act;               /* enum llama_act: how matrix inputs are rounded */
    const float *rope_div; /* per-pair frequency divisors for this context's size, or NULL */
    int act_output;        /* 1: the output head's input is rounded as the others */
    int act_static;        /* 1: matrices' calibrated input scales (llama_ctx_set_act_static) */
    struct simfmt act_fmt;
    struct simfmt kv_fmt;      /* K and V as written to the cache (SIMFMT_NONE: f32) */
    float *aq;                 /* [n_ctx][max_in (+ max_in / 32)]: a matrix input after rounding */
    int8_t *a8;                /* a=llamacpp, [rows][max_in]: the codes of aq's rows, */
    void *a8_figs;             /* [rows][max_in / 8]: their scales, sums of 16 and Q8_1 sums
                                * (simfmt_codes) */
    struct matmul_q8 *a8_rows; /* [rows]: each row's codes as gemm_q8 takes them */
    int a8_n;                  /* rows of a8, a8_figs and a8_rows */
};

/* floats of a8_figs a row of `in` codes takes: scales per 32, sums of 16,
 * Q8_1 sums per 32 */
#define A8_FIGS(in) ((in) / 32 * 2 + (in) / 16)

/* Reads the hyperparameters of any family qgate runs (llama_arch.c):
 * QG_OK or QG_ERR_DATA with err naming the file and key. */
int lm_read_hparams(const struct gguf *g, const char *name, struct llama_hparams *hp, char *err,
                    size_t errlen);

/* Every matrix of the model (experts one by one), for scans and
 * simulation: up to max into out; returns the count (which may exceed max:
 * call with max 0 to size). Views of one fused tensor are listed once each. */
int lm_matrices(struct llama_model *m, struct wmat **out, int max);

/* y[n][out] = x[n][in] . W^T (+ bias) (+ beta y), the input rounded as the
 * context's activation mode says (llama_eval.c). */
void lm_matmul(const struct llama_ctx *c, float *y, const float *x, const struct wmat *W,
               const float *bias, float beta, int n);
/* The k products of one x in one fork-join (matmul.h's parts). */
void lm_matmul_group(const struct llama_ctx *c, const struct matmul_part *parts, int k,
                     const float *x, int n);
/* llama_q81.c: under a=llamacpp, y += what W . x (n rows) misses of
 * llama.cpp's Q8_1 block sums when x was rounded as llama.cpp's Q8_1 rounds
 * it (x: the input before rounding); nothing for other modes and for
 * weights other than Q4_1 and Q5_1 */
void lm_q81_correct(const struct llama_ctx *c, float *y, const float *x, const struct wmat *W,
                    int n);

/* a prompt's products (n > 1) of x with the k parts, each one sgemm with
 * the Q8_1 sums included (x rounded, its deltas and the weights' minima as
 * extra columns; c->aq as the buffer): 1 when done, 0 (nothing written)
 * when a part is not Q4_1/Q5_1 under a=llamacpp, the inputs differ or n < 2 */
int lm_q81_products(const struct llama_ctx *c, const struct matmul_part *parts, int k,
                    const float *x, int n);

/* The layer's FFN of c->xn's n rows into out (+ beta out), any family
 * (llama_ffn.c); uses c->gate, c->up, c->tmp and the MoE buffers. */
void lm_ffn(struct llama_ctx *c, const struct layer *L, float *out, float beta, int n);
/* GELU (tanh form); llamacpp: through f16 as ggml's table computes it. */
float lm_gelu(float x, int llamacpp);

/* The RoPE factors a context of n_ctx positions uses: Llama 3's
 * rope_freqs, else LongRoPE's long ones when n_ctx exceeds the original
 * context and its short ones otherwise (as llama.cpp's get_rope_factors),
 * or NULL. */
const float *lm_rope_factors(const struct llama_model *m, int n_ctx);

/* The first non-finite value of n decoded ones: -1 when all are finite. */
int64_t lm_first_nonfinite(const float *p, int64_t n);
/* QG_ERR_DATA naming the file, tensor and element of a NaN or Inf weight. */
int lm_nonfinite_error(const char *name, const char *tname, float v, int64_t at, char *err,
                       size_t errlen);

#endif
