/* test_hf_arch — checkpoint directories of every family the engine runs:
 * a synthetic GGUF of the family is written back as the Hugging Face
 * checkpoint llama.cpp's converter would have read (tensor names, q/k row
 * order, gemma's norm - 1, experts one per tensor, config.json), and the
 * directory must give the GGUF's logits; transformers' log-probs on these
 * directories are recorded figures. */
#include "backends/dequant.h"
#include "backends/ggml_types.h"
#include "backends/gguf.h"
#include "backends/hf_model.h"
#include "backends/llama.h"
#include "backends/simfmt.h"
#include "backends/synth.h"
#include "core/status.h"
#include "core/util.h"
#include "tests/test.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* how the test checkpoints store projections */
enum { Q_NONE = 0, Q_CT_FP8, Q_MO_NVFP4, Q_MO_FP8 };

/* the input_scale written with ModelOpt projections (a calibration's
 * amax / (6 x 448) for activations up to 8) */
static const float MO_INPUT_SCALE = 8.0f / (6.0f * 448.0f);
static float mo_input_scale = 8.0f / (6.0f * 448.0f); /* what gguf_to_hf writes */

/* the input_scale written for projection `name` ("....weight"): the base
 * times 1, 1.25 or 1.5 by its name, so that projections differ */
static float mo_scale_of(const char *name, float base)
{
    unsigned sum = 0;
    for (const char *c = name; *c; c++)
        sum += (unsigned char)*c;
    return base * (1.0f + 0.25f * (float)(sum % 3));
}

/* a safetensors file being written; quant: projections as compressed-tensors
 * FP8 E4M3 with one f32 scale per output channel, or as ModelOpt exports
 * NVFP4 or FP8 (with input_scale) */
struct stw {
    cJSON *hdr;
    uint8_t *data;
    size_t n;
    int quant;
    float input_scale;
};

static void st_put(struct stw *w, const char *name, const char *dtype, int64_t d0, int64_t d1,
                   const void *v, size_t nb)
{
    cJSON *e = cJSON_AddObjectToObject(w->hdr, name), *sh = cJSON_AddArrayToObject(e, "shape"),
          *of = cJSON_AddArrayToObject(e, "data_offsets");
    cJSON_AddStringToObject(e, "dtype", dtype);
    if (d0 >= 0) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)d0)); /* d0 < 0: [] */
    if (d1) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)d1));
    cJSON_AddItemToArray(of, cJSON_CreateNumber((double)w->n));
    cJSON_AddItemToArray(of, cJSON_CreateNumber((double)(w->n + nb)));
    w->data = realloc(w->data, w->n + nb);
    memcpy(w->data + w->n, v, nb);
    w->n += nb;
}

/* an f32 tensor of shape [d0] or [d0, d1]; a projection ("*.weight" of a
 * Linear) in FP8 when w->fp8 */
/* "<name less .weight>.<suffix>" */
static void sibling(char *out, size_t n, const char *name, const char *suffix)
{
    snprintf(out, n, "%.*s.%s", (int)(strlen(name) - strlen(".weight")), name, suffix);
}

/* ModelOpt NVFP4 (its NVFP4QTensor.quantize: global amax / (6 x 448), FP8
 * block scales, E2M1 codes low nibble first) */
static void st_add_nvfp4(struct stw *w, const char *name, int64_t out, int64_t in, const float *v)
{
    float amax = 0, *s2 = malloc(sizeof *s2);
    for (int64_t i = 0; i < out * in; i++)
        amax = fmaxf(amax, fabsf(v[i]));
    *s2 = nvfp4_tensor_scale(amax);
    uint8_t *pk = calloc((size_t)(out * in / 2), 1), *sc = malloc((size_t)(out * in / 16)), c[16];
    for (int64_t b = 0; b < out * in / 16; b++) {
        nvfp4_block_encode(v + b * 16, 16, *s2, &sc[b], c);
        for (int k = 0; k < 16; k++)
            pk[(b * 16 + k) / 2] |= (uint8_t)(c[k] << (k % 2 ? 4 : 0));
    }
    char n[300];
    st_put(w, name, "U8", out, in / 2, pk, (size_t)(out * in / 2));
    sibling(n, sizeof n, name, "weight_scale");
    st_put(w, n, "F8_E4M3", out, in / 16, sc, (size_t)(out * in / 16));
    sibling(n, sizeof n, name, "weight_scale_2");
    st_put(w, n, "F32", -1, 0, s2, 4);
    free(pk), free(sc), free(s2);
}

/* FP8 E4M3 codes of v / scale with the scale per row (compressed-tensors)
 * or per tensor (ModelOpt) */
static void st_add_fp8(struct stw *w, const char *name, int64_t out, int64_t in, const float *v)
{
    int per_row = w->quant == Q_CT_FP8;
    uint8_t *q = malloc((size_t)(out * in));
    float *sc = calloc((size_t)out, sizeof *sc);
    for (int64_t i = 0; i < out * in; i++)
        sc[per_row ? i / in : 0] = fmaxf(sc[per_row ? i / in : 0], fabsf(v[i]));
    for (int64_t r = 0; r < (per_row ? out : 1); r++)
        sc[r] = sc[r] > 0 ? sc[r] / 448.0f : 1.0f;
    for (int64_t i = 0; i < out * in; i++)
        q[i] = fp8_e4m3_from_f32(v[i] / sc[per_row ? i / in : 0]);
    char n[300];
    st_put(w, name, "F8_E4M3", out, in, q, (size_t)(out * in));
    sibling(n, sizeof n, name, "weight_scale");
    st_put(w, n, "F32", per_row ? out : -1, per_row ? 1 : 0, sc, (size_t)(per_row ? out : 1) * 4);
    free(q);
    free(sc);
}

/* an f32 tensor of shape [d0] or [d0, d1]; a projection ("*.weight" of a
 * Linear) quantized as w->quant says */
static void st_add(struct stw *w, const char *name, int64_t d0, int64_t d1, const float *v,
                   int linear)
{
    if (!w->quant || !linear) {
        st_put(w, name, "F32", d0, d1, v, (size_t)(d0 * (d1 ? d1 : 1)) * 4);
        return;
    }
    if (w->quant == Q_MO_NVFP4)
        st_add_nvfp4(w, name, d0, d1, v);
    else
        st_add_fp8(w, name, d0, d1, v);
    if (w->quant == Q_MO_NVFP4 || w->quant == Q_MO_FP8) {
        char n[300];
        float is = mo_scale_of(name, w->input_scale);
        sibling(n, sizeof n, name, "input_scale");
        st_put(w, n, "F32", -1, 0, &is, 4);
    }
}

static int st_save(struct stw *w, const char *path)
{
    char *hs = cJSON_PrintUnformatted(w->hdr);
    size_t hl = strlen(hs), pad = (8 - hl % 8) % 8, total = 8 + hl + pad + w->n;
    uint8_t *img = malloc(total);
    for (int i = 0; i < 8; i++)
        img[i] = (uint8_t)((uint64_t)(hl + pad) >> (8 * i));
    memcpy(img + 8, hs, hl);
    memset(img + 8 + hl, ' ', pad);
    memcpy(img + 8 + hl + pad, w->data, w->n);
    int rc = t_write_file(path, img, total);
    free(img);
    free(hs);
    return rc;
}

static int64_t key_int(const struct gguf *g, const char *arch, const char *sfx, int64_t def)
{
    char k[128];
    int64_t v;
    snprintf(k, sizeof k, "%s.%s", arch, sfx);
    return gguf_get_int(g, k, &v) == QG_OK ? v : def;
}

static double key_float(const struct gguf *g, const char *arch, const char *sfx, double def)
{
    char k[128];
    double v;
    snprintf(k, sizeof k, "%s.%s", arch, sfx);
    return gguf_get_float(g, k, &v) == QG_OK ? v : def;
}

