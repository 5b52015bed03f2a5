/* llama — the Llama-family transformer shared by the local backends.
 *
 * Architectures (llama_arch.c describes how each differs, as data): llama
 * (Llama 1/2/3 with RoPE scaling, Mistral, Mixtral's experts), qwen2,
 * qwen2moe, qwen3, qwen3moe, gemma, gemma2, gemma3, phi3, starcoder2. Weight matrices stay in the
 * mapped file in their stored block format (matmul.h dequantizes panels
 * just before each sgemm, and decodes blocks inside the decode kernels), so
 * the memory cost is the file (plus per context a KV cache of 2 x layers x
 * ctx x kv_dim x 4 bytes and per thread a panel of at most 256 x the widest
 * input floats, 8 MiB). Norm weights and biases are decoded to f32 at load. Activations
 * are f32, RMSNorm sums in double as ggml does, attention is causal with
 * grouped-query heads.
 *
 * Shapes: a projection weight W is stored as ne0 = in, ne1 = out, i.e. a
 * row-major [out][in] matrix; activations are row-major [n_tokens][width].
 */
#ifndef QG_LLAMA_H
#define QG_LLAMA_H

#include "backends/gguf.h"

#include <stddef.h>
#include <stdint.h>

/* How the families differ (llama_arch.c reads them from the file). */
enum llama_norm_kind { LLAMA_NORM_RMS = 0, LLAMA_NORM_LAYER = 1 }; /* LayerNorm: weight and bias */
enum llama_ffn_act {
    LLAMA_FFN_SWIGLU = 0, /* silu(gate) * up */
    LLAMA_FFN_GEGLU = 1,  /* gelu_tanh(gate) * up */
    LLAMA_FFN_GELU = 2,   /* gelu_tanh(up): no gate (starcoder2) */
};

struct llama_hparams {
    char arch[16];
    int n_vocab, dim, n_layers, n_heads, n_kv_heads, head_dim, ffn;
    int ctx_train;             /* <arch>.context_length */
    int rope_dims;             /* dimensions rotated per head */
    int rope_neox;             /* 1: rotate (i, i + rope_dims/2); 0: adjacent pairs */
    float rms_eps, rope_theta; /* rms_eps: the norms' epsilon, LayerNorm's too */
    int qkv_bias;              /* q/k/v biases (qwen2, qwen2moe, starcoder2) */
    int tied_output;           /* no output.weight: logits use the embedding */
    int norm;                  /* enum llama_norm_kind */
    int ffn_act;               /* enum llama_ffn_act */
    int post_norms;   /* gemma2: RMSNorm of the attention and FFN outputs before the residual */
    int qk_norm;      /* qwen3: per-head RMSNorm of Q and K before RoPE */
    float embd_scale; /* the embedding row times this: 1, or sqrt(dim) (gemma) */
    float attn_scale; /* q.k times this: 1/sqrt(head_dim) unless the family or file says */
    int q_prescale;   /* llama.cpp scales Q itself before the f16 cache (gemma*, phi3) */
    float attn_softcap, final_softcap; /* 0: none; else c * tanh(v / c) (gemma2) */
    int swa_window;        /* 0: none; else a query sees the swa_window keys up to itself */
    int swa_pattern;       /* with a window: 0 every layer; p: layers l with l % p < p - 1 */
    float rope_freq_scale; /* rotation angles times this: 1, or 1/factor (linear scaling) */
    float rope_theta_swa, rope_scale_swa; /* the same for windowed layers (gemma3: their own) */
    float rope_mscale; /* cos and sin times this: rope.scaling.attn_factor (LongRoPE), 1 */
    int ctx_orig;      /* rope.scaling.original_context_length: LongRoPE's long factors above */
    int rope_factors;  /* 1: rope_freqs.weight divides each pair's frequency (Llama 3) */
    int n_expert, n_expert_used; /* 0: dense FFN */
    int expert_ffn, shexp_ffn;   /* an expert's FFN width; the shared expert's (0: none) */
    int moe_norm_w;              /* the chosen experts' weights renormalised to sum 1 (Mixtral) */
    float moe_w_scale;           /* the chosen weights times this (1) */
};

/* 1 when layer l attends within the sliding window */
int llama_layer_swa(const struct llama_hparams *h, int l);
/* Layer l's RoPE base and angle scale (windowed layers may have their own). */
void llama_layer_rope(const struct llama_hparams *h, int l, float *theta, float *scale);
/* The architectures qgate runs, comma-separated, for messages and docs. */
const char *llama_families(void);
/* What qgate implements of the family `arch` (one line), or NULL when it
 * does not run it. */
const char *llama_family_note(const char *arch);

struct llama_model;

