/* synth — seeded random Llama/Qwen2 GGUF models. */
#include "backends/synth.h"
#include "backends/dequant.h"
#include "backends/ggml_types.h"
#include "backends/gguf.h"
#include "backends/gguf_write.h"
#include "backends/quant.h"
#include "core/status.h"
#include "core/util.h"
#include "core/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct synth_params synth_default_params(void)
{
    struct synth_params p = {
        .arch = "llama",
        .name = "qgate-synth",
        .n_vocab = 320,
        .dim = 64,
        .n_layers = 2,
        .n_heads = 4,
        .n_kv_heads = 2,
        .ffn = 96,
        .ctx = 128,
        .rope_dims = 0,
        .rms_eps = 1e-5f,
        .rope_theta = 10000.0f,
        .wtype = GGML_F32,
        .tied_output = 0,
        .seed = 1,
        .byte_fallback = 1,
        .logit_scale = 1.0f,
    };
    return p;
}

/* uniform in [-1, 1) */
static float urand(uint64_t *s)
{
    return (float)((double)(rng_next(s) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

static const char *const words[] = {
    "the",   "a",    "and", "was", "to",     "she",  "he",  "it",   "Lily", "time",
    "upon",  "Once", "day", "big", "little", "girl", "boy", "play", "saw",  "said",
    "happy", "with", "in",  "on",  "of",     "her",  "his", "they", "you",  "ball",
    "park",  "mom",  "dog", "cat", "tree",   "red",  "sun",
};

/* Fills the vocabulary: specials, byte tokens, "▁"+word and plain letter pieces. */
static int build_vocab(int n, int bytes, char ***toks_out, float **scores_out, int32_t **types_out)
{
    int first_piece = bytes ? 259 : 3;
    char **toks = calloc((size_t)n, sizeof *toks);
    float *scores = calloc((size_t)n, sizeof *scores);
    int32_t *types = calloc((size_t)n, sizeof *types);
    if (!toks || !scores || !types) goto fail;
    const char *specials[3] = {"<unk>", "<s>", "</s>"};
    for (int i = 0; i < n; i++) {
        char piece[64];
        int type = 1; /* normal */
        if (i < 3) {
            snprintf(piece, sizeof piece, "%s", specials[i]);
            type = i == 0 ? 2 : 3; /* unknown, control */
        } else if (i < first_piece) {
            snprintf(piece, sizeof piece, "<0x%02X>", i - 3);
            type = 6; /* byte */
        } else {
            int k = i - first_piece;
            int nw = (int)(sizeof words / sizeof *words);
            if (k == 0)
                snprintf(piece, sizeof piece, "\xe2\x96\x81");
            else if (k <= 26)
                snprintf(piece, sizeof piece, "%c", 'a' + k - 1);
            else if (k <= 26 + nw)
                snprintf(piece, sizeof piece, "\xe2\x96\x81%s", words[k - 27]);
            else
                snprintf(piece, sizeof piece, "\xe2\x96\x81w%d", k - 27 - nw);
        }
        if (!(toks[i] = qg_strdup(piece))) goto fail;
        scores[i] = i < first_piece ? 0.0f : -(float)(i - first_piece);
        types[i] = type;
    }
    *toks_out = toks;
    *scores_out = scores;
    *types_out = types;
    return QG_OK;
fail:
    for (int i = 0; toks && i < n; i++)
        free(toks[i]);
    free(toks);
    free(scores);
    free(types);
    return QG_ERR_NOMEM;
}

/* Adds a tensor of ne0 x ne1 random values scaled by `scale` (+ `offset`),
 * stored as `type`. */
static const struct synth_params *cur; /* the model being written (single-threaded use) */

/* Where each block format keeps its fp16 scales (byte offsets; -1 ends). */
static const int *scale_offsets(uint32_t type)
{
    static const int d0[] = {0, -1}, d01[] = {0, 2, -1}, q2k[] = {80, 82, -1}, q3k[] = {108, -1},
                     q6k[] = {208, -1}, tq1[] = {52, -1}, tq2[] = {64, -1}, none[] = {-1};
    switch (type) {
    case GGML_Q4_1:
    case GGML_Q5_1:
    case GGML_Q5_K:
        return d01;
    case GGML_Q2_K:
        return q2k;
    case GGML_Q3_K:
        return q3k;
    case GGML_Q6_K:
        return q6k;
    case GGML_TQ1_0:
        return tq1;
    case GGML_TQ2_0:
        return tq2;
    case GGML_IQ1_M:
    case GGML_MXFP4:
    case GGML_BF16:
        return none;
    }
    return d0;
}

void synth_random_blocks(uint32_t type, uint8_t *q, int64_t n, float scale, uint64_t *rng)
{
    const struct ggml_type_info *ti = ggml_type_get(type);
    size_t nb = (size_t)(n / ti->block), bs = ti->type_size;
    for (size_t i = 0; i < nb * bs; i++)
        q[i] = (uint8_t)rng_next(rng);
    uint16_t h = quant_f32_to_f16(scale / 16);
    for (size_t b = 0; b < nb; b++) {
        uint8_t *blk = q + b * bs;
        for (const int *o = scale_offsets(type); *o >= 0; o++)
            blk[*o] = (uint8_t)h, blk[*o + 1] = (uint8_t)(h >> 8);
        if (type == GGML_IQ1_M) /* the fp16 scale in the top nibbles of 4 u16 */
            for (int k = 0; k < 4; k++)
                blk[48 + 2 * k + 1] =
                    (uint8_t)((blk[48 + 2 * k + 1] & 0x0F) | (((h >> (4 * k)) & 0xF) << 4));
        if (type == GGML_MXFP4) blk[0] = (uint8_t)(127 - 6); /* E8M0 2^-6 */
        if (type == QG_NVFP4_S16 || type == QG_I4_S32) {     /* f32 scale, no NaN, mode f32 */
            float fs = type == QG_I4_S32 ? scale / 16 : 1.0f;
            memcpy(blk, &fs, 4);
            if (type == QG_NVFP4_S16) blk[4] &= 0x77; /* an FP8 block scale that is not NaN */
            blk[5] = 0;
        }
        if (type == QG_F8_E4M3_S32) { /* an f32 scale, mode f32, codes without NaN */
            float fs = scale / 16;
            memcpy(blk, &fs, 4);
            blk[4] = 0;
            for (int k = 5; k < 37; k++)
                if ((blk[k] & 0x7F) == 0x7F) blk[k] &= 0xFE;
        }
        if (type == GGML_BF16)
            for (size_t k = 0; k < bs; k += 2)
                blk[k + 1] = (uint8_t)(0x3C | (blk[k + 1] & 0x80));
    }
}

static int add_random3(struct gguf_writer *w, uint64_t *rng, const char *name, uint32_t type,
                       int64_t ne0, int64_t ne1, int64_t ne2, float scale, float offset)
{
    if (cur->omit_tensor && strcmp(name, cur->omit_tensor) == 0) return QG_OK;
    if (cur->swap_tensor && strcmp(name, cur->swap_tensor) == 0) {
        int64_t t = ne0;
        ne0 = ne1;
        ne1 = t;
    }
    if (cur->raw_tensor && strcmp(name, cur->raw_tensor) == 0) {
        const struct ggml_type_info *rt = ggml_type_get(cur->raw_type);
        if (!rt || ne0 % rt->block) return QG_ERR_USAGE;
        size_t nb = (size_t)(ne0 / rt->block * rt->type_size * ne1);
        uint8_t *raw = malloc(nb ? nb : 1);
        if (!raw) return QG_ERR_NOMEM;
        for (size_t i = 0; i < nb; i++)
            raw[i] = (uint8_t)rng_next(rng);
        int64_t ne[2] = {ne0, ne1};
        int rc = gguf_writer_add_tensor(w, name, cur->raw_type, ne1 > 1 ? 2 : 1, ne, raw);
        free(raw);
        return rc;
    }
    const struct ggml_type_info *ti = ggml_type_get(type);
    if (ne0 % ti->block)
        type = GGML_F32, ti = ggml_type_get(type); /* as llama-quantize falls back */
    int64_t n = ne0 * ne1 * ne2;
    float *x = malloc((size_t)n * sizeof *x);
    uint8_t *q = malloc((size_t)(n / ti->block * ti->type_size) + 1);
    int rc = QG_ERR_NOMEM;
    if (x && q) {
        for (int64_t i = 0; i < n; i++)
            x[i] = offset + scale * urand(rng);
        size_t row_bytes = (size_t)(ne0 / ti->block * ti->type_size);
        rc = QG_OK;
        if (!synth_quantizable(type)) synth_random_blocks(type, q, n, scale, rng);
        for (int64_t r = 0; r < ne1 * ne2 && !rc && synth_quantizable(type); r++)
            rc = quant_row(type, x + r * ne0, q + r * row_bytes, ne0);
        int64_t ne[3] = {ne0, ne1, ne2};
        if (!rc) rc = gguf_writer_add_tensor(w, name, type, ne2 > 1 ? 3 : ne1 > 1 ? 2 : 1, ne, q);
    }
    free(x);
    free(q);
    return rc;
}

static int add_random(struct gguf_writer *w, uint64_t *rng, const char *name, uint32_t type,
                      int64_t ne0, int64_t ne1, float scale, float offset)
{
    return add_random3(w, rng, name, type, ne0, ne1, 1, scale, offset);
}

int synth_quantizable(uint32_t type)
{
    return type == GGML_F32 || type == GGML_F16 || type == GGML_Q8_0 || type == GGML_Q4_0 ||
           type == GGML_Q4_K;
}

static int check_params(const struct synth_params *p, char *err, size_t errlen)
{
    const struct ggml_type_info *ti = ggml_type_get(p->wtype);
    if (!ti || !dequant_supported(p->wtype))
        return qg_errf(err, errlen, QG_ERR_USAGE,
                       "synth: weight type must be one qgate decodes (not %s)",
                       ti ? ti->name : "an unknown id");
    if (!p->arch || !*p->arch || strlen(p->arch) > 32)
        return qg_errf(err, errlen, QG_ERR_USAGE, "synth: architecture name must be 1..32 bytes");
    if (p->n_vocab < (p->byte_fallback ? 259 : 4) || p->dim <= 0 || p->n_layers <= 0 ||
        p->n_heads <= 0 || p->n_kv_heads <= 0 || p->ffn <= 0 || p->ctx <= 0)
        return qg_errf(err, errlen, QG_ERR_USAGE,
                       "synth: sizes must be positive (vocab >= 259 with byte fallback)");
    if ((p->rope_dims ? p->rope_dims : p->dim / (p->n_heads ? p->n_heads : 1)) > 4096)
        return qg_errf(err, errlen, QG_ERR_USAGE, "synth: rotated dimensions above 4096");
    if (p->dim % p->n_heads || p->n_heads % p->n_kv_heads)
        return qg_errf(err, errlen, QG_ERR_USAGE,
                       "synth: dim must divide by heads and heads by kv heads");
    if (p->dim % (int)ti->block || p->ffn % (int)ti->block)
        return qg_errf(err, errlen, QG_ERR_USAGE,
                       "synth: dim and ffn must be multiples of %u for %s", ti->block, ti->name);
    return QG_OK;
}

static int is(const struct synth_params *p, const char *arch)
{
    return strcmp(p->arch, arch) == 0;
}

static int n_experts(const struct synth_params *p)
{
    return is(p, "qwen2moe") || is(p, "qwen3moe") ? (p->n_expert ? p->n_expert : 4)
           : is(p, "llama")                       ? p->n_expert
                                                  : 0;
}

/* the keys of experts, RoPE scaling, windows and caps */
static int write_family_keys(struct gguf_writer *w, const struct synth_params *p)
{
    char key[128];
    int rc = QG_OK, ne = n_experts(p);
#define KEY(suffix, setter, v)                                                                     \
    if (!rc) {                                                                                     \
        snprintf(key, sizeof key, "%s." suffix, p->arch);                                          \
        rc = setter(w, key, v);                                                                    \
    }
    if (ne) {
        KEY("expert_count", gguf_writer_set_u32, (uint32_t)ne);
        KEY("expert_used_count", gguf_writer_set_u32,
            (uint32_t)(p->n_expert_used ? p->n_expert_used : 2));
    }
    if (is(p, "qwen3moe")) KEY("expert_feed_forward_length", gguf_writer_set_u32, (uint32_t)p->ffn);
    if (is(p, "qwen2moe")) {
        KEY("expert_feed_forward_length", gguf_writer_set_u32, (uint32_t)p->ffn);
        KEY("expert_shared_feed_forward_length", gguf_writer_set_u32, (uint32_t)(2 * p->ffn));
    }
    if (is(p, "llama") && p->rope_linear > 0) {
        KEY("rope.scaling.type", gguf_writer_set_str, "linear");
        KEY("rope.scaling.factor", gguf_writer_set_f32, p->rope_linear);
    }
    if ((is(p, "llama") && p->swa_window) || is(p, "gemma2") || is(p, "gemma3"))
        KEY("attention.sliding_window", gguf_writer_set_u32,
            (uint32_t)(p->swa_window ? p->swa_window : 8));
    if (is(p, "phi3") && p->longrope) {
        KEY("rope.scaling.original_context_length", gguf_writer_set_u32, 32u);
        KEY("rope.scaling.attn_factor", gguf_writer_set_f32, 1.19f);
    }
    if (is(p, "gemma3")) { /* layer 0 windowed with its own RoPE base, layer 1 global, scaled */
        KEY("attention.sliding_window_pattern", gguf_writer_set_u32, 2u);
        KEY("rope.freq_base_swa", gguf_writer_set_f32, p->rope_theta * 0.1f);
        KEY("rope.scaling.type", gguf_writer_set_str, "linear");
        KEY("rope.scaling.factor", gguf_writer_set_f32, 8.0f);
    }
    if (is(p, "gemma2")) {
        KEY("attn_logit_softcapping", gguf_writer_set_f32, 20.0f);
        KEY("final_logit_softcapping", gguf_writer_set_f32, 15.0f);
    }
#undef KEY
    if (!rc && p->extra_key) rc = gguf_writer_set_u32(w, p->extra_key, 1);
    return rc;
}

static int write_metadata(struct gguf_writer *w, const struct synth_params *p)
{
    char key[128];
    int hd = p->dim / p->n_heads;
    uint32_t ftype = p->wtype == GGML_F32    ? 0
                     : p->wtype == GGML_F16  ? 1
                     : p->wtype == GGML_Q8_0 ? 7
                     : p->wtype == GGML_Q4_0 ? 2
                                             : 15;
    int rc = gguf_writer_set_str(w, "general.architecture", p->arch);
    if (!rc) rc = gguf_writer_set_str(w, "general.name", p->name);
    if (!rc) rc = gguf_writer_set_u32(w, "general.file_type", ftype);
#define SET_U32(suffix, v)                                                                         \
    if (!rc) {                                                                                     \
        snprintf(key, sizeof key, "%s." suffix, p->arch);                                          \
        rc = gguf_writer_set_u32(w, key, (uint32_t)(v));                                           \
    }
    SET_U32("context_length", p->ctx);
    SET_U32("embedding_length", p->dim);
    SET_U32("block_count", p->n_layers);
    SET_U32("feed_forward_length", p->ffn);
    SET_U32("attention.head_count", p->n_heads);
    SET_U32("attention.head_count_kv", p->n_kv_heads);
    SET_U32("rope.dimension_count", p->rope_dims ? p->rope_dims : hd);
#undef SET_U32
    if (!rc) {
        snprintf(key, sizeof key, "%s.rope.freq_base", p->arch);
        rc = gguf_writer_set_f32(w, key, p->rope_theta);
    }
    if (!rc) {
        snprintf(key, sizeof key, "%s.attention.layer_norm%s_epsilon", p->arch,
                 is(p, "starcoder2") ? "" : "_rms");
        rc = gguf_writer_set_f32(w, key, p->rms_eps);
    }
    if (!rc) rc = write_family_keys(w, p);
    char **toks = NULL;
    float *scores = NULL;
    int32_t *types = NULL;
    if (!rc) rc = build_vocab(p->n_vocab, p->byte_fallback, &toks, &scores, &types);
    if (!rc) rc = gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    if (!rc)
        rc = gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)toks,
                                     (uint64_t)p->n_vocab);
    if (!rc)
        rc =
            gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_F32, scores, (uint64_t)p->n_vocab);
    if (!rc)
        rc = gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_I32, types,
                                 (uint64_t)p->n_vocab);
    if (!rc) rc = gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    if (!rc) rc = gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    if (!rc) rc = gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    if (!rc) rc = gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", 1);
    if (!rc) rc = gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", 0);
    for (int i = 0; toks && i < p->n_vocab; i++)
        free(toks[i]);
    free(toks);
    free(scores);
    free(types);
    return rc;
}

