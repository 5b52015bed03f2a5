/* cmd_suite — `qgate suite check FILE`: validate a suite and show what it
 * would run, without loading a model. */
#include "backends/gguf.h"
#include "backends/tokenizer.h"
#include "harness/commands.h"
#include "core/status.h"
#include "harness/suite.h"
#include "core/util.h"
#include "tasks/perplexity.h"

#include <stdlib.h>
#include <string.h>

static const struct cli_opt opts[] = {
    {"allow-changed-data", 0, CLI_FLAG, NULL, "accept data whose sha256 differs from the suite's pin (warns)", 0},
    {"tokenizer", 0, CLI_STR, "MODEL.gguf", "count perplexity tokens and windows with this model's tokenizer", 0},
    CLI_OPT_JSON,
    CLI_OPT_END,
};

static const char *kind_name(int k)
{
    return task_kind_name(k);
}

/* tokens and windows of a perplexity task with the given tokenizer */
static int ppl_counts(const struct task_config *t, const struct tokenizer *tok, int64_t *tokens, int64_t *windows,
                      int64_t *scored, char *err, size_t errlen)
{
    char *buf;
    size_t n;
    int rc = qg_read_file(task_config_file(t, "data")->path, (size_t)1 << 32, &buf, &n, err, errlen);
    if (rc) return rc;
    int32_t *ids = NULL;
    int64_t k = 0;
    rc = tok_encode(tok, buf, n, 1, 0, &ids, &k);
    free(buf);
    free(ids);
    if (rc) return qg_errf(err, errlen, rc, "tokenizing failed");
    struct ppl_params p = {.protocol = t->protocol, .n_ctx = t->ctx, .stride = t->stride, .max_windows = t->chunks};
    struct ppl_window *w;
    if ((rc = ppl_plan(&p, k, &w, windows, err, errlen))) return rc;
    *scored = 0;
    for (int64_t i = 0; i < *windows; i++) *scored += w[i].n - w[i].from;
    free(w);
    *tokens = k;
    return QG_OK;
}