/* Reads hyperparameters and maps every weight; takes g (closed by
 * llama_free, or here on failure). QG_OK; QG_ERR_DATA with err naming the
 * file and the problem (unsupported architecture, missing tensor, wrong
 * shape, unsupported tensor type, a non-finite norm weight or bias);
 * QG_ERR_NOMEM. */
int llama_load(struct gguf *g, const char *name, struct llama_model **out, char *err,
               size_t errlen);
void llama_free(struct llama_model *m); /* accepts NULL */

struct simfmt;
struct llama_ctx;

/* How a context rounds every matrix product's input (weights as they
 * are): not at all; as llama.cpp's CPU backend does for the weight's type
 * (simfmt_llamacpp_act); or in a simulated format (simfmt_apply_act). */
enum llama_act { LLAMA_ACT_NONE = 0, LLAMA_ACT_LLAMACPP = 1, LLAMA_ACT_FORMAT = 2 };
#define LLAMA_MAX_ROWS_HINT 128 /* the most rows one product gets beside n_ctx (logits) */
/* QG_OK or QG_ERR_NOMEM (a buffer of n_ctx rows of the widest input). */
int llama_ctx_set_act(struct llama_ctx *c, int mode, const struct simfmt *f);
/* round 0: the output head's input is not rounded (a checkpoint's declared
 * activation scheme covers its quantized projections, not lm_head); 1
 * (default): every product's is. */
void llama_ctx_set_act_output(struct llama_ctx *c, int round);
/* on: a matrix with a checkpoint's calibrated input scale (ModelOpt's
 * input_scale) quantizes its input with it (simfmt_apply_act_static), as
 * the checkpoint declares; off (the default): a dynamic scale, as a=FORMAT
 * asks. */
void llama_ctx_set_act_static(struct llama_ctx *c, int on);
/* The activation format a checkpoint directory declares for its quantized
 * projections ("fp8_e4m3": dynamic per-token FP8), or NULL. */
const char *llama_declared_act(const struct llama_model *m);
/* K and V rounded in f as they are written to the cache (simfmt_apply_kv);
 * attention scores and softmax stay f32. */
void llama_ctx_set_kv(struct llama_ctx *c, const struct simfmt *f);
/* Under a=llamacpp without a simulated cache format the context keeps K
 * and V in fp16 as well, as llama.cpp does, and decode reads those (half
 * the bytes, the same values); positions written while that was not so
 * (another mode, a format, on 0) are read from the f32 cache. 1: so (the
 * default); 0: the f32 cache alone (tests compare the two). */
void llama_ctx_set_kv16(struct llama_ctx *c, int on);
/* Simulates a deployment format on the weights: every matrix (the
 * embedding, the output head and each layer's seven) whose tensor name
 * matches none of keep's comma-separated glob patterns ("output",
 * "token_embd" and "blk.0.*" work; NULL keeps none) is dequantized to an
 * f32 copy the model owns, then quantized and dequantized in f (round to
 * nearest per the format's scales). *n_done counts them. QG_OK or
 * QG_ERR_NOMEM. Call before any context is made. */
/* Gives every matrix that a=llamacpp's decode kernels read faster from
 * decode's copy (matmul_copy, under avx512vnni: Q4_0, IQ4_NL, MXFP4,
 * Q4_K, Q2_K in columns where llama.cpp repacks, Q4_0, IQ4_NL, MXFP4
 * interleaved elsewhere; IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
 * IQ3_S decoded; TQ1_0 as TQ2_0) that copy, owned by m, made on up to n_threads
 * threads: decode steps, prefill's packing and a tied embedding's lookup
 * then read that copy (matmul_row_codes, matmul_row; the lookup of an
 * IQ2, IQ3 or TQ1_0 embedding reads the file), and the mapped file's pages of those rows are
 * let go (gguf_drop_range) as each matrix is copied, so the copy takes the
 * place of the file's pages in memory, as llama.cpp's repacked buffers do;
 * a reader of the file (the float path, another kernel set) has them read
 * back in. The copies are one block; a decoded copy is larger than the
 * rows it holds (Q4_K's columns 1.03x, IQ1_S 1.4x, IQ1_M 1.36x, IQ2_XXS 1.55x, IQ2_XS 1.43x,
 * IQ2_S 1.29x, IQ3_XXS 1.37x, IQ3_S 1.22x, TQ1_0 1.22x). QG_OK, or QG_ERR_NOMEM with nothing done
 * (decode then reads the file). */
int llama_pack_decode(struct llama_model *m, int n_threads);

/* Marks every matrix of m as llama.cpp's --no-repack leaves it
 * (WMAT_NO_REPACK): a=llamacpp's decode then follows ggml's vec_dot on
 * them and prefill gemm_q8's own order, not llama.cpp's repacked kernels'
 * (matmul_q8_blockwise). For repack=0; before llama_pack_decode, which
 * then copies nothing in the columns layout. QG_OK, or QG_ERR_NOMEM with
 * nothing marked. */