/* one layer's attention tensors, as the family stores them */
static int write_attention(struct gguf_writer *w, const struct synth_params *p, int l,
                           uint64_t *rng)
{
    int hd = p->dim / p->n_heads, kv = p->n_kv_heads * hd, rc = QG_OK;
    int bias = is(p, "qwen2") || is(p, "qwen2moe") || is(p, "starcoder2"), ln = is(p, "starcoder2");
    float s_in = 1.0f / sqrtf((float)p->dim);
    uint32_t t = p->wtype;
    char n[GGUF_MAX_NAME + 1];
#define ADD(suffix, type, ne0, ne1, sc, off)                                                       \
    if (!rc) {                                                                                     \
        snprintf(n, sizeof n, "blk.%d." suffix, l);                                                \
        rc = add_random(w, rng, n, type, ne0, ne1, sc, off);                                       \
    }
    ADD("attn_norm.weight", GGML_F32, p->dim, 1, 0.1f, 1.0f);
    if (ln) ADD("attn_norm.bias", GGML_F32, p->dim, 1, 0.1f, 0.0f);
    if (is(p, "phi3")) {
        ADD("attn_qkv.weight", t, p->dim, p->dim + 2 * kv, s_in, 0.0f);
    } else {
        ADD("attn_q.weight", t, p->dim, p->dim, s_in, 0.0f);
        ADD("attn_k.weight", t, p->dim, kv, s_in, 0.0f);
        ADD("attn_v.weight", t, p->dim, kv, s_in, 0.0f);
    }
    if (bias) {
        ADD("attn_q.bias", GGML_F32, p->dim, 1, 0.1f, 0.0f);
        ADD("attn_k.bias", GGML_F32, kv, 1, 0.1f, 0.0f);
        ADD("attn_v.bias", GGML_F32, kv, 1, 0.1f, 0.0f);
    }
    if (is(p, "qwen3") || is(p, "qwen3moe") || is(p, "gemma3")) {
        ADD("attn_q_norm.weight", GGML_F32, hd, 1, 0.1f, 1.0f);
        ADD("attn_k_norm.weight", GGML_F32, hd, 1, 0.1f, 1.0f);
    }
    ADD("attn_output.weight", t, p->dim, p->dim, s_in, 0.0f);
    if (ln) ADD("attn_output.bias", GGML_F32, p->dim, 1, 0.1f, 0.0f);
    if (is(p, "gemma2") || is(p, "gemma3"))
        ADD("post_attention_norm.weight", GGML_F32, p->dim, 1, 0.1f, 0.5f);
#undef ADD
    return rc;
}

