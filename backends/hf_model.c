/* hf_model — Hugging Face checkpoint directories as GGUF-shaped models
 * (see the header); hf_quant.c dequantizes the quantized projections. */
#include "backends/hf_model.h"
#include "backends/gguf.h"
#include "backends/hf_arch.h"
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
    /* ModelOpt's older exports: the scheme in hf_quant_config.json */
    char mo[4400];
    snprintf(mo, sizeof mo, "%s/hf_quant_config.json", dir);
    const cJSON *qc = cJSON_GetObjectItemCaseSensitive(c, "quantization_config");
    if ((!qc || cJSON_IsNull(qc)) && access(mo, F_OK) == 0) {
        if ((*rc = qg_read_file(mo, 1 << 20, &text, &n, err, errlen))) {
            cJSON_Delete(c);
            return NULL;
        }
        cJSON *h = cJSON_ParseWithLength(text, n);
        free(text);
        cJSON *qq = cJSON_DetachItemFromObjectCaseSensitive(h, "quantization");
        cJSON_Delete(h);
        if (!cJSON_IsObject(qq)) {
            cJSON_Delete(qq);
            cJSON_Delete(c);
            *rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: no \"quantization\" object", mo);
            return NULL;
        }
        cJSON_AddStringToObject(qq, "quant_method", "modelopt");
        cJSON_DeleteItemFromObjectCaseSensitive(c, "quantization_config");
        cJSON_AddItemToObject(c, "quantization_config", qq);
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
    int rc = hf_arch_keys(w, h, base && base[1] ? base + 1 : dir);
    if (!rc)
        rc = gguf_writer_set_str(w, "qgate.hf.quantization",
                                 q->scheme ? q->label : "none (weights as stored)");
    if (!rc && (q->act_fp8_dynamic || q->act_static)) /* the quantized projections' inputs */
        rc = gguf_writer_set_str(w, "qgate.hf.act", q->act_static ? q->act_static : "fp8_e4m3");
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
    rc = o ? hf_read_cfg(c, file, &h, err, errlen) : QG_ERR_NOMEM;
    if (!rc) rc = hf_quant_read(c, file, &q, err, errlen);
    if (!rc) rc = open_files(dir, o, err, errlen);
    const struct st_tensor *emb = o && !rc ? hf_find(o, "model.embed_tokens.weight") : NULL;
    int64_t rows = emb && emb->n_dims == 2 ? emb->shape[0] : -1;
    if (!rc && (rows <= 0 || rows > (1 << 24)))
        rc = qg_errf(err, errlen, QG_ERR_DATA,
                     "model.embed_tokens.weight is missing or not a [vocabulary, hidden] matrix");
    if (!rc) rc = metadata(dir, &h, &q, rows, &buf, &size, &n_vocab, err, errlen);
    if (!rc) rc = hf_arch_tensors(o, &h, &q, rows, &t, &n, err, errlen);
    cJSON_Delete(c); /* h points into it */
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
