/* hf_model — Hugging Face checkpoint directories as GGUF-shaped models
 * (see the header); hf_quant.c dequantizes the quantized projections. */
#include "backends/hf_model.h"
#include "backends/gguf.h"
#include "backends/gguf_write.h"
#include "backends/ggml_types.h"
#include "backends/hf_quant.h"
#include "backends/hf_tokenizer.h"
#include "backends/safetensors.h"
#include "core/status.h"
#include "core/util.h"
#include "datasets/hash.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { HF_MAX_FILES = 256 };

int hf_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* config.json's sizes as the family reads them */
struct hf_cfg {
    const char *arch; /* the GGUF architecture */
    int64_t dim, layers, heads, kv_heads, head_dim, ffn, ctx, vocab;
    double eps, theta;
    int tied, neox_order; /* neox_order: q/k rows in HF's rotate-half order */
    int64_t window;       /* Mistral's sliding_window (0: none) */
    int llama3;           /* Llama 3.1 RoPE scaling: factor, low, high, original context */
    double l3[4];
};

static double num(const cJSON *c, const char *k, double def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, k);
    return cJSON_IsNumber(v) ? v->valuedouble : def;
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

/* Llama 3.1's RoPE scaling (rope_scaling, or transformers 5's
 * rope_parameters, with rope_type "llama3"): 1 when set, read into h */
static int llama3_scaling(const cJSON *c, struct hf_cfg *h)
{
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(c, "rope_scaling");
    if (!rs || cJSON_IsNull(rs)) rs = cJSON_GetObjectItemCaseSensitive(c, "rope_parameters");
    const char *t = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rs, "rope_type"));
    if (!t) t = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rs, "type"));
    if (!t || strcmp(t, "llama3") || strcmp(h->arch, "llama")) return 0;
    h->l3[0] = num(rs, "factor", 8.0), h->l3[1] = num(rs, "low_freq_factor", 1.0);
    h->l3[2] = num(rs, "high_freq_factor", 4.0);
    h->l3[3] = num(rs, "original_max_position_embeddings", 8192.0);
    return h->l3[0] > 0 && h->l3[1] > 0 && h->l3[2] > h->l3[1] && h->l3[3] > 0;
}

/* What a loaded checkpoint owns: its files and the dequantized copies. */
struct hf_owner {
    struct st_file *files[HF_MAX_FILES];
    unsigned char *used[HF_MAX_FILES]; /* per tensor of each file: read by the loader */
    int n_files;
    void **bufs;
    int n_bufs;
};

static void owner_free(void *p)
{
    struct hf_owner *o = p;
    if (!o) return;
    for (int i = 0; i < o->n_files; i++) {
        st_close(o->files[i]);
        free(o->used[i]);
    }
    for (int i = 0; i < o->n_bufs; i++)
        free(o->bufs[i]);
    free(o->bufs);
    free(o);
}

/* keeps buf until the model is closed; QG_OK or QG_ERR_NOMEM (buf freed) */
int hf_owner_keep(struct hf_owner *o, void *buf)
{
    void **g = realloc(o->bufs, (size_t)(o->n_bufs + 1) * sizeof *g);
    if (!g) {
        free(buf);
        return QG_ERR_NOMEM;
    }
    o->bufs = g;
    o->bufs[o->n_bufs++] = buf;
    return QG_OK;
}

const struct st_tensor *hf_find(const struct hf_owner *o, const char *name)
{
    for (int i = 0; i < o->n_files; i++) {
        const struct st_tensor *t = st_find(o->files[i], name);
        if (t) {
            o->used[i][t - st_tensor_at(o->files[i], 0)] = 1;
            return t;
        }
    }
    return NULL;
}

/* each tensor name in one place only; after loading, every tensor read (a
 * bias, a zero point or an input scale left over is something the engine
 * would ignore) */
