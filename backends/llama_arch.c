/* llama_arch — the families as data: which norm, activation, RoPE, caps,
 * windows and experts each architecture uses, read from the file's
 * metadata as llama.cpp reads it (src/models/<arch>.cpp), and every
 * "<arch>.*" key qgate does not implement refused by name. */
#include "backends/llama.h"
#include "backends/llama_impl.h"
#include "core/status.h"
#include "core/util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum {
    F_NEOX = 1 << 0,      /* NeoX RoPE */
    F_QKV_BIAS = 1 << 1,  /* q/k/v biases required */
    F_LAYERNORM = 1 << 2, /* LayerNorm with biases */
    F_GEGLU = 1 << 3,     /* gelu-gated FFN */
    F_GELU = 1 << 4,      /* plain GELU MLP */
    F_EMBD_SCALE = 1 << 5,
    F_POST_NORMS = 1 << 6,  /* post-attention and post-FFN norms */
    F_MOE = 1 << 7,         /* experts required */
    F_MOE_OPT = 1 << 8,     /* experts when expert_count > 0 */
    F_QK_NORM = 1 << 9,     /* per-head Q/K norms */
    F_NO_SWA = 1 << 10,     /* a sliding_window key is read and not used (as llama.cpp) */
    F_ROPE_SCALE = 1 << 11, /* linear scaling and rope_freqs */
    F_Q_PRESCALE = 1 << 12, /* Q times the attention scale before it meets K (llama.cpp) */
};

static const struct family {
    const char *name;
    unsigned flags;
    int swa_pattern;           /* which layers a window applies to (llama.cpp's set_swa_pattern) */
    int swa_window;            /* the window when the file sets none (0: no window) */
    float attn_cap, final_cap; /* soft caps when the file sets none */
    int big_scale_layers;      /* layer count of the size that scales q by 1/sqrt(dim/heads) */
    int own_swa_rope;          /* windowed layers: rope.freq_base_swa (default 10000), scale 1 */
    const char *note;
} families[] = {
    {"llama", F_MOE_OPT | F_ROPE_SCALE, 0, 0, 0, 0, 0, 0,
     "RMSNorm, SwiGLU, RoPE with linear or Llama 3 (rope_freqs) scaling, GQA, Mixtral experts, "
     "a sliding window where the file sets one"},
    {"qwen2", F_NEOX | F_QKV_BIAS, 0, 0, 0, 0, 0, 0,
     "RMSNorm, SwiGLU, NeoX RoPE, q/k/v biases, GQA"},
    {"qwen2moe", F_NEOX | F_QKV_BIAS | F_MOE, 0, 0, 0, 0, 0, 0,
     "qwen2 with routed experts (softmax, top-k, weights as chosen) and a sigmoid-gated shared "
     "expert"},
    {"qwen3", F_NEOX | F_QK_NORM, 0, 0, 0, 0, 0, 0,
     "RMSNorm, SwiGLU, NeoX RoPE, per-head Q/K RMSNorm, GQA"},
    {"qwen3moe", F_NEOX | F_QK_NORM | F_MOE, 0, 0, 0, 0, 0, 0,
     "qwen3 with routed experts (softmax, top-k, the chosen weights renormalised), no shared "
     "expert"},
    {"gemma", F_NEOX | F_GEGLU | F_EMBD_SCALE | F_Q_PRESCALE, 0, 0, 0, 0, 0, 0,
     "RMSNorm, GELU-gated FFN, embedding times sqrt(dim), NeoX RoPE, tied output"},
    {"gemma2", F_NEOX | F_GEGLU | F_EMBD_SCALE | F_POST_NORMS | F_Q_PRESCALE, 2, 4096, 50.0f, 30.0f,
     46, 0,
     "gemma with post-attention and post-FFN norms, attention and final logit soft-capping, "
     "a sliding window on even layers"},
    {"gemma3",
     F_NEOX | F_GEGLU | F_EMBD_SCALE | F_POST_NORMS | F_QK_NORM | F_ROPE_SCALE | F_Q_PRESCALE, 6, 0,
     0, 0, 62, 1,
     "gemma2's norms with per-head Q/K RMSNorm, no attention cap, a sliding window on 5 of "
     "every 6 layers with their own RoPE base, linear RoPE scaling on the global layers"},
    {"phi3", F_NEOX | F_NO_SWA | F_Q_PRESCALE, 0, 0, 0, 0, 0, 0,
     "fused QKV and gate-up, NeoX RoPE, partial rotary; its sliding_window is not applied "
     "(llama.cpp disables Phi-3 SWA)"},
    {"starcoder2", F_NEOX | F_QKV_BIAS | F_LAYERNORM | F_GELU, 0, 0, 0, 0, 0, 0,
     "LayerNorm with biases, plain GELU MLP, biases on every projection, NeoX RoPE"},
};
enum { N_FAMILIES = (int)(sizeof families / sizeof *families) };