/* one layer's FFN tensors: dense, fused, GELU MLP or experts */
static int write_ffn(struct gguf_writer *w, const struct synth_params *p, int l, uint64_t *rng)
{
    int rc = QG_OK, ne = n_experts(p), ln = is(p, "starcoder2");
    float s_in = 1.0f / sqrtf((float)p->dim), s_ffn = 1.0f / sqrtf((float)p->ffn);
    uint32_t t = p->wtype;
    char n[GGUF_MAX_NAME + 1];
#define ADD(suffix, type, ne0, ne1, ne2, sc, off)                                                  \
    if (!rc) {                                                                                     \
        snprintf(n, sizeof n, "blk.%d." suffix, l);                                                \
        rc = add_random3(w, rng, n, type, ne0, ne1, ne2, sc, off);                                 \
    }
    ADD("ffn_norm.weight", GGML_F32, p->dim, 1, 1, 0.1f, 1.0f);
    if (ln) ADD("ffn_norm.bias", GGML_F32, p->dim, 1, 1, 0.1f, 0.0f);
    if (ne) {
        ADD("ffn_gate_inp.weight", GGML_F32, p->dim, ne, 1, 2 * s_in, 0.0f);
        ADD("ffn_gate_exps.weight", t, p->dim, p->ffn, ne, s_in, 0.0f);
        ADD("ffn_up_exps.weight", t, p->dim, p->ffn, ne, s_in, 0.0f);
        ADD("ffn_down_exps.weight", t, p->ffn, p->dim, ne, s_ffn, 0.0f);
        if (is(p, "qwen2moe")) {
            ADD("ffn_gate_inp_shexp.weight", GGML_F32, p->dim, 1, 1, s_in, 0.0f);
            ADD("ffn_gate_shexp.weight", t, p->dim, 2 * p->ffn, 1, s_in, 0.0f);
            ADD("ffn_up_shexp.weight", t, p->dim, 2 * p->ffn, 1, s_in, 0.0f);
            ADD("ffn_down_shexp.weight", t, 2 * p->ffn, p->dim, 1, s_ffn, 0.0f);
        }
    } else if (is(p, "phi3")) {
        ADD("ffn_up.weight", t, p->dim, 2 * p->ffn, 1, s_in, 0.0f);
        ADD("ffn_down.weight", t, p->ffn, p->dim, 1, s_ffn, 0.0f);
    } else {
        if (!ln) ADD("ffn_gate.weight", t, p->dim, p->ffn, 1, s_in, 0.0f);
        ADD("ffn_up.weight", t, p->dim, p->ffn, 1, s_in, 0.0f);
        if (ln) ADD("ffn_up.bias", GGML_F32, p->ffn, 1, 1, 0.1f, 0.0f);
        ADD("ffn_down.weight", t, p->ffn, p->dim, 1, s_ffn, 0.0f);
        if (ln) ADD("ffn_down.bias", GGML_F32, p->dim, 1, 1, 0.1f, 0.0f);
    }
    if (is(p, "gemma2") || is(p, "gemma3"))
        ADD("post_ffw_norm.weight", GGML_F32, p->dim, 1, 1, 0.1f, 0.5f);
#undef ADD
    return rc;
}