static int check_tensors(const struct hf_owner *o, int after_load, char *err, size_t errlen)
{
    for (int i = 0; i < o->n_files; i++)
        for (int64_t k = 0; k < st_n_tensors(o->files[i]); k++) {
            const struct st_tensor *t = st_tensor_at(o->files[i], k);
            if (after_load && !o->used[i][k])
                return qg_errf(err, errlen, QG_ERR_DATA,
                               "tensor '%s' is not used by qgate's reading of this checkpoint "
                               "(refused rather than computed without it)",
                               t->name);
            for (int j = 0; !after_load && j <= i; j++) {
                const struct st_tensor *u = st_find(o->files[j], t->name);
                if (u && u != t)
                    return qg_errf(err, errlen, QG_ERR_DATA,
                                   "tensor '%s' is stored twice (the checkpoint is ambiguous)",
                                   t->name);
            }
        }
    return QG_OK;
}

static int add_file(struct hf_owner *o, const char *path, char *err, size_t errlen)
{
    int rc = st_open(path, &o->files[o->n_files], err, errlen);
    if (rc) return rc;
    int64_t n = st_n_tensors(o->files[o->n_files]);
    if (!(o->used[o->n_files] = calloc((size_t)n + 1, 1))) {
        st_close(o->files[o->n_files]);
        return QG_ERR_NOMEM;
    }
    o->n_files++;
    return QG_OK;
}

/* a size: a whole number in 1..2^24, else -1 (def when absent) */
static int64_t whole(const cJSON *c, const char *k, int64_t def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, k);
    if (!v) return def;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 1 && v->valuedouble <= (1 << 24)) ||
        v->valuedouble != (double)(int64_t)v->valuedouble)
        return -1;
    return (int64_t)v->valuedouble;
}

/* what config.json asks that qgate does not implement: refused by name */
static int check_features(const cJSON *c, const char *file, const struct hf_cfg *h, char *err,
                          size_t errlen)
{
    const char *act = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "hidden_act")),
               *rt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                   cJSON_GetObjectItemCaseSensitive(c, "rope_parameters"), "rope_type"));
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(c, "rope_scaling");
    const char *what = NULL;
    if (h->llama3)
        ; /* Llama 3.1's scaling: as the rope_freqs tensor llama.cpp's converter writes */
    else if (rs && !cJSON_IsNull(rs))
        what = "rope_scaling";
    else if (rt && strcmp(rt, "default"))
        what = "rope_parameters.rope_type";
    else if (act && strcmp(act, "silu"))
        what = "hidden_act";
    else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "attention_bias")) &&
             strcmp(h->arch, "qwen2"))
        what = "attention_bias";
    else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "mlp_bias")))
        what = "mlp_bias";
    else if (num(c, "partial_rotary_factor", 1.0) != 1.0)
        what = "partial_rotary_factor";
    else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "use_sliding_window")))
        what = "use_sliding_window";
    else if (h->window < 0)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: sliding_window must be null or a whole number in 1..2^24", file);
    if (what)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: %s is set: not implemented for checkpoint directories", file, what);
    if (!(h->eps > 0 && h->eps < 1) || !(h->theta > 0))
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: rms_norm_eps or rope_theta out of range",
                       file);
    return QG_OK;
}