static const struct family *family_find(const char *a, size_t al)
{
    for (int i = 0; i < N_FAMILIES; i++)
        if (strlen(families[i].name) == al && memcmp(families[i].name, a, al) == 0)
            return &families[i];
    return NULL;
}

const char *llama_families(void)
{
    return "llama, qwen2, qwen2moe, qwen3, qwen3moe, gemma, gemma2, gemma3, phi3, starcoder2";
}

const char *llama_family_note(const char *arch)
{
    const struct family *f = family_find(arch, strlen(arch));
    return f ? f->note : NULL;
}

int llama_layer_swa(const struct llama_hparams *h, int l)
{
    if (!h->swa_window) return 0;
    return h->swa_pattern == 0 || l % h->swa_pattern < h->swa_pattern - 1;
}

void llama_layer_rope(const struct llama_hparams *h, int l, float *theta, float *scale)
{
    int swa = llama_layer_swa(h, l);
    *theta = swa ? h->rope_theta_swa : h->rope_theta;
    *scale = swa ? h->rope_scale_swa : h->rope_freq_scale;
}

/* keys that change the forward pass only in some families: elsewhere
 * llama.cpp ignores them, so qgate refuses them rather than compute
 * something llama.cpp does not */
static const struct {
    const char *key, *families; /* space-separated, padded */
} family_keys[] = {
    {"attention.sliding_window", " llama gemma2 gemma3 phi3 "},
    {"attention.sliding_window_pattern", " gemma2 gemma3 "},
    {"rope.freq_base_swa", " gemma2 gemma3 "},
    {"attn_logit_softcapping", " gemma2 "},
    {"final_logit_softcapping", " gemma2 gemma3 "},
    {"attention.scale", " llama "},
    {"expert_count", " llama qwen2moe qwen3moe "},
    {"expert_used_count", " llama qwen2moe qwen3moe "},
    {"expert_feed_forward_length", " qwen2moe qwen3moe "},
    {"expert_shared_feed_forward_length", " qwen2moe "},
    {"expert_weights_scale", " llama qwen2moe "},
    {"expert_gating_func", " llama qwen2moe "},
    {"rope.scaling.attn_factor", " phi3 "},
};

/* "<arch>.<suffix>" keys qgate reads (or knows to be harmless) */
static const char *const known_keys[] = {
    "context_length",
    "embedding_length",
    "block_count",
    "feed_forward_length",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.key_length",
    "attention.value_length",
    "attention.layer_norm_rms_epsilon",
    "attention.layer_norm_epsilon",
    "attention.sliding_window",
    "attention.sliding_window_pattern",
    "attention.scale",
    "attention.causal",
    "attn_logit_softcapping",
    "final_logit_softcapping",
    "rope.dimension_count",
    "rope.freq_base",
    "rope.freq_base_swa",
    "rope.scaling.type",
    "rope.scaling.factor",
    "rope.scale_linear",
    "rope.scaling.original_context_length",
    "rope.scaling.attn_factor",
    "rope.scaling.finetuned",
    "vocab_size",
    "expert_count",
    "expert_used_count",
    "expert_feed_forward_length",
    "expert_shared_feed_forward_length",
    "expert_weights_scale",
    "expert_gating_func",
};

static int key_known(const char *suffix)
{
    for (size_t i = 0; i < sizeof known_keys / sizeof *known_keys; i++)
        if (!strcmp(known_keys[i], suffix)) return 1;
    return 0;
}

/* Every "<arch>." key is one qgate reads; any other changes the model in a
 * way it does not implement */
