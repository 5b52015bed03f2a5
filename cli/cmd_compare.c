/* cmd_compare — `qgate compare --baseline A --candidate B [--run ID]`: the
 * verdict from the store alone; and the part `qgate gate` shares. */
#include "cli/commands.h"
#include "core/json.h"
#include "core/status.h"
#include "harness/suite.h"
#include "core/util.h"
#include "harness/compare.h"
#include "metrics/verdict.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct cli_opt opts[] = {
    {"baseline", 'b', CLI_STR, "NAME", "the baseline model's name in the run", 0},
    {"candidate", 'c', CLI_STR, "NAME", "the candidate model's name in the run", 0},
    {"run", 0, CLI_INT, "ID", "the run (default: the newest)", 0},
    {"policy", 0, CLI_STR, "FILE", "policy JSON (default: the suite's policy stored with the run)",
     0},
    {"seed", 0, CLI_INT, "N", "bootstrap seed (default 20261130)", 0},
    {"format", 'f', CLI_STR, "text|json", "output format (default text)", 0},
    {"allow-identical", 0, CLI_FLAG, NULL,
     "compare a model with itself (an A/A check of the noise; otherwise refused)", 0},
    CLI_OPT_DB,
    CLI_OPT_END,
};

/* One line for the loss and every gate: the bound that decides it. */
static void print_gates(const struct verdict_task *t)
{
    if (!t->n_gates) return;
    printf("%17s gates: loss %s", "", verdict_name(t->loss_verdict));
    for (int i = 0; i < t->n_gates; i++) {
        const struct verdict_gate *g = &t->gates[i];
        char iv[64];
        if (isfinite(g->lo) && isfinite(g->hi))
            snprintf(iv, sizeof iv, "[%.4g, %.4g]", g->lo, g->hi);
        else
            snprintf(iv, sizeof iv, "(not bounded)");
        printf("; %s %.4g %s %s %.4g %s", g->name, g->value, iv,
               g->kind == VERDICT_GATE_MAX ? "<=" : ">=", g->limit, verdict_name(g->verdict));
    }
    printf("\n");
}

static void print_text(const char *base, const char *cand, int64_t run_id,
                       const struct verdict_task *v, int n, int suite,
                       const struct verdict_policy *pol)
{
    int color = qg_use_color(1);
    printf("%s vs %s (run %lld): one-sided alpha %.3g, power %.2g, %d bootstrap draws\n",
           cmd_term(cand), cmd_term(base), (long long)run_id, pol->alpha, 1 - pol->beta,
           pol->bootstrap);
    printf("%-16s %-13s %10s %10s %10s %23s %9s %9s %9s  %s\n", "task", "metric", "baseline",
           "candidate", "loss", "interval (90%)", "margin", "noise", "MDE", "verdict");
    printf("(baseline, candidate: PPL or accuracy; loss: ln PPL ratio or accuracy lost, > 0 "
           "when the candidate is worse)\n");
    for (int i = 0; i < n; i++) {
        const struct verdict_task *t = &v[i];
        char iv[64];
        if (isfinite(t->lo) && isfinite(t->hi))
            snprintf(iv, sizeof iv, "[%+.5f, %+.5f]", t->lo, t->hi);
        else
            snprintf(iv, sizeof iv, "(not bounded)");
        const char *col = !color                       ? ""
                          : t->verdict == VERDICT_PASS ? "\033[32m"
                          : t->verdict == VERDICT_FAIL ? "\033[31m"
                                                       : "\033[33m";
        char mde[32] = "n/a", se[48] = "";
        if (isfinite(t->mde)) snprintf(mde, sizeof mde, "%.5f", t->mde);
        if (isfinite(t->se)) snprintf(se, sizeof se, " +/- %.5f paired SE", t->se);
        printf("%-16s %-13s %10.4f %10.4f %+10.5f %23s %9.5f %9.2g %9s  %s%s%s\n",
               cmd_term_cut(t->name, 16), t->metric, t->base_value, t->cand_value, t->delta, iv,
               t->margin, t->noise, mde, col, verdict_name(t->verdict), color ? "\033[0m" : "");
        if (t->kind == TASK_PERPLEXITY) {
            printf("%17s PPL ratio %.5f (ln %+.5f%s)", "", exp(t->delta), t->delta, se);
            if (t->has_kld)
                printf("; KLD mean %.6f, p99 %.6f, max %.4f%s; same top-1 %.2f%%; mean dp %+.5f",
                       t->kld_mean, t->kld_p99, t->kld_max,
                       t->kld_top_k > 0 ? " (top-K lower bound)" : "", 100 * t->top1, t->dp_mean);
            printf("\n");
        } else {
            printf("%17s flips %lld worse / %lld better of %lld (%.2f%%, 95%% %.2f-%.2f%%); "
                   "McNemar p %.3g\n",
                   "", (long long)t->flips_b, (long long)t->flips_c, (long long)t->n_items,
                   100.0 * (double)(t->flips_b + t->flips_c) / (double)t->n_items, 100 * t->flip_lo,
                   100 * t->flip_hi, t->p_value);
        }
        print_gates(t);
        char ph[32]; /* "0" reads as certainty: say how small */
        snprintf(ph, sizeof ph, t->p_holm < 1e-15 ? "< 1e-15" : "%.3g", t->p_holm);
        char nz[128] = "";
        if (t->deterministic == 0)
            snprintf(nz, sizeof nz, "; reruns of the baseline move it by +-%.3g (1 SD)%s", t->noise,
                     t->kind == TASK_PERPLEXITY ? "" : ", changing ");
        if (t->deterministic == 0 && t->kind != TASK_PERPLEXITY)
            snprintf(nz + strlen(nz), sizeof nz - strlen(nz), "%.2f%% of its items",
                     100 * t->churn);
        printf("%17s %s%s%s%s; Holm-adjusted p %s\n", "", t->reason,
               t->deterministic == 1 ? "; baseline repeats identical (deterministic)" : "", nz,
               t->critical ? "" : "; informational (not in the suite verdict)", ph);
    }
    const char *col = !color                  ? ""
                      : suite == VERDICT_PASS ? "\033[1;32m"
                      : suite == VERDICT_FAIL ? "\033[1;31m"
                                              : "\033[1;33m";
    printf("suite verdict: %s%s%s\n", col, verdict_name(suite), color ? "\033[0m" : "");
}