static int read_cfg(const cJSON *c, const char *file, struct hf_cfg *h, char *err, size_t errlen)
{
    static const struct {
        const char *hf, *arch;
        int neox_order;
    } archs[] = {{"LlamaForCausalLM", "llama", 1},
                 {"MistralForCausalLM", "llama", 1},
                 {"Qwen2ForCausalLM", "qwen2", 0},
                 {"Qwen3ForCausalLM", "qwen3", 0}};
    const cJSON *a = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(c, "architectures"), 0);
    memset(h, 0, sizeof *h);
    for (size_t i = 0; cJSON_IsString(a) && i < sizeof archs / sizeof *archs; i++)
        if (!strcmp(a->valuestring, archs[i].hf))
            h->arch = archs[i].arch, h->neox_order = archs[i].neox_order;
    if (!h->arch)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: architecture '%.60s' is not supported in a checkpoint directory "
                       "(qgate reads LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
                       "Qwen3ForCausalLM)",
                       file, cJSON_IsString(a) ? a->valuestring : "?");
    h->dim = whole(c, "hidden_size", -1);
    h->layers = whole(c, "num_hidden_layers", -1);
    h->heads = whole(c, "num_attention_heads", -1);
    h->kv_heads = whole(c, "num_key_value_heads", h->heads);
    h->head_dim = whole(c, "head_dim", h->heads > 0 && h->dim > 0 ? h->dim / h->heads : -1);
    h->ffn = whole(c, "intermediate_size", -1);
    h->ctx = whole(c, "max_position_embeddings", -1);
    h->vocab = whole(c, "vocab_size", 0);
    h->eps = num(c, "rms_norm_eps", 0);
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(c, "rope_parameters");
    h->theta = num(c, "rope_theta", num(rp, "rope_theta", 10000.0));
    h->tied = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "tie_word_embeddings"));
    int64_t v[] = {h->dim, h->layers, h->heads, h->kv_heads, h->head_dim, h->ffn, h->ctx};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        if (v[i] <= 0 || v[i] > (1 << 24))
            return qg_errf(err, errlen, QG_ERR_DATA,
                           "%s: hidden_size, num_hidden_layers, num_attention_heads, "
                           "intermediate_size and max_position_embeddings must be whole "
                           "numbers in 1..2^24",
                           file);
    h->llama3 = llama3_scaling(c, h);
    /* Mistral's window (llama family: every layer, a query sees the window's
     * keys up to itself, as transformers' mask); transformers' Llama ignores
     * the key, Qwen's window needs use_sliding_window (refused below) */
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(c, "sliding_window");
    if (!strcmp(a->valuestring, "MistralForCausalLM") && sw && !cJSON_IsNull(sw))
        h->window = whole(c, "sliding_window", 0);
    if (h->window >= h->ctx) h->window = 0; /* never reached */
    if (h->heads % h->kv_heads)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: num_key_value_heads must divide num_attention_heads", file);
    return check_features(c, file, h, err, errlen);
}

/* the GGUF keys of the architecture */
static int write_arch_keys(struct gguf_writer *w, const struct hf_cfg *h, const char *name)
{
    char key[128];
    int rc = gguf_writer_set_str(w, "general.architecture", h->arch);
    if (!rc) rc = gguf_writer_set_str(w, "general.name", name);
#define U32(suffix, v)                                                                             \
    if (!rc) {                                                                                     \
        snprintf(key, sizeof key, "%s." suffix, h->arch);                                          \
        rc = gguf_writer_set_u32(w, key, (uint32_t)(v));                                           \
    }
    U32("context_length", h->ctx);
    U32("embedding_length", h->dim);
    U32("block_count", h->layers);
    U32("feed_forward_length", h->ffn);
    U32("attention.head_count", h->heads);
    U32("attention.head_count_kv", h->kv_heads);
    U32("attention.key_length", h->head_dim);
    U32("attention.value_length", h->head_dim);
#undef U32
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", h->arch);
    if (!rc) rc = gguf_writer_set_f32(w, key, (float)h->eps);
    snprintf(key, sizeof key, "%s.rope.freq_base", h->arch);
    if (!rc) rc = gguf_writer_set_f32(w, key, (float)h->theta);
    if (!rc && h->neox_order) rc = gguf_writer_set_bool(w, "qgate.rope_neox", 1);
    snprintf(key, sizeof key, "%s.attention.sliding_window", h->arch);
    if (!rc && h->window > 0) rc = gguf_writer_set_u32(w, key, (uint32_t)h->window);
    return rc;
}

