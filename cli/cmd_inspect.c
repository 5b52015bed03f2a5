/* cmd_inspect — `qgate inspect MODEL.gguf`: what a model file really holds. */
#include "backends/ggml_types.h"
#include "backends/gguf.h"
#include "backends/hf_model.h"
#include "backends/llama.h"
#include "backends/model_info.h"
#include "datasets/hash.h"
#include "cli/commands.h"
#include "core/status.h"
#include "core/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct cli_opt opts[] = {
    CLI_OPT_JSON,
    {"tensors", 0, CLI_FLAG, NULL, "also list every tensor (name, type, shape, bytes)", 0},
    {"metadata", 0, CLI_FLAG, NULL, "also list every metadata key (arrays summarised)", 0},
    CLI_OPT_END,
};

/* The ggml type a llama.cpp file type asks for ("Q4_K_M" -> Q4_K), or -1 for
 * mixtures that do not name one type. */
static int requested_type(int64_t ftype)
{
    const char *n = model_ftype_name(ftype);
    char base[32];
    snprintf(base, sizeof base, "%s", n);
    int t = ggml_type_from_name(base);
    if (t >= 0) return t;
    size_t len = strlen(base);
    if (len > 2 && base[len - 2] == '_' && strchr("SML", base[len - 1])) {
        base[len - 2] = '\0';
        return ggml_type_from_name(base);
    }
    return -1;
}

/* A note when the requested file type's block format is stored nowhere. */
static const char *ftype_note(const struct model_info *m, char *buf, size_t n)
{
    int want = requested_type(m->file_type);
    if (want < 0 || m->vocab_only) return NULL;
    for (int i = 0; i < m->n_types; i++)
        if ((int)m->types[i].type == want) return NULL;
    snprintf(buf, n,
             "file type says %s, but no tensor is stored as %s (llama-quantize fell back per "
             "tensor); the stored types below are what the model computes with",
             model_ftype_name(m->file_type), ggml_type_name((uint32_t)want));
    return buf;
}

/* Copies a GGUF string for display: control bytes become '?', long ones are cut. */
static void show_str(const char *s, size_t len, char *out, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < len && k + 4 < n; i++)
        out[k++] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
    if (len > 0 && k + 4 >= n) memcpy(out + k, "...", 3), k += 3;
    out[k] = '\0';
}

static void kv_value_text(const struct gguf *g, int64_t i, char *out, size_t n)
{
    uint32_t t = gguf_kv_type(g, i);
    const char *s;
    size_t len;
    int64_t iv;
    double fv;
    if (t == GGUF_STR && gguf_kv_str(g, i, &s, &len) == QG_OK) {
        char tmp[256];
        show_str(s, len, tmp, sizeof tmp);
        snprintf(out, n, "\"%s\"", tmp);
    } else if (t == GGUF_ARR) {
        snprintf(out, n, "[%llu x %s]", (unsigned long long)gguf_kv_len(g, i),
                 gguf_vtype_name(gguf_kv_arr_type(g, i)));
    } else if ((t == GGUF_F32 || t == GGUF_F64) && gguf_kv_float(g, i, &fv) == QG_OK) {
        snprintf(out, n, "%.9g", fv);
    } else if (gguf_kv_int(g, i, &iv) == QG_OK) {
        snprintf(out, n, t == GGUF_BOOL ? (iv ? "true" : "false") : "%lld", (long long)iv);
    } else {
        snprintf(out, n, "(u64 above 2^63)");
    }
}

static void print_int(const char *label, int64_t v)
{
    if (v >= 0) printf("%-14s %lld\n", label, (long long)v);
}

/* what the engine implements of the file's family, or which it runs */
static void print_family(const char *arch)
{
    const char *fam = llama_family_note(arch);
    if (fam)
        printf("%-14s %s\n", "qgate runs", fam);
    else
        printf("%-14s not this family (it runs %s)\n", "qgate runs", llama_families());
}

