/* sampled — seeded paragraphs from a model's own distribution. */
#include "harness/sampled.h"
#include "backends/backend.h"
#include "core/status.h"
#include "core/utf8.h"

#include <stdlib.h>
#include <string.h>

/* text without its invalid UTF-8 bytes */
static void append_valid(struct sbuf *out, const char *t, size_t n)
{
    for (size_t k = 0; k < n;) {
        size_t bad;
        if (utf8_valid(t + k, n - k, &bad)) {
            sbuf_append(out, t + k, n - k);
            return;
        }
        sbuf_append(out, t + k, bad);
        k += bad + 1;
    }
}

int sampled_text(const char *spec, const struct sampled_params *p, struct sbuf *out, char *err,
                 size_t errlen)
{
    struct backend b;
    struct backend_open_params bp = {.n_ctx = p->n_ctx, .n_threads = p->threads};
    int rc = backend_open(spec, &bp, &b, err, errlen);
    if (rc) return rc;
    struct backend_info info;
    backend_info(&b, &info);
    size_t start = out->len;
    int64_t tokens = 0;
    for (int i = 0; i < p->max_paragraphs && !rc; i++) {
        if (p->max_bytes && out->len - start >= p->max_bytes) break;
        if (p->max_tokens && tokens >= p->max_tokens) break;
        struct backend_gen_params gp = {.max_tokens = p->paragraph_tokens,
                                        .temperature = 1.0f,
                                        .top_p = 1.0f,
                                        .seed = p->seed * 1000 + (uint64_t)i};
        char *t = NULL;
        int32_t *ids = NULL;
        int64_t n_ids = 0;
        rc = backend_generate(&b, &info.bos, 1, &gp, &t, &ids, &n_ids);
        if (rc) qg_errf(err, errlen, rc, "%s: sampling text failed", spec);
        if (!rc && t) append_valid(out, t, strlen(t));
        if (!rc) sbuf_append(out, "\n", 1);
        tokens += n_ids;
        free(t);
        free(ids);
    }
    backend_close(&b);
    return rc;
}