/* the .safetensors files: those the index names, else model.safetensors */
static int open_files(const char *dir, struct hf_owner *o, char *err, size_t errlen)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (access(path, F_OK) != 0) {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        int rc = add_file(o, path, err, errlen);
        return rc ? rc : check_tensors(o, 0, err, errlen);
    }
    char *text = NULL;
    size_t n = 0;
    int rc = qg_read_file(path, 64 << 20, &text, &n, err, errlen);
    if (rc) return rc;
    cJSON *j = cJSON_ParseWithLength(text, n), *e;
    free(text);
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(j, "weight_map");
    if (!cJSON_IsObject(map)) rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: no weight_map", path);
    char seen[HF_MAX_FILES][256];
    int ns = 0;
    cJSON_ArrayForEach(e, map)
    {
        if (rc) break;
        const char *f = cJSON_IsString(e) ? e->valuestring : NULL;
        size_t fl = f ? strlen(f) : 0;
        if (!f || strchr(f, '/') || fl > 255 || fl <= 12 || strcmp(f + fl - 12, ".safetensors")) {
            rc = qg_errf(err, errlen, QG_ERR_DATA,
                         "%s: weight_map['%.60s'] is not a .safetensors file in the directory",
                         path, e->string);
            break;
        }
        int k = 0;
        while (k < ns && strcmp(seen[k], f))
            k++;
        if (k < ns) continue;
        if (ns == HF_MAX_FILES) {
            rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: more than %d shards", path, HF_MAX_FILES);
            break;
        }
        snprintf(seen[ns++], sizeof seen[0], "%s", f);
        char fp[4400];
        snprintf(fp, sizeof fp, "%s/%s", dir, f);
        rc = add_file(o, fp, err, errlen);
    }
    cJSON_Delete(j);
    return rc ? rc : check_tensors(o, 0, err, errlen);
}

/* a stored tensor as the GGUF tensor `gname` (F32/F16/BF16 in place; an
 * unaligned one copied) of ne0 x ne1 */
static int plain(struct hf_owner *o, const char *hf, const char *gname, int64_t ne0, int64_t ne1,
                 struct gguf_tensor *t, char *err, size_t errlen)
{
    const struct st_tensor *s = hf_find(o, hf);
    if (!s) return qg_errf(err, errlen, QG_ERR_DATA, "tensor '%s' is missing", hf);
    int type = s->dtype == ST_F32    ? GGML_F32
               : s->dtype == ST_F16  ? GGML_F16
               : s->dtype == ST_BF16 ? GGML_BF16
                                     : -1;
    if (type < 0)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "tensor '%s' is %s without a quantization scheme that explains it", hf,
                       st_dtype_name(s->dtype));
    int two = ne1 > 1;
    if (s->n_dims != 1 + two || s->shape[0] != (two ? ne1 : ne0) || (two && s->shape[1] != ne0))
        return qg_errf(err, errlen, QG_ERR_DATA, "tensor '%s' is not of shape [%lld%s%lld]", hf,
                       (long long)(two ? ne1 : ne0), two ? ", " : "", (long long)(two ? ne0 : 0));
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", gname);
    t->type = (uint32_t)type;
    t->n_dims = ne1 > 1 ? 2 : 1;
    t->ne[0] = ne0, t->ne[1] = ne1, t->ne[2] = t->ne[3] = 1;
    t->nbytes = s->nbytes;
    t->data = s->data;
    if ((uintptr_t)s->data % st_dtype_size(s->dtype)) { /* the kernels read aligned values */
        void *c = malloc(s->nbytes ? s->nbytes : 1);
        if (!c || hf_owner_keep(o, c)) return QG_ERR_NOMEM;
        memcpy(c, s->data, s->nbytes);
        t->data = c;
    }
    return QG_OK;
}

