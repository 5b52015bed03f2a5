/* model_info — summarise a GGUF model. */
#include "backends/model_info.h"
#include "core/status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *model_ftype_name(int64_t ftype)
{
    static const char *const names[] = {
        [0] = "F32",      [1] = "F16",      [2] = "Q4_0",    [3] = "Q4_1",    [7] = "Q8_0",
        [8] = "Q5_0",     [9] = "Q5_1",     [10] = "Q2_K",   [11] = "Q3_K_S", [12] = "Q3_K_M",
        [13] = "Q3_K_L",  [14] = "Q4_K_S",  [15] = "Q4_K_M", [16] = "Q5_K_S", [17] = "Q5_K_M",
        [18] = "Q6_K",    [19] = "IQ2_XXS", [20] = "IQ2_XS", [21] = "Q2_K_S", [22] = "IQ3_XS",
        [23] = "IQ3_XXS", [24] = "IQ1_S",   [25] = "IQ4_NL", [26] = "IQ3_S",  [27] = "IQ3_M",
        [28] = "IQ2_S",   [29] = "IQ2_M",   [30] = "IQ4_XS", [31] = "IQ1_M",  [32] = "BF16",
        [36] = "TQ1_0",   [37] = "TQ2_0",
    };
    int64_t base = ftype & ~(int64_t)1024; /* 1024 = LLAMA_FTYPE_GUESSED */
    if (base < 0 || base >= (int64_t)(sizeof names / sizeof *names) || !names[base])
        return "unknown";
    return names[base];
}

static void copy_str(const struct gguf *g, const char *key, char *dst, size_t n)
{
    const char *s;
    size_t len;
    dst[0] = '\0';
    if (gguf_get_str(g, key, &s, &len) != QG_OK) return;
    if (len >= n) len = n - 1;
    memcpy(dst, s, len);
    dst[len] = '\0';
    for (size_t i = 0; i < len; i++) /* keep terminal output sane */
        if ((unsigned char)dst[i] < 0x20 || dst[i] == 0x7f) dst[i] = '?';
}

static int64_t arch_int(const struct gguf *g, const char *arch, const char *suffix)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int64_t v;
    return gguf_get_int(g, key, &v) == QG_OK ? v : -1;
}

static double arch_float(const struct gguf *g, const char *arch, const char *suffix)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    double v;
    return gguf_get_float(g, key, &v) == QG_OK ? v : NAN;
}

static int cmp_stat(const void *a, const void *b)
{
    const struct model_type_stat *x = a, *y = b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : (int)x->type - (int)y->type;
}

int model_info_read(const struct gguf *g, struct model_info *m)
{
    memset(m, 0, sizeof *m);
    copy_str(g, "general.architecture", m->arch, sizeof m->arch);
    copy_str(g, "general.name", m->name, sizeof m->name);
    copy_str(g, "tokenizer.ggml.model", m->tok_model, sizeof m->tok_model);
    m->gguf_version = gguf_version(g);
    m->file_bytes = gguf_file_size(g);
    m->alignment = gguf_alignment(g);
    m->n_kv = gguf_n_kv(g);
    m->n_tensors = gguf_n_tensors(g);
    if (gguf_get_int(g, "general.file_type", &m->file_type) != QG_OK) m->file_type = -1;
    const char *a = m->arch;
    m->ctx = arch_int(g, a, "context_length");
    m->dim = arch_int(g, a, "embedding_length");
    m->n_layers = arch_int(g, a, "block_count");
    m->ffn = arch_int(g, a, "feed_forward_length");
    m->n_heads = arch_int(g, a, "attention.head_count");
    m->n_kv_heads = arch_int(g, a, "attention.head_count_kv");
    m->rope_dims = arch_int(g, a, "rope.dimension_count");
    m->expert_count = arch_int(g, a, "expert_count");
    m->rope_theta = arch_float(g, a, "rope.freq_base");
    m->rms_eps = arch_float(g, a, "attention.layer_norm_rms_epsilon");
    int64_t ti = gguf_find_key(g, "tokenizer.ggml.tokens");
    m->n_vocab = ti >= 0 && gguf_kv_type(g, ti) == GGUF_ARR ? (int64_t)gguf_kv_len(g, ti) : -1;
    if (m->n_vocab < 0) m->n_vocab = arch_int(g, a, "vocab_size");
    if (gguf_get_int(g, "tokenizer.ggml.bos_token_id", &m->bos) != QG_OK) m->bos = -1;
    if (gguf_get_int(g, "tokenizer.ggml.eos_token_id", &m->eos) != QG_OK) m->eos = -1;
    m->vocab_only = m->n_tensors == 0;

    struct model_type_stat all[GGML_TYPE_LIMIT] = {{0}};
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const struct gguf_tensor *t = gguf_tensor_at(g, i);
        int64_t nel = gguf_tensor_nelements(t);
        all[t->type].type = t->type;
        all[t->type].count++;
        all[t->type].elements += nel;
        all[t->type].bytes += t->nbytes;
        m->n_params += nel;
    }
    for (int t = 0; t < GGML_TYPE_LIMIT; t++)
        if (all[t].count) m->types[m->n_types++] = all[t];
    qsort(m->types, (size_t)m->n_types, sizeof *m->types, cmp_stat);
    return QG_OK;
}
