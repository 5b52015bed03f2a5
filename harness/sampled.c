/* sampled — seeded paragraphs from a model's own distribution. */
#include "harness/sampled.h"
#include "backends/backend.h"
#include "core/status.h"
#include "core/utf8.h"
#include "datasets/hash.h"
#include "store/store.h"
#include "metrics/stats.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>

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

int64_t sampled_tokens_for(double margin, double alpha, double beta)
{
    double z = stats_norm_ppf(1 - alpha) + stats_norm_ppf(1 - beta);
    double n = SAMPLED_DEPENDENCE * (z * SAMPLED_SIGMA / margin) * (z * SAMPLED_SIGMA / margin);
    if (!(n < 1e7)) n = 1e7;
    return n < SAMPLED_MIN_TOKENS ? SAMPLED_MIN_TOKENS : (int64_t)ceil(n);
}

/* the baseline's sampled text: from the store, else sampled now and stored */
static int sampled_corpus(struct store *s, const struct sampled_suite_params *p, struct sbuf *text,
                          char sha[HASH_HEX_LEN + 1], char *err, size_t errlen)
{
    char model_sha[HASH_HEX_LEN + 1], origin[256], file[4096];
    qg_spec_file(p->baseline, file, sizeof file);
    int rc = QG_OK;
    if (p->baseline_sha)
        snprintf(model_sha, sizeof model_sha, "%s", p->baseline_sha);
    else
        rc = backend_model_sha256(file, model_sha, err, errlen);
    if (rc) return rc;
    snprintf(origin, sizeof origin, "sampled/1 model %s seed %llu tokens %lld", model_sha,
             (unsigned long long)p->seed, (long long)p->tokens);
    char *found = NULL;
    size_t n = 0;
    rc = store_text_find(s, origin, &found, &n, sha);
    if (rc == QG_ERR_NOTFOUND && p->also &&
        store_text_find(p->also, origin, &found, &n, sha) == 0 &&
        (rc = store_text_put(s, sha, origin, found, n))) /* kept with the run */
        free(found);
    if (rc == QG_ERR_NOTFOUND && p->baseline_sha)
        return qg_errf(err, errlen, QG_ERR_NOINPUT,
                       "the baseline '%s' is not here, and no text sampled from it (%lld tokens, "
                       "seed %llu) is stored: give the baseline file, or the --sample-tokens and "
                       "--seed of the stored run",
                       p->baseline, (long long)p->tokens, (unsigned long long)p->seed);
    if (rc == QG_OK) {
        sbuf_append(text, found, n);
        free(found);
        if (!p->quiet)
            printf("measuring on %lld tokens sampled from the baseline (stored)\n",
                   (long long)p->tokens);
        return text->data || !n ? QG_OK : QG_ERR_NOMEM;
    }
    if (rc != QG_ERR_NOTFOUND) return qg_errf(err, errlen, rc, "%s", store_errmsg(s));
    if (!p->quiet)
        printf("sampling %lld tokens from the baseline to measure on (seed %llu; stored for "
               "later runs)...\n",
               (long long)p->tokens, (unsigned long long)p->seed);
    fflush(stdout);
    struct sampled_params sp = {.seed = p->seed,
                                .threads = p->threads,
                                .n_ctx = p->ctx,
                                .paragraph_tokens = p->ctx,
                                .max_tokens = p->tokens,
                                .max_paragraphs = 1 << 20};
    if ((rc = sampled_text(p->baseline, &sp, text, err, errlen))) return rc;
    hash_sha256_mem(text->data ? text->data : "", text->len, sha);
    rc = store_text_put(s, sha, origin, sbuf_str(text), text->len);
    return rc ? qg_errf(err, errlen, rc, "%s", store_errmsg(s)) : QG_OK;
}

static void add_task(cJSON *tasks, const char *name, const char *data, const char *sha, int ctx)
{
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "name", name);
    cJSON_AddStringToObject(t, "kind", "perplexity");
    cJSON_AddStringToObject(t, "data", data);
    cJSON_AddStringToObject(t, "sha256", sha);
    cJSON_AddStringToObject(t, "protocol", "rolling");
    cJSON_AddNumberToObject(t, "ctx", ctx);
    cJSON_AddItemToArray(tasks, t);
}

/* suite.json: the sampled text, then each user text */
static int write_suite(const struct sampled_suite_params *p, const char *dir, const char *sha,
                       char *suite, size_t suitelen, char *err, size_t errlen)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "name", "sampled");
    cJSON_AddStringToObject(root, "description",
                            "Written by qgate gate: text sampled from the baseline, and the "
                            "user's texts (--text).");
    cJSON *tasks = cJSON_AddArrayToObject(root, "tasks");
    add_task(tasks, "sampled-text", "sampled.txt", sha, p->ctx);
    int rc = QG_OK;
    for (int i = 0; i < p->n_texts && !rc; i++) {
        char h[HASH_HEX_LEN + 1], name[160], st[128], abs[4096];
        rc = hash_sha256_file(p->texts[i], h, err, errlen);
        qg_path_stem(p->texts[i], st, sizeof st);
        snprintf(name, sizeof name, "text-%s", st);
        if (p->texts[i][0] != '/' && getcwd(abs, sizeof abs))
            snprintf(abs + strlen(abs), sizeof abs - strlen(abs), "/%s", p->texts[i]);
        else
            snprintf(abs, sizeof abs, "%s", p->texts[i]);
        if (!rc) add_task(tasks, name, abs, h, p->ctx);
    }
    char *json = rc ? NULL : cJSON_Print(root);
    cJSON_Delete(root);
    if (rc) return rc;
    if (!json) return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    snprintf(suite, suitelen, "%s/suite.json", dir);
    rc = qg_write_file_atomic(suite, json, strlen(json), err, errlen);
    free(json);
    return rc;
}

int sampled_suite_make(struct store *s, const struct sampled_suite_params *p, char *dir,
                       size_t dirlen, char *suite, size_t suitelen, char *err, size_t errlen)
{
    dir[0] = suite[0] = '\0';
    const char *tmp = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/qgate-gate-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(tmpl))
        return qg_errf(err, errlen, QG_ERR_CANTCREAT,
                       "cannot create a folder for the sampled text "
                       "(%s): %s",
                       tmpl, strerror(errno));
    snprintf(dir, dirlen, "%s", tmpl);
    struct sbuf text;
    sbuf_init(&text, 0);
    char sha[HASH_HEX_LEN + 1], path[4200];
    int rc = sampled_corpus(s, p, &text, sha, err, errlen);
    snprintf(path, sizeof path, "%s/sampled.txt", dir);
    if (!rc) rc = qg_write_file_atomic(path, sbuf_str(&text), text.len, err, errlen);
    sbuf_release(&text);
    if (!rc) rc = write_suite(p, dir, sha, suite, suitelen, err, errlen);
    return rc;
}

void sampled_suite_remove(const char *dir)
{
    if (!dir || !*dir) return;
    char path[4200];
    snprintf(path, sizeof path, "%s/sampled.txt", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/suite.json", dir);
    unlink(path);
    rmdir(dir);
}
