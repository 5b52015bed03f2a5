/* cmd_suite — `qgate suite check FILE`: validate a suite and show what it
 * would run, without loading a model. */
#include "backends/backend.h"
#include "cli/commands.h"
#include "harness/compare.h"
#include "core/status.h"
#include "harness/suite.h"
#include "harness/suite_pin.h"
#include "core/util.h"
#include "tasks/perplexity.h"

#include <stdlib.h>
#include <string.h>

static const struct cli_opt opts[] = {
    {"allow-changed-data", 0, CLI_FLAG, NULL,
     "accept data whose sha256 differs from the suite's pin (warns)", 0},
    {"tokenizer", 0, CLI_STR, "MODEL.gguf",
     "count perplexity tokens and windows with this model's tokenizer", 0},
    {"dry-run", 0, CLI_FLAG, NULL, "pin: show the pins, do not write them", 0},
    CLI_OPT_JSON,
    CLI_OPT_END,
};

/* tokens and windows of a perplexity task with the given tokenizer */
static int ppl_counts(const struct task_config *t, const struct backend *tok, int64_t *tokens,
                      int64_t *windows, int64_t *scored, char *err, size_t errlen)
{
    char *buf;
    size_t n;
    int rc = task_read_text(t, &buf, &n, err, errlen);
    if (rc) return rc;
    int32_t *ids = NULL;
    int64_t k = 0;
    rc = backend_tokenize(tok, buf, n, BACKEND_TOK_ADD_SPECIAL, &ids, &k);
    free(buf);
    free(ids);
    if (rc) return qg_errf(err, errlen, rc, "tokenizing failed");
    struct ppl_params p = ppl_task_params(t, 0, 1);
    struct ppl_window *w;
    if ((rc = ppl_plan(&p, k, &w, windows, err, errlen))) return rc;
    *scored = 0;
    for (int64_t i = 0; i < *windows; i++)
        *scored += w[i].n - w[i].from;
    free(w);
    *tokens = k;
    return QG_OK;
}

static void files_json(const struct task_config *t, cJSON *j)
{
    cJSON *files = cJSON_AddArrayToObject(j, "files");
    for (int f = 0; f < t->n_files; f++) {
        cJSON *fj = cJSON_CreateObject();
        cJSON_AddStringToObject(fj, "role", t->files[f].role);
        cJSON_AddStringToObject(fj, "path", t->files[f].path);
        cJSON_AddStringToObject(fj, "sha256", t->files[f].sha256);
        cJSON_AddBoolToObject(fj, "changed", t->files[f].changed);
        cJSON_AddItemToArray(files, fj);
        if (t->files[f].changed)
            qg_warn("task '%s': %s differs from its pinned sha256 (now %s)", t->name,
                    t->files[f].path, t->files[f].sha256);
    }
}

static int ppl_detail(const struct task_config *t, const struct backend *tok, cJSON *j,
                      char *detail, size_t dn, char *err, size_t errlen)
{
    snprintf(detail, dn, "%s, ctx %d%s", ppl_protocol_name(t->protocol), t->ctx,
             tok ? "" : " (pass --tokenizer to count tokens)");
    if (!tok) return QG_OK;
    int64_t tokens = 0, windows = 0, scored = 0;
    int rc = ppl_counts(t, tok, &tokens, &windows, &scored, err, errlen);
    if (rc) return rc;
    snprintf(detail, dn, "%s, ctx %d: %lld tokens, %lld windows, %lld scored",
             ppl_protocol_name(t->protocol), t->ctx, (long long)tokens, (long long)windows,
             (long long)scored);
    cJSON_AddNumberToObject(j, "tokens", (double)tokens);
    cJSON_AddNumberToObject(j, "windows", (double)windows);
    cJSON_AddNumberToObject(j, "tokens_scored", (double)scored);
    return QG_OK;
}

/* What a task would run: a one-line detail and its item count (-1 for
 * perplexity), loading its items. */
static int task_detail(const struct task_config *t, const struct backend *tok, cJSON *j,
                       char *detail, size_t dn, int64_t *items, char *err, size_t errlen)
{
    *items = -1;
    if (t->kind == TASK_PERPLEXITY) return ppl_detail(t, tok, j, detail, dn, err, errlen);
    if (t->kind == TASK_MULTIPLE_CHOICE) {
        struct mc_item *mi;
        int rc = task_mc_items(t, &mi, items, err, errlen);
        if (rc) return rc;
        int minc = 99, maxc = 0;
        for (int64_t k = 0; k < *items; k++) {
            minc = mi[k].n_choices < minc ? mi[k].n_choices : minc;
            maxc = mi[k].n_choices > maxc ? mi[k].n_choices : maxc;
        }
        snprintf(detail, dn, "%d-%d choices", minc, maxc);
        mc_items_free(mi, *items);
        return QG_OK;
    }
    struct gen_item *gi;
    int rc = task_gen_items(t, &gi, items, err, errlen);
    if (rc) return rc;
    size_t k = (size_t)snprintf(detail, dn, "max %d tokens; pipelines", t->max_tokens);
    for (int p = 0; p < t->n_pipelines && k < dn; p++)
        k += (size_t)snprintf(detail + k, dn - k, " %s", extract_pipeline_name(t->pipelines[p]));
    gen_items_free(gi, *items);
    return QG_OK;
}

