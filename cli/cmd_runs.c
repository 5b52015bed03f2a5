/* cmd_runs — `qgate runs`: list the runs in the results database. */
#include "cli/commands.h"
#include "core/status.h"
#include "core/util.h"
#include "core/json.h"

#include <string.h>

static const struct cli_opt opts[] = {
    CLI_OPT_DB,
    CLI_OPT_JSON,
    {"limit", 'n', CLI_INT, "N", "show at most N runs, newest first (default 50; 0 = all)", 0},
    CLI_OPT_END,
};

static int cmd_runs(const struct cli_args *a)
{
    int64_t limit = cli_int(a, "limit", 50);
    if (limit < 0) return cmd_usage("--limit must be >= 0");
    struct store *s;
    int code = cmd_open_store(a, 1, &s);
    if (code) return code;
    cJSON *runs;
    int rc = store_runs_json(s, limit, &runs);
    if (rc) {
        code = cmd_fail(rc, store_errmsg(s));
    } else if (cli_flag(a, "json")) {
        code = cmd_print_json(runs);
    } else {
        cmd_term_json(runs); /* names and commands may hold escape sequences */
        if (cJSON_GetArraySize(runs) == 0)
            printf("no runs in %s\n", cli_str(a, "db") ? cli_str(a, "db") : STORE_DEFAULT_PATH);
        int wm = cmd_col_width(runs, "models", 6, 80);
        if (cJSON_GetArraySize(runs) > 0)
            printf("%5s  %-20s  %-11s  %-*s %5s %9s  %-28s %s\n", "id", "created", "status", wm,
                   "models", "tasks", "trials", "verdicts", "command");
        const cJSON *r;
        cJSON_ArrayForEach(r, runs)
        {
            char trials[32];
            snprintf(trials, sizeof trials, "%lld/%lld", json_int(r, "trials_done", 0),
                     json_int(r, "trials", 0));
            printf("%5lld  %-20s  %-11s  %-*s %5lld %9s  %-28s %.60s\n", json_int(r, "id", 0),
                   json_str(r, "created_at", ""), json_str(r, "status", ""), wm,
                   cmd_term_cut(json_str(r, "models", ""), 80), json_int(r, "tasks", 0), trials,
                   cmd_term_cut(json_str(r, "verdicts", "-"), 28), json_str(r, "command", ""));
        }
        cJSON_Delete(runs);
    }
    store_close(s);
    return code;
}

const struct cli_cmd cmd_runs_def = {
    .name = "runs",
    .fn = cmd_runs,
    .summary = "list the runs stored in the results database",
    .opts = opts,
    .min_pos = 0,
    .max_pos = 0,
};