/* A run made with --shard holds only its part of every task: say so. */
static void warn_if_shard(struct store *s, int64_t run_id)
{
    cJSON *run;
    if (store_run_json(s, run_id, &run) != QG_OK) return;
    int64_t n = json_int(run, "shard_count", 1);
    if (n > 1)
        fprintf(stderr,
                "qgate: warning: run %lld is shard %lld/%lld of a sharded run: this verdict rests "
                "on about 1/%lld of the items; merge every shard first ('qgate merge OUT.db "
                "SHARD.db...') and compare the merged run\n",
                (long long)run_id, json_int(run, "shard_index", 0) + 1, (long long)n, (long long)n);
    cJSON_Delete(run);
}

/* The comparison's summary JSON (*out) and task verdicts (*v, n, suite),
 * computed and not stored. 0 or an exit code (message printed). */
static int compare_compute(struct store *s, int64_t run_id, const char *base, const char *cand,
                           const char *policy_file, struct verdict_params *vp,
                           struct verdict_task **v, int *n, int *suite, cJSON **out)
{
    char err[QG_ERRMSG_MAX];
    warn_if_shard(s, run_id);
    int rc = compare_load_policy(s, run_id, policy_file, &vp->policy, err, sizeof err);
    if (rc) return cmd_fail(rc, err);
    if ((rc = compare_run(s, run_id, base, cand, vp, v, n, suite, err, sizeof err)))
        return cmd_fail(rc, err);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "run", (double)run_id);
    cJSON_AddStringToObject(o, "baseline", base);
    cJSON_AddStringToObject(o, "candidate", cand);
    cJSON_AddNumberToObject(o, "bootstrap_seed", (double)vp->seed);
    cJSON_AddItemToObject(o, "policy", compare_policy_json(&vp->policy));
    cJSON *arr = cJSON_AddArrayToObject(o, "tasks");
    for (int i = 0; i < *n; i++)
        cJSON_AddItemToArray(arr, compare_task_json(&(*v)[i]));
    cJSON_AddStringToObject(o, "verdict", verdict_name(*suite));
    struct sbuf plain;
    sbuf_init(&plain, 1 << 16);
    compare_plain(cand, *v, *n, *suite, &plain);
    cJSON_AddStringToObject(o, "summary", sbuf_str(&plain));
    sbuf_release(&plain);
    *out = o;
    return 0;
}