/* the model's tokenizer alone (no weights; a vocab-only file opens) */
static int load_tokenizer(const char *spec, struct backend *tok, char *err, size_t errlen)
{
    struct backend_open_params bp = {.tokenizer_only = 1};
    return backend_open(spec, &bp, tok, err, errlen);
}

/* Checks every task of s, printing a table row each (unless json). */
static int check_tasks(const struct suite *s, const struct backend *tok, int json, cJSON *arr,
                       char *err, size_t errlen)
{
    int rc = QG_OK;
    for (int i = 0; i < s->n_tasks && !rc; i++) {
        const struct task_config *t = &s->tasks[i];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, j);
        cJSON_AddStringToObject(j, "name", t->name);
        cJSON_AddStringToObject(j, "kind", task_kind_name(t->kind));
        if (t->benchmark) cJSON_AddStringToObject(j, "benchmark", t->benchmark);
        cJSON_AddStringToObject(j, "config_sha256", t->config_hash);
        files_json(t, j);
        char detail[256] = "", count[32] = "-";
        int64_t items;
        rc = task_detail(t, tok, j, detail, sizeof detail, &items, err, errlen);
        if (items >= 0) {
            cJSON_AddNumberToObject(j, "items", (double)items);
            snprintf(count, sizeof count, "%lld", (long long)items);
        }
        if (!json && !rc)
            printf("  %-16s %-16s %-10s %10s  %s\n", t->name, task_kind_name(t->kind),
                   t->benchmark ? t->benchmark : "-", count, detail);
    }
    return rc;
}

static int cmd_suite(const struct cli_args *a)
{
    char err[QG_ERRMSG_MAX];
    if (!strcmp(a->pos[0], "pin")) {
        int changed = 0;
        int rc = suite_pin(a->pos[1], cli_flag(a, "dry-run"), &changed, err, sizeof err);
        if (rc) return cmd_fail(rc, err);
        if (!changed)
            printf("every pin of %s matches its data\n", a->pos[1]);
        else
            printf("%s %d pin%s %s %s\n", cli_flag(a, "dry-run") ? "would write" : "wrote", changed,
                   changed > 1 ? "s" : "", cli_flag(a, "dry-run") ? "to" : "into", a->pos[1]);
        return 0;
    }
    if (strcmp(a->pos[0], "check") != 0)
        return cmd_usage("unknown action 'suite %s' (known: check, pin)", a->pos[0]);
    struct suite *s;
    int rc = suite_load(a->pos[1], cli_flag(a, "allow-changed-data"), &s, err, sizeof err);
    if (rc) return cmd_fail(rc, err);
    struct backend tokb, *tok = NULL;
    if (cli_str(a, "tokenizer")) {
        if ((rc = load_tokenizer(cli_str(a, "tokenizer"), &tokb, err, sizeof err))) {
            suite_free(s);
            return cmd_fail(rc, err);
        }
        tok = &tokb;
    }
    int json = cli_flag(a, "json");
    cJSON *out = cJSON_CreateObject();
    cJSON_AddStringToObject(out, "suite", s->name);
    cJSON_AddStringToObject(out, "file", s->path);
    cJSON_AddStringToObject(out, "sha256", s->sha256);
    if (!json) {
        printf("suite %s (%s, sha256 %.12s): %d tasks\n", s->name, s->path, s->sha256, s->n_tasks);
        printf("  %-16s %-16s %-10s %10s  %s\n", "task", "kind", "benchmark", "items", "detail");
    }
    rc = check_tasks(s, tok, json, cJSON_AddArrayToObject(out, "tasks"), err, sizeof err);
    int code = 0;
    if (rc) {
        cJSON_Delete(out);
        code = cmd_fail(rc, err);
    } else if (json) {
        cJSON_AddItemToObject(out, "policy", compare_policy_json(&s->policy));
        code = cmd_print_json(out);
    } else {
        printf("policy: margin ln PPL %.4f, accuracy %.1f points, alpha %.3f, beta %.2f, bootstrap "
               "%d\n",
               s->policy.margin_ppl, 100 * s->policy.margin_acc, s->policy.alpha, s->policy.beta,
               s->policy.bootstrap);
        printf("ok\n");
        cJSON_Delete(out);
    }
    if (tok) backend_close(tok);
    suite_free(s);
    return code;
}

const struct cli_cmd cmd_suite_def = {
    .name = "suite",
    .fn = cmd_suite,
    .args_usage = "check|pin SUITE.json",
    .summary = "validate a suite file and show what it would run (no model needed); pin its data",
    .description = "Checks every task's options, resolves data paths against the suite's folder,\n"
                   "verifies each file's pinned sha256, and loads every item. Exit 65 with the\n"
                   "file, line or item on any problem.\n"
                   "'suite pin' shows every missing or changed sha256 pin, then writes them\n"
                   "into the suite file (--dry-run: only shows them).",
    .opts = opts,
    .min_pos = 2,
    .max_pos = 2,
};
