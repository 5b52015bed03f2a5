/* cmd_show — `qgate show RUN`: one run's models, tasks and trials. */
#include "cli/commands.h"
#include "core/status.h"
#include "core/util.h"
#include "core/json.h"

#include <math.h>
#include <string.h>

static const struct cli_opt opts[] = {
    CLI_OPT_DB,
    CLI_OPT_JSON,
    CLI_OPT_END,
};

static void print_run(const cJSON *r)
{
    printf("run %lld  (uid %s)\n", json_int(r, "id", -1), json_str(r, "uid", "-"));
    printf("  status     %s\n", json_str(r, "status", "-"));
    printf("  created    %s\n  finished   %s\n", json_str(r, "created_at", "-"),
           json_str(r, "finished_at", "-"));
    printf("  qgate      %s on %s\n", json_str(r, "qgate_version", "-"), json_str(r, "host", "-"));
    printf("  kernels    %s\n", json_str(r, "kernels", "not recorded"));
    printf("  command    %s\n", json_str(r, "command", "-"));
    if (strcmp(json_str(r, "suite_name", "-"), "-") != 0)
        printf("  suite      %s (sha256 %s)\n", json_str(r, "suite_name", "-"),
               json_str(r, "suite_hash", "-"));
    printf("  seed       %lld (sampling and generation; each comparison keeps its bootstrap "
           "seed), repeats %lld, shard %lld/%lld\n",
           json_int(r, "seed", -1), json_int(r, "repeats", -1), json_int(r, "shard_index", -1) + 1,
           json_int(r, "shard_count", -1));
    const cJSON *o, *models = cJSON_GetObjectItemCaseSensitive(r, "models"),
                    *tasks = cJSON_GetObjectItemCaseSensitive(r, "tasks");
    int wm = cmd_col_width(models, "name", 12, 60), wt = cmd_col_width(tasks, "name", 20, 60);
    printf("\nmodels:\n");
    cJSON_ArrayForEach(o, models)
    {
        printf("  %-*s %-9s %-6s %s\n", wm, json_str(o, "name", "-"),
               json_int(o, "role", -1) == 0 ? "baseline" : "candidate", json_str(o, "backend", "-"),
               json_str(o, "spec", "-"));
        cJSON *pv = cJSON_Parse(json_str(o, "provenance_json", ""));
        if (pv) /* a remote model: what was detected at open */
            printf("  %*s server %s%s%s, model '%s'\n  %*s scoring route: %s; context %lld (%s)\n",
                   wm, "", json_str(pv, "server", "?"),
                   json_get(pv, "system_fingerprint") ? ", fingerprint " : "",
                   json_str(pv, "system_fingerprint", ""), json_str(pv, "model", "?"), wm, "",
                   json_str(pv, "route", "?"), json_int(pv, "ctx", 0),
                   json_str(pv, "ctx_source", "?"));
        else
            printf("  %*s sha256 %s, %lld params\n", wm, "", json_str(o, "sha256", "-"),
                   json_int(o, "n_params", -1));
        cJSON_Delete(pv);
    }
    printf("\ntasks:\n");
    cJSON_ArrayForEach(o, tasks)
    {
        /* items (windows of a perplexity task) as its baseline's first trial stored them */
        int ppl = !strcmp(json_str(o, "kind", ""), "perplexity");
        long long n = json_int(o, "n_items", -1);
        const cJSON *tr;
        cJSON_ArrayForEach(
            tr, cJSON_GetObjectItemCaseSensitive(
                    r, "trials")) if (n < 0 &&
                                      !strcmp(json_str(tr, "task", ""), json_str(o, "name", "")) &&
                                      json_int(tr, "repeat", -1) == 0) n =
            json_int(tr, "items_stored", -1);
        char items[32] = "-";
        if (n >= 0) snprintf(items, sizeof items, "%lld %s", n, ppl ? "windows" : "items");
        printf("  %-*s %-16s %14s%s  config %.12s\n", wt, json_str(o, "name", "-"),
               json_str(o, "kind", "-"), items, json_int(o, "critical", -1) == 1 ? " critical" : "",
               json_str(o, "config_hash", "-"));
    }
    printf("\ntrials:\n  %-*s %-*s %6s %-9s %10s %10s %9s\n", wt, "task", wm, "model", "repeat",
           "status", "items", "tokens", "seconds");
    cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(r, "trials"))
    {
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(o, "wall_seconds");
        printf("  %-*s %-*s %6lld %-9s %10lld %10lld %9.2f%s%s\n", wt, json_str(o, "task", "-"), wm,
               json_str(o, "model", "-"), json_int(o, "repeat", -1), json_str(o, "status", "-"),
               json_int(o, "items_stored", -1), json_int(o, "n_tokens", -1),
               cJSON_IsNumber(w) ? w->valuedouble : NAN,
               json_int(o, "deterministic", -1) == 1 ? "  deterministic" : "",
               cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, "error")) ? "  error" : "");
    }
}

static int cmd_show(const struct cli_args *a)
{
    int64_t id;
    if (qg_parse_i64(a->pos[0], 1, INT64_MAX, &id) != QG_OK)
        return cmd_usage("run id must be a positive integer, got '%s' (see 'qgate runs')",
                         a->pos[0]);
    struct store *s;
    int code = cmd_open_store(a, 1, &s);
    if (code) return code;
    cJSON *run;
    int rc = store_run_json(s, id, &run);
    if (rc)
        code = cmd_fail(rc, store_errmsg(s));
    else if (cli_flag(a, "json"))
        code = cmd_print_json(run);
    else {
        cmd_term_json(run); /* names and commands may hold escape sequences */
        print_run(run);
        cJSON_Delete(run);
    }
    store_close(s);
    return code;
}

const struct cli_cmd cmd_show_def = {
    .name = "show",
    .fn = cmd_show,
    .args_usage = "RUN",
    .summary = "show one run: its models, tasks and trials with their status",
    .opts = opts,
    .min_pos = 1,
    .max_pos = 1,
};
