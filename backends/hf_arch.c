/* hf_arch — config.json and tensor names of the architectures a checkpoint
 * directory may hold (see the header). */
#include "backends/hf_arch.h"
#include "backends/ggml_types.h"
#include "backends/gguf.h"
#include "backends/gguf_write.h"
#include "backends/hf_quant.h"
#include "backends/quant.h"
#include "backends/safetensors.h"
#include "core/status.h"
#include "core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    HA_ROTATE_HALF = 1 << 0, /* llama: q/k rows in rotate-half order, run as NeoX */
    HA_QKV_BIAS = 1 << 1,    /* q/k/v biases */
    HA_QK_NORM = 1 << 2,     /* per-head q/k RMSNorm */
    HA_NORM1 = 1 << 3,       /* gemma: RMSNorm multiplies by 1 + w */
    HA_POST_NORMS = 1 << 4,  /* gemma2/3: four norms per layer */
    HA_FUSED = 1 << 5,       /* phi3: qkv_proj, gate_up_proj */
    HA_STARCODER = 1 << 6,   /* LayerNorm with biases, c_fc/c_proj, biases everywhere */
    HA_MIXTRAL = 1 << 7,     /* block_sparse_moe.{gate, experts.E.w1/w2/w3} */
    HA_QWEN_MOE = 1 << 8,    /* mlp.{gate, experts.E.*_proj} */
    HA_SHARED = 1 << 9,      /* qwen2moe's shared expert */
    HA_WINDOW = 1 << 10,     /* sliding_window on every layer */
    HA_PATTERN = 1 << 11,    /* gemma2/3: sliding_window on the family's layers */
    HA_GELU = 1 << 12,       /* gelu_pytorch_tanh */
    HA_TIED = 1 << 13,       /* tie_word_embeddings defaults to true */
    HA_QGATE_WIN = 1 << 14,  /* the window as qgate.hf.sliding_window (llama.cpp ignores it) */
};

struct hf_family {
    const char *hf, *arch;
    unsigned flags;
    int swa_pattern, big_scale_layers; /* gemma2/3: as llama_arch.c's table */
};

static const struct hf_family families[] = {
    {"LlamaForCausalLM", "llama", HA_ROTATE_HALF, 0, 0},
    {"MistralForCausalLM", "llama", HA_ROTATE_HALF | HA_WINDOW, 0, 0},
    {"MixtralForCausalLM", "llama", HA_ROTATE_HALF | HA_WINDOW | HA_MIXTRAL, 0, 0},
    {"Qwen2ForCausalLM", "qwen2", HA_QKV_BIAS, 0, 0},
    {"Qwen2MoeForCausalLM", "qwen2moe", HA_QKV_BIAS | HA_QWEN_MOE | HA_SHARED, 0, 0},
    {"Qwen3ForCausalLM", "qwen3", HA_QK_NORM, 0, 0},
    {"Qwen3MoeForCausalLM", "qwen3moe", HA_QK_NORM | HA_QWEN_MOE, 0, 0},
    {"GemmaForCausalLM", "gemma", HA_NORM1 | HA_GELU | HA_TIED, 0, 0},
    {"Gemma2ForCausalLM", "gemma2", HA_NORM1 | HA_GELU | HA_TIED | HA_POST_NORMS | HA_PATTERN, 2,
     46},
    {"Gemma3ForCausalLM", "gemma3",
     HA_NORM1 | HA_GELU | HA_TIED | HA_POST_NORMS | HA_PATTERN | HA_QK_NORM, 6, 62},
    {"Phi3ForCausalLM", "phi3", HA_FUSED | HA_WINDOW | HA_QGATE_WIN, 0, 0},
    {"Starcoder2ForCausalLM", "starcoder2",
     HA_STARCODER | HA_GELU | HA_TIED | HA_WINDOW | HA_QGATE_WIN, 0, 0},
};
enum { N_FAMILIES = (int)(sizeof families / sizeof *families) };

static const cJSON *item(const cJSON *c, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(c, k);
}