static int cmd_suite(const struct cli_args *a)
{
    if (strcmp(a->pos[0], "check") != 0)
        return qg_error("unknown action 'suite %s' (known: check)", a->pos[0]), QG_EX_USAGE;
    const char *path = a->pos[1];
    char err[QG_ERRMSG_MAX];
    struct suite *s;
    int rc = suite_load(path, cli_flag(a, "allow-changed-data"), &s, err, sizeof err);
    if (rc) return cmd_fail(rc, err);
    struct tokenizer *tok = NULL;
    if (cli_str(a, "tokenizer")) {
        struct gguf *g;
        if ((rc = gguf_open(cli_str(a, "tokenizer"), &g, err, sizeof err)) == QG_OK) {
            rc = tok_load(g, cli_str(a, "tokenizer"), &tok, err, sizeof err);
            gguf_close(g);
        }
        if (rc) {
            suite_free(s);
            return cmd_fail(rc, err);
        }
    }
    cJSON *out = cJSON_CreateObject();
    cJSON_AddStringToObject(out, "suite", s->name);
    cJSON_AddStringToObject(out, "file", s->path);
    cJSON_AddStringToObject(out, "sha256", s->sha256);
    cJSON *arr = cJSON_AddArrayToObject(out, "tasks");
    int json = cli_flag(a, "json");
    if (!json) {
        printf("suite %s (%s, sha256 %.12s): %d tasks\n", s->name, s->path, s->sha256, s->n_tasks);
        printf("  %-16s %-16s %-10s %10s  %s\n", "task", "kind", "benchmark", "items", "detail");
    }
    for (int i = 0; i < s->n_tasks && !rc; i++) {
        const struct task_config *t = &s->tasks[i];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, j);
        cJSON_AddStringToObject(j, "name", t->name);
        cJSON_AddStringToObject(j, "kind", kind_name(t->kind));
        if (t->benchmark) cJSON_AddStringToObject(j, "benchmark", t->benchmark);
        cJSON_AddStringToObject(j, "config_sha256", t->config_hash);
        cJSON *files = cJSON_AddArrayToObject(j, "files");
        for (int f = 0; f < t->n_files; f++) {
            cJSON *fj = cJSON_CreateObject();
            cJSON_AddStringToObject(fj, "role", t->files[f].role);
            cJSON_AddStringToObject(fj, "path", t->files[f].path);
            cJSON_AddStringToObject(fj, "sha256", t->files[f].sha256);
            cJSON_AddBoolToObject(fj, "changed", t->files[f].changed);
            cJSON_AddItemToArray(files, fj);
            if (t->files[f].changed)
                qg_warn("task '%s': %s differs from its pinned sha256 (now %s)", t->name, t->files[f].path, t->files[f].sha256);
        }
        char detail[256] = "";
        int64_t items = -1;
        if (t->kind == TASK_PERPLEXITY) {
            snprintf(detail, sizeof detail, "%s, ctx %d%s", ppl_protocol_name(t->protocol), t->ctx,
                     tok ? "" : " (pass --tokenizer to count tokens)");
            if (tok) {
                int64_t tokens = 0, windows = 0, scored = 0;
                if (!(rc = ppl_counts(t, tok, &tokens, &windows, &scored, err, sizeof err))) {
                    snprintf(detail, sizeof detail, "%s, ctx %d: %lld tokens, %lld windows, %lld scored",
                             ppl_protocol_name(t->protocol), t->ctx, (long long)tokens, (long long)windows, (long long)scored);
                    cJSON_AddNumberToObject(j, "tokens", (double)tokens);
                    cJSON_AddNumberToObject(j, "windows", (double)windows);
                    cJSON_AddNumberToObject(j, "tokens_scored", (double)scored);
                }
            }
        } else if (t->kind == TASK_MULTIPLE_CHOICE) {
            struct mc_item *mi;
            if (!(rc = task_mc_items(t, &mi, &items, err, sizeof err))) {
                int minc = 99, maxc = 0;
                for (int64_t k = 0; k < items; k++) {
                    minc = mi[k].n_choices < minc ? mi[k].n_choices : minc;
                    maxc = mi[k].n_choices > maxc ? mi[k].n_choices : maxc;
                }
                snprintf(detail, sizeof detail, "%d-%d choices", minc, maxc);
                mc_items_free(mi, items);
            }
        } else {
            struct gen_item *gi;
            if (!(rc = task_gen_items(t, &gi, &items, err, sizeof err))) {
                size_t k = (size_t)snprintf(detail, sizeof detail, "max %d tokens; pipelines", t->max_tokens);
                for (int p = 0; p < t->n_pipelines && k < sizeof detail; p++)
                    k += (size_t)snprintf(detail + k, sizeof detail - k, " %s", pipeline_name(t->pipelines[p]));
                gen_items_free(gi, items);
            }
        }
        if (items >= 0) cJSON_AddNumberToObject(j, "items", (double)items);
        if (!json && !rc)
            printf("  %-16s %-16s %-10s %10s  %s\n", t->name, kind_name(t->kind), t->benchmark ? t->benchmark : "-",
                   items >= 0 ? (snprintf(err, sizeof err, "%lld", (long long)items), err) : "-", detail);
    }
    int code = 0;
    if (rc) {
        cJSON_Delete(out);
        code = cmd_fail(rc, err);
    } else if (json) {
        cJSON *pol = cJSON_AddObjectToObject(out, "policy");
        cJSON_AddNumberToObject(pol, "margin_ppl", s->policy.margin_ppl);
        cJSON_AddNumberToObject(pol, "margin_acc", s->policy.margin_acc);
        cJSON_AddNumberToObject(pol, "alpha", s->policy.alpha);
        cJSON_AddNumberToObject(pol, "beta", s->policy.beta);
        cJSON_AddNumberToObject(pol, "bootstrap", s->policy.bootstrap);
        code = cmd_print_json(out);
    } else {
        printf("policy: margin ln PPL %.4f, accuracy %.1f points, alpha %.3f, beta %.2f, bootstrap %d\n",
               s->policy.margin_ppl, 100 * s->policy.margin_acc, s->policy.alpha, s->policy.beta, s->policy.bootstrap);
        printf("ok\n");
        cJSON_Delete(out);
    }
    tok_free(tok);
    suite_free(s);
    return code;
}

const struct cli_cmd cmd_suite_def = {
    .name = "suite",
    .fn = cmd_suite,
    .args_usage = "check SUITE.json",
    .summary = "validate a suite file and show what it would run (no model needed)",
    .description = "Checks every task's options, resolves data paths against the suite's folder,\n"
                   "verifies each file's pinned sha256, and loads every item. Exit 65 with the\n"
                   "file, line or item on any problem.",
    .opts = opts,
    .min_pos = 2,
    .max_pos = 2,
};