/* a projection: stored as is, or dequantized to f32 */
static int linear(struct hf_owner *o, const struct hf_quant *q, const char *prefix,
                  const char *gname, int64_t in, int64_t out, struct gguf_tensor *t, char *err,
                  size_t errlen)
{
    char hf[512];
    snprintf(hf, sizeof hf, "%s.weight", prefix);
    const struct st_tensor *s = hf_find(o, hf);
    if (q->scheme == HF_PLAIN ||
        (s && (s->dtype == ST_F32 || s->dtype == ST_F16 || s->dtype == ST_BF16)))
        return plain(o, hf, gname, in, out, t, err, errlen);
    float *w;
    int rc = hf_quant_linear(o, q, prefix, out, in, &w, err, errlen);
    if (rc || (rc = hf_owner_keep(o, w))) return rc;
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", gname);
    t->type = GGML_F32;
    t->n_dims = 2;
    t->ne[0] = in, t->ne[1] = out, t->ne[2] = t->ne[3] = 1;
    t->nbytes = (uint64_t)in * (uint64_t)out * 4;
    t->data = w;
    return QG_OK;
}

/* layer l's tensors appended to t[*n] */
static int layer_tensors(struct hf_owner *o, const struct hf_cfg *h, const struct hf_quant *q,
                         int l, struct gguf_tensor *t, int *n, char *err, size_t errlen)
{
    const int64_t d = h->dim, qd = h->heads * h->head_dim, kvd = h->kv_heads * h->head_dim;
    char p[256], hf[320], gn[GGUF_MAX_NAME + 1];
    int rc = QG_OK;
    static const struct {
        const char *hf, *gg;
        int rows; /* 0 q, 1 kv, 2 dim, 3 ffn */
        int cols;
    } lin[] = {{"self_attn.q_proj", "attn_q", 0, 2}, {"self_attn.k_proj", "attn_k", 1, 2},
               {"self_attn.v_proj", "attn_v", 1, 2}, {"self_attn.o_proj", "attn_output", 2, 0},
               {"mlp.gate_proj", "ffn_gate", 3, 2},  {"mlp.up_proj", "ffn_up", 3, 2},
               {"mlp.down_proj", "ffn_down", 2, 3}};
    const int64_t size[4] = {qd, kvd, d, h->ffn};
    for (size_t i = 0; i < sizeof lin / sizeof *lin && !rc; i++) {
        snprintf(p, sizeof p, "model.layers.%d.%s", l, lin[i].hf);
        snprintf(gn, sizeof gn, "blk.%d.%s.weight", l, lin[i].gg);
        rc = linear(o, q, p, gn, size[lin[i].cols], size[lin[i].rows], &t[(*n)++], err, errlen);
        if (!rc && !strcmp(h->arch, "qwen2") && i < 3) { /* q/k/v biases */
            snprintf(hf, sizeof hf, "%s.bias", p);
            snprintf(gn, sizeof gn, "blk.%d.%s.bias", l, lin[i].gg);
            rc = plain(o, hf, gn, size[lin[i].rows], 1, &t[(*n)++], err, errlen);
        }
    }
    static const struct {
        const char *hf, *gg;
        int qk;
    } vec[] = {{"input_layernorm", "attn_norm", 0},
               {"post_attention_layernorm", "ffn_norm", 0},
               {"self_attn.q_norm", "attn_q_norm", 1},
               {"self_attn.k_norm", "attn_k_norm", 1}};
    for (size_t i = 0; i < sizeof vec / sizeof *vec && !rc; i++) {
        if (vec[i].qk && strcmp(h->arch, "qwen3")) continue;
        snprintf(hf, sizeof hf, "model.layers.%d.%s.weight", l, vec[i].hf);
        snprintf(gn, sizeof gn, "blk.%d.%s.weight", l, vec[i].gg);
        rc = plain(o, hf, gn, vec[i].qk ? h->head_dim : d, 1, &t[(*n)++], err, errlen);
    }
    return rc;
}