static int write_tensors(struct gguf_writer *w, const struct synth_params *p)
{
    uint64_t rng = p->seed;
    float s_in = 1.0f / sqrtf((float)p->dim);
    uint32_t t = p->wtype;
    int gemma = !strncmp(p->arch, "gemma", 5);
    /* gemma scales the embedding by sqrt(dim): smaller entries keep it O(1) */
    int rc = add_random(w, &rng, "token_embd.weight", t, p->dim, p->n_vocab,
                        gemma ? s_in * p->logit_scale : 1.0f, 0.0f);
    if (!rc && is(p, "llama") && p->rope_freqs) { /* Llama 3's factors: 1 fast .. 8 slow */
        int nd = p->rope_dims ? p->rope_dims : p->dim / p->n_heads;
        float f[2048];
        for (int k = 0; k < nd / 2 && k < 2048; k++)
            f[k] = 1.0f + 7.0f * (float)k / (float)(nd / 2 > 1 ? nd / 2 - 1 : 1);
        int64_t ne[1] = {nd / 2};
        rc = gguf_writer_add_tensor(w, "rope_freqs.weight", GGML_F32, 1, ne, f);
    }
    if (!rc && is(p, "phi3") && p->longrope) { /* long: 1 .. 6, short: 1 .. 1.5 */
        int nd = p->rope_dims ? p->rope_dims : p->dim / p->n_heads;
        float lf[2048], sf[2048];
        for (int k = 0; k < nd / 2 && k < 2048; k++) {
            float r = (float)k / (float)(nd / 2 > 1 ? nd / 2 - 1 : 1);
            lf[k] = 1.0f + 5.0f * r * r;
            sf[k] = 1.0f + 0.5f * r;
        }
        int64_t ne[1] = {nd / 2};
        rc = gguf_writer_add_tensor(w, "rope_factors_long.weight", GGML_F32, 1, ne, lf);
        if (!rc) rc = gguf_writer_add_tensor(w, "rope_factors_short.weight", GGML_F32, 1, ne, sf);
    }
    for (int l = 0; l < p->n_layers && !rc; l++) {
        rc = write_attention(w, p, l, &rng);
        if (!rc) rc = write_ffn(w, p, l, &rng);
    }
    if (!rc) rc = add_random(w, &rng, "output_norm.weight", GGML_F32, p->dim, 1, 0.1f, 1.0f);
    if (!rc && is(p, "starcoder2"))
        rc = add_random(w, &rng, "output_norm.bias", GGML_F32, p->dim, 1, 0.1f, 0.0f);
    if (!rc && !p->tied_output && !gemma)
        rc = add_random(w, &rng, "output.weight", t, p->dim, p->n_vocab, s_in * p->logit_scale,
                        0.0f);
    if (!rc && p->extra_tensor)
        rc = add_random(w, &rng, p->extra_tensor, GGML_F32, p->dim, 1, 0.1f, 1.0f);
    return rc;
}

int synth_write(const struct synth_params *p, const char *path, char *err, size_t errlen)
{
    int rc = check_params(p, err, errlen);
    if (rc) return rc;
    cur = p;
    struct gguf_writer *w = gguf_writer_new();
    if (!w) return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    rc = write_metadata(w, p);
    if (!rc) rc = write_tensors(w, p);
    if (rc)
        qg_errf(err, errlen, rc, "synth: building %s failed: %s", path, qg_strerror(rc));
    else
        rc = gguf_writer_write(w, path, err, errlen);
    gguf_writer_free(w);
    return rc;
}
