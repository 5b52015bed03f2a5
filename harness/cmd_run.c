/* cmd_run — `qgate run --suite S --model NAME=SPEC ...`: runs every task of a
 * suite on every model and stores each item's result.
 *
 * This first version runs one repeat, models one after another; rows are
 * written in transactions of ROW_BATCH so a killed run loses at most the
 * batch in flight. Repeats, lockstep KLD, --resume and --shard come with the
 * verdict (see the issues).
 */
#include "backends/backend.h"
#include "backends/gguf.h"
#include "backends/model_info.h"
#include "datasets/hash.h"
#include "harness/commands.h"
#include "harness/progress.h"
#include "harness/status.h"
#include "harness/store.h"
#include "harness/suite.h"
#include "harness/util.h"
#include "tasks/run.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { ROW_BATCH = 256, MAX_MODELS = 16 };

static const struct cli_opt opts[] = {
    {"suite", 's', CLI_STR, "FILE", "the suite to run", 0},
    {"model", 'm', CLI_STR, "NAME=SPEC", "a model (the first is the baseline): NAME=PATH.gguf", 1},
    CLI_OPT_DB,
    {"threads", 't', CLI_INT, "T", "threads", 0},
    {"allow-changed-data", 0, CLI_FLAG, NULL, "run even when data differs from the suite's pins", 0},
    {"quiet", 'q', CLI_FLAG, NULL, "no progress output", 0},
    CLI_OPT_END,
};

struct sink {
    struct store *s;
    int64_t trial;
    int64_t pending;
    struct progress *pg;
    int64_t done;
};

static int on_row(void *ud, const struct task_row *r)
{
    struct sink *k = ud;
    int rc = QG_OK;
    if (k->pending == 0 && (rc = store_begin(k->s))) return rc;
    struct store_item it = {.trial_id = k->trial, .idx = r->idx, .cluster = r->cluster, .nll = r->nll,
                            .n_tokens = r->n_tokens, .n_bytes = r->n_bytes, .n_words = r->n_words,
                            .correct = r->correct, .score = r->score, .prediction = r->prediction,
                            .extracted = r->extracted, .output_hash = r->output_hash, .extra_json = r->extra_json,
                            .kld_sum = NAN, .top1_agree = NAN, .dp_sum = NAN};
    if ((rc = store_item_put(k->s, &it))) return rc;
    if (++k->pending == ROW_BATCH) {
        rc = store_commit(k->s);
        k->pending = 0;
    }
    progress_update(k->pg, ++k->done, 0, "items");
    return rc;
}

static char *types_json(const char *path, int64_t *n_params, char *arch, size_t archn)
{
    struct gguf *g;
    char err[QG_ERRMSG_MAX];
    if (gguf_open(path, &g, err, sizeof err)) return NULL;
    struct model_info m;
    model_info_read(g, &m);
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < m.n_types; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "type", ggml_type_name(m.types[i].type));
        cJSON_AddNumberToObject(o, "count", (double)m.types[i].count);
        cJSON_AddNumberToObject(o, "bytes", (double)m.types[i].bytes);
        cJSON_AddItemToArray(a, o);
    }
    *n_params = m.n_params;
    snprintf(arch, archn, "%s", m.arch);
    char *s = cJSON_PrintUnformatted(a);
    cJSON_Delete(a);
    gguf_close(g);
    return s;
}

static char *command_line(const struct cli_args *a)
{
    struct sbuf b;
    sbuf_init(&b, 1 << 16);
    sbuf_append(&b, "qgate", 5);
    for (int i = 0; i < a->argc; i++) sbuf_printf(&b, " %s", a->argv[i]);
    return b.data;
}