int llama_no_repack(struct llama_model *m);

int llama_simulate_weights(struct llama_model *m, const struct simfmt *f, const char *keep,
                           int *n_done, char *err, size_t errlen);

/* Scans every weight matrix for a NaN or Inf: QG_OK when there is none,
 * else QG_ERR_DATA with err naming the file, tensor and element. (Matrices
 * are not scanned at load, which maps them; llama_eval's non-finite result
 * is the cue to call this.) */
int llama_find_nonfinite(const struct llama_model *m, char *err, size_t errlen);

const struct llama_hparams *llama_hparams(const struct llama_model *m);

struct wmat;
/* The model's tensors, borrowed (valid while m lives), for a backend that
 * places them elsewhere (cuda): matrices as stored (or simulated), vectors
 * as f32; biases NULL when the architecture has none. */
struct llama_layer_view {
    const float *attn_norm, *ffn_norm, *bq, *bk, *bv;
    const struct wmat *wq, *wk, *wv, *wo, *w_gate, *w_up, *w_down;
};
void llama_layer_view(const struct llama_model *m, int l, struct llama_layer_view *v);
/* 1 when the model needs nothing beyond that view: RMSNorm, SwiGLU, dense
 * FFN, unscaled RoPE, no biases but q/k/v, no caps or windows (what the
 * CUDA backend runs); 0 with why naming the first feature it uses. */
int llama_is_basic(const struct llama_model *m, const char **why);
/* The embedding, the output head (the embedding when tied), the final norm. */
const struct wmat *llama_tok_embd(const struct llama_model *m);
const struct wmat *llama_output_mat(const struct llama_model *m);
const float *llama_out_norm(const struct llama_model *m);
/* Bytes of weights: matrices as stored in the file, vectors as f32. */
size_t llama_weight_bytes(const struct llama_model *m);
/* Bytes of stored matrices one decoded token reads: all but the embedding
 * (of which it reads one row), unless the output is tied to it. */
size_t llama_decode_bytes(const struct llama_model *m);
/* Floating-point operations of one forward pass over n tokens from an empty
 * context with logits for n_logits rows (multiply-add = 2). */
double llama_flops(const struct llama_model *m, int n, int n_logits);

/* An evaluation context: KV cache for up to n_ctx positions. */
struct llama_ctx;
int llama_ctx_new(const struct llama_model *m, int n_ctx, struct llama_ctx **out);
void llama_ctx_free(struct llama_ctx *c);
/* Threads of the forward pass (default: all cores; at most that). Every
 * sgemm is split across these threads with single-threaded BLAS calls, so
 * llama_ctx_new sets OpenBLAS to one thread for the whole process and
 * stops its own threads (kernel_set_blas_one_thread). */
void llama_ctx_set_threads(struct llama_ctx *c, int n);
/* seed != 0: after every layer each residual value moves one ulp up or
 * down (a seeded hash decides), a benign perturbation of the size a GPU's
 * other reduction order produces, for measuring the noise floor; 0: off. */
void llama_ctx_set_perturb(struct llama_ctx *c, uint64_t seed);
/* Forgets every cached position. */
void llama_ctx_reset(struct llama_ctx *c);
int llama_ctx_pos(const struct llama_ctx *c); /* positions cached */

/* Evaluates n tokens at positions pos..pos+n-1 (pos = llama_ctx_pos) as one
 * batch: every projection is one sgemm over the n rows. Writes logits for
 * the rows logits_from..n-1 into logits ([n - logits_from][n_vocab]).
 * QG_OK, QG_ERR_USAGE (context full, token out of range), QG_ERR_NOMEM,
 * QG_ERR_DATA when the hidden states or the logits came out non-finite
 * (see llama_find_nonfinite). */
int llama_eval(struct llama_ctx *c, const int32_t *tokens, int n, int logits_from, float *logits);

/* Logits for rows [first, first + count) of the batch last passed to
 * llama_eval (its final hidden states are kept until the next call), into
 * logits ([count][n_vocab]). Lets callers bound the logits buffer. QG_OK,
 * QG_ERR_USAGE for rows outside the last batch, or QG_ERR_DATA when a logit
 * is NaN or Inf (a non-finite output layer: llama_find_nonfinite names it). */
int llama_output(struct llama_ctx *c, int first, int count, float *logits);

/* Reference forward: plain loops, double accumulation, fresh context over n
 * tokens, logits for every row ([n][n_vocab]). Slow; for tests. */
int llama_eval_ref(const struct llama_model *m, const int32_t *tokens, int n, float *logits);

#endif
