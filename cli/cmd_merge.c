/* cmd_merge — `qgate merge OUT.db IN.db...`: shards of one run into one. */
#include "cli/commands.h"
#include "core/status.h"
#include "core/util.h"

static const struct cli_opt opts[] = {
    CLI_OPT_END,
};

static int cmd_merge(const struct cli_args *a)
{
    char err[QG_ERRMSG_MAX];
    struct store *s;
    struct store_params p = store_default_params();
    int rc = store_open(a->pos[0], &p, &s, err, sizeof err);
    if (rc) return cmd_fail(rc, err);
    int64_t run;
    rc = store_merge_shards(s, (const char *const *)a->pos + 1, a->n_pos - 1, &run);
    int code = rc ? cmd_fail(rc, store_errmsg(s)) : 0;
    if (!code)
        printf("merged %d shards into run %lld of %s\n", a->n_pos - 1, (long long)run, a->pos[0]);
    store_close(s);
    return code;
}

const struct cli_cmd cmd_merge_def = {
    .name = "merge",
    .fn = cmd_merge,
    .args_usage = "OUT.db SHARD.db...",
    .summary = "merge the shard files of one run (made with run --shard i/n) into one run",
    .opts = opts,
    .min_pos = 2,
    .max_pos = 4097,
};
