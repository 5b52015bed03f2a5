/* backend — the registry: picks a backend from a model spec. */
#include "backends/backend.h"
#include "core/util.h"

#include <string.h>

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