static int present(const cJSON *c, const char *k)
{
    const cJSON *v = item(c, k);
    return v && !cJSON_IsNull(v);
}

static double num(const cJSON *c, const char *k, double def)
{
    const cJSON *v = item(c, k);
    return cJSON_IsNumber(v) ? v->valuedouble : def;
}

/* a size: a whole number in 0..2^24, else -1 (def when absent or null) */
static int64_t whole(const cJSON *c, const char *k, int64_t def)
{
    const cJSON *v = item(c, k);
    if (!v || cJSON_IsNull(v)) return def;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= (1 << 24)) ||
        v->valuedouble != (double)(int64_t)v->valuedouble)
        return -1;
    return (int64_t)v->valuedouble;
}

static const char *str(const cJSON *c, const char *k)
{
    return cJSON_GetStringValue(item(c, k));
}

void hf_llama3_factors(double theta, int head_dim, const double l3[4], float *out)
{
    const float pi2 = 6.2831853071795864769f, lo = (float)(l3[3] / l3[1]),
                hi = (float)(l3[3] / l3[2]);
    for (int k = 0; k < head_dim / 2; k++) { /* float32, as convert_hf_to_gguf's torch code */
        float freq = 1.0f / powf((float)theta, (float)(2 * k) / (float)head_dim),
              wavelen = pi2 / freq;
        if (wavelen < hi)
            out[k] = 1.0f;
        else if (wavelen > lo)
            out[k] = (float)l3[0];
        else {
            float smooth = ((float)l3[3] / wavelen - (float)l3[1]) / (float)(l3[2] - l3[1]);
            out[k] = 1.0f / ((1.0f - smooth) / (float)l3[0] + smooth);
        }
    }
}

/* Phi-3's LongRoPE: both factor lists, rope_dims / 2 positive numbers
 * each, and the attention factor transformers and llama.cpp's converter
 * derive from the context lengths */
static int longrope(const cJSON *c, const cJSON *p, const char *file, struct hf_cfg *h, char *err,
                    size_t errlen)
{
    static const char *const key[2] = {"long_factor", "short_factor"};
    for (int i = 0; i < 2; i++) {
        const cJSON *a = item(p, key[i]), *e;
        int ok = cJSON_IsArray(a) && cJSON_GetArraySize(a) == h->rope_dims / 2;
        cJSON_ArrayForEach(e, a) ok = ok && cJSON_IsNumber(e) && e->valuedouble > 0;
        if (!ok)
            return qg_errf(err, errlen, QG_ERR_DATA,
                           "%s: rope_scaling.%s must be %lld positive numbers", file, key[i],
                           (long long)(h->rope_dims / 2));
        h->longrope[i] = a;
    }
    h->orig_ctx = whole(c, "original_max_position_embeddings",
                        whole(p, "original_max_position_embeddings", h->ctx));
    if (h->orig_ctx <= 0)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: original_max_position_embeddings must be a whole number", file);
    double scale = (double)h->ctx / (double)h->orig_ctx;
    h->attn_factor = num(p, "attention_factor", 0);
    if (!(h->attn_factor > 0))
        h->attn_factor = scale <= 1 ? 1.0 : sqrt(1 + log(scale) / log((double)h->orig_ctx));
    return QG_OK;
}

