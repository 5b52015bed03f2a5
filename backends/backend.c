/* backend — the registry: picks a backend from a model spec. */
#include "backends/backend.h"
#include "backends/gguf.h"
#include "backends/hf_model.h"
#include "backends/model_info.h"
#include "core/status.h"
#include "core/util.h"
#include "datasets/hash.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const struct {
    const char *prefix;
    const struct backend_ops *ops;
    int keep_prefix; /* open() gets the whole spec (a URL) */
} registry[] = {
    {"cpu:", &backend_cpu_ops, 0},
#ifdef QG_HAVE_CUDA
    {"cuda:", &backend_cuda_ops, 0},
#endif
    {"http://", &backend_http_ops, 1}, {"https://", &backend_http_ops, 1},
    {"", &backend_cpu_ops, 0}, /* a plain path is a local GGUF on the CPU */
};

int backend_open(const char *spec, const struct backend_open_params *p, struct backend *out,
                 char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const char *q = strchr(spec, '?');
    int on_gpu =
        !strncmp(spec, "cuda:", 5) || (q && strncmp(spec, "http", 4) && strstr(q, "device=cuda"));
#ifdef QG_HAVE_CUDA
    if (on_gpu && strncmp(spec, "cuda:", 5)) { /* PATH.gguf?device=cuda[:N] */
        int rc = backend_cuda_ops.open(spec, p, &out->impl, err, errlen);
        if (rc == QG_OK) out->ops = &backend_cuda_ops;
        return rc;
    }
#else
    if (on_gpu)
        return qg_errf(err, errlen, QG_ERR_UNAVAILABLE,
                       "%s: this qgate was built without the CUDA backend (build it with cmake "
                       "-DQG_CUDA=ON on a machine with the CUDA toolkit)",
                       spec);
#endif
    for (size_t i = 0; i < sizeof registry / sizeof *registry; i++) {
        size_t n = strlen(registry[i].prefix);
        if (strncmp(spec, registry[i].prefix, n) != 0) continue;
        const struct backend_ops *ops = registry[i].ops;
        if (ops->version != BACKEND_API_VERSION)
            return qg_errf(err, errlen, QG_ERR_INTERNAL, "backend %s has API version %d", ops->name,
                           ops->version);
        int rc = ops->open(registry[i].keep_prefix ? spec : spec + n, p, &out->impl, err, errlen);
        if (rc == QG_OK) out->ops = ops;
        return rc;
    }
    return qg_errf(err, errlen, QG_ERR_USAGE, "%s: no backend for this model spec", spec);
}

void backend_close(struct backend *b)
{
    if (b && b->ops) b->ops->close(b->impl);
    if (b) {
        b->ops = NULL;
        b->impl = NULL;
    }
}

/* the stored tensor types as JSON, by descending bytes */
static char *types_json(const struct model_info *m)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < m->n_types; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "type", ggml_type_name(m->types[i].type));
        cJSON_AddNumberToObject(o, "count", (double)m->types[i].count);
        cJSON_AddNumberToObject(o, "bytes", (double)m->types[i].bytes);
        cJSON_AddItemToArray(a, o);
    }
    char *s = a ? cJSON_PrintUnformatted(a) : NULL;
    cJSON_Delete(a);
    return s;
}

int backend_model_sha256(const char *file, char sha[65], char *err, size_t errlen)
{
    return hf_is_dir(file) ? hf_hash(file, sha, err, errlen)
                           : hash_sha256_file(file, sha, err, errlen);
}

int backend_identify(const char *spec, int hash, struct backend_identity *id, char *err,
                     size_t errlen)
{
    memset(id, 0, sizeof *id);
    id->n_params = id->file_bytes = id->n_ctx_train = id->n_layers = -1;
    if (!strncmp(spec, "http://", 7) || !strncmp(spec, "https://", 8)) return QG_OK;
    char file[4096];
    qg_spec_file(!strncmp(spec, "cpu:", 4)    ? spec + 4
                 : !strncmp(spec, "cuda:", 5) ? spec + 5
                                              : spec,
                 file, sizeof file);
    struct stat st;
    if (stat(file, &st) == 0 && S_ISREG(st.st_mode)) id->file_bytes = (int64_t)st.st_size;
    struct gguf *g;
    int rc = model_open(file, &g, err, errlen);
    if (rc) return rc;
    struct model_info m;
    model_info_read(g, &m);
    gguf_close(g);
    snprintf(id->arch, sizeof id->arch, "%s", m.arch);
    id->n_params = m.n_params;
    id->n_ctx_train = m.ctx;
    id->n_layers = m.n_layers;
    id->types_json = types_json(&m);
    if (hash && backend_model_sha256(file, id->sha256, err, errlen)) id->sha256[0] = '\0';
    return QG_OK;
}

void backend_identity_release(struct backend_identity *id)
{
    if (!id) return;
    free(id->types_json);
    id->types_json = NULL;
}