/* the HF name of a GGUF tensor suffix in a family; NULL: not stored */
static const char *hf_suffix(const char *arch, const char *s)
{
    int gemma23 = !strncmp(arch, "gemma", 5) && arch[5], llama = !strcmp(arch, "llama"),
        sc = !strcmp(arch, "starcoder2");
    static const char *const map[][2] = {
        {"attn_norm", "input_layernorm"},
        {"attn_q", "self_attn.q_proj"},
        {"attn_k", "self_attn.k_proj"},
        {"attn_v", "self_attn.v_proj"},
        {"attn_qkv", "self_attn.qkv_proj"},
        {"attn_output", "self_attn.o_proj"},
        {"attn_q_norm", "self_attn.q_norm"},
        {"attn_k_norm", "self_attn.k_norm"},
        {"post_attention_norm", "post_attention_layernorm"},
        {"post_ffw_norm", "post_feedforward_layernorm"},
        {"ffn_gate", "mlp.gate_proj"},
        {"ffn_down", "mlp.down_proj"},
        {"ffn_gate_shexp", "mlp.shared_expert.gate_proj"},
        {"ffn_up_shexp", "mlp.shared_expert.up_proj"},
        {"ffn_down_shexp", "mlp.shared_expert.down_proj"},
        {"ffn_gate_inp_shexp", "mlp.shared_expert_gate"},
    };
    if (!strcmp(s, "ffn_norm"))
        return gemma23 ? "pre_feedforward_layernorm" : "post_attention_layernorm";
    if (!strcmp(s, "ffn_up"))
        return !strcmp(arch, "phi3") ? "mlp.gate_up_proj" : sc ? "mlp.c_fc" : "mlp.up_proj";
    if (sc && !strcmp(s, "ffn_down")) return "mlp.c_proj";
    if (!strcmp(s, "ffn_gate_inp")) return llama ? "block_sparse_moe.gate" : "mlp.gate";
    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        if (!strcmp(map[i][0], s)) return map[i][1];
    return NULL;
}

/* one GGUF tensor written as the HF tensor(s) */
static void convert_tensor(struct stw *w, const struct gguf *g, const char *arch,
                           const struct gguf_tensor *t)
{
    const float *v = t->data;
    int64_t ne0 = t->ne[0], ne1 = t->n_dims > 1 ? t->ne[1] : 0, k = ne0 * (ne1 ? ne1 : 1);
    int layer = -1, pos = 0, norm1 = !strncmp(arch, "gemma", 5);
    char sfx[96] = "", kind[16] = "", hf[256];
    if (!strncmp(t->name, "blk.", 4)) {
        char *end;
        layer = (int)strtol(t->name + 4, &end, 10);
        pos = (int)(end + 1 - t->name);
        const char *dot = strrchr(t->name, '.');
        snprintf(sfx, sizeof sfx, "%.*s", (int)(dot - t->name - pos), t->name + pos);
        snprintf(kind, sizeof kind, "%s", dot + 1);
    }
    float *c = malloc((size_t)(k * (t->n_dims > 2 ? t->ne[2] : 1)) * sizeof *c);
    memcpy(c, v, (size_t)(k * (t->n_dims > 2 ? t->ne[2] : 1)) * sizeof *c);
    int is_norm = strstr(t->name, "norm.weight") != NULL;
    if (norm1 && is_norm)
        for (int64_t i = 0; i < k; i++)
            c[i] -= 1.0f;
    if (layer < 0) {
        const char *n = !strcmp(t->name, "token_embd.weight")    ? "model.embed_tokens.weight"
                        : !strcmp(t->name, "output_norm.weight") ? "model.norm.weight"
                        : !strcmp(t->name, "output_norm.bias")   ? "model.norm.bias"
                        : !strcmp(t->name, "output.weight")      ? "lm_head.weight"
                                                                 : NULL;
        if (n) st_add(w, n, ne1 ? ne1 : ne0, ne1 ? ne0 : 0, c, 0);
        free(c);
        return;
    }
    int64_t hd = key_int(g, arch, "attention.key_length",
                         key_int(g, arch, "embedding_length", 0) /
                             key_int(g, arch, "attention.head_count", 1));
    if (!strcmp(arch, "llama") && (!strcmp(sfx, "attn_q") || !strcmp(sfx, "attn_k")))
        for (int64_t r = 0; r < ne1; r++) { /* back to rotate-half rows */
            int64_t h = r / hd, i = (r % hd) / (hd / 2), j = r % (hd / 2);
            memcpy(c + r * ne0, v + (h * hd + 2 * j + i) * ne0, (size_t)ne0 * sizeof *c);
        }
    if (strstr(sfx, "_exps")) { /* one tensor per expert */
        int llama = !strcmp(arch, "llama");
        const char *p = !strncmp(sfx, "ffn_gate", 8) ? (llama ? "w1" : "gate_proj")
                        : !strncmp(sfx, "ffn_up", 6) ? (llama ? "w3" : "up_proj")
                                                     : (llama ? "w2" : "down_proj");
        for (int64_t e = 0; e < t->ne[2]; e++) {
            snprintf(hf, sizeof hf, "model.layers.%d.%s.experts.%lld.%s.weight", layer,
                     llama ? "block_sparse_moe" : "mlp", (long long)e, p);
            st_add(w, hf, ne1, ne0, c + e * k, 1);
        }
        free(c);
        return;
    }
    const char *h = hf_suffix(arch, sfx);
    snprintf(hf, sizeof hf, "model.layers.%d.%s.%s", layer, h ? h : sfx, kind);
    if (!strcmp(sfx, "ffn_gate_inp_shexp"))
        st_add(w, hf, 1, ne0, c, 0);
    else /* a projection: a matrix other than the router */
        st_add(w, hf, ne1 ? ne1 : ne0, ne1 ? ne0 : 0, c,
               ne1 > 1 && strcmp(sfx, "ffn_gate_inp") && !strcmp(kind, "weight"));
    free(c);
}

static void num(cJSON *c, const char *k, double v)
{
    cJSON_AddNumberToObject(c, k, v);
}

/* a float as transformers' strict configs want it ("15.0"); 0: null */
static void fnum(cJSON *c, const char *k, double v)
{
    char b[64];
    snprintf(b, sizeof b, v == floor(v) ? "%.1f" : "%.17g", v);
    cJSON_AddItemToObject(c, k, v == 0 ? cJSON_CreateNull() : cJSON_CreateRaw(b));
}

