/* cmd_comparisons — `qgate comparisons`: list the stored comparisons and
 * their verdicts. */
#include "cli/commands.h"
#include "core/json.h"
#include "core/status.h"
#include "core/util.h"

#include <string.h>

static const struct cli_opt opts[] = {
    {"run", 0, CLI_INT, "ID", "only the comparisons of this run", 0},
    {"limit", 'n', CLI_INT, "N", "show at most N, newest first (default 50; 0 = all)", 0},
    CLI_OPT_DB,
    CLI_OPT_JSON,
    CLI_OPT_END,
};

static int cmd_comparisons(const struct cli_args *a)
{
    int64_t limit = cli_int(a, "limit", 50), run = cli_int(a, "run", 0);
    if (limit < 0) return cmd_usage("--limit must be >= 0");
    if (cli_str(a, "run") && run <= 0) return cmd_usage("--run must be a positive id");
    struct store *s;
    int code = cmd_open_store(a, 1, &s);
    if (code) return code;
    cJSON *rows;
    int rc = store_comparisons_json(s, run, limit, &rows);
    if (rc) {
        code = cmd_fail(rc, store_errmsg(s));
    } else if (cli_flag(a, "json")) {
        code = cmd_print_json(rows);
    } else {
        cmd_term_json(rows);
        if (cJSON_GetArraySize(rows) == 0)
            printf("no comparisons in %s\n",
                   cli_str(a, "db") ? cli_str(a, "db") : STORE_DEFAULT_PATH);
        int wb = cmd_col_width(rows, "baseline", 8, 60),
            wc = cmd_col_width(rows, "candidate", 9, 60);
        if (cJSON_GetArraySize(rows) > 0)
            printf("%5s %5s  %-20s  %-*s %-*s %-12s\n", "id", "run", "created", wb, "baseline", wc,
                   "candidate", "verdict");
        const cJSON *r;
        cJSON_ArrayForEach(r, rows) printf(
            "%5lld %5lld  %-20s  %-*s %-*s %-12s\n", json_int(r, "id", 0), json_int(r, "run", 0),
            json_str(r, "created_at", ""), wb, cmd_term_cut(json_str(r, "baseline", ""), 60), wc,
            cmd_term_cut(json_str(r, "candidate", ""), 60), json_str(r, "verdict", ""));
        cJSON_Delete(rows);
    }
    store_close(s);
    return code;
}

const struct cli_cmd cmd_comparisons_def = {
    .name = "comparisons",
    .fn = cmd_comparisons,
    .summary = "list the stored comparisons (run, baseline, candidate, verdict, when)",
    .description = "'qgate report --comparison ID' renders one of them.",
    .opts = opts,
    .min_pos = 0,
    .max_pos = 0,
};