static int check_keys(const struct gguf *g, const char *name, const char *arch, char *err,
                      size_t errlen)
{
    size_t al = strlen(arch);
    for (int64_t i = 0; i < gguf_n_kv(g); i++) {
        const char *k = gguf_kv_key(g, i);
        if (strncmp(k, arch, al) != 0 || k[al] != '.') continue;
        if (!key_known(k + al + 1))
            return qg_errf(err, errlen, QG_ERR_DATA,
                           "%s: metadata key '%s' is not implemented by qgate's engine (it would "
                           "change the forward pass)",
                           name, k);
        char padded[40];
        snprintf(padded, sizeof padded, " %s ", arch);
        for (size_t f = 0; f < sizeof family_keys / sizeof *family_keys; f++)
            if (!strcmp(family_keys[f].key, k + al + 1) && !strstr(family_keys[f].families, padded))
                return qg_errf(err, errlen, QG_ERR_DATA,
                               "%s: metadata key '%s' is not implemented for %s (llama.cpp "
                               "ignores it there; qgate uses it in:%s)",
                               name, k, arch, family_keys[f].families);
    }
    return QG_OK;
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

/* a float key: def when absent; QG_ERR_DATA when present and not a number */
static int get_float(const struct gguf *g, const char *arch, const char *suffix, double def,
                     double *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int rc = gguf_get_float(g, key, out);
    if (rc == QG_ERR_NOTFOUND) {
        *out = def;
        return QG_OK;
    }
    return rc;
}

static int read_sizes(const struct gguf *g, const char *name, struct llama_hparams *hp, char *err,
                      size_t errlen)
{
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
    if (get_int(g, hp->arch, "attention.value_length", hp->head_dim, &v) != QG_OK ||
        v != hp->head_dim)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: attention.value_length differs from key_length %d (not implemented)",
                       name, hp->head_dim);
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
    return QG_OK;
}

/* RoPE base and scaling: linear (a factor) is implemented, Llama 3's by
 * its rope_freqs tensor; YaRN and LongRoPE are refused */
static int read_rope(const struct gguf *g, const char *name, const struct family *f,
                     struct llama_hparams *hp, char *err, size_t errlen)
{
    double d;
    if (get_float(g, hp->arch, "rope.freq_base", 10000.0, &d) || !(d > 0))
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: %s.rope.freq_base is not positive", name,
                       hp->arch);
    hp->rope_theta = (float)d;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", hp->arch);
    const char *t = "linear";
    size_t tl = 6;
    if (gguf_get_str(g, key, &t, &tl) == QG_ERR_DATA)
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: %s is not a string", name, key);
    double factor = 0, lin = 0;
    if (get_float(g, hp->arch, "rope.scaling.factor", 0, &factor) ||
        get_float(g, hp->arch, "rope.scale_linear", 0, &lin))
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: a rope scaling factor is not a number", name);
    if (factor < 0 || lin < 0)
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: a negative RoPE scaling factor", name);
    if (factor == 0) factor = lin; /* llama.cpp: rope.scaling.factor, else rope.scale_linear */
    int none = tl == 4 && !memcmp(t, "none", 4), linear = tl == 6 && !memcmp(t, "linear", 6);
    if (!none && !linear)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: RoPE scaling '%.*s' is not implemented (qgate implements linear "
                       "scaling and Llama 3's rope_freqs)",
                       name, (int)(tl < 32 ? tl : 32), t);
    hp->rope_freq_scale = linear && factor > 0 ? (float)(1.0 / factor) : 1.0f;
    double af;
    if (get_float(g, hp->arch, "rope.scaling.attn_factor", 1.0, &af) || !(af > 0 && af < 100))
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: bad rope.scaling.attn_factor", name);
    hp->rope_mscale = (float)af;
    int64_t oc;
    if (get_int(g, hp->arch, "rope.scaling.original_context_length", hp->ctx_train, &oc) ||
        oc <= 0 || oc > (1 << 24))
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: bad rope.scaling.original_context_length",
                       name);
    hp->ctx_orig = (int)oc;
    if (hp->rope_mscale != 1.0f && strcmp(hp->arch, "phi3"))
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: rope.scaling.attn_factor on a %s model is not implemented", name,
                       hp->arch);
    if (hp->rope_freq_scale != 1.0f && !(f->flags & F_ROPE_SCALE))
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: RoPE scaling on a %s model is not implemented", name, hp->arch);
    return QG_OK;
}