/* RoPE: base (per layer type for gemma3), partial rotary, scaling */
static int read_rope(const cJSON *c, const char *file, struct hf_cfg *h, char *err, size_t errlen)
{
    const cJSON *rp = item(c, "rope_parameters"), *full = rp, *swa = NULL;
    if (item(rp, "full_attention")) {
        full = item(rp, "full_attention");
        swa = item(rp, "sliding_attention");
    }
    const cJSON *p = present(c, "rope_scaling") ? item(c, "rope_scaling") : full;
    h->theta = num(c, "rope_theta", num(full, "rope_theta", 10000.0));
    h->theta_swa = num(c, "rope_local_base_freq", num(swa, "rope_theta", 10000.0));
    const char *st = swa ? str(swa, "rope_type") : NULL;
    if (st && strcmp(st, "default"))
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: rope_parameters.sliding_attention.rope_type '%.40s' is not "
                       "implemented",
                       file, st);
    double part = num(c, "partial_rotary_factor", num(full, "partial_rotary_factor", 1.0));
    h->rope_dims = (int64_t)llround(part * (double)h->head_dim);
    if (part != 1.0 && (strcmp(h->arch, "phi3") || !(part > 0 && part < 1) ||
                        (double)h->rope_dims != part * (double)h->head_dim || h->rope_dims % 2))
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: partial_rotary_factor %g is not implemented here (Phi-3: a factor "
                       "giving an even number of rotated dimensions)",
                       file, part);
    const char *t = str(p, "rope_type");
    if (!t) t = str(p, "type");
    if (!t || !strcmp(t, "default")) return QG_OK;
    if (!strcmp(t, "linear") && (!strcmp(h->arch, "llama") || !strcmp(h->arch, "gemma3"))) {
        h->rope_linear = num(p, "factor", 0);
        return h->rope_linear > 0
                   ? QG_OK
                   : qg_errf(err, errlen, QG_ERR_DATA,
                             "%s: linear RoPE scaling needs a positive factor", file);
    }
    if (!strcmp(t, "llama3") && !strcmp(h->arch, "llama")) {
        h->l3[0] = num(p, "factor", 8.0), h->l3[1] = num(p, "low_freq_factor", 1.0);
        h->l3[2] = num(p, "high_freq_factor", 4.0);
        h->l3[3] = num(p, "original_max_position_embeddings", 8192.0);
        h->llama3 = 1;
        return h->l3[0] > 0 && h->l3[1] > 0 && h->l3[2] > h->l3[1] && h->l3[3] > 0
                   ? QG_OK
                   : qg_errf(err, errlen, QG_ERR_DATA, "%s: bad llama3 RoPE scaling factors", file);
    }
    if ((!strcmp(t, "longrope") || !strcmp(t, "su")) && !strcmp(h->arch, "phi3"))
        return longrope(c, p, file, h, err, errlen);
    return qg_errf(err, errlen, QG_ERR_DATA,
                   "%s: RoPE scaling '%.40s' on %s is not implemented for checkpoint directories "
                   "(qgate reads linear on Llama and Gemma 3, llama3 on Llama, longrope on Phi-3)",
                   file, t, h->fam->hf);
}