/* the container: a checkpoint directory's files and quantization, or the
 * GGUF header; 1 for a directory */
static int print_container(const struct gguf *g, const struct model_info *m, const char *path)
{
    const char *hq;
    size_t hql;
    if (gguf_get_str(g, "qgate.hf.quantization", &hq, &hql) != QG_OK) {
        printf("%-14s v%u, %lld metadata keys, %lld tensors, alignment %llu\n", "gguf",
               m->gguf_version, (long long)m->n_kv, (long long)m->n_tensors,
               (unsigned long long)m->alignment);
        return 0;
    }
    int nf;
    int64_t sb = hf_stored_bytes(path, &nf);
    printf("%-14s Hugging Face directory, %d safetensors file%s\n", "checkpoint", nf,
           nf == 1 ? "" : "s");
    printf("%-14s %.*s%s\n", "quantization", (int)hql, hq,
           strncmp(hq, "none", 4) ? " (projections, dequantized to f32 at load)" : "");
    if (m->n_params > 0)
        printf("%-14s %.2f bits per parameter as stored\n", "stored",
               8.0 * (double)sb / (double)m->n_params);
    return 1;
}

static void print_text(const struct gguf *g, const struct model_info *m, const char *path,
                       const char *sha, int tensors, int metadata)
{
    char hb[32], note[256];
    qg_human_bytes(m->file_bytes, hb);
    printf("%-14s %s\n", "file", path);
    printf("%-14s %llu bytes (%s)\n", "size", (unsigned long long)m->file_bytes, hb);
    printf("%-14s %s\n", "sha256", sha);
    int dir = print_container(g, m, path);
    printf("%-14s %s\n", "architecture", m->arch[0] ? m->arch : "(none)");
    print_family(m->arch);
    if (m->name[0]) printf("%-14s %s\n", "name", m->name);
    if (m->file_type >= 0)
        printf("%-14s %s (%lld)\n", "file type", model_ftype_name(m->file_type),
               (long long)m->file_type);
    if (m->vocab_only)
        printf("%-14s none (vocabulary-only file)\n", "parameters");
    else
        printf("%-14s %lld (stored, including any separate output matrix)\n", "parameters",
               (long long)m->n_params);
    print_int("context", m->ctx);
    print_int("embedding", m->dim);
    print_int("layers", m->n_layers);
    print_int("ffn", m->ffn);
    if (m->n_heads > 0) {
        printf("%-14s %lld (kv %lld)", "heads", (long long)m->n_heads,
               (long long)(m->n_kv_heads > 0 ? m->n_kv_heads : m->n_heads));
        if (m->dim > 0) printf(", head size %lld", (long long)(m->dim / m->n_heads));
        printf("\n");
    }
    print_int("experts", m->expert_count);
    if (m->rope_dims >= 0 || !isnan(m->rope_theta)) {
        printf("%-14s", "rope");
        if (m->rope_dims >= 0) printf(" %lld dims", (long long)m->rope_dims);
        if (!isnan(m->rope_theta)) printf(" theta %g", m->rope_theta);
        printf("\n");
    }
    if (!isnan(m->rms_eps)) printf("%-14s %g\n", "rms epsilon", m->rms_eps);
    printf("%-14s %s, %lld tokens", "tokenizer", m->tok_model[0] ? m->tok_model : "(none)",
           (long long)(m->n_vocab > 0 ? m->n_vocab : 0));
    if (m->bos >= 0 || m->eos >= 0)
        printf(" (bos %lld, eos %lld)", (long long)m->bos, (long long)m->eos);
    printf("\n");
    if (ftype_note(m, note, sizeof note)) printf("\nnote: %s\n", note);
    if (m->n_types > 0) {
        printf("\n%s tensor types:\n  %-8s %8s %14s %14s %7s\n", dir ? "in-memory" : "stored",
               "type", "tensors", "elements", "bytes", "share");
        uint64_t total = 0;
        for (int i = 0; i < m->n_types; i++)
            total += m->types[i].bytes;
        for (int i = 0; i < m->n_types; i++)
            printf("  %-8s %8lld %14lld %14llu %6.1f%%\n", ggml_type_name(m->types[i].type),
                   (long long)m->types[i].count, (long long)m->types[i].elements,
                   (unsigned long long)m->types[i].bytes,
                   total ? 100.0 * (double)m->types[i].bytes / (double)total : 0.0);
    }
    if (tensors && m->n_tensors > 0) {
        printf("\ntensors:\n  %-32s %-8s %-24s %12s\n", "name", "type", "shape (ne0 x ne1 ...)",
               "bytes");
        for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
            const struct gguf_tensor *t = gguf_tensor_at(g, i);
            char shape[96] = "";
            size_t k = 0;
            for (uint32_t d = 0; d < t->n_dims; d++)
                k += (size_t)snprintf(shape + k, sizeof shape - k, d ? " x %lld" : "%lld",
                                      (long long)t->ne[d]);
            printf("  %-32s %-8s %-24s %12llu\n", t->name, ggml_type_name(t->type), shape,
                   (unsigned long long)t->nbytes);
        }
    }
    if (metadata) {
        printf("\nmetadata:\n");
        for (int64_t i = 0; i < gguf_n_kv(g); i++) {
            char v[300];
            kv_value_text(g, i, v, sizeof v);
            printf("  %-44s %-7s %s\n", gguf_kv_key(g, i), gguf_vtype_name(gguf_kv_type(g, i)), v);
        }
    }
}

