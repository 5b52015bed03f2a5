/* cmd_run — `qgate run --suite S --model NAME=SPEC ...`: run and store. */
#include "cli/commands.h"
#include "harness/sampled.h"
#include "harness/runner.h"
#include "core/status.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

static const struct cli_opt opts[] = {
    {"suite", 's', CLI_STR, "FILE", "the suite to run", 0},
    {"model", 'm', CLI_STR, "NAME=SPEC", "a model; the first is the baseline (NAME=PATH.gguf)", 1},
    {"repeats", 'r', CLI_INT, "R",
     "repeat every trial R times (default 1; stops after 2 identical repeats)", 0},
    {"seed", 0, CLI_INT, "N", "base seed (repeat r uses N + r)", 0},
    {"tasks", 0, CLI_STR, "A,B",
     "only these tasks of the suite; without --suite, named benchmarks ('qgate tasks')", 0},
    {"data", 0, CLI_STR, "DIR",
     "the folder the named benchmarks' files are in (default: $QGATE_DATA)", 0},
    CLI_OPT_DEVICE,
    {"limit", 0, CLI_INT, "N", "at most N items (perplexity: windows) per task", 0},
    {"resume", 0, CLI_INT, "RUN",
     "finish an interrupted run (give the same --suite and --model list)", 0},
    {"shard", 0, CLI_STR, "K/N",
     "run the K-th of N deterministic parts of every task, K = 1..N as CI nodes are numbered "
     "(merge with 'qgate merge')",
     0},
    {"noise", 0, CLI_STR, "perturb",
     "also repeat the baseline under a benign numerical perturbation to measure the noise floor",
     0},
    {"no-cache", 0, CLI_FLAG, NULL,
     "remote models: neither read nor fill the response cache in the database", 0},
    CLI_OPT_DB,
    {"threads", 't', CLI_INT, "T", "threads per model", 0},
    CLI_OPT_CPU,
    {"allow-changed-data", 0, CLI_FLAG, NULL, "run even when data differs from the suite's pins",
     0},
    {"quiet", 'q', CLI_FLAG, NULL, "no progress output", 0},
    CLI_OPT_END,
};

char *cmd_command_line(const struct cli_args *a)
{
    struct sbuf b;
    sbuf_init(&b, 1 << 16);
    sbuf_append(&b, "qgate", 5);
    for (int i = 0; i < a->argc; i++)
        sbuf_printf(&b, " %s", a->argv[i]);
    return b.data;
}

/* NAME=SPEC into p->names/specs (names point into buf). 0 or an exit code. */
int cmd_parse_model(const char *arg, struct runner_params *p, char (*buf)[128])
{
    const char *eq = strchr(arg, '=');
    int i = p->n_models;
    if (i >= RUNNER_MAX_MODELS) return cmd_usage("at most %d models", RUNNER_MAX_MODELS);
    if (!eq || eq == arg || !eq[1] || (size_t)(eq - arg) >= 128)
        return cmd_usage("model '%s' must be NAME=SPEC (e.g. base=model-f16.gguf)", arg);
    snprintf(buf[i], 128, "%.*s", (int)(eq - arg), arg);
    for (int j = 0; j < i; j++)
        if (!strcmp(p->names[j], buf[i])) return cmd_usage("model name '%s' given twice", buf[i]);
    p->names[i] = buf[i];
    p->specs[i] = eq + 1;
    p->n_models++;
    return 0;
}

