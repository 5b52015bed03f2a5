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
    {"http://", &backend_http_ops, 1},
    {"https://", &backend_http_ops, 1},
    {"", &backend_cpu_ops, 0}, /* a plain path is a local GGUF on the CPU */
};

int backend_open(const char *spec, const struct backend_open_params *p, struct backend *out,
                 char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (strncmp(spec, "cuda:", 5) == 0)
        return qg_errf(
            err, errlen, QG_ERR_UNAVAILABLE,
            "%s: this qgate has no backend for that model spec yet (local GGUF files only)", spec);
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
