/* cmd_gate — `qgate gate --suite S --baseline SPEC --candidate SPEC`: run and
 * compare in one step, for CI. */
#include "harness/commands.h"
#include "harness/runner.h"
#include "core/status.h"
#include "core/util.h"
#include "metrics/verdict.h"

#include <stdlib.h>
#include <string.h>

static const struct cli_opt opts[] = {
    {"suite", 's', CLI_STR, "FILE", "the suite", 0},
    {"baseline", 'b', CLI_STR, "SPEC", "the original model (PATH.gguf, or NAME=PATH.gguf)", 0},
    {"candidate", 'c', CLI_STR, "SPEC", "a quantized model (repeatable)", 1},
    {"repeats", 'r', CLI_INT, "R",
     "repeats (default 2: measures run-to-run noise, stops when identical)", 0},
    {"policy", 'p', CLI_STR, "FILE", "policy JSON (default: the suite's)", 0},
    {"seed", 0, CLI_INT, "N", "bootstrap seed (default 20261130)", 0},
    {"noise", 0, CLI_STR, "perturb",
     "also repeat the baseline under a benign numerical perturbation to measure the noise floor",
     0},
    {"no-cache", 0, CLI_FLAG, NULL,
     "remote models: neither read nor fill the response cache in the database", 0},
    CLI_OPT_DB,
    {"threads", 't', CLI_INT, "T", "threads per model", 0},
    {"allow-changed-data", 0, CLI_FLAG, NULL, "run even when data differs from the suite's pins",
     0},
    {"quiet", 'q', CLI_FLAG, NULL, "only the verdicts", 0},
    {"report", 0, CLI_STR, "FILE", "also write the HTML report to FILE", 0},
    {"junit", 0, CLI_STR, "FILE", "also write JUnit XML to FILE", 0},
    {"md", 0, CLI_STR, "FILE", "also write the Markdown report to FILE (e.g. $GITHUB_STEP_SUMMARY)",
     0},
    {"json", 0, CLI_STR, "FILE", "also write the JSON report to FILE", 0},
    CLI_OPT_END,
};

static int add_model(const char *spec, const char *default_name, struct runner_params *p,
                     char (*buf)[128])
{
    if (strchr(spec, '=')) return cmd_parse_model(spec, p, buf);
    char named[4400];
    snprintf(named, sizeof named, "%s=%s", default_name, spec);
    int code = cmd_parse_model(named, p, buf);
    if (!code) p->specs[p->n_models - 1] = spec; /* point at argv, not the local copy */
    return code;
}

static int cmd_gate(const struct cli_args *a)
{
    struct runner_params p = {.suite_path = cli_str(a, "suite"),
                              .allow_changed = cli_flag(a, "allow-changed-data"),
                              .repeats = (int)cli_int(a, "repeats", 2),
                              .threads = (int)cli_int(a, "threads", 0),
                              .quiet = 1,
                              .no_cache = cli_flag(a, "no-cache")};
    if (!p.suite_path || !cli_str(a, "baseline") || cli_count(a, "candidate") == 0)
        return cmd_usage("'qgate gate' needs --suite FILE, --baseline SPEC and --candidate SPEC");
    if (p.repeats < 1 || p.repeats > 1000) return cmd_usage("--repeats must be 1..1000");
    if (cli_str(a, "noise")) {
        if (strcmp(cli_str(a, "noise"), "perturb") != 0)
            return cmd_usage("--noise takes 'perturb', got '%s'", cli_str(a, "noise"));
        p.noise_perturb = 1;
    }
    char names[RUNNER_MAX_MODELS][128];
    int code = add_model(cli_str(a, "baseline"), "baseline", &p, names);
    for (int i = 0; i < cli_count(a, "candidate") && !code; i++) {
        char dn[32];
        snprintf(dn, sizeof dn, cli_count(a, "candidate") == 1 ? "candidate" : "candidate%d",
                 i + 1);
        code = add_model(cli_nth(a, "candidate", i), dn, &p, names);
    }
    if (code) return code;
    /* outputs checked before the run: a bad path costs nothing, and no
     * output may overwrite the suite, the database or a model */
    static const char *const outputs[] = {"report", "junit", "md", "json", NULL};
    const char *inputs[RUNNER_MAX_MODELS + 2] = {
        p.suite_path, cli_str(a, "db") ? cli_str(a, "db") : STORE_DEFAULT_PATH};
    for (int i = 0; i < p.n_models; i++)
        inputs[2 + i] = p.specs[i];
    if ((code = cmd_check_outputs(a, outputs, inputs, 2 + p.n_models))) return code;
    struct store *s;
    if ((code = cmd_open_store(a, 0, &s))) return code;
    char *cmd = cmd_command_line(a);
    p.command = cmd;
    char err[QG_ERRMSG_MAX];
    int64_t run_id;
    if (!cli_flag(a, "quiet"))
        printf("qgate gate: running %s on %d models (%d repeats)...\n", p.suite_path, p.n_models,
               p.repeats);
    runner_catch_signals();
    int rc = runner_run(s, &p, &run_id, err, sizeof err);
    int worst = VERDICT_PASS;
    if (rc) code = cmd_fail(rc, err);
    for (int i = 1; i < p.n_models && !code; i++) {
        int v = VERDICT_INCONCLUSIVE;
        int64_t cid = 0;
        int quiet = cli_flag(a, "quiet"); /* only the verdicts: one line per candidate */
        code = cmd_compare_models(s, run_id, p.names[0], p.names[i], cli_str(a, "policy"),
                                  (uint64_t)cli_int(a, "seed", 20261130),
                                  quiet ? CMP_OUT_NONE : CMP_OUT_TEXT, cmd, &v, &cid);
        if (!code && quiet)
            printf("%s vs %s: %s (comparison %lld; 'qgate report --comparison %lld')\n",
                   cmd_term(p.names[i]), cmd_term(p.names[0]), verdict_name(v), (long long)cid,
                   (long long)cid);
        static const char *const kinds[][2] = {
            {"report", "html"}, {"junit", "junit"}, {"md", "md"}, {"json", "json"}};
        for (size_t k = 0; k < sizeof kinds / sizeof *kinds && !code; k++) {
            const char *path = cli_str(a, kinds[k][0]);
            if (!path) continue;
            char numbered[4200];
            if (p.n_models > 2) { /* one file per candidate: name.2.ext */
                const char *dot = strrchr(path, '.');
                size_t stem = dot && !strchr(dot, '/') ? (size_t)(dot - path) : strlen(path);
                snprintf(numbered, sizeof numbered, "%.*s.%d%s", (int)stem, path, i, path + stem);
                path = numbered;
            }
            code = cmd_write_report(s, cid, kinds[k][1], path);
            if (!code && !cli_flag(a, "quiet")) printf("wrote %s\n", path);
        }
        if (!code && (v == VERDICT_FAIL || (v == VERDICT_INCONCLUSIVE && worst == VERDICT_PASS)))
            worst = v;
        if (!quiet) printf("\n");
    }
    free(cmd);
    store_close(s);
    return code ? code : worst;
}

const struct cli_cmd cmd_gate_def = {
    .name = "gate",
    .fn = cmd_gate,
    .summary =
        "run a suite on a baseline and candidates and decide: exit 0 PASS, 1 FAIL, 2 INCONCLUSIVE",
    .opts = opts,
    .min_pos = 0,
    .max_pos = 0,
};