/* experts: counts and widths */
static int read_moe(const struct gguf *g, const char *name, const struct family *f,
                    struct llama_hparams *hp, char *err, size_t errlen)
{
    int64_t ne = 0, nu = 0, ef = 0, sf = 0;
    if (get_int(g, hp->arch, "expert_count", 0, &ne) ||
        get_int(g, hp->arch, "expert_used_count", 0, &nu))
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: bad expert counts", name);
    if ((f->flags & F_MOE) && ne <= 0)
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: %s needs %s.expert_count", name, hp->arch,
                       hp->arch);
    if (ne > 0 && !(f->flags & (F_MOE | F_MOE_OPT)))
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: experts in a %s model are not implemented",
                       name, hp->arch);
    if (ne <= 0) return QG_OK;
    if (ne > 1024 || nu <= 0 || nu > ne || nu > 64)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: expert_used_count %lld must be in 1..expert_count %lld (and at most "
                       "64)",
                       name, (long long)nu, (long long)ne);
    /* llama.cpp: Mixtral's experts are feed_forward_length wide; qwen2moe's
     * and qwen3moe's default to feed_forward_length / expert_used_count */
    int64_t ef_def = strcmp(hp->arch, "llama") ? hp->ffn / nu : hp->ffn;
    if (get_int(g, hp->arch, "expert_feed_forward_length", ef_def, &ef) || ef <= 0 ||
        ef > (1 << 24) || get_int(g, hp->arch, "expert_shared_feed_forward_length", 0, &sf) ||
        sf < 0 || sf > (1 << 24))
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: bad expert feed-forward lengths", name);
    hp->n_expert = (int)ne;
    hp->n_expert_used = (int)nu;
    hp->expert_ffn = (int)ef;
    hp->shexp_ffn = (int)sf;
    /* Mixtral and qwen3moe renormalise the chosen weights; qwen2moe keeps them */
    hp->moe_norm_w = strcmp(hp->arch, "qwen2moe") != 0;
    int64_t gating = 1;
    double ws = 0;
    if (get_int(g, hp->arch, "expert_gating_func", 1, &gating) || gating != 1)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: expert gating other than softmax is not implemented", name);
    if (get_float(g, hp->arch, "expert_weights_scale", 0, &ws) || !isfinite(ws))
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: bad expert_weights_scale", name);
    hp->moe_w_scale = ws != 0 ? (float)ws : 1.0f;
    return QG_OK;
}