/* config.json of the family, from the GGUF's keys */
static cJSON *config(const struct gguf *g, const char *arch, const char *hfarch)
{
    cJSON *c = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(c, "architectures");
    cJSON_AddItemToArray(a, cJSON_CreateString(hfarch));
    static const char *const types[][2] = {
        {"LlamaForCausalLM", "llama"},        {"MistralForCausalLM", "mistral"},
        {"MixtralForCausalLM", "mixtral"},    {"Qwen2ForCausalLM", "qwen2"},
        {"Qwen2MoeForCausalLM", "qwen2_moe"}, {"Qwen3ForCausalLM", "qwen3"},
        {"Qwen3MoeForCausalLM", "qwen3_moe"}, {"GemmaForCausalLM", "gemma"},
        {"Gemma2ForCausalLM", "gemma2"},      {"Gemma3ForCausalLM", "gemma3_text"},
        {"Phi3ForCausalLM", "phi3"},          {"Starcoder2ForCausalLM", "starcoder2"}};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (!strcmp(types[i][0], hfarch)) cJSON_AddStringToObject(c, "model_type", types[i][1]);
    int64_t dim = key_int(g, arch, "embedding_length", 0),
            heads = key_int(g, arch, "attention.head_count", 0),
            hd = key_int(g, arch, "attention.key_length", dim / heads);
    num(c, "hidden_size", (double)dim);
    num(c, "num_hidden_layers", (double)key_int(g, arch, "block_count", 0));
    num(c, "num_attention_heads", (double)heads);
    num(c, "num_key_value_heads", (double)key_int(g, arch, "attention.head_count_kv", heads));
    num(c, "head_dim", (double)hd);
    cJSON_AddNullToObject(c, "pad_token_id");
    num(c, "vocab_size", (double)gguf_find_tensor(g, "token_embd.weight")->ne[1]);
    num(c, "intermediate_size", (double)key_int(g, arch, "feed_forward_length", 0));
    num(c, "max_position_embeddings", (double)key_int(g, arch, "context_length", 0));
    num(c, !strcmp(arch, "starcoder2") ? "norm_epsilon" : "rms_norm_eps",
        key_float(g, arch,
                  !strcmp(arch, "starcoder2") ? "attention.layer_norm_epsilon"
                                              : "attention.layer_norm_rms_epsilon",
                  0));
    num(c, "rope_theta", key_float(g, arch, "rope.freq_base", 10000));
    cJSON_AddBoolToObject(c, "tie_word_embeddings", !gguf_find_tensor(g, "output.weight"));
    cJSON_AddStringToObject(c, "torch_dtype", "float32");
    int gelu = !strncmp(arch, "gemma", 5) || !strcmp(arch, "starcoder2");
    cJSON_AddStringToObject(
        c, !strncmp(arch, "gemma", 5) && arch[5] ? "hidden_activation" : "hidden_act",
        gelu ? "gelu_pytorch_tanh" : "silu");
    int64_t rd = key_int(g, arch, "rope.dimension_count", hd);
    if (rd != hd) num(c, "partial_rotary_factor", (double)rd / (double)hd);
    int64_t ne = key_int(g, arch, "expert_count", 0),
            w = key_int(g, arch, "attention.sliding_window", 0);
    if (ne) {
        num(c, !strcmp(arch, "llama") ? "num_local_experts" : "num_experts", (double)ne);
        num(c, "num_experts_per_tok", (double)key_int(g, arch, "expert_used_count", 0));
        num(c, "moe_intermediate_size", (double)key_int(g, arch, "expert_feed_forward_length", 0));
        num(c, "shared_expert_intermediate_size",
            (double)key_int(g, arch, "expert_shared_feed_forward_length", 0));
        cJSON_AddBoolToObject(c, "norm_topk_prob", !strcmp(arch, "qwen3moe"));
    }
    if (w && strcmp(arch, "phi3")) num(c, "sliding_window", (double)w);
    if (!strncmp(arch, "gemma", 5) && arch[5]) {
        num(c, "query_pre_attn_scalar", (double)hd);
        fnum(c, "final_logit_softcapping", key_float(g, arch, "final_logit_softcapping", 0));
        num(c, "sliding_window_pattern",
            (double)key_int(g, arch, "attention.sliding_window_pattern",
                            !strcmp(arch, "gemma2") ? 2 : 6));
    }
    if (!strcmp(arch, "gemma2"))
        fnum(c, "attn_logit_softcapping", key_float(g, arch, "attn_logit_softcapping", 0));
    if (!strcmp(arch, "gemma3"))
        num(c, "rope_local_base_freq", key_float(g, arch, "rope.freq_base_swa", 10000));
    double lin = key_float(g, arch, "rope.scaling.factor", 0);
    if (lin > 0) {
        cJSON *rs = cJSON_AddObjectToObject(c, "rope_scaling");
        cJSON_AddStringToObject(rs, "rope_type", "linear");
        num(rs, "factor", lin);
    }
    const struct gguf_tensor *lf = gguf_find_tensor(g, "rope_factors_long.weight"),
                             *sf = gguf_find_tensor(g, "rope_factors_short.weight");
    if (lf && sf) {
        cJSON *rs = cJSON_AddObjectToObject(c, "rope_scaling");
        cJSON_AddStringToObject(rs, "type", "longrope");
        num(rs, "attention_factor", key_float(g, arch, "rope.scaling.attn_factor", 1));
        cJSON_AddItemToObject(rs, "long_factor", cJSON_CreateFloatArray(lf->data, (int)lf->ne[0]));
        cJSON_AddItemToObject(rs, "short_factor", cJSON_CreateFloatArray(sf->data, (int)sf->ne[0]));
        num(c, "original_max_position_embeddings",
            (double)key_int(g, arch, "rope.scaling.original_context_length", 0));
    }
    return c;
}

/* tokenizer.json of the GGUF's SentencePiece-style vocabulary: BPE with
 * byte fallback (no merges: ids are what the tests compare) */
static int tokenizer(const struct gguf *g, const char *dir)
{
    cJSON *t = cJSON_CreateObject(), *m = cJSON_AddObjectToObject(t, "model"),
          *v = cJSON_AddObjectToObject(m, "vocab"),
          *added = cJSON_AddArrayToObject(t, "added_tokens");
    cJSON_AddStringToObject(m, "type", "BPE");
    cJSON_AddBoolToObject(m, "byte_fallback", 1);
    cJSON_AddStringToObject(m, "unk_token", "<unk>");
    cJSON_AddArrayToObject(m, "merges");
    int64_t k = gguf_find_key(g, "tokenizer.ggml.tokens");
    for (uint64_t i = 0; k >= 0 && i < gguf_kv_len(g, k); i++) {
        const char *s;
        size_t n;
        char tok[256];
        gguf_arr_str(g, k, i, &s, &n);
        snprintf(tok, sizeof tok, "%.*s", (int)n, s);
        num(v, tok, (double)i);
        if (i < 3) {
            cJSON *a = cJSON_CreateObject();
            num(a, "id", (double)i);
            cJSON_AddStringToObject(a, "content", tok);
            cJSON_AddBoolToObject(a, "special", 1);
            cJSON_AddItemToArray(added, a);
        }
    }
    cJSON *nz = cJSON_AddObjectToObject(t, "normalizer"),
          *list = cJSON_AddArrayToObject(nz, "normalizers"), *p = cJSON_CreateObject(),
          *r = cJSON_CreateObject();
    cJSON_AddStringToObject(nz, "type", "Sequence");
    cJSON_AddStringToObject(p, "type", "Prepend");
    cJSON_AddStringToObject(p, "prepend", "\xe2\x96\x81");
    cJSON_AddStringToObject(r, "type", "Replace");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(r, "pattern"), "String", " ");
    cJSON_AddStringToObject(r, "content", "\xe2\x96\x81");
    cJSON_AddItemToArray(list, p);
    cJSON_AddItemToArray(list, r);
    char path[4400], *s = cJSON_Print(t);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    int rc = t_write_file(path, s, strlen(s));
    free(s);
    cJSON_Delete(t);
    static const char tc[] = "{\"add_bos_token\": true, \"add_eos_token\": false, "
                             "\"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    return rc ? rc : t_write_file(path, tc, strlen(tc));
}

/* the F32 GGUF at path written as checkpoint directory dir of class hfarch
 * (with sliding_window set to window when not 0; projections quantized as
 * quant says) */