int cmd_compare_summary(struct store *s, int64_t run_id, const char *base, const char *cand,
                        const char *policy_file, uint64_t seed, cJSON **summary)
{
    struct verdict_params vp = {.seed = seed};
    struct verdict_task *v = NULL;
    int n, suite;
    int code = compare_compute(s, run_id, base, cand, policy_file, &vp, &v, &n, &suite, summary);
    free(v);
    return code;
}

int cmd_compare_models(struct store *s, int64_t run_id, const char *base, const char *cand,
                       const char *policy_file, uint64_t seed, int output, const char *command,
                       int *verdict, int64_t *comparison_id)
{
    struct verdict_params vp = {.seed = seed};
    struct verdict_task *v;
    int n, suite, rc;
    cJSON *out;
    int reused = 0;
    int code0 = compare_compute(s, run_id, base, cand, policy_file, &vp, &v, &n, &suite, &out);
    if (code0) return code0;
    const char *plain = json_str(out, "summary", "");
    struct compare_save cs = {.run_id = run_id,
                              .baseline = base,
                              .candidate = cand,
                              .command = command,
                              .params = &vp,
                              .tasks = v,
                              .n_tasks = n,
                              .suite = suite,
                              .summary = out,
                              .reused = &reused};
    int64_t cid = 0;
    int code = 0;
    if ((rc = compare_save(s, &cs, &cid))) {
        cJSON_Delete(out);
        code = cmd_fail(rc, store_errmsg(s));
    } else {
        cJSON_AddNumberToObject(out, "comparison", (double)cid);
        if (comparison_id) *comparison_id = cid;
        if (output == CMP_OUT_JSON)
            code = cmd_print_json(out);
        else if (output == CMP_OUT_NONE)
            cJSON_Delete(out);
        else if (output == CMP_OUT_PLAIN) {
            printf("%s (comparison %lld)\n", cmd_term(plain), (long long)cid);
            cJSON_Delete(out);
        } else {
            print_text(base, cand, run_id, v, n, suite, &vp.policy);
            printf("%s\n%s comparison %lld\n", cmd_term(plain),
                   reused ? "the same as stored" : "stored as", (long long)cid);
            cJSON_Delete(out);
        }
    }
    free(v);
    *verdict = suite;
    return code;
}

static int cmd_compare(const struct cli_args *a)
{
    const char *base = cli_str(a, "baseline"), *cand = cli_str(a, "candidate"),
               *fmt = cli_str(a, "format");
    if (!base || !cand)
        return cmd_usage("'qgate compare' needs --baseline NAME and --candidate NAME");
    if (fmt && strcmp(fmt, "text") && strcmp(fmt, "json"))
        return cmd_usage("--format must be text or json");
    struct store *s;
    int code = cmd_open_existing_store(a, &s);
    if (code) return code;
    int64_t run = cli_int(a, "run", 0);
    int rc = run > 0 ? QG_OK : store_run_latest(s, &run);
    char why[QG_ERRMSG_MAX];
    int same = rc || cli_flag(a, "allow-identical")
                   ? 0
                   : compare_same_model(s, run, base, cand, why, sizeof why);
    if (rc) {
        code = cmd_fail(rc, store_errmsg(s));
    } else if (same < 0) {
        code = cmd_fail(same, why);
    } else if (same) {
        code = cmd_usage("%s: a model compared with itself proves nothing; --allow-identical "
                         "runs it as an A/A check of the noise",
                         why);
    } else {
        char *cmd = cmd_command_line(a);
        int verdict = VERDICT_INCONCLUSIVE;
        code = cmd_compare_models(
            s, run, base, cand, cli_str(a, "policy"), (uint64_t)cli_int(a, "seed", 20261130),
            fmt && !strcmp(fmt, "json") ? CMP_OUT_JSON : CMP_OUT_TEXT, cmd, &verdict, NULL);
        if (!code) code = verdict; /* 0 PASS, 1 FAIL, 2 INCONCLUSIVE */
        free(cmd);
    }
    store_close(s);
    return code;
}

const struct cli_cmd cmd_compare_def = {
    .name = "compare",
    .fn = cmd_compare,
    .summary = "paired, noise-aware verdict of a candidate against a baseline from a stored run",
    .description =
        "Exit 0 PASS (within the margin), 1 FAIL (a real drop beyond it), 2 INCONCLUSIVE;\n"
        "64-74 on errors. The comparison and its rows are stored.",
    .opts = opts,
    .min_pos = 0,
    .max_pos = 0,
};
