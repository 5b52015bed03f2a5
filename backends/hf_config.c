/* hf_config — config.json as the family's GGUF keys (see the header). */
#include "backends/hf_config.h"
#include "backends/gguf_write.h"
#include "core/status.h"
#include "core/util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

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
    if (f->flags & HA_PATTERN) /* absent: transformers' default; null: none */
        h->window = item(c, "sliding_window") ? whole(c, "sliding_window", 0) : 4096;
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
    /* gemma2's caps: absent, transformers' defaults 50 and 30; null, none */
    h->caps[0] =
        item(c, "attn_logit_softcapping") || !g2 ? num(c, "attn_logit_softcapping", 0) : 50.0;
    h->caps[1] =
        item(c, "final_logit_softcapping") || !g2 ? num(c, "final_logit_softcapping", 0) : 30.0;
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
    if (!(h->eps > 0 && h->eps < 1) || !(h->theta > 0 && h->theta < 1e12) ||
        !(h->theta_swa > 0 && h->theta_swa < 1e12) || !(h->rope_linear < 1e6) ||
        !(h->attn_factor < 100))
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: rms_norm_eps (norm_epsilon) not in (0, 1), or a RoPE base (1e12), "
                       "linear factor (1e6) or attention factor (100) out of range",
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
    if (h->heads * h->head_dim > (1 << 24) || h->kv_heads > h->heads)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: num_attention_heads x head_dim must be at most 2^24 and "
                       "num_key_value_heads at most num_attention_heads",
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