static int cmd_run(const struct cli_args *a)
{
    struct runner_params p = {.suite_path = cli_str(a, "suite"),
                              .allow_changed = cli_flag(a, "allow-changed-data"),
                              .repeats = (int)cli_int(a, "repeats", 1),
                              .seed = (uint64_t)cli_int(a, "seed", 0),
                              .threads = (int)cli_int(a, "threads", 0),
                              .quiet = cli_flag(a, "quiet"),
                              .no_cache = cli_flag(a, "no-cache"),
                              .tasks = cli_str(a, "tasks"),
                              .limit = cli_int(a, "limit", 0),
                              .resume = cli_int(a, "resume", 0)};
    if ((!p.suite_path && !p.tasks) || cli_count(a, "model") == 0)
        return cmd_usage("'qgate run' needs --suite FILE (or named benchmarks: --tasks A,B --data "
                         "DIR) and at least one --model NAME=SPEC");
    if (p.suite_path && cli_str(a, "data"))
        return cmd_usage("--data is where named benchmarks (--tasks without --suite) find their "
                         "files; a suite names its own");
    if (p.repeats < 1 || p.repeats > 1000) return cmd_usage("--repeats must be 1..1000");
    if (p.tasks && !p.tasks[strspn(p.tasks, ", ")])
        return cmd_usage("--tasks names no task: give one or more task names, comma-separated");
    if (cli_str(a, "limit") && p.limit < 1) return cmd_usage("--limit must be a positive count");
    if (cli_str(a, "resume") && p.resume < 1)
        return cmd_usage("--resume takes a run id (a positive integer, see 'qgate runs'), got '%s'",
                         cli_str(a, "resume"));
    if (cli_str(a, "shard")) {
        int64_t i = -1, n = -1;
        const char *spec = cli_str(a, "shard"), *slash = strchr(spec, '/');
        char k[32] = "";
        if (slash && (size_t)(slash - spec) < sizeof k) memcpy(k, spec, (size_t)(slash - spec));
        /* numbered 1..N, as CI systems number their parallel nodes
         * (GitLab CI_NODE_INDEX, Buildkite's job index + 1) */
        if (!slash || qg_parse_i64(k, 1, 4096, &i) || qg_parse_i64(slash + 1, 1, 4096, &n) || i > n)
            return cmd_usage("--shard must be K/N with 1 <= K <= N (shards are numbered from 1, "
                             "as CI nodes are; e.g. 1/4 ... 4/4), got '%s'",
                             cli_str(a, "shard"));
        p.shard_index = (int)i - 1; /* stored 0-based */
        p.shard_count = (int)n;
    }
    if (cli_str(a, "noise")) {
        if (strcmp(cli_str(a, "noise"), "perturb") != 0)
            return cmd_usage("--noise takes 'perturb', got '%s'", cli_str(a, "noise"));
        p.noise_perturb = 1;
    }
    char names[RUNNER_MAX_MODELS][128];
    for (int i = 0; i < cli_count(a, "model"); i++) {
        int code = cmd_parse_model(cli_nth(a, "model", i), &p, names);
        if (code) return code;
    }
    static char devspec[RUNNER_MAX_MODELS][4400];
    int code = cmd_apply_device(a, p.specs, p.n_models, devspec);
    if (code) return code;
    struct store *s;
    code = cmd_open_store(a, 0, &s);
    if (code) return code;
    char dir[4096] = "", suite[4200];
    if (!p.suite_path && (code = cmd_registry_suite(a, s, &p, dir, suite, sizeof suite, 0))) {
        store_close(s);
        return code;
    }
    char *cmd = cmd_command_line(a);
    p.command = cmd;
    char err[QG_ERRMSG_MAX];
    int64_t run_id;
    runner_catch_signals();
    int rc = runner_run(s, &p, &run_id, err, sizeof err);
    sampled_suite_remove(dir);
    if (rc)
        code = cmd_fail(rc, err);
    else if (!p.quiet)
        printf("stored as run %lld in %s ('qgate show %lld', 'qgate compare --run %lld')\n",
               (long long)run_id, cli_str(a, "db") ? cli_str(a, "db") : STORE_DEFAULT_PATH,
               (long long)run_id, (long long)run_id);
    free(cmd);
    store_close(s);
    return code;
}

const struct cli_cmd cmd_run_def = {
    .name = "run",
    .fn = cmd_run,
    .summary = "run a suite on one or more models and store every item's result",
    .description = "Perplexity tasks run all models in lockstep over the same windows: the first\n"
                   "model is the baseline, the others also get KL divergence, top-1 agreement and\n"
                   "dp against it, from full-vocabulary distributions.",
    .opts = opts,
    .min_pos = 0,
    .max_pos = 0,
};