static int all_tensors(struct hf_owner *o, const struct hf_cfg *h, const struct hf_quant *q,
                       int64_t n_vocab, struct gguf_tensor **out, int *n, char *err, size_t errlen)
{
    struct gguf_tensor *t = calloc((size_t)(h->layers * 16 + 5), sizeof *t);
    if (!t) return QG_ERR_NOMEM;
    *n = 0;
    int rc = plain(o, "model.embed_tokens.weight", "token_embd.weight", h->dim, n_vocab, &t[(*n)++],
                   err, errlen);
    if (!rc)
        rc =
            plain(o, "model.norm.weight", "output_norm.weight", h->dim, 1, &t[(*n)++], err, errlen);
    if (!rc && !h->tied)
        rc = plain(o, "lm_head.weight", "output.weight", h->dim, n_vocab, &t[(*n)++], err, errlen);
    for (int l = 0; l < h->layers && !rc; l++)
        rc = layer_tensors(o, h, q, l, t, n, err, errlen);
    float *rf = !rc && h->llama3 ? malloc((size_t)h->head_dim / 2 * sizeof *rf + 4) : NULL;
    if (!rc && h->llama3 && (!rf || hf_owner_keep(o, rf))) rc = QG_ERR_NOMEM;
    if (!rc && h->llama3) { /* the converter's rope_freqs.weight */
        hf_llama3_factors(h->theta, (int)h->head_dim, h->l3, rf);
        struct gguf_tensor *r = &t[(*n)++];
        memset(r, 0, sizeof *r);
        snprintf(r->name, sizeof r->name, "rope_freqs.weight");
        r->type = GGML_F32, r->n_dims = 1;
        r->ne[0] = h->head_dim / 2, r->ne[1] = r->ne[2] = r->ne[3] = 1;
        r->nbytes = (uint64_t)(h->head_dim / 2) * 4, r->data = rf;
    }
    if (rc) {
        free(t);
        return rc;
    }
    *out = t;
    return QG_OK;
}

static cJSON *read_config(const char *dir, char *file, size_t fn, int *rc, char *err, size_t errlen)
{
    snprintf(file, fn, "%s/config.json", dir);
    if (access(file, F_OK) != 0) {
        *rc = qg_errf(err, errlen, QG_ERR_NOINPUT,
                      "%s: a directory without config.json (a model is a .gguf file or a Hugging "
                      "Face checkpoint directory)",
                      dir);
        return NULL;
    }
    char *text = NULL;
    size_t n = 0;
    if ((*rc = qg_read_file(file, 16 << 20, &text, &n, err, errlen))) return NULL;
    cJSON *c = cJSON_ParseWithLength(text, n);
    free(text);
    if (!cJSON_IsObject(c)) {
        cJSON_Delete(c);
        *rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: not a JSON object", file);
        return NULL;
    }
    return c;
}

/* metadata image: the architecture's keys and the tokenizer's */
static int metadata(const char *dir, const struct hf_cfg *h, const struct hf_quant *q, int64_t rows,
                    uint8_t **buf, size_t *size, int *n_vocab, char *err, size_t errlen)
{
    struct gguf_writer *w = gguf_writer_new();
    if (!w) return QG_ERR_NOMEM;
    const char *base = strrchr(dir, '/');
    int rc = write_arch_keys(w, h, base && base[1] ? base + 1 : dir);
    if (!rc)
        rc = gguf_writer_set_str(w, "qgate.hf.quantization",
                                 q->scheme ? q->label : "none (weights as stored)");
    if (!rc && q->act_fp8_dynamic) /* the declared inputs of the quantized projections */
        rc = gguf_writer_set_str(w, "qgate.hf.act", "fp8_e4m3");
    if (!rc) rc = hf_tokenizer_keys(dir, w, (int)rows, n_vocab, err, errlen);
    if (!rc) rc = gguf_writer_to_memory(w, buf, size);
    gguf_writer_free(w);
    return rc;
}