static int gguf_to_hf(const char *path, const char *dir, const char *hfarch, int window, int quant)
{
    struct gguf *g;
    char err[QG_ERRMSG_MAX], arch[32], p[4400];
    const char *a;
    size_t al;
    if (gguf_open(path, &g, err, sizeof err) || gguf_get_str(g, "general.architecture", &a, &al))
        return -1;
    snprintf(arch, sizeof arch, "%.*s", (int)al, a);
    mkdir(dir, 0755);
    struct stw w = {cJSON_CreateObject(), NULL, 0, quant, mo_input_scale};
    cJSON_AddStringToObject(cJSON_AddObjectToObject(w.hdr, "__metadata__"), "format", "pt");
    int rc = 0;
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(g, i);
        if (t->type != GGML_F32) rc = -1;
        if (!rc && strncmp(t->name, "rope_", 5)) convert_tensor(&w, g, arch, t);
    }
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    if (!rc) rc = st_save(&w, p);
    cJSON *c = config(g, arch, hfarch);
    if (window) num(c, "sliding_window", window);
    static const char *const qc[] = {
        NULL,
        "{\"config_groups\": {\"group_0\": {\"format\": \"float-quantized\", "
        "\"input_activations\": null, \"targets\": [\"Linear\"], \"weights\": {\"dynamic\": "
        "false, \"num_bits\": 8, \"strategy\": \"channel\", \"symmetric\": true, \"type\": "
        "\"float\"}}}, \"format\": \"float-quantized\", \"ignore\": [\"lm_head\"], "
        "\"quant_method\": \"compressed-tensors\"}",
        "{\"quant_method\": \"modelopt\", \"quant_algo\": \"NVFP4\", \"group_size\": 16, "
        "\"kv_cache_quant_algo\": null, \"ignore\": [\"lm_head\"]}",
        NULL}; /* ModelOpt FP8: the older hf_quant_config.json */
    if (qc[quant]) cJSON_AddItemToObject(c, "quantization_config", cJSON_Parse(qc[quant]));
    static const char hq[] = "{\"producer\": {\"name\": \"modelopt\"}, \"quantization\": "
                             "{\"quant_algo\": \"FP8\", \"kv_cache_quant_algo\": null, "
                             "\"exclude_modules\": [\"lm_head\"]}}";
    snprintf(p, sizeof p, "%s/hf_quant_config.json", dir);
    if (!rc && quant == Q_MO_FP8) rc = t_write_file(p, hq, strlen(hq));
    char *cs = cJSON_Print(c);
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (!rc) rc = t_write_file(p, cs, strlen(cs));
    if (!rc) rc = tokenizer(g, dir);
    free(cs);
    cJSON_Delete(c);
    cJSON_Delete(w.hdr);
    free(w.data);
    gguf_close(g);
    return rc;
}

/* the synthetic families and the HF class each is written as */
static const struct hf_variant {
    const char *label, *arch, *hf;
    int n_expert, swa, longrope;
    float rope_linear;
    int hf_window; /* config.json's sliding_window where the GGUF has none (llama.cpp
                    * ignores it; transformers applies it) */
} hf_variants[] = {
    {"llama+linear", "llama", "LlamaForCausalLM", 0, 0, 0, 4.0f, 0},
    {"mistral", "llama", "MistralForCausalLM", 0, 8, 0, 0, 0},
    {"mixtral", "llama", "MixtralForCausalLM", 4, 0, 0, 0, 0},
    {"qwen2", "qwen2", "Qwen2ForCausalLM", 0, 0, 0, 0, 0},
    {"qwen2moe", "qwen2moe", "Qwen2MoeForCausalLM", 0, 0, 0, 0, 0},
    {"qwen3", "qwen3", "Qwen3ForCausalLM", 0, 0, 0, 0, 0},
    {"qwen3moe", "qwen3moe", "Qwen3MoeForCausalLM", 0, 0, 0, 0, 0},
    {"gemma", "gemma", "GemmaForCausalLM", 0, 0, 0, 0, 0},
    {"gemma2", "gemma2", "Gemma2ForCausalLM", 0, 0, 0, 0, 0},
    {"gemma3", "gemma3", "Gemma3ForCausalLM", 0, 0, 0, 0, 0},
    {"phi3", "phi3", "Phi3ForCausalLM", 0, 0, 0, 0, 0},
    {"phi3+longrope", "phi3", "Phi3ForCausalLM", 0, 0, 1, 0, 0},
    {"starcoder2", "starcoder2", "Starcoder2ForCausalLM", 0, 0, 0, 0, 0},
    {"phi3+window", "phi3", "Phi3ForCausalLM", 0, 0, 0, 0, 12},
    {"starcoder2+window", "starcoder2", "Starcoder2ForCausalLM", 0, 0, 0, 0, 12},
};
enum { N_HF_VARIANTS = (int)(sizeof hf_variants / sizeof *hf_variants) };