static int cmd_run(const struct cli_args *a)
{
    const char *suite_path = cli_str(a, "suite");
    int n_models = cli_count(a, "model");
    if (!suite_path || n_models == 0) return qg_error("'qgate run' needs --suite FILE and at least one --model NAME=SPEC"), QG_EX_USAGE;
    if (n_models > MAX_MODELS) return qg_error("at most %d models", MAX_MODELS), QG_EX_USAGE;
    const char *names[MAX_MODELS], *specs[MAX_MODELS];
    char namebuf[MAX_MODELS][128];
    for (int i = 0; i < n_models; i++) {
        const char *m = cli_nth(a, "model", i), *eq = strchr(m, '=');
        if (!eq || eq == m || !eq[1] || (size_t)(eq - m) >= sizeof namebuf[i])
            return qg_error("--model '%s' must be NAME=SPEC (e.g. base=model-f16.gguf)", m), QG_EX_USAGE;
        snprintf(namebuf[i], sizeof namebuf[i], "%.*s", (int)(eq - m), m);
        names[i] = namebuf[i];
        specs[i] = eq + 1;
        for (int j = 0; j < i; j++)
            if (!strcmp(names[j], names[i])) return qg_error("model name '%s' given twice", names[i]), QG_EX_USAGE;
    }
    char err[QG_ERRMSG_MAX];
    struct suite *su;
    int rc = suite_load(suite_path, cli_flag(a, "allow-changed-data"), &su, err, sizeof err);
    if (rc) return cmd_fail(rc, err);
    struct store *s;
    int code = cmd_open_store(a, 0, &s);
    if (code) {
        suite_free(su);
        return code;
    }
    char *cmd = command_line(a);
    struct store_run_new rn = {.command = cmd, .suite_name = su->name, .suite_hash = su->sha256, .seed = 0, .repeats = 1, .shard_count = 1};
    int64_t run_id, model_ids[MAX_MODELS], task_ids[64];
    rc = store_run_create(s, &rn, &run_id);
    for (int i = 0; i < n_models && !rc; i++) {
        char sha[HASH_HEX_LEN + 1] = "", arch[64] = "";
        int64_t np = -1, bytes = -1;
        char *tj = types_json(specs[i], &np, arch, sizeof arch);
        if (hash_sha256_file(specs[i], sha, err, sizeof err) == QG_OK) {
            char *d;
            size_t n;
            (void)d;
            (void)n;
        }
        struct store_model_new mn = {.name = names[i], .spec = cli_nth(a, "model", i), .backend = "cpu", .path = specs[i],
                                     .sha256 = sha[0] ? sha : NULL, .file_bytes = bytes, .n_params = np, .arch = arch,
                                     .format = "gguf", .types_json = tj, .role = i > 0};
        rc = store_model_add(s, run_id, &mn, &model_ids[i]);
        free(tj);
    }
    for (int t = 0; t < su->n_tasks && t < 64 && !rc; t++) {
        const struct suite_task *st = &su->tasks[t];
        struct store_task_new tn = {.name = st->name, .kind = st->kind, .config_json = st->config_json,
                                    .config_hash = st->config_hash, .n_items = -1, .critical = st->critical};
        rc = store_task_add(s, run_id, &tn, &task_ids[t]);
        for (int f = 0; f < st->n_files && !rc; f++) {
            int64_t ds;
            rc = store_dataset_add(s, st->files[f].path, st->files[f].sha256, -1, &ds);
            if (!rc) rc = store_task_link_dataset(s, task_ids[t], ds, st->files[f].role);
        }
    }
    if (rc) code = cmd_fail(rc, store_errmsg(s));
    int quiet = cli_flag(a, "quiet");
    if (!code && !quiet) printf("run %lld: suite %s, %d task(s), %d model(s)\n", (long long)run_id, su->name, su->n_tasks, n_models);
    for (int i = 0; i < n_models && !code; i++) {
        struct backend b;
        struct backend_open_params bp = {.n_threads = (int)cli_int(a, "threads", 0)};
        if ((rc = backend_open(specs[i], &bp, &b, err, sizeof err))) {
            code = cmd_fail(rc, err);
            break;
        }
        struct backend_info info;
        backend_info(&b, &info);
        for (int t = 0; t < su->n_tasks && !code; t++) {
            struct store_trial_new tr = {.run_id = run_id, .model_id = model_ids[i], .task_id = task_ids[t], .repeat = 0, .seed = 0};
            int64_t trial;
            if ((rc = store_trial_create(s, &tr, &trial))) {
                code = cmd_fail(rc, store_errmsg(s));
                break;
            }
            struct progress pg;
            progress_init(&pg, su->tasks[t].name, quiet);
            struct sink k = {.s = s, .trial = trial, .pg = &pg};
            struct task_summary sum;
            err[0] = '\0';
            rc = task_run(&su->tasks[t], &b, info.n_ctx_train, on_row, &k, &sum, err, sizeof err);
            progress_done(&pg);
            if (k.pending && !rc) rc = store_commit(s);
            else if (k.pending) store_rollback(s);
            cJSON *mj = cJSON_CreateObject();
            cJSON_AddNumberToObject(mj, sum.metric_name ? sum.metric_name : "metric", sum.metric);
            if (sum.metric2_name && !isnan(sum.metric2)) cJSON_AddNumberToObject(mj, sum.metric2_name, sum.metric2);
            char *mjs = cJSON_PrintUnformatted(mj);
            cJSON_Delete(mj);
            struct store_trial_result res = {.status = rc ? STORE_TRIAL_FAILED : STORE_TRIAL_DONE, .n_items = sum.items,
                                             .n_tokens = sum.tokens, .wall_seconds = sum.seconds, .deterministic = -1,
                                             .metrics_json = mjs, .error = rc ? (err[0] ? err : store_errmsg(s)) : NULL};
            int rc2 = store_trial_finish(s, trial, &res);
            free(mjs);
            if (rc) code = cmd_fail(rc, err[0] ? err : store_errmsg(s));
            else if (rc2) code = cmd_fail(rc2, store_errmsg(s));
            else if (!quiet)
                printf("  %-10s %-16s %8lld items  %s %.4f%s%s%s  (%.1f s)\n", names[i], su->tasks[t].name, (long long)sum.items,
                       sum.metric_name, sum.metric, sum.metric2_name && !isnan(sum.metric2) ? ", " : "",
                       sum.metric2_name && !isnan(sum.metric2) ? sum.metric2_name : "",
                       sum.metric2_name && !isnan(sum.metric2) ? (snprintf(err, sizeof err, " %.4f", sum.metric2), err) : "",
                       sum.seconds);
        }
        backend_close(&b);
    }
    store_run_set_status(s, run_id, code ? STORE_RUN_FAILED : STORE_RUN_DONE);
    if (!code && !quiet) printf("stored as run %lld in %s ('qgate show %lld')\n", (long long)run_id,
                                cli_str(a, "db") ? cli_str(a, "db") : STORE_DEFAULT_PATH, (long long)run_id);
    free(cmd);
    store_close(s);
    suite_free(su);
    return code;
}

const struct cli_cmd cmd_run_def = {
    .name = "run",
    .fn = cmd_run,
    .summary = "run a suite on one or more models and store every item's result",
    .opts = opts,
    .min_pos = 0,
    .max_pos = 0,
};