/* the window and, for gemma2/3, its layers, soft caps and query scale */
static int read_window(const cJSON *c, const char *file, struct hf_cfg *h, char *err, size_t errlen)
{
    const struct hf_family *f = h->fam;
    if (f->flags & HA_WINDOW) h->window = whole(c, "sliding_window", 0);
    if (f->flags & HA_PATTERN) h->window = whole(c, "sliding_window", 4096); /* its default */
    if (h->window < 0)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: sliding_window must be null or a whole number in 0..2^24", file);
    if (h->window >= h->ctx) h->window = 0; /* never reached */
    if (!(f->flags & HA_PATTERN)) return QG_OK;
    /* which layers are windowed: layer_types (transformers 5) or
     * sliding_window_pattern, as "every layer but each pattern-th" (0: all) */
    const cJSON *lt = item(c, "layer_types");
    int64_t pat = whole(c, "sliding_window_pattern", f->swa_pattern);
    int ok = pat >= 0 && (!present(c, "layer_types") ||
                          (cJSON_IsArray(lt) && cJSON_GetArraySize(lt) == (int)h->layers));
    for (int l = 0; ok && cJSON_IsArray(lt) && l < h->layers; l++) {
        const char *s = cJSON_GetStringValue(cJSON_GetArrayItem(lt, l));
        if (l == 0) pat = 0;
        if (s && !strcmp(s, "full_attention") && !pat) pat = l + 1;
    }
    for (int l = 0; ok && cJSON_IsArray(lt) && l < h->layers; l++) {
        const char *s = cJSON_GetStringValue(cJSON_GetArrayItem(lt, l));
        int swa = pat == 0 || l % pat < pat - 1;
        ok = s && !strcmp(s, swa ? "sliding_attention" : "full_attention");
    }
    if (!ok)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: layer_types are not a window on every layer but each n-th (as %s's "
                       "every %dth): not implemented",
                       file, h->arch, f->swa_pattern);
    h->swa_pattern = pat;
    int g2 = !strcmp(h->arch, "gemma2");
    h->caps[0] =
        present(c, "attn_logit_softcapping") || !g2 ? num(c, "attn_logit_softcapping", 0) : 50.0;
    h->caps[1] =
        present(c, "final_logit_softcapping") || !g2 ? num(c, "final_logit_softcapping", 0) : 30.0;
    if (!g2 && h->caps[0] != 0)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: attn_logit_softcapping on gemma3 is not implemented", file);
    /* llama.cpp scales queries by 1/sqrt(head_dim), by 1/sqrt(dim/heads) at
     * the 27B size; the config's query_pre_attn_scalar must agree */
    double want =
        h->layers == f->big_scale_layers ? (double)(h->dim / h->heads) : (double)h->head_dim;
    double qs = num(c, "query_pre_attn_scalar", 256.0);
    if (qs != want || !(h->caps[0] >= 0 && h->caps[1] >= 0))
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: query_pre_attn_scalar %g is not %g (or a soft cap is negative): not "
                       "implemented",
                       file, qs, want);
    return QG_OK;
}

/* experts: counts, widths, and the routing each family implements */
static int read_moe(const cJSON *c, const char *file, struct hf_cfg *h, char *err, size_t errlen)
{
    unsigned fl = h->fam->flags;
    if (!(fl & (HA_MIXTRAL | HA_QWEN_MOE))) return QG_OK;
    h->n_expert = whole(c, "num_local_experts", whole(c, "num_experts", -1));
    h->n_used = whole(c, "num_experts_per_tok", -1);
    h->expert_ffn = fl & HA_MIXTRAL ? h->ffn : whole(c, "moe_intermediate_size", -1);
    h->shexp_ffn = fl & HA_SHARED ? whole(c, "shared_expert_intermediate_size", -1) : 0;
    if (h->n_expert <= 0 || h->n_expert > 1024 || h->n_used <= 0 || h->n_used > h->n_expert ||
        h->n_used > 64 || h->expert_ffn <= 0 || h->shexp_ffn < 0)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: expert counts and widths (num_experts or num_local_experts, "
                       "num_experts_per_tok <= 64, moe_intermediate_size, "
                       "shared_expert_intermediate_size) must be whole numbers",
                       file);
    if (fl & HA_MIXTRAL) return QG_OK;
    /* llama.cpp renormalises the chosen weights for qwen3moe, not qwen2moe */
    int norm = cJSON_IsTrue(item(c, "norm_topk_prob")), want = !(fl & HA_SHARED);
    const cJSON *only = item(c, "mlp_only_layers");
    const char *what = norm != want                              ? "norm_topk_prob"
                       : whole(c, "decoder_sparse_step", 1) != 1 ? "decoder_sparse_step"
                       : only && cJSON_GetArraySize(only) && !cJSON_IsNull(only) ? "mlp_only_layers"
                                                                                 : NULL;
    return what ? qg_errf(err, errlen, QG_ERR_DATA,
                          "%s: %s as set here is not implemented for %s (qgate: norm_topk_prob "
                          "%s, every layer sparse)",
                          file, what, h->fam->hf, want ? "true" : "false")
                : QG_OK;
}