/* windows, caps, scales */
static int read_attention(const struct gguf *g, const char *name, const struct family *f,
                          struct llama_hparams *hp, char *err, size_t errlen)
{
    int64_t win = 0, pat = f->swa_pattern, causal = 1;
    char key[128];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", hp->arch);
    int64_t ki = gguf_find_key(g, key);
    if (ki >= 0 && gguf_kv_type(g, ki) == GGUF_ARR)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: a per-layer %s array is not implemented (a number is)", name, key);
    if (get_int(g, hp->arch, "attention.sliding_window", f->swa_window, &win) || win < 0 ||
        win > (1 << 24) || get_int(g, hp->arch, "attention.sliding_window_pattern", pat, &pat) ||
        pat < 0 || pat > 1024)
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: bad sliding-window keys", name);
    if (get_int(g, hp->arch, "attention.causal", 1, &causal) || causal != 1)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: non-causal attention is not implemented (not a language model?)", name);
    hp->swa_window = (f->flags & F_NO_SWA) ? 0 : (int)win;
    hp->swa_pattern = (int)pat;
    /* a checkpoint directory's window where transformers applies one and
     * llama.cpp does not (Phi-3, Starcoder2): every layer */
    int64_t hw;
    int hrc = gguf_get_int(g, "qgate.hf.sliding_window", &hw);
    if (hrc != QG_OK && hrc != QG_ERR_NOTFOUND)
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: bad qgate.hf.sliding_window", name);
    if (hrc == QG_OK && (hw < 0 || hw > (1 << 24)))
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: bad qgate.hf.sliding_window", name);
    if (hrc == QG_OK) hp->swa_window = (int)hw, hp->swa_pattern = 0;
    double sa, sf, scale, base_swa;
    if (get_float(g, hp->arch, "attn_logit_softcapping", f->attn_cap, &sa) ||
        get_float(g, hp->arch, "final_logit_softcapping", f->final_cap, &sf) || !(sa >= 0) ||
        !(sf >= 0) || get_float(g, hp->arch, "attention.scale", 0, &scale) || !(scale >= 0))
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: bad soft-capping or attention.scale", name);
    if (!strcmp(hp->arch, "gemma3")) sa = 0; /* llama.cpp reads no attention cap for gemma3 */
    hp->attn_softcap = (float)sa;
    hp->final_softcap = (float)sf;
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    if (f->big_scale_layers &&
        hp->n_layers == f->big_scale_layers) /* Gemma 27B: llama.cpp's rule */
        hp->attn_scale = 1.0f / sqrtf((float)(hp->dim / hp->n_heads));
    if (scale > 0) hp->attn_scale = (float)scale;
    /* the windowed layers' RoPE: their own base (gemma3: default 10000) and no scaling, or the
     * global layers' */
    if (get_float(g, hp->arch, "rope.freq_base_swa", f->own_swa_rope ? 10000.0 : hp->rope_theta,
                  &base_swa) ||
        !(base_swa > 0))
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: bad rope.freq_base_swa", name);
    hp->rope_theta_swa = (float)base_swa;
    hp->rope_scale_swa = f->own_swa_rope ? 1.0f : hp->rope_freq_scale;
    return QG_OK;
}

int lm_read_hparams(const struct gguf *g, const char *name, struct llama_hparams *hp, char *err,
                    size_t errlen)
{
    const char *a;
    size_t al;
    memset(hp, 0, sizeof *hp);
    if (gguf_get_str(g, "general.architecture", &a, &al) != QG_OK)
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: general.architecture is missing", name);
    const struct family *f = family_find(a, al);
    if (!f)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: architecture '%.*s' is not supported (qgate runs %s)", name,
                       (int)(al < 32 ? al : 32), a, llama_families());
    snprintf(hp->arch, sizeof hp->arch, "%s", f->name);
    int rc = check_keys(g, name, hp->arch, err, errlen);
    if (!rc) rc = read_sizes(g, name, hp, err, errlen);
    if (!rc) rc = read_rope(g, name, f, hp, err, errlen);
    if (!rc) rc = read_moe(g, name, f, hp, err, errlen);
    if (!rc) rc = read_attention(g, name, f, hp, err, errlen);
    if (rc) return rc;
    hp->rope_neox = (f->flags & F_NEOX) != 0;
    int64_t neox;
    if (gguf_get_int(g, "qgate.rope_neox", &neox) == QG_OK) /* a checkpoint directory's rows */
        hp->rope_neox = neox != 0;
    hp->qkv_bias = (f->flags & F_QKV_BIAS) != 0;
    hp->norm = (f->flags & F_LAYERNORM) ? LLAMA_NORM_LAYER : LLAMA_NORM_RMS;
    hp->ffn_act = (f->flags & F_GEGLU)  ? LLAMA_FFN_GEGLU
                  : (f->flags & F_GELU) ? LLAMA_FFN_GELU
                                        : LLAMA_FFN_SWIGLU;
    hp->post_norms = (f->flags & F_POST_NORMS) != 0;
    hp->qk_norm = (f->flags & F_QK_NORM) != 0;
    hp->q_prescale = (f->flags & F_Q_PRESCALE) != 0;
    hp->embd_scale = (f->flags & F_EMBD_SCALE) ? sqrtf((float)hp->dim) : 1.0f;
    double d;
    const char *ek = hp->norm == LLAMA_NORM_LAYER ? "attention.layer_norm_epsilon"
                                                  : "attention.layer_norm_rms_epsilon";
    if (get_float(g, hp->arch, ek, -1, &d) || !(d > 0 && d < 1))
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: %s.%s is missing or not in (0, 1)", name,
                       hp->arch, ek);
    hp->rms_eps = (float)d;
    return QG_OK;
}