static void add_opt_int(cJSON *o, const char *k, int64_t v)
{
    if (v >= 0)
        cJSON_AddNumberToObject(o, k, (double)v);
    else
        cJSON_AddNullToObject(o, k);
}

static void add_opt_f64(cJSON *o, const char *k, double v)
{
    if (!isnan(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

static cJSON *to_json(const struct gguf *g, const struct model_info *m, const char *path,
                      const char *sha, int tensors, int metadata)
{
    cJSON *o = cJSON_CreateObject();
    char note[256];
    cJSON_AddStringToObject(o, "file", path);
    cJSON_AddNumberToObject(o, "size", (double)m->file_bytes);
    cJSON_AddStringToObject(o, "sha256", sha);
    cJSON_AddNumberToObject(o, "gguf_version", m->gguf_version);
    cJSON_AddNumberToObject(o, "n_kv", (double)m->n_kv);
    cJSON_AddNumberToObject(o, "n_tensors", (double)m->n_tensors);
    cJSON_AddNumberToObject(o, "alignment", (double)m->alignment);
    cJSON_AddStringToObject(o, "architecture", m->arch);
    const char *fam = llama_family_note(m->arch);
    if (fam)
        cJSON_AddStringToObject(o, "family_support", fam);
    else
        cJSON_AddNullToObject(o, "family_support");
    cJSON_AddStringToObject(o, "name", m->name);
    if (m->file_type >= 0)
        cJSON_AddStringToObject(o, "file_type", model_ftype_name(m->file_type));
    else
        cJSON_AddNullToObject(o, "file_type");
    cJSON_AddBoolToObject(o, "vocab_only", m->vocab_only);
    cJSON_AddNumberToObject(o, "parameters", (double)m->n_params);
    add_opt_int(o, "context_length", m->ctx);
    add_opt_int(o, "embedding_length", m->dim);
    add_opt_int(o, "block_count", m->n_layers);
    add_opt_int(o, "feed_forward_length", m->ffn);
    add_opt_int(o, "head_count", m->n_heads);
    add_opt_int(o, "head_count_kv", m->n_kv_heads);
    add_opt_int(o, "expert_count", m->expert_count);
    add_opt_int(o, "rope_dimension_count", m->rope_dims);
    add_opt_f64(o, "rope_freq_base", m->rope_theta);
    add_opt_f64(o, "rms_epsilon", m->rms_eps);
    cJSON *tok = cJSON_AddObjectToObject(o, "tokenizer");
    cJSON_AddStringToObject(tok, "model", m->tok_model);
    add_opt_int(tok, "vocab_size", m->n_vocab);
    add_opt_int(tok, "bos", m->bos);
    add_opt_int(tok, "eos", m->eos);
    const char *n = ftype_note(m, note, sizeof note);
    if (n) cJSON_AddStringToObject(o, "note", n);
    cJSON *types = cJSON_AddArrayToObject(o, "tensor_types");
    for (int i = 0; i < m->n_types; i++) {
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "type", ggml_type_name(m->types[i].type));
        cJSON_AddNumberToObject(t, "count", (double)m->types[i].count);
        cJSON_AddNumberToObject(t, "elements", (double)m->types[i].elements);
        cJSON_AddNumberToObject(t, "bytes", (double)m->types[i].bytes);
        cJSON_AddItemToArray(types, t);
    }
    if (tensors) {
        cJSON *arr = cJSON_AddArrayToObject(o, "tensors");
        for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
            const struct gguf_tensor *t = gguf_tensor_at(g, i);
            cJSON *j = cJSON_CreateObject();
            cJSON_AddStringToObject(j, "name", t->name);
            cJSON_AddStringToObject(j, "type", ggml_type_name(t->type));
            cJSON *shape = cJSON_AddArrayToObject(j, "shape");
            for (uint32_t d = 0; d < t->n_dims; d++)
                cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->ne[d]));
            cJSON_AddNumberToObject(j, "offset", (double)t->offset);
            cJSON_AddNumberToObject(j, "bytes", (double)t->nbytes);
            cJSON_AddItemToArray(arr, j);
        }
    }
    if (metadata) {
        cJSON *md = cJSON_AddObjectToObject(o, "metadata");
        for (int64_t i = 0; i < gguf_n_kv(g); i++) {
            char v[300];
            kv_value_text(g, i, v, sizeof v);
            cJSON_AddStringToObject(md, gguf_kv_key(g, i), v);
        }
    }
    return o;
}