/* what config.json asks that qgate does not implement: refused by name */
static int check_features(const cJSON *c, const char *file, const struct hf_cfg *h, char *err,
                          size_t errlen)
{
    unsigned fl = h->fam->flags;
    /* gemma2/3 read hidden_activation; Gemma 1's legacy "gelu" means tanh */
    const char *act = str(c, fl & HA_POST_NORMS ? "hidden_activation" : "hidden_act");
    if (!act) act = fl & HA_GELU ? "gelu_pytorch_tanh" : "silu";
    if (!strcmp(h->arch, "gemma") && !strcmp(act, "gelu")) act = "gelu_pytorch_tanh";
    const char *what = NULL;
    if (strcmp(act, fl & HA_GELU ? "gelu_pytorch_tanh" : "silu"))
        what = fl & HA_POST_NORMS ? "hidden_activation" : "hidden_act";
    else if (cJSON_IsTrue(item(c, "attention_bias")) && !(fl & HA_QKV_BIAS))
        what = "attention_bias";
    else if (cJSON_IsTrue(item(c, "mlp_bias")))
        what = "mlp_bias";
    else if ((fl & HA_STARCODER) && cJSON_IsFalse(item(c, "use_bias")))
        what = "use_bias false";
    else if (cJSON_IsFalse(item(c, "qkv_bias")) && (fl & HA_QKV_BIAS))
        what = "qkv_bias false";
    else if (cJSON_IsTrue(item(c, "use_sliding_window")))
        what = "use_sliding_window";
    else if (cJSON_IsTrue(item(c, "use_bidirectional_attention")))
        what = "use_bidirectional_attention";
    if (what)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: %s is set: not implemented for %s checkpoint directories", file, what,
                       h->fam->hf);
    if (!(h->eps > 0 && h->eps < 1) || !(h->theta > 0) || !(h->theta_swa > 0))
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: rms_norm_eps (norm_epsilon), rope_theta or the local RoPE base out of "
                       "range",
                       file);
    return QG_OK;
}

static int read_sizes(const cJSON *c, const char *file, struct hf_cfg *h, char *err, size_t errlen)
{
    h->dim = whole(c, "hidden_size", -1);
    h->layers = whole(c, "num_hidden_layers", -1);
    h->heads = whole(c, "num_attention_heads", -1);
    h->kv_heads = whole(c, "num_key_value_heads", h->heads);
    h->head_dim = whole(c, "head_dim", h->heads > 0 && h->dim > 0 ? h->dim / h->heads : -1);
    h->ffn = whole(c, "intermediate_size", -1);
    h->ctx = whole(c, "max_position_embeddings", -1);
    h->vocab = whole(c, "vocab_size", 0);
    int64_t v[] = {h->dim, h->layers, h->heads, h->kv_heads, h->head_dim, h->ffn, h->ctx};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        if (v[i] <= 0)
            return qg_errf(err, errlen, QG_ERR_DATA,
                           "%s: hidden_size, num_hidden_layers, num_attention_heads, "
                           "num_key_value_heads, head_dim, intermediate_size and "
                           "max_position_embeddings must be whole numbers in 1..2^24",
                           file);
    if (h->heads % h->kv_heads)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: num_key_value_heads must divide num_attention_heads", file);
    h->eps = num(c, h->fam->flags & HA_STARCODER ? "norm_epsilon" : "rms_norm_eps", 0);
    const cJSON *tie = item(c, "tie_word_embeddings");
    h->tied = cJSON_IsBool(tie) ? cJSON_IsTrue(tie) : (h->fam->flags & HA_TIED) != 0;
    return QG_OK;
}

int hf_read_cfg(const cJSON *c, const char *file, struct hf_cfg *h, char *err, size_t errlen)
{
    const cJSON *a = cJSON_GetArrayItem(item(c, "architectures"), 0);
    memset(h, 0, sizeof *h);
    for (int i = 0; cJSON_IsString(a) && i < N_FAMILIES; i++)
        if (!strcmp(a->valuestring, families[i].hf)) h->fam = &families[i];
    if (!h->fam) {
        char list[600];
        size_t n = 0;
        for (int i = 0; i < N_FAMILIES; i++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", families[i].hf);
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: architecture '%.60s' is not supported in a checkpoint directory "
                       "(qgate reads %s)",
                       file, cJSON_IsString(a) ? a->valuestring : "?", list);
    }
    h->arch = h->fam->arch;
    int rc = read_sizes(c, file, h, err, errlen);
    if (!rc) rc = read_rope(c, file, h, err, errlen);
    if (!rc) rc = read_window(c, file, h, err, errlen);
    if (!rc) rc = read_moe(c, file, h, err, errlen);
    return rc ? rc : check_features(c, file, h, err, errlen);
}