int hf_open(const char *dir, struct gguf **out, char *err, size_t errlen)
{
    *out = NULL;
    err[0] = '\0';
    char file[4200];
    int rc, n = 0, n_vocab = 0;
    cJSON *c = read_config(dir, file, sizeof file, &rc, err, errlen);
    if (!c) return rc;
    struct hf_cfg h;
    struct hf_quant q;
    struct hf_owner *o = calloc(1, sizeof *o);
    struct gguf_tensor *t = NULL;
    uint8_t *buf = NULL;
    size_t size = 0;
    rc = o ? read_cfg(c, file, &h, err, errlen) : QG_ERR_NOMEM;
    if (!rc) rc = hf_quant_read(c, file, &q, err, errlen);
    cJSON_Delete(c);
    if (!rc) rc = open_files(dir, o, err, errlen);
    const struct st_tensor *emb = o && !rc ? hf_find(o, "model.embed_tokens.weight") : NULL;
    int64_t rows = emb && emb->n_dims == 2 ? emb->shape[0] : -1;
    if (!rc && (rows <= 0 || rows > (1 << 24)))
        rc = qg_errf(err, errlen, QG_ERR_DATA,
                     "model.embed_tokens.weight is missing or not a [vocabulary, hidden] matrix");
    if (!rc) rc = metadata(dir, &h, &q, rows, &buf, &size, &n_vocab, err, errlen);
    if (!rc) rc = all_tensors(o, &h, &q, rows, &t, &n, err, errlen);
    if (!rc) rc = check_tensors(o, 1, err, errlen);
    struct gguf *g = NULL;
    if (!rc) rc = gguf_open_memory(buf, size, dir, &g, err, errlen);
    if (!rc) rc = gguf_attach(g, buf, t, n, owner_free, o);
    if (rc) {
        gguf_close(g);
        free(buf);
        owner_free(o);
    }
    free(t);
    if (rc == QG_ERR_NOMEM && !err[0])
        qg_errf(err, errlen, rc, "%s: out of memory", dir);
    else if (rc == QG_ERR_DATA && strncmp(err, dir, strlen(dir))) {
        char tmp[1024];
        snprintf(tmp, sizeof tmp, "%s", err);
        qg_errf(err, errlen, rc, "%s: %s", dir, tmp);
    }
    if (!rc) *out = g;
    return rc;
}

int model_open(const char *path, struct gguf **out, char *err, size_t errlen)
{
    return hf_is_dir(path) ? hf_open(path, out, err, errlen) : gguf_open(path, out, err, errlen);
}

int64_t hf_stored_bytes(const char *dir, int *n_files)
{
    DIR *d = opendir(dir);
    int64_t total = 0;
    *n_files = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        struct stat st;
        char p[4400];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (l > 12 && !strcmp(e->d_name + l - 12, ".safetensors") && stat(p, &st) == 0) {
            total += (int64_t)st.st_size;
            (*n_files)++;
        }
    }
    if (d) closedir(d);
    return total;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int hf_hash(const char *dir, char sha[65], char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    if (!d) return qg_errf(err, errlen, QG_ERR_NOINPUT, "%s: cannot list the directory", dir);
    char *names[HF_MAX_FILES + 8];
    int n = 0, rc = QG_OK;
    struct dirent *e;
    while (!rc && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        int want = (l > 12 && !strcmp(e->d_name + l - 12, ".safetensors")) ||
                   (l > 5 && !strcmp(e->d_name + l - 5, ".json"));
        if (!want) continue;
        if (n == HF_MAX_FILES + 8)
            rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: more than %d checkpoint files", dir,
                         HF_MAX_FILES + 8);
        else if (!(names[n] = qg_strdup(e->d_name)))
            rc = qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
        else
            n++;
    }
    closedir(d);
    if (!rc) qsort(names, (size_t)n, sizeof *names, cmp_str);
    struct sbuf all;
    sbuf_init(&all, 0);
    for (int i = 0; i < n && !rc; i++) {
        char p[4400], h[65];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        rc = hash_sha256_file(p, h, err, errlen);
        if (!rc) sbuf_printf(&all, "%s%c%s\n", names[i], 0, h);
    }
    if (!rc) rc = hash_sha256_mem(sbuf_str(&all), all.len, sha);
    sbuf_release(&all);
    for (int i = 0; i < n; i++)
        free(names[i]);
    return rc;
}