static int cmd_inspect(const struct cli_args *a)
{
    const char *path = a->pos[0];
    char err[QG_ERRMSG_MAX], sha[HASH_HEX_LEN + 1];
    struct gguf *g;
    int rc = model_open(path, &g, err, sizeof err);
    if (rc) return cmd_fail(rc, err);
    struct model_info *m = malloc(sizeof *m);
    if (!m) {
        gguf_close(g);
        return cmd_fail(QG_ERR_NOMEM, "out of memory");
    }
    model_info_read(g, m);
    if (hf_is_dir(path)) {
        int nf;
        m->file_bytes = (uint64_t)hf_stored_bytes(path, &nf);
        rc = hf_hash(path, sha, err, sizeof err);
    } else {
        rc = hash_sha256_mem(gguf_bytes(g), (size_t)gguf_file_size(g), sha);
    }
    int code = 0;
    if (rc) {
        code = cmd_fail(rc, "cannot hash the file");
    } else if (cli_flag(a, "json")) {
        code = cmd_print_json(
            to_json(g, m, path, sha, cli_flag(a, "tensors"), cli_flag(a, "metadata")));
    } else {
        print_text(g, m, path, sha, cli_flag(a, "tensors"), cli_flag(a, "metadata"));
    }
    free(m);
    gguf_close(g);
    return code;
}

const struct cli_cmd cmd_inspect_def = {
    .name = "inspect",
    .fn = cmd_inspect,
    .args_usage = "MODEL.gguf",
    .summary = "show what a GGUF model file holds: architecture, sizes, tokenizer, stored types",
    .description = "Reads the file without loading weights. The stored tensor types table shows\n"
                   "what is really in the file, which can differ from its requested file type.\n"
                   "Exit 65 when the file is not a valid GGUF, 66 when it cannot be opened.",
    .opts = opts,
    .min_pos = 1,
    .max_pos = 1,
};