/* the variant's synthetic GGUF at gguf and its checkpoint directory at dir */
static int write_pair(const struct hf_variant *v, const char *gguf, const char *dir)
{
    struct synth_params p = synth_default_params();
    p.arch = v->arch;
    p.n_expert = v->n_expert;
    p.swa_window = v->swa;
    p.rope_linear = v->rope_linear;
    p.longrope = v->longrope;
    p.seed = 101;
    char err[QG_ERRMSG_MAX];
    if (synth_write(&p, gguf, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return gguf_to_hf(gguf, dir, v->hf, v->hf_window, 0);
}

/* logits of n tokens (i*37+5) % V, no BOS, in a context of 64 */
static float *logits_of(const char *model, int n, int *V)
{
    struct gguf *g;
    struct llama_model *m = NULL;
    struct llama_ctx *ctx = NULL;
    char err[QG_ERRMSG_MAX];
    if (model_open(model, &g, err, sizeof err) || llama_load(g, model, &m, err, sizeof err) ||
        llama_ctx_new(m, 64, &ctx)) {
        fprintf(stderr, "%s: %s\n", model, err);
        return NULL;
    }
    *V = llama_hparams(m)->n_vocab;
    int32_t tok[64];
    for (int i = 0; i < n; i++)
        tok[i] = (int32_t)((i * 37 + 5) % *V);
    float *lg = malloc((size_t)n * (size_t)*V * sizeof *lg);
    if (llama_eval(ctx, tok, n, 0, lg)) {
        free(lg);
        lg = NULL;
    }
    llama_ctx_free(ctx);
    llama_free(m);
    return lg;
}

TEST(hf_arch_directories_equal_gguf, unit)
{
    for (int i = 0; i < N_HF_VARIANTS; i++) {
        const struct hf_variant *v = &hf_variants[i];

        char dir[4200];
        snprintf(dir, sizeof dir, "%s", t_path(v->label));
        ASSERT_OK(write_pair(v, t_path("v.gguf"), dir));
        if (v->hf_window) continue; /* not the GGUF's model */
        int V, V2;
        float *a = logits_of(t_path("v.gguf"), 40, &V), *b = logits_of(dir, 40, &V2);
        ASSERT(a && b);
        ASSERT_EQ(V, V2);
        double worst = 0, big = 0;
        for (int k = 0; k < 40 * V; k++) {
            worst = fmax(worst, fabs((double)a[k] - b[k]));
            big = fmax(big, fabs((double)a[k]));
        }
        printf("%-14s %-22s max |logit difference| %.2g of %.3g\n", v->label, v->hf, worst, big);
        ASSERT(worst <= 1e-5 * big);
        free(a);
        free(b);
    }
    return 0;
}

/* transformers 5.25.0 (torch 2.15.0, CPU, float32, eager attention):
 * AutoModelForCausalLM.from_pretrained(DIR) on the directories
 * hf_arch_directories_equal_gguf writes (loading report: no missing,
 * unexpected or mismatched tensors), log p(tok[i+1]) at positions 0..38
 * of the 40 ids (i*37+5) % 320, no BOS; in hf_variants' order */
static const double tf_lp[N_HF_VARIANTS][39] = {
    {
        /* llama+linear */
        -5.075037756, -5.793139629, -6.512058221, -6.440720992, -4.701632682, -5.960213294,
        -6.414965233, -6.652902146, -5.318239116, -5.901029627, -6.186609743, -5.745474340,
        -6.588348632, -6.530239503, -4.954175088, -4.899106026, -5.595953622, -6.410057813,
        -7.099077922, -5.809203675, -6.413784292, -5.978243660, -6.247175918, -5.761639728,
        -6.618169639, -5.350278859, -7.028374641, -5.575283907, -5.911897956, -4.968561548,
        -6.220086265, -5.975298968, -5.683882576, -5.353217339, -6.966258766, -7.129981464,
        -5.395806621, -5.640104219, -5.305189605,
    },
    {
        /* mistral */
        -5.075037756, -5.809630699, -6.517160405, -6.468018297, -4.705657576, -5.984240446,
        -6.407572951, -6.673306712, -5.339876014, -5.890756852, -6.063200587, -5.876505668,
        -6.652111257, -6.684379781, -5.084931984, -4.876648248, -5.557736335, -6.400089283,
        -6.852916518, -5.938337317, -6.393943878, -5.291775928, -6.446302204, -5.693816463,
        -6.610805262, -5.328994707, -6.924328671, -5.636891679, -6.016124324, -5.034207523,
        -6.134973741, -5.756502542, -5.769791948, -5.467070321, -7.098796307, -6.977099951,
        -5.562360438, -5.968272805, -5.450252604,
    },
    {
        /* mixtral */
        -6.297634554, -5.655705649, -7.658437383, -6.714784620, -6.018478900, -6.674086041,
        -4.459979117, -6.384827833, -6.095108900, -6.883128141, -5.149176433, -5.905298906,
        -5.852347081, -6.039351054, -6.554872447, -5.885656984, -5.065584728, -6.147021614,
        -5.256237559, -6.697142721, -6.609361728, -5.867617271, -5.668368366, -6.269022063,
        -5.625083516, -6.303430383, -5.971612504, -6.598680750, -5.845685807, -5.575819058,
        -6.417668827, -7.004008988, -5.982766974, -5.082080941, -5.298177693, -6.706076877,
        -5.520871728, -5.186203939, -5.956664619,
    },
    {
        /* qwen2 */
        -5.662681539, -5.981911759, -4.466955229, -6.062399936, -5.952791133, -5.956583710,
        -6.574143507, -6.738231036, -6.127293450, -5.839134057, -5.715909651, -5.714828011,
        -5.980517571, -6.709061112, -6.646917211, -5.538491331, -6.771782412, -6.022630294,
        -5.374819197, -5.832599345, -5.535690083, -6.921451399, -5.915680327, -5.966315622,
        -6.325884991, -5.856292069, -6.271644601, -6.348402303, -7.375266520, -5.286814191,
        -6.002350891, -6.168267798, -5.142190722, -5.903075397, -5.647328664, -5.715589073,
        -4.856120061, -6.124922513, -5.405483254,
    },
    {
        /* qwen2moe */
        -6.088132861, -5.085756240, -6.809279899, -6.445842515, -5.081617233, -5.221551496,
        -5.473582033, -5.269787409, -5.887314081, -6.321622968, -6.367356488, -6.469416945,
        -8.024141171, -6.549108264, -6.155877809, -4.319879313, -5.725463159, -5.985099404,
        -5.932621934, -6.852954294, -5.296220900, -6.020301075, -6.508708237, -5.234162596,
        -5.824619853, -6.183016964, -5.573013606, -5.890087892, -5.265726211, -6.569344136,
        -5.440112331, -4.768905625, -5.691353791, -6.027219562, -6.187547266, -6.669844672,
        -5.207713197, -5.151755734, -5.329369458,
    },
    {
        /* qwen3 */
        -5.639297086, -6.504867668, -6.851880194, -4.704095201, -5.282625451, -5.837914248,
        -4.854703383, -6.191968747, -7.073401624, -5.634349392, -6.034188275, -6.447004764,
        -5.892254925, -5.746727391, -6.325739196, -6.336048288, -7.136244550, -5.998161930,
        -5.664662558, -5.009969006, -6.462186875, -6.091204858, -5.636490453, -5.506919258,
        -5.130570766, -5.436485765, -5.344562333, -5.624737109, -6.448710060, -5.782697681,
        -5.713084943, -5.433552806, -5.299143186, -6.067086844, -5.885939339, -6.513006916,
        -4.908385661, -5.827447387, -5.494081797,
    },
    {
        /* qwen3moe */
        -5.726192622, -5.329315997, -5.268266222, -5.975548932, -6.235160951, -5.444978814,
        -6.212727061, -6.471837241, -5.044731891, -5.738706847, -5.766768454, -5.497348668,
        -6.503905760, -5.529913886, -5.829380898, -6.840918074, -5.504694348, -6.572687990,
        -5.904550192, -5.747036290, -6.491625216, -5.642075724, -5.552854922, -5.493226215,
        -6.425460392, -6.816162732, -6.353438800, -6.466113087, -6.605159460, -5.495279366,
        -6.170652759, -6.179008848, -5.527364267, -6.169199972, -6.692763602, -6.108489666,
        -4.603668915, -5.368680195, -6.452424337,
    },
    {
        /* gemma */
        -5.457221614, -6.603215752, -6.813906671, -7.476991172, -5.589856534, -6.416116987,
        -5.923506832, -6.719444740, -6.699205405, -6.559933685, -5.867745693, -5.435115312,
        -5.838771733, -6.869419420, -6.350789437, -4.950292942, -6.650077346, -6.018023409,
        -6.555654309, -5.865458546, -4.958694021, -6.163887151, -5.920035136, -4.752457208,
        -6.002526931, -7.097622950, -5.982939300, -6.960270564, -6.191717825, -5.873614028,
        -6.206283638, -5.845958195, -6.317883717, -6.648822976, -6.696840633, -5.885912066,
        -6.584849486, -5.658470826, -6.164363702,
    },
    {
        /* gemma2 */
        -6.085453423, -6.364752863, -5.875901088, -6.804408481, -4.881769410, -5.792492324,
        -6.050415658, -6.086068681, -6.063228067, -7.161256878, -6.706651806, -5.429571181,
        -5.483052202, -6.260047140, -5.688418585, -5.409204599, -6.024759794, -5.512645356,
        -6.538373002, -4.604281128, -5.075578093, -5.874999089, -6.640198603, -5.690053411,
        -5.575781730, -6.332658948, -6.321728145, -6.643058953, -6.318374371, -5.092776732,
        -6.695506387, -5.633400236, -6.268933362, -6.773855753, -6.963534340, -5.571929157,
        -6.418988251, -6.625303881, -5.497807131,
    },
    {
        /* gemma3 */
        -5.916425149, -6.897595411, -5.880659329, -6.844996573, -6.119833840, -6.617142047,
        -5.424302664, -6.556127943, -6.532471764, -5.260653195, -5.264674276, -5.278263155,
        -5.957162408, -6.226822458, -5.865168708, -5.968817940, -6.181157802, -5.184952089,
        -6.530907913, -5.533229573, -6.196077101, -5.872081380, -6.372532464, -5.043618673,
        -5.472603649, -7.101217415, -5.298063907, -6.656936854, -5.991351461, -5.717243825,
        -6.104294580, -5.501470641, -7.043281697, -6.134175027, -6.541635974, -7.040875755,
        -5.963634680, -5.837547651, -5.780448464,
    },
    {
        /* phi3 */
        -5.075037756, -5.772108677, -6.453062611, -6.454226594, -4.766111054, -5.931966262,
        -6.387110502, -6.676515201, -5.312118158, -5.841976137, -6.208046543, -5.798282005,
        -6.592303577, -6.490635545, -4.937652614, -4.924031998, -5.616206955, -6.388040642,
        -7.081157383, -5.827467968, -6.411265728, -5.940255307, -6.227230544, -5.725512120,
        -6.613598875, -5.348375065, -7.004744714, -5.572528046, -5.948924574, -4.953090872,
        -6.207225731, -6.006450900, -5.670079071, -5.289273782, -6.969113275, -7.139613496,
        -5.355162552, -5.625530902, -5.295758695,
    },
    {
        /* phi3+longrope */
        -5.075037756, -5.769353324, -6.401666713, -6.444262243, -4.805373558, -5.950791012,
        -6.410587400, -6.711366145, -5.321511688, -5.847616620, -6.196796332, -5.790118492,
        -6.576959152, -6.446977707, -4.940341079, -4.954446005, -5.621516688, -6.394247126,
        -7.074888592, -5.837327438, -6.387342015, -5.930896204, -6.251927262, -5.748349544,
        -6.605279145, -5.335355409, -6.998689548, -5.584461383, -5.933020992, -4.919633890,
        -6.179269290, -5.934174686, -5.671307838, -5.274442170, -6.972484437, -7.119750451,
        -5.375718272, -5.594016305, -5.251960326,
    },
    {
        /* starcoder2 */
        -5.888345014, -6.843295185, -5.435838406, -5.435418674, -6.535626536, -6.770065329,
        -5.497846453, -4.847242226, -5.754605866, -5.542512619, -6.068613742, -6.775434708,
        -5.396822567, -5.989664170, -7.192259839, -5.715450959, -7.214585742, -5.454118839,
        -5.968619434, -6.897437066, -6.294863775, -6.847354724, -4.878551652, -6.643811056,
        -5.285691535, -5.974850099, -7.651069781, -5.596593388, -5.572154963, -6.506090168,
        -6.015172734, -5.961877537, -7.168505463, -5.961529549, -6.186681192, -5.579576066,
        -5.197989999, -5.954262976, -5.966967451,
    },
    {
        /* phi3+window */
        -5.075037756, -5.772108677, -6.453062611, -6.454226594, -4.766111054, -5.931966262,
        -6.387110502, -6.676515201, -5.312118158, -5.841976137, -6.208046543, -5.798282005,
        -6.637316969, -6.448566385, -4.988396680, -4.915344105, -5.567729440, -6.357848321,
        -7.026224694, -5.843574126, -6.515711345, -5.671390784, -6.318146314, -5.765956010,
        -6.599960706, -5.263961372, -7.033663329, -5.461453732, -6.069310308, -5.104709518,
        -6.123071290, -5.799721469, -5.703567086, -5.282109045, -7.156337198, -7.085791400,
        -5.553250108, -5.982011860, -5.442394936,
    },
    {
        /* starcoder2+window */
        -5.888345014, -6.843295185, -5.435838406, -5.435418674, -6.535626536, -6.770065329,
        -5.497846453, -4.847242226, -5.754605866, -5.542512619, -6.068613742, -6.775434708,
        -5.395882237, -5.899611317, -7.206453973, -5.707784542, -7.114525211, -5.329880510,
        -6.066152384, -6.850612909, -6.248757700, -6.756294478, -4.802029655, -6.576273395,
        -5.302882782, -5.727720796, -7.596247714, -5.821363103, -5.437274563, -6.438135720,
        -5.989605835, -5.935977543, -7.184850275, -5.834332208, -6.047040657, -5.523854086,
        -5.250320878, -6.121188849, -6.100511357,
    },
};

TEST(hf_arch_transformers_reference, unit)
{
    for (int i = 0; i < N_HF_VARIANTS; i++) {
        const struct hf_variant *v = &hf_variants[i];
        ASSERT_OK(write_pair(v, t_path("v.gguf"), t_path("dir")));
        int V;
        float *lg = logits_of(t_path("dir"), 40, &V);
        ASSERT(lg);
        double worst = 0, sum = 0, want = 0;
        for (int k = 0; k + 1 < 40; k++) {
            const float *r = lg + (size_t)k * V;
            double lp = t_logprob(r, V, ((k + 1) * 37 + 5) % V);
            worst = fmax(worst, fabs(lp / tf_lp[i][k] - 1));
            sum += lp, want += tf_lp[i][k];
        }
        printf("%-14s sum of log-probs %.6f, transformers %.6f; worst token relative %.2g\n",
               v->label, sum, want, worst);
        ASSERT(worst < 1e-4); /* the bound; float32 rounding is ~1e-6 */
        free(lg);
    }
    return 0;
}

/* the variant labelled label */
static const struct hf_variant *hf_variant_named(const char *label)
{
    for (int i = 0; i < N_HF_VARIANTS; i++)
        if (!strcmp(hf_variants[i].label, label)) return &hf_variants[i];
    abort();
}

/* Mixture-of-Experts checkpoints in FP8 (compressed-tensors, channel
 * scales): every expert kept as stored (qgate's FP8 blocks, decoding to
 * the exact fp8 x scale) and stacked in expert order; the router stays as
 * stored */
TEST(hf_arch_fp8_experts, unit)
{
    static const char *const labels[] = {"mixtral", "qwen2moe"};
    for (int i = 0; i < 2; i++) {
        const struct hf_variant *v = hf_variant_named(labels[i]);
        struct synth_params p = synth_default_params();
        p.arch = v->arch, p.n_expert = v->n_expert, p.seed = 101;
        char err[QG_ERRMSG_MAX], dir[4200], ref[4200];
        ASSERT_OK(synth_write(&p, t_path("m.gguf"), err, sizeof err));
        snprintf(dir, sizeof dir, "%s", t_path("fp8"));
        snprintf(ref, sizeof ref, "%s", t_path("f32"));
        ASSERT_OK(gguf_to_hf(t_path("m.gguf"), dir, v->hf, 0, Q_CT_FP8));
        ASSERT_OK(gguf_to_hf(t_path("m.gguf"), ref, v->hf, 0, Q_NONE));
        struct gguf *g, *q;
        ASSERT_OK(gguf_open(t_path("m.gguf"), &g, err, sizeof err));
        ASSERT_OK(model_open(dir, &q, err, sizeof err));
        const struct gguf_tensor *a = gguf_find_tensor(g, "blk.1.ffn_down_exps.weight"),
                                 *b = gguf_find_tensor(q, "blk.1.ffn_down_exps.weight"),
                                 *r = gguf_find_tensor(q, "blk.1.ffn_gate_inp.weight");
        /* kept as stored: the codes with each row's scale per 32 */
        ASSERT(a && b && r && b->type == QG_F8_E4M3_S32 && r->type == GGML_F32);
        ASSERT(b->ne[0] == a->ne[0] && b->ne[1] == a->ne[1] && b->ne[2] == a->ne[2]);
        int64_t all = gguf_tensor_nelements(b);
        ASSERT_EQ(b->nbytes, all / 32 * 37);
        float *y = malloc((size_t)all * sizeof *y);
        ASSERT_OK(dequant_row(b->type, b->data, y, all));
        const float *x = a->data;
        int64_t in = a->ne[0], bad = 0, n = 0;
        for (int64_t row = 0; row < a->ne[1] * a->ne[2]; row++) { /* expert e's row r */
            float amax = 0;
            for (int64_t c = 0; c < in; c++)
                amax = fmaxf(amax, fabsf(x[row * in + c]));
            float s = amax > 0 ? amax / 448.0f : 1.0f;
            for (int64_t c = 0; c < in; c++, n++)
                bad +=
                    y[row * in + c] != fp8_e4m3_to_f32(fp8_e4m3_from_f32(x[row * in + c] / s)) * s;
        }
        printf("%s: %lld of %lld expert weights are fp8 x scale (%.3f bytes each)", v->label,
               (long long)(n - bad), (long long)n, (double)b->nbytes / (double)all);
        free(y);
        ASSERT_EQ(bad, 0);
        gguf_close(q);
        gguf_close(g);
        int V;
        float *lf = logits_of(ref, 40, &V), *lq = logits_of(dir, 40, &V);
        ASSERT(lf && lq);
        double e = 0, z = 0;
        for (int k = 0; k < 40 * V; k++)
            e += ((double)lf[k] - lq[k]) * ((double)lf[k] - lq[k]), z += (double)lf[k] * lf[k];
        printf("; logits against f32: relative RMS %.3g\n", sqrt(e / z));
        ASSERT(e > 0 && sqrt(e / z) < 0.05); /* FP8 moves them, a little */
        free(lf);
        free(lq);
    }
    return 0;
}

/* config.json's key set to the JSON value (NULL: removed) */
static int edit_config(const char *dir, const char *key, const char *value)
{
    char path[4400];
    size_t n;
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *s = t_read_file(path, &n);
    cJSON *c = s ? cJSON_Parse(s) : NULL;
    free(s);
    if (!c) return -1;
    cJSON_DeleteItemFromObject(c, key);
    if (value) cJSON_AddItemToObject(c, key, cJSON_Parse(value));
    s = cJSON_Print(c);
    int rc = t_write_file(path, s, strlen(s));
    free(s);
    cJSON_Delete(c);
    return rc;
}

/* settings a family's checkpoint may hold that qgate does not implement
 * are refused naming config.json and the setting */
TEST(hf_arch_refusals, unit)
{
    static const struct {
        const char *variant, *key, *value, *expect;
    } cases[] = {
        {"qwen3moe", "norm_topk_prob", "false", "norm_topk_prob as set here"},
        {"qwen2moe", "mlp_only_layers", "[0]", "mlp_only_layers as set here"},
        {"qwen2moe", "decoder_sparse_step", "2", "decoder_sparse_step as set here"},
        {"gemma2", "query_pre_attn_scalar", "100", "query_pre_attn_scalar 100 is not 16"},
        {"gemma2", "layer_types", "[\"full_attention\", \"sliding_attention\"]",
         "layer_types are not a window on every layer but each n-th"},
        {"gemma3", "attn_logit_softcapping", "50.0", "attn_logit_softcapping on gemma3"},
        {"gemma3", "hidden_activation", "\"gelu\"", "hidden_activation is set"},
        {"phi3", "rope_scaling", "{\"rope_type\": \"yarn\", \"factor\": 4.0}",
         "RoPE scaling 'yarn' on Phi3ForCausalLM is not implemented"},
        {"phi3+longrope", "original_max_position_embeddings", "0",
         "original_max_position_embeddings must be a whole number"},
        {"phi3", "partial_rotary_factor", "0.3", "partial_rotary_factor 0.3"},
        {"llama+linear", "partial_rotary_factor", "0.5", "partial_rotary_factor 0.5"},
        {"llama+linear", "rope_scaling", "{\"rope_type\": \"linear\"}",
         "linear RoPE scaling needs a positive factor"},
        {"starcoder2", "use_bias", "false", "use_bias false is set"},
        {"starcoder2", "hidden_act", "\"gelu\"", "hidden_act is set"},
        {"mixtral", "num_experts_per_tok", "9", "expert counts and widths"},
        {"qwen2", "use_sliding_window", "true", "use_sliding_window is set"},
        {"qwen3", "rope_theta", "1e300", "a RoPE base (1e12)"},
        {"qwen3", "head_dim", "16777216", "num_attention_heads x head_dim must be at most"},
        {"qwen3", "quantization_config",
         "{\"quant_method\": \"modelopt\", \"quant_algo\": \"MIXED_PRECISION\"}",
         "ModelOpt quant_algo 'MIXED_PRECISION' (group_size 0) is not supported"},
        {"qwen3", "quantization_config",
         "{\"quant_method\": \"modelopt\", \"quant_algo\": \"NVFP4\", "
         "\"kv_cache_quant_algo\": \"FP8\"}",
         "ModelOpt kv_cache_quant_algo is set"},
        {"qwen3", "quantization_config",
         "{\"quant_method\": \"modelopt\", \"quant_algo\": \"NVFP4\", \"group_size\": 32}",
         "ModelOpt quant_algo 'NVFP4' (group_size 32) is not supported"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char dir[4200], err[QG_ERRMSG_MAX];
        snprintf(dir, sizeof dir, "%s", t_path("bad"));
        ASSERT_OK(write_pair(hf_variant_named(cases[i].variant), t_path("b.gguf"), dir));
        ASSERT_OK(edit_config(dir, cases[i].key, cases[i].value));
        struct gguf *g = NULL;
        int rc = model_open(dir, &g, err, sizeof err);
        if (rc != QG_ERR_DATA || !strstr(err, cases[i].expect) || !strstr(err, "config.json"))
            T_FAIL_("case %zu (%s %s): rc %d: %s", i, cases[i].variant, cases[i].key, rc, err);
        gguf_close(g);
    }
    return 0;
}

/* x rounded to bfloat16 (to nearest even) */
static float rbf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000u;
    memcpy(&x, &u, 4);
    return x;
}

/* logits of the n tokens tok with the checkpoint's declared activations
 * (declared 1), the same format with dynamic scales (2, as a=FORMAT), or
 * none (0) */
static float *logits_act(const char *dir, const int32_t *tok, int n, int declared, int *V)
{
    struct gguf *g;
    struct llama_model *m = NULL;
    struct llama_ctx *ctx = NULL;
    char err[QG_ERRMSG_MAX];
    struct simfmt f;
    if (model_open(dir, &g, err, sizeof err) || llama_load(g, dir, &m, err, sizeof err) ||
        llama_ctx_new(m, 64, &ctx) || !llama_declared_act(m) ||
        simfmt_parse(llama_declared_act(m), &f, err, sizeof err) ||
        (declared && llama_ctx_set_act(ctx, LLAMA_ACT_FORMAT, &f)))
        return NULL;
    llama_ctx_set_act_static(ctx, declared == 1);
    *V = llama_hparams(m)->n_vocab;
    float *lg = malloc((size_t)n * (size_t)*V * sizeof *lg);
    if (llama_eval(ctx, tok, n, 0, lg)) free(lg), lg = NULL;
    llama_ctx_free(ctx);
    llama_free(m);
    return lg;
}

/* ModelOpt's unified export: NVFP4 (config.json) and FP8 (the older
 * hf_quant_config.json) weights as its dequantize computes them, every
 * projection's input_scale read, the declared activations quantized with
 * it */
TEST(hf_arch_modelopt, unit)
{
    static const struct {
        const char *variant, *tensor, *act;
        int quant, bf16; /* bf16: torch_dtype bfloat16, the products rounded to it */
    } cases[] = {{"qwen3", "blk.1.ffn_down.weight", "nvfp4", Q_MO_NVFP4, 0},
                 {"mixtral", "blk.1.ffn_down_exps.weight", "nvfp4", Q_MO_NVFP4, 0},
                 {"qwen3", "blk.1.attn_q.weight", "fp8_e4m3", Q_MO_FP8, 0},
                 {"qwen3", "blk.1.attn_q.weight", "fp8_e4m3", Q_MO_FP8, 1}};
    for (int i = 0; i < 4; i++) {
        const struct hf_variant *v = hf_variant_named(cases[i].variant);
        char err[QG_ERRMSG_MAX], dir[4200], sn[GGUF_MAX_NAME + 1];
        snprintf(dir, sizeof dir, "%s", t_path(cases[i].act));
        ASSERT_OK(write_pair(v, t_path("m.gguf"), t_path("f32")));
        ASSERT_OK(gguf_to_hf(t_path("m.gguf"), dir, v->hf, 0, cases[i].quant));
        if (cases[i].bf16) ASSERT_OK(edit_config(dir, "torch_dtype", "\"bfloat16\""));
        struct gguf *g, *q;
        ASSERT_OK(gguf_open(t_path("m.gguf"), &g, err, sizeof err));
        ASSERT_OK(model_open(dir, &q, err, sizeof err));
        const struct gguf_tensor *a = gguf_find_tensor(g, cases[i].tensor),
                                 *b = gguf_find_tensor(q, cases[i].tensor);
        snprintf(sn, sizeof sn, "%.*s.input_scale", (int)strlen(cases[i].tensor) - 7,
                 cases[i].tensor);
        const struct gguf_tensor *is = gguf_find_tensor(q, sn);
        /* kept as stored: qgate's NVFP4 and FP8 blocks */
        ASSERT(a && b && is &&
               b->type == (cases[i].quant == Q_MO_NVFP4 ? QG_NVFP4_S16 : QG_F8_E4M3_S32));
        /* the scale read: the largest of the experts' (down), or of the
         * q, k and v that share the input (attn_q) */
        float want_s = 0;
        for (int e = 0; e < (int)a->ne[2]; e++) {
            char hn[256];
            snprintf(hn, sizeof hn, "model.layers.1.block_sparse_moe.experts.%d.w2.weight", e);
            want_s =
                fmaxf(want_s, mo_scale_of(a->ne[2] > 1 ? hn : "model.layers.1.mlp.down_proj.weight",
                                          MO_INPUT_SCALE));
        }
        if (strstr(cases[i].tensor, "attn_q")) {
            static const char *const qkv[] = {"model.layers.1.self_attn.q_proj.weight",
                                              "model.layers.1.self_attn.k_proj.weight",
                                              "model.layers.1.self_attn.v_proj.weight"};
            want_s = 0;
            for (int k = 0; k < 3; k++)
                want_s = fmaxf(want_s, mo_scale_of(qkv[k], MO_INPUT_SCALE));
            for (int k = 0; k < 2; k++) {
                const struct gguf_tensor *o = gguf_find_tensor(q, k ? "blk.1.attn_v.input_scale"
                                                                    : "blk.1.attn_k.input_scale");
                ASSERT(o && ((const float *)o->data)[0] == want_s);
            }
        }
        printf("input_scale %.6g (written %.6g..%.6g); ", ((const float *)is->data)[0],
               MO_INPUT_SCALE, 1.5 * MO_INPUT_SCALE);
        ASSERT(((const float *)is->data)[0] == want_s);
        int64_t all = gguf_tensor_nelements(b);
        float *y = malloc((size_t)all * sizeof *y);
        ASSERT_OK(dequant_row(b->type, b->data, y, all));
        const float *x = a->data;
        int64_t per = a->ne[0] * a->ne[1], bad = 0; /* one expert (or the matrix) */
        for (int64_t e = 0; e < a->ne[2]; e++) {
            float amax = 0;
            for (int64_t k = 0; k < per; k++)
                amax = fmaxf(amax, fabsf(x[e * per + k]));
            for (int64_t k = 0; k < per; k += 16) {
                uint8_t sc, c[16];
                float s2 = nvfp4_tensor_scale(amax), st = amax / 448.0f;
                nvfp4_block_encode(x + e * per + k, 16, s2, &sc, c);
                for (int j = 0; j < 16; j++) {
                    float want =
                        cases[i].quant == Q_MO_NVFP4
                            ? fp4_e2m1_to_f32(c[j]) * (fp8_e4m3_to_f32(sc) * s2)
                        : cases[i].bf16
                            ? rbf16(fp8_e4m3_to_f32(fp8_e4m3_from_f32(x[e * per + k + j] / st)) *
                                    rbf16(st))
                            : fp8_e4m3_to_f32(fp8_e4m3_from_f32(x[e * per + k + j] / st)) * st;
                    bad += y[e * per + k + j] != want;
                }
            }
        }
        printf("%s %s%s: %lld of %lld weights differ from ModelOpt's dequantization (%s, %.3f "
               "bytes each); ",
               cases[i].variant, cases[i].act, cases[i].bf16 ? " bf16" : "", (long long)bad,
               (long long)(per * a->ne[2]), ggml_type_name(b->type),
               (double)b->nbytes / (double)all);
        free(y);
        ASSERT_EQ(bad, 0);
        gguf_close(q);
        gguf_close(g);
        /* the declared activations: with every input_scale 1e30 each block
         * scale underflows, every projection sees zeros, and a position's
         * logits depend on its own token only */
        int32_t tok[4] = {5, 9, 5, 9};
        int V;
        float *with = logits_act(dir, tok, 4, 1, &V), *none = logits_act(dir, tok, 4, 0, &V);
        ASSERT(with && none);
        double d_act = 0;
        for (int k = 0; k < 4 * V; k++)
            d_act = fmax(d_act, fabs((double)with[k] - none[k]));
        mo_input_scale = 1e30f;
        ASSERT_OK(gguf_to_hf(t_path("m.gguf"), t_path("huge"), v->hf, 0, cases[i].quant));
        mo_input_scale = MO_INPUT_SCALE;
        float *z = logits_act(t_path("huge"), tok, 4, 1, &V),
              *dyn = logits_act(t_path("huge"), tok, 4, 2, &V);
        ASSERT(z && dyn);
        double rep = 0, rep_none = 0, rep_dyn = 0;
        for (int k = 0; k < V; k++) {
            rep = fmax(rep, fabs((double)z[k] - z[2 * V + k]));
            rep_none = fmax(rep_none, fabs((double)none[k] - none[2 * V + k]));
            rep_dyn = fmax(rep_dyn, fabs((double)dyn[k] - dyn[2 * V + k]));
        }
        free(dyn);
        ASSERT(rep_dyn > 0); /* a=FORMAT's dynamic scales ignore input_scale */
        printf("declared %s moves logits by up to %.3g; with input_scale 1e30 token 5's logits at "
               "positions 0 and 2 differ by %.3g (%.3g without the activations)\n",
               cases[i].act, d_act, rep, rep_none);
        ASSERT(d_act > 0 && rep == 0 && rep_none > 0);
        free(with), free(none), free(z);
    }
    return 0;
}

/* Gemma 2's caps and window: null in config.json turns each off (as
 * transformers' None does); absent, transformers' defaults (50, 30, 4096) */
TEST(hf_arch_gemma2_null_settings, unit)
{
    static const char *const keys[] = {"attn_logit_softcapping", "final_logit_softcapping",
                                       "sliding_window"};
    static const double absent[] = {50, 30, 4096};
    for (int nul = 0; nul < 2; nul++) {
        char dir[4200], err[QG_ERRMSG_MAX];
        snprintf(dir, sizeof dir, "%s", t_path(nul ? "null" : "absent"));
        ASSERT_OK(write_pair(hf_variant_named("gemma2"), t_path("g.gguf"), dir));
        for (int k = 0; k < 3; k++)
            ASSERT_OK(edit_config(dir, keys[k], nul ? "null" : NULL));
        if (!nul) ASSERT_OK(edit_config(dir, "max_position_embeddings", "8192"));
        struct gguf *g;
        ASSERT_OK(model_open(dir, &g, err, sizeof err));
        for (int k = 0; k < 3; k++) {
            char key[96];
            double v;
            snprintf(key, sizeof key, "gemma2.%s%s", k == 2 ? "attention." : "", keys[k]);
            ASSERT_OK(gguf_get_float(g, key, &v));
            printf("%s %s: %g\n", nul ? "null" : "absent", key, v);
            ASSERT(v == (nul ? 0 : absent[k]));
        }
        gguf_close(g);
    }
    return 0;
}
