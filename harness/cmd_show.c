/* cmd_show — `qgate show RUN`: one run's models, tasks and trials. */
#include "harness/commands.h"
#include "harness/status.h"
#include "harness/util.h"

#include <math.h>
#include <string.h>

static const struct cli_opt opts[] = {
    CLI_OPT_DB,
    CLI_OPT_JSON,
    CLI_OPT_END,
};

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "-";
}

static long long jint(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? (long long)v->valuedouble : -1;
}

static void print_run(const cJSON *r)
{
    printf("run %lld  (uid %s)\n", jint(r, "id"), jstr(r, "uid"));
    printf("  status     %s\n", jstr(r, "status"));
    printf("  created    %s\n  finished   %s\n", jstr(r, "created_at"), jstr(r, "finished_at"));
    printf("  qgate      %s on %s\n", jstr(r, "qgate_version"), jstr(r, "host"));
    printf("  command    %s\n", jstr(r, "command"));
    if (strcmp(jstr(r, "suite_name"), "-") != 0)
        printf("  suite      %s (sha256 %s)\n", jstr(r, "suite_name"), jstr(r, "suite_hash"));
    printf("  seed       %lld, repeats %lld, shard %lld/%lld\n", jint(r, "seed"), jint(r, "repeats"),
           jint(r, "shard_index"), jint(r, "shard_count"));
    const cJSON *o;
    printf("\nmodels:\n");
    cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(r, "models"))
        printf("  %-12s %-9s %-6s %s\n  %12s sha256 %s, %lld params\n", jstr(o, "name"),
               jint(o, "role") == 0 ? "baseline" : "candidate", jstr(o, "backend"), jstr(o, "spec"),
               "", jstr(o, "sha256"), jint(o, "n_params"));
    printf("\ntasks:\n");
    cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(r, "tasks"))
        printf("  %-20s %-16s %8lld items%s  config %.12s\n", jstr(o, "name"), jstr(o, "kind"),
               jint(o, "n_items"), jint(o, "critical") == 1 ? " critical" : "", jstr(o, "config_hash"));
    printf("\ntrials:\n  %-20s %-12s %6s %-9s %10s %10s %9s\n", "task", "model", "repeat", "status",
           "items", "tokens", "seconds");
    cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(r, "trials"))
    {
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(o, "wall_seconds");
        printf("  %-20s %-12s %6lld %-9s %10lld %10lld %9.2f%s%s\n", jstr(o, "task"), jstr(o, "model"),
               jint(o, "repeat"), jstr(o, "status"), jint(o, "items_stored"), jint(o, "n_tokens"),
               cJSON_IsNumber(w) ? w->valuedouble : NAN,
               jint(o, "deterministic") == 1 ? "  deterministic" : "",
               cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, "error")) ? "  error" : "");
    }
}

static int cmd_show(const struct cli_args *a)
{
    int64_t id;
    if (qg_parse_i64(a->pos[0], 1, INT64_MAX, &id) != QG_OK)
        return qg_error("run id must be a positive integer, got '%s' (see 'qgate runs')", a->pos[0]), QG_EX_USAGE;
    struct store *s;
    int code = cmd_open_store(a, 1, &s);
    if (code) return code;
    cJSON *run;
    int rc = store_run_json(s, id, &run);
    if (rc) code = cmd_fail(rc, store_errmsg(s));
    else if (cli_flag(a, "json")) code = cmd_print_json(run);
    else {
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