int hf_arch_keys(struct gguf_writer *w, const struct hf_cfg *h, const char *name)
{
    char key[128];
    unsigned fl = h->fam->flags;
    int rc = gguf_writer_set_str(w, "general.architecture", h->arch);
    if (!rc) rc = gguf_writer_set_str(w, "general.name", name);
#define KEY(suffix) snprintf(key, sizeof key, "%s." suffix, h->arch)
#define U32(suffix, v)                                                                             \
    if (!rc) {                                                                                     \
        KEY(suffix);                                                                               \
        rc = gguf_writer_set_u32(w, key, (uint32_t)(v));                                           \
    }
#define F32(suffix, v)                                                                             \
    if (!rc) {                                                                                     \
        KEY(suffix);                                                                               \
        rc = gguf_writer_set_f32(w, key, (float)(v));                                              \
    }
    U32("context_length", h->ctx);
    U32("embedding_length", h->dim);
    U32("block_count", h->layers);
    U32("feed_forward_length", h->ffn);
    U32("attention.head_count", h->heads);
    U32("attention.head_count_kv", h->kv_heads);
    U32("attention.key_length", h->head_dim);
    U32("attention.value_length", h->head_dim);
    if (fl & HA_STARCODER) {
        F32("attention.layer_norm_epsilon", h->eps);
    } else {
        F32("attention.layer_norm_rms_epsilon", h->eps);
    }
    F32("rope.freq_base", h->theta);
    if (h->rope_dims != h->head_dim) U32("rope.dimension_count", h->rope_dims);
    if (!strcmp(h->arch, "gemma3")) F32("rope.freq_base_swa", h->theta_swa);
    if (h->rope_linear > 0 && !rc) {
        KEY("rope.scaling.type");
        rc = gguf_writer_set_str(w, key, "linear");
        F32("rope.scaling.factor", h->rope_linear);
    }
    if (h->longrope[0]) {
        F32("rope.scaling.attn_factor", h->attn_factor);
        U32("rope.scaling.original_context_length", h->orig_ctx);
    }
    if (fl & HA_PATTERN) U32("attention.sliding_window", h->window);
    if ((fl & HA_PATTERN) && h->swa_pattern != h->fam->swa_pattern)
        U32("attention.sliding_window_pattern", h->swa_pattern);
    if ((fl & HA_PATTERN) && !strcmp(h->arch, "gemma2")) F32("attn_logit_softcapping", h->caps[0]);
    if (fl & HA_PATTERN) F32("final_logit_softcapping", h->caps[1]);
    if ((fl & HA_WINDOW) && !(fl & HA_QGATE_WIN) && h->window > 0)
        U32("attention.sliding_window", h->window);
    if (!rc && (fl & HA_QGATE_WIN) && h->window > 0)
        rc = gguf_writer_set_u32(w, "qgate.hf.sliding_window", (uint32_t)h->window);
    if (h->n_expert) {
        U32("expert_count", h->n_expert);
        U32("expert_used_count", h->n_used);
    }
    if (fl & HA_QWEN_MOE) U32("expert_feed_forward_length", h->expert_ffn);
    if (fl & HA_SHARED) U32("expert_shared_feed_forward_length", h->shexp_ffn);
#undef U32
#undef F32
#undef KEY
    if (!rc && (fl & HA_ROTATE_HALF)) rc = gguf_writer_set_bool(w, "qgate.rope_neox", 1);
    return rc;
}

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
    int rc = plain(b->o, name, gn, d, E, 0, 0, &b->t[b->n++], b->err, b->errlen);
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
