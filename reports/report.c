/* report — one JSON document per comparison, and its renderers. */
#include "reports/report.h"
#include "harness/status.h"
#include "reports/escape.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small JSON helpers ---- */
static const cJSON *jget(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }
static double jnum(const cJSON *o, const char *k)
{
    const cJSON *v = jget(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}
static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = jget(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}
static void add_str(cJSON *o, const char *k, const char *v)
{
    char *s = utf8_sanitize(v ? v : "");
    cJSON_AddStringToObject(o, k, s);
    free(s);
}

/* the metric value of a trial: ppl, else acc, else the first number */
static double trial_value(struct store *s, int64_t trial)
{
    char *mj = NULL;
    double v = NAN;
    if (store_trial_metrics(s, trial, &mj) == QG_OK && mj) {
        cJSON *m = cJSON_Parse(mj);
        v = jnum(m, "ppl");
        if (isnan(v)) v = jnum(m, "acc");
        const cJSON *c;
        if (isnan(v) && m) cJSON_ArrayForEach(c, m) if (cJSON_IsNumber(c) && isnan(v)) v = c->valuedouble;
        cJSON_Delete(m);
    }
    free(mj);
    return v;
}

static void add_repeats(struct store *s, int64_t run, const char *model, int64_t task, cJSON *arr)
{
    for (int r = 0; r < 64; r++) {
        int64_t t;
        int st;
        if (store_trial_find(s, run, model, task, r, &t, &st) != QG_OK) break;
        if (st == STORE_TRIAL_DONE) cJSON_AddItemToArray(arr, cJSON_CreateNumber(trial_value(s, t)));
    }
}

/* one side of a flipped item: its answer as text */
static char *answer_text(struct store *s, int64_t trial, int64_t idx, char **prompt, char **id)
{
    char *pred, *ext, *extra;
    if (store_item_text(s, trial, idx, &pred, &ext, &extra) != QG_OK) return NULL;
    cJSON *x = extra ? cJSON_Parse(extra) : NULL;
    struct sbuf b;
    sbuf_init(&b, 1 << 16);
    const cJSON *ch = jget(x, "choices");
    if (cJSON_IsArray(ch) && pred) { /* multiple choice: the chosen choice */
        int64_t k = -1;
        const cJSON *c = qg_parse_i64(pred, 0, 1 << 20, &k) ? NULL : cJSON_GetArrayItem(ch, (int)k);
        sbuf_printf(&b, "%s", cJSON_IsString(c) ? c->valuestring : pred);
    } else {
        sbuf_printf(&b, "%s%s%s", ext ? ext : "", ext && pred ? " <- " : "", pred ? pred : "");
    }
    if (prompt && !*prompt && x) *prompt = qg_strdup(jstr(x, "prompt"));
    if (id && !*id && x) *id = qg_strdup(jstr(x, "id"));
    cJSON_Delete(x);
    free(pred);
    free(ext);
    free(extra);
    return b.data ? b.data : qg_strdup("");
}

static void add_flips(struct store *s, int64_t run, const char *base, const char *cand, int64_t task, cJSON *t)
{
    int64_t tb, tc;
    struct store_row *rb = NULL, *rc = NULL;
    int64_t nb = 0, nc = 0;
    if (store_trial_find(s, run, base, task, 0, &tb, NULL) || store_trial_find(s, run, cand, task, 0, &tc, NULL)) return;
    if (store_items_read(s, tb, &rb, &nb) || store_items_read(s, tc, &rc, &nc) || nb != nc) {
        free(rb);
        free(rc);
        return;
    }
    cJSON *arr = cJSON_AddArrayToObject(t, "flipped_items");
    int shown = 0;
    for (int64_t i = 0; i < nb && shown < REPORT_MAX_FLIPS; i++) {
        if (rb[i].correct < 0 || rb[i].correct == rc[i].correct) continue;
        char *prompt = NULL, *id = NULL;
        char *a = answer_text(s, tb, rb[i].idx, &prompt, &id), *b = answer_text(s, tc, rc[i].idx, &prompt, &id);
        cJSON *f = cJSON_CreateObject();
        cJSON_AddNumberToObject(f, "index", (double)rb[i].idx);
        add_str(f, "id", id);
        add_str(f, "prompt", prompt);
        add_str(f, "baseline_answer", a);
        add_str(f, "candidate_answer", b);
        cJSON_AddBoolToObject(f, "baseline_correct", rb[i].correct);
        cJSON_AddBoolToObject(f, "candidate_correct", rc[i].correct);
        cJSON_AddItemToArray(arr, f);
        free(prompt);
        free(id);
        free(a);
        free(b);
        shown++;
    }
    free(rb);
    free(rc);
}

static void add_kld(struct store *s, int64_t run, const char *cand, int64_t task, cJSON *t)
{
    int64_t tc;
    char *mj = NULL;
    if (store_trial_find(s, run, cand, task, 0, &tc, NULL) || store_trial_metrics(s, tc, &mj) || !mj) return;
    cJSON *m = cJSON_Parse(mj);
    free(mj);
    if (!m || isnan(jnum(m, "kld_mean"))) {
        cJSON_Delete(m);
        return;
    }
    cJSON *k = cJSON_AddObjectToObject(t, "kld");
    static const char *keys[] = {"kld_mean", "kld_median", "kld_p90", "kld_p99", "kld_p999", "kld_max", "top1_agree", "dp_mean"};
    static const char *names[] = {"mean", "median", "p90", "p99", "p99.9", "max", "same_top1", "dp_mean"};
    for (int i = 0; i < 8; i++)
        if (!isnan(jnum(m, keys[i]))) cJSON_AddNumberToObject(k, names[i], jnum(m, keys[i]));
    /* from the candidate's top-K log-probs (a remote model): a lower bound */
    if (!isnan(jnum(m, "kld_top_k"))) cJSON_AddNumberToObject(k, "top_k", jnum(m, "kld_top_k"));
    cJSON_Delete(m);
}

static cJSON *provenance(const cJSON *run)
{
    cJSON *p = cJSON_CreateObject();
    static const char *keys[] = {"command", "host", "created_at", "finished_at", "qgate_version", "suite_name", "suite_hash", "uid"};
    for (int i = 0; i < 8; i++) add_str(p, keys[i], jstr(run, keys[i]));
    cJSON_AddNumberToObject(p, "seed", jnum(run, "seed"));
    cJSON_AddNumberToObject(p, "repeats", jnum(run, "repeats"));
    cJSON *models = cJSON_AddArrayToObject(p, "models");
    const cJSON *m;
    cJSON_ArrayForEach(m, jget(run, "models"))
    {
        cJSON *o = cJSON_CreateObject();
        add_str(o, "name", jstr(m, "name"));
        add_str(o, "path", jstr(m, "path"));
        add_str(o, "sha256", jstr(m, "sha256"));
        add_str(o, "arch", jstr(m, "arch"));
        cJSON_AddNumberToObject(o, "parameters", jnum(m, "n_params"));
        cJSON *types = cJSON_Parse(jstr(m, "types_json"));
        cJSON_AddItemToObject(o, "stored_types", types ? types : cJSON_CreateArray());
        cJSON_AddItemToArray(models, o);
    }
    cJSON *tasks = cJSON_AddArrayToObject(p, "tasks");
    cJSON_ArrayForEach(m, jget(run, "tasks"))
    {
        cJSON *o = cJSON_CreateObject();
        add_str(o, "name", jstr(m, "name"));
        add_str(o, "kind", jstr(m, "kind"));
        add_str(o, "config_sha256", jstr(m, "config_hash"));
        add_str(o, "datasets", jstr(m, "datasets"));
        cJSON_AddItemToArray(tasks, o);
    }
    return p;
}

int report_build(struct store *s, int64_t comparison_id, cJSON **doc, char *err, size_t errlen)
{
    *doc = NULL;
    int64_t cid, run_id;
    char *sj, *created;
    int rc = store_comparison_get(s, comparison_id, &cid, &run_id, &sj, &created);
    if (rc) return qg_errf(err, errlen, rc, "%s", store_errmsg(s));
    cJSON *sum = sj ? cJSON_Parse(sj) : NULL;
    free(sj);
    cJSON *run = NULL;
    if (!sum) rc = qg_errf(err, errlen, QG_ERR_DATA, "comparison %lld has no readable summary", (long long)cid);
    if (!rc && (rc = store_run_json(s, run_id, &run))) qg_errf(err, errlen, rc, "%s", store_errmsg(s));
    if (rc) {
        cJSON_Delete(sum);
        free(created);
        return rc;
    }
    const char *base = jstr(sum, "baseline"), *cand = jstr(sum, "candidate");
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "schema", REPORT_SCHEMA);
    char now[32];
    qg_utc_now(now);
    cJSON_AddStringToObject(d, "generated_at", now);
    cJSON_AddStringToObject(d, "qgate_version", QG_VERSION);
    add_str(d, "verdict", jstr(sum, "verdict"));
    cJSON *c = cJSON_AddObjectToObject(d, "comparison");
    cJSON_AddNumberToObject(c, "id", (double)cid);
    cJSON_AddNumberToObject(c, "run", (double)run_id);
    add_str(c, "created_at", created);
    add_str(c, "baseline", base);
    add_str(c, "candidate", cand);
    cJSON_AddNumberToObject(c, "bootstrap_seed", jnum(sum, "bootstrap_seed"));
    cJSON_AddItemToObject(c, "policy", cJSON_Duplicate(jget(sum, "policy"), 1));
    cJSON *tasks = cJSON_AddArrayToObject(d, "tasks");
    const cJSON *t;
    cJSON_ArrayForEach(t, jget(sum, "tasks"))
    {
        cJSON *o = cJSON_Duplicate(t, 1);
        cJSON_DeleteItemFromObjectCaseSensitive(o, "task");
        add_str(o, "task", jstr(t, "task"));
        cJSON_DeleteItemFromObjectCaseSensitive(o, "reason");
        add_str(o, "reason", jstr(t, "reason"));
        int64_t task_id = -1;
        const cJSON *rt;
        const char *kind = "";
        cJSON_ArrayForEach(rt, jget(run, "tasks")) if (!strcmp(jstr(rt, "name"), jstr(t, "task"))) {
            task_id = (int64_t)jnum(rt, "id");
            kind = jstr(rt, "kind");
        }
        add_str(o, "kind", kind);
        if (task_id > 0) {
            cJSON *reps = cJSON_AddObjectToObject(o, "repeats");
            add_repeats(s, run_id, base, task_id, cJSON_AddArrayToObject(reps, "baseline"));
            add_repeats(s, run_id, cand, task_id, cJSON_AddArrayToObject(reps, "candidate"));
            if (!strcmp(kind, "perplexity")) add_kld(s, run_id, cand, task_id, o);
            else add_flips(s, run_id, base, cand, task_id, o);
        }
        cJSON_AddItemToArray(tasks, o);
    }
    cJSON_AddItemToObject(d, "provenance", provenance(run));
    cJSON_Delete(run);
    cJSON_Delete(sum);
    free(created);
    *doc = d;
    return QG_OK;
}

/* ---------------------------------------------------------------- text */

static int vcode(const char *v)
{
    return !strcmp(v, "PASS") ? 0 : !strcmp(v, "FAIL") ? 1 : 2;
}

/* s escaped for a terminal, cut to width bytes on a UTF-8 boundary and
 * padded to width columns (one per character) */
static void term_cell(struct sbuf *b, const char *s, int width)
{
    struct sbuf t;
    sbuf_init(&t, 1 << 16);
    esc_term(&t, s);
    const char *p = t.data ? t.data : "";
    size_t n = 0;
    int cols = 0;
    while (p[n] && cols < width) {
        size_t k = 1;
        while (((unsigned char)p[n + k] & 0xC0) == 0x80) k++;
        n += k;
        cols++;
    }
    sbuf_append(b, p, n);
    for (; cols < width; cols++) sbuf_append(b, " ", 1);
    sbuf_release(&t);
}

static void render_text(const cJSON *d, int color, struct sbuf *b)
{
    const cJSON *c = jget(d, "comparison"), *pol = jget(c, "policy"), *t;
    esc_term(b, jstr(c, "candidate"));
    sbuf_printf(b, " vs ");
    esc_term(b, jstr(c, "baseline"));
    sbuf_printf(b, " (run %.0f, comparison %.0f): one-sided alpha %.3g, power %.2g, %.0f bootstrap draws\n", jnum(c, "run"),
                jnum(c, "id"), jnum(pol, "alpha"), 1 - jnum(pol, "beta"), jnum(pol, "bootstrap"));
    sbuf_printf(b, "%-16s %-13s %10s %10s %10s %23s %9s %9s %9s %9s %9s  %s\n", "task", "metric", "baseline", "candidate", "loss",
                "interval (90%)", "margin", "noise", "MDE", "flips -/+", "p", "verdict");
    static const char *col[] = {"\033[32m", "\033[31m", "\033[33m"};
    cJSON_ArrayForEach(t, jget(d, "tasks"))
    {
        char iv[64];
        snprintf(iv, sizeof iv, "[%+.5f, %+.5f]", jnum(t, "ci_low"), jnum(t, "ci_high"));
        const char *v = jstr(t, "verdict");
        char fl[48] = "-";
        if (!isnan(jnum(t, "flips_b"))) snprintf(fl, sizeof fl, "%.0f/%.0f", jnum(t, "flips_b"), jnum(t, "flips_c"));
        term_cell(b, jstr(t, "task"), 16);
        sbuf_printf(b, " %-13s %10.4f %10.4f %+10.5f %23s %9.5f %9.2g %9.5f %9s %9.3g  %s%s%s\n", jstr(t, "metric"),
                    jnum(t, "baseline"), jnum(t, "candidate"), jnum(t, "delta"), iv, jnum(t, "margin"), jnum(t, "noise"), jnum(t, "mde"),
                    fl, jnum(t, "p_value"), color ? col[vcode(v)] : "", v, color ? "\033[0m" : "");
        if (!isnan(jnum(t, "ppl_ratio"))) {
            sbuf_printf(b, "%17s PPL ratio %.5f (ln %+.5f +/- %.5f paired SE)", "", jnum(t, "ppl_ratio"), jnum(t, "delta"), jnum(t, "se"));
            if (!isnan(jnum(t, "kld_mean")))
                sbuf_printf(b, "; KLD mean %.6f, p99 %.6f, max %.4f%s; same top-1 %.2f%%; mean dp %+.5f", jnum(t, "kld_mean"),
                            jnum(t, "kld_p99"), jnum(t, "kld_max"), isnan(jnum(jget(t, "kld"), "top_k")) ? "" : " (top-K lower bound)",
                            100 * jnum(t, "same_top1"), jnum(t, "dp_mean"));
            sbuf_printf(b, "\n");
        } else if (!isnan(jnum(t, "flips_b"))) {
            double n = jnum(t, "items");
            sbuf_printf(b, "%17s flips %.0f worse / %.0f better of %.0f (%.2f%%, 95%% %.2f-%.2f%%); McNemar p %.3g\n", "",
                        jnum(t, "flips_b"), jnum(t, "flips_c"), n, 100 * (jnum(t, "flips_b") + jnum(t, "flips_c")) / n,
                        100 * jnum(t, "flip_rate_low"), 100 * jnum(t, "flip_rate_high"), jnum(t, "p_value"));
        }
        const cJSON *det = jget(t, "deterministic");
        sbuf_printf(b, "%17s ", "");
        esc_term(b, jstr(t, "reason"));
        sbuf_printf(b, "%s; Holm-adjusted p %.3g\n",
                    cJSON_IsTrue(det) ? "; baseline repeats identical (deterministic)"
                    : cJSON_IsFalse(det) ? "; noise from the baseline's repeats" : "",
                    jnum(t, "p_holm"));
    }
    const char *v = jstr(d, "verdict");
    static const char *bold[] = {"\033[1;32m", "\033[1;31m", "\033[1;33m"};
    sbuf_printf(b, "suite verdict: %s%s%s\n", color ? bold[vcode(v)] : "", v, color ? "\033[0m" : "");
}

/* ---------------------------------------------------------------- md */

static void render_md(const cJSON *d, struct sbuf *b)
{
    const cJSON *c = jget(d, "comparison"), *t, *p = jget(d, "provenance");
    const char *v = jstr(d, "verdict");
    static const char *badge[] = {"✅ PASS", "❌ FAIL", "⚠️ INCONCLUSIVE"};
    sbuf_printf(b, "## qgate: **%s** — ", badge[vcode(v)]);
    esc_md(b, jstr(c, "candidate"));
    sbuf_printf(b, " vs ");
    esc_md(b, jstr(c, "baseline"));
    sbuf_printf(b, "\n\n| task | metric | baseline | candidate | loss | 90%% interval | margin | noise | verdict |\n"
                   "|---|---|---:|---:|---:|---|---:|---:|---|\n");
    cJSON_ArrayForEach(t, jget(d, "tasks"))
    {
        sbuf_printf(b, "| ");
        esc_md(b, jstr(t, "task"));
        sbuf_printf(b, " | %s | %.4f | %.4f | %+.5f | [%+.5f, %+.5f] | %.5f | %.2g | %s |\n", jstr(t, "metric"), jnum(t, "baseline"),
                    jnum(t, "candidate"), jnum(t, "delta"), jnum(t, "ci_low"), jnum(t, "ci_high"), jnum(t, "margin"), jnum(t, "noise"),
                    badge[vcode(jstr(t, "verdict"))]);
    }
    cJSON_ArrayForEach(t, jget(d, "tasks"))
    {
        sbuf_printf(b, "\n<details><summary>");
        esc_html(b, jstr(t, "task"));
        sbuf_printf(b, ": %s</summary>\n\n", jstr(t, "verdict"));
        sbuf_printf(b, "- reason: ");
        esc_md(b, jstr(t, "reason"));
        sbuf_printf(b, "\n- paired SE %.3g, MDE %.3g, p %.3g (Holm %.3g), %.0f units / %.0f items\n", jnum(t, "se"), jnum(t, "mde"),
                    jnum(t, "p_value"), jnum(t, "p_holm"), jnum(t, "units"), jnum(t, "items"));
        if (!isnan(jnum(t, "ppl_ratio"))) sbuf_printf(b, "- PPL ratio %.5f\n", jnum(t, "ppl_ratio"));
        const cJSON *k = jget(t, "kld");
        if (k) sbuf_printf(b, "- KLD mean %.3g, median %.3g, p99 %.3g, max %.3g; same top-1 %.2f%%\n", jnum(k, "mean"), jnum(k, "median"),
                           jnum(k, "p99"), jnum(k, "max"), 100 * jnum(k, "same_top1"));
        if (k && !isnan(jnum(k, "top_k")))
            sbuf_printf(b, "- the KLD comes from the candidate's top-%.0f log-probs (one bucket for the rest): a lower bound\n",
                        jnum(k, "top_k"));
        if (!isnan(jnum(t, "flips_b")))
            sbuf_printf(b, "- flips: %.0f worse, %.0f better (McNemar p %.3g)\n", jnum(t, "flips_b"), jnum(t, "flips_c"), jnum(t, "p_value"));
        const cJSON *f;
        int any = 0;
        cJSON_ArrayForEach(f, jget(t, "flipped_items"))
        {
            if (!any++) sbuf_printf(b, "\n| item | prompt | baseline | candidate |\n|---|---|---|---|\n");
            sbuf_printf(b, "| ");
            esc_md(b, jstr(f, "id"));
            sbuf_printf(b, " | ");
            esc_md(b, jstr(f, "prompt"));
            sbuf_printf(b, " | %s ", cJSON_IsTrue(jget(f, "baseline_correct")) ? "✓" : "✗");
            esc_md(b, jstr(f, "baseline_answer"));
            sbuf_printf(b, " | %s ", cJSON_IsTrue(jget(f, "candidate_correct")) ? "✓" : "✗");
            esc_md(b, jstr(f, "candidate_answer"));
            sbuf_printf(b, " |\n");
        }
        sbuf_printf(b, "\n</details>\n");
    }
    sbuf_printf(b, "\n<details><summary>Provenance</summary>\n\n- qgate %s, run %.0f, comparison %.0f, host ", jstr(p, "qgate_version"),
                jnum(c, "run"), jnum(c, "id"));
    esc_md(b, jstr(p, "host"));
    sbuf_printf(b, ", %s\n- command: ", jstr(p, "created_at"));
    esc_md(b, jstr(p, "command"));
    sbuf_printf(b, "\n- suite ");
    esc_md(b, jstr(p, "suite_name"));
    sbuf_printf(b, " (sha256 %s), seed %.0f, bootstrap seed %.0f\n", jstr(p, "suite_hash"), jnum(p, "seed"), jnum(c, "bootstrap_seed"));
    cJSON_ArrayForEach(t, jget(p, "models"))
    {
        sbuf_printf(b, "- model ");
        esc_md(b, jstr(t, "name"));
        sbuf_printf(b, ": ");
        esc_md(b, jstr(t, "path"));
        sbuf_printf(b, " (sha256 %s)\n", jstr(t, "sha256"));
    }
    sbuf_printf(b, "\n</details>\n");
}

/* ---------------------------------------------------------------- junit */

/* JUnit outcome of a row: 0 pass, 1 failure, 2 skipped (INCONCLUSIVE: the
 * suite cannot tell, which is neither a pass nor a regression; CI shows it
 * and the exit code 2 of `qgate gate` carries it), 3 error (a row without a
 * finite result or with an unknown verdict) */
static int junit_outcome(const cJSON *t)
{
    const char *v = jstr(t, "verdict");
    if (!isfinite(jnum(t, "delta")) || !isfinite(jnum(t, "ci_low")) || !isfinite(jnum(t, "ci_high"))) return 3;
    return !strcmp(v, "PASS") ? 0 : !strcmp(v, "FAIL") ? 1 : !strcmp(v, "INCONCLUSIVE") ? 2 : 3;
}

static void render_junit(const cJSON *d, struct sbuf *b)
{
    const cJSON *c = jget(d, "comparison"), *t;
    int n = 0, counts[4] = {0};
    cJSON_ArrayForEach(t, jget(d, "tasks"))
    {
        n++;
        counts[junit_outcome(t)]++;
    }
    sbuf_printf(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"qgate ");
    esc_xml(b, jstr(c, "candidate"));
    sbuf_printf(b, " vs ");
    esc_xml(b, jstr(c, "baseline"));
    sbuf_printf(b, "\" tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\">\n", n, counts[1], counts[3], counts[2]);
    static const char *const tag[] = {NULL, "failure", "skipped", "error"};
    cJSON_ArrayForEach(t, jget(d, "tasks"))
    {
        const char *v = jstr(t, "verdict");
        int o = junit_outcome(t);
        sbuf_printf(b, "  <testsuite name=\"");
        esc_xml(b, jstr(t, "task"));
        sbuf_printf(b, "\" tests=\"1\" failures=\"%d\" errors=\"%d\" skipped=\"%d\">\n    <testcase classname=\"qgate.", o == 1, o == 3,
                    o == 2);
        esc_xml(b, jstr(t, "task"));
        sbuf_printf(b, "\" name=\"");
        esc_xml(b, jstr(t, "metric"));
        sbuf_printf(b, "\">\n");
        char nums[512];
        snprintf(nums, sizeof nums, "loss %+.6f, 90%% interval [%+.6f, %+.6f], margin %.6f, noise %.3g, MDE %.3g, baseline %.6f, candidate %.6f",
                 jnum(t, "delta"), jnum(t, "ci_low"), jnum(t, "ci_high"), jnum(t, "margin"), jnum(t, "noise"), jnum(t, "mde"),
                 jnum(t, "baseline"), jnum(t, "candidate"));
        if (o) {
            sbuf_printf(b, "      <%s message=\"", tag[o]);
            esc_xml(b, v);
            sbuf_printf(b, ": ");
            esc_xml(b, jstr(t, "reason"));
            sbuf_printf(b, "\" type=\"");
            esc_xml(b, v);
            sbuf_printf(b, "\">");
            esc_xml(b, nums);
            sbuf_printf(b, "</%s>\n", tag[o]);
        }
        sbuf_printf(b, "      <system-out>");
        esc_xml(b, nums);
        sbuf_printf(b, "</system-out>\n    </testcase>\n  </testsuite>\n");
    }
    sbuf_printf(b, "</testsuites>\n");
}

/* ---------------------------------------------------------------- html */

static const char *vcolor(const char *v)
{
    return !strcmp(v, "PASS") ? "#2e7d32" : !strcmp(v, "FAIL") ? "#c62828" : "#b26a00";
}

/* forest plot: each task's loss and interval in units of its margin, so
 * every task shares one axis where the margin is at 1 */
static void forest(const cJSON *d, struct sbuf *b)
{
    int n = cJSON_GetArraySize(jget(d, "tasks"));
    double lo = -1.5, hi = 2.5;
    const cJSON *t;
    cJSON_ArrayForEach(t, jget(d, "tasks"))
    {
        double m = jnum(t, "margin");
        if (!(m > 0)) continue;
        lo = fmin(lo, jnum(t, "ci_low") / m - 0.5);
        hi = fmax(hi, jnum(t, "ci_high") / m + 0.5);
    }
    lo = fmax(lo, -20);
    hi = fmin(hi, 20);
    int W = 760, L = 170, R = 30, rowh = 34, H = 40 + rowh * n + 30;
    double sx = (W - L - R) / (hi - lo);
#define X(v) (L + ((v) - lo) * sx)
    sbuf_printf(b, "<svg class=\"chart forest\" id=\"forest\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" "
                   "aria-label=\"paired loss per task against the margin\" xmlns=\"http://www.w3.org/2000/svg\">\n", W, H, W, H);
    double x1 = X(fmax(lo, fmin(hi, 1.0)));
    sbuf_printf(b, "<rect x=\"%d\" y=\"30\" width=\"%.1f\" height=\"%d\" fill=\"#dff3df\"/>\n", L, x1 - L, rowh * n);
    sbuf_printf(b, "<rect x=\"%.1f\" y=\"30\" width=\"%.1f\" height=\"%d\" fill=\"#fbe3e3\"/>\n", x1, W - R - x1, rowh * n);
    sbuf_printf(b, "<line x1=\"%.1f\" y1=\"26\" x2=\"%.1f\" y2=\"%d\" stroke=\"#777\" stroke-dasharray=\"3,3\"/>\n", X(0), X(0), 34 + rowh * n);
    sbuf_printf(b, "<line x1=\"%.1f\" y1=\"26\" x2=\"%.1f\" y2=\"%d\" stroke=\"#c62828\"/>\n", x1, x1, 34 + rowh * n);
    sbuf_printf(b, "<text x=\"%.1f\" y=\"20\" font-size=\"11\" text-anchor=\"end\">no change</text>\n", X(0) - 3);
    sbuf_printf(b, "<text x=\"%.1f\" y=\"20\" font-size=\"11\" text-anchor=\"start\" fill=\"#c62828\">margin</text>\n", x1 + 3);
    int i = 0;
    cJSON_ArrayForEach(t, jget(d, "tasks"))
    {
        double m = jnum(t, "margin"), y = 30 + rowh * i + rowh / 2.0;
        if (!(m > 0)) m = 1;
        double a = fmax(lo, fmin(hi, jnum(t, "ci_low") / m)), z = fmax(lo, fmin(hi, jnum(t, "ci_high") / m));
        double e = fmax(lo, fmin(hi, jnum(t, "delta") / m));
        const char *c = vcolor(jstr(t, "verdict"));
        sbuf_printf(b, "<text x=\"8\" y=\"%.1f\" font-size=\"12\">", y + 4);
        esc_html(b, jstr(t, "task"));
        sbuf_printf(b, "</text>\n<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"/>\n", X(a), y, X(z), y, c);
        sbuf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\"/>\n", X(e), y, c);
        i++;
    }
    for (int k = (int)ceil(lo); k <= (int)floor(hi); k++)
        sbuf_printf(b, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\">%d&#215;</text>\n", X(k), 46 + rowh * n, k);
    sbuf_printf(b, "</svg>\n");
#undef X
}

/* small chart of per-repeat values of both models */
static void repeats_chart(const cJSON *t, struct sbuf *b)
{
    const cJSON *r = jget(t, "repeats"), *bs = jget(r, "baseline"), *cs = jget(r, "candidate"), *v;
    double lo = INFINITY, hi = -INFINITY;
    cJSON_ArrayForEach(v, bs) if (cJSON_IsNumber(v)) lo = fmin(lo, v->valuedouble), hi = fmax(hi, v->valuedouble);
    cJSON_ArrayForEach(v, cs) if (cJSON_IsNumber(v)) lo = fmin(lo, v->valuedouble), hi = fmax(hi, v->valuedouble);
    if (!isfinite(lo)) return;
    double pad = fmax((hi - lo) * 0.15, fmax(fabs(hi), fabs(lo)) * 0.02 + 1e-9);
    lo -= pad, hi += pad;
    int W = 360, H = 90;
    sbuf_printf(b, "<svg class=\"chart repeats\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"metric per repeat\" "
                   "xmlns=\"http://www.w3.org/2000/svg\">\n<text x=\"4\" y=\"12\" font-size=\"11\">metric per repeat (run-to-run noise)</text>\n", W, H, W, H);
    const cJSON *sides[2] = {bs, cs};
    const char *cols[2] = {"#1565c0", "#ef6c00"}, *lab[2] = {"baseline", "candidate"};
    for (int s2 = 0; s2 < 2; s2++) {
        double y = 35 + 28 * s2;
        sbuf_printf(b, "<text x=\"4\" y=\"%.0f\" font-size=\"10\">%s</text>\n", y + 3, lab[s2]);
        cJSON_ArrayForEach(v, sides[s2])
        {
            if (!cJSON_IsNumber(v)) continue;
            double x = 80 + (v->valuedouble - lo) / (hi - lo) * (W - 100);
            sbuf_printf(b, "<circle cx=\"%.1f\" cy=\"%.0f\" r=\"4\" fill=\"%s\" fill-opacity=\"0.7\"/>\n", x, y, cols[s2]);
        }
    }
    sbuf_printf(b, "<text x=\"80\" y=\"86\" font-size=\"9\">%.5g</text><text x=\"%d\" y=\"86\" font-size=\"9\" text-anchor=\"end\">%.5g</text>\n</svg>\n",
                lo, W - 20, hi);
}

static void kld_chart(const cJSON *k, struct sbuf *b)
{
    static const char *keys[] = {"median", "mean", "p90", "p99", "p99.9", "max"};
    double mx = 0;
    for (int i = 0; i < 6; i++) mx = fmax(mx, jnum(k, keys[i]));
    if (!(mx > 0)) return;
    int W = 360, H = 30 + 18 * 6;
    sbuf_printf(b, "<svg class=\"chart kld\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"KLD distribution\" "
                   "xmlns=\"http://www.w3.org/2000/svg\">\n<text x=\"4\" y=\"12\" font-size=\"11\">KL(base || candidate) per token, "
                   "nats (square-root scale)%s</text>\n", W, H, W, H, isnan(jnum(k, "top_k")) ? "" : "; top-K: a lower bound");
    for (int i = 0; i < 6; i++) {
        double v = jnum(k, keys[i]), w = isnan(v) ? 0 : sqrt(v / mx) * (W - 170);
        sbuf_printf(b, "<text x=\"4\" y=\"%d\" font-size=\"10\">%s</text><rect x=\"50\" y=\"%d\" width=\"%.1f\" height=\"12\" fill=\"#6a1b9a\"/>"
                       "<text x=\"%.1f\" y=\"%d\" font-size=\"10\">%.3g</text>\n",
                    30 + 18 * i, keys[i], 20 + 18 * i, w, 56 + w, 30 + 18 * i, v);
    }
    sbuf_printf(b, "</svg>\n");
}

static void flips_chart(const cJSON *t, struct sbuf *b)
{
    double fb = jnum(t, "flips_b"), fc = jnum(t, "flips_c"), n = jnum(t, "items");
    if (isnan(fb) || !(n > 0)) return;
    int W = 360, H = 70;
    double sb = fb / n * (W - 20), sc = fc / n * (W - 20), same = W - 20 - sb - sc;
    sbuf_printf(b, "<svg class=\"chart flips\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"flips\" "
                   "xmlns=\"http://www.w3.org/2000/svg\">\n<text x=\"4\" y=\"12\" font-size=\"11\">items: same answer correctness, "
                   "worse, better</text>\n<rect x=\"10\" y=\"22\" width=\"%.1f\" height=\"18\" fill=\"#9e9e9e\"/>"
                   "<rect x=\"%.1f\" y=\"22\" width=\"%.1f\" height=\"18\" fill=\"#c62828\"/><rect x=\"%.1f\" y=\"22\" width=\"%.1f\" "
                   "height=\"18\" fill=\"#2e7d32\"/>\n<text x=\"10\" y=\"58\" font-size=\"10\">%.0f unchanged, %.0f worse, %.0f better of %.0f</text>\n</svg>\n",
                W, H, W, H, same, 10 + same, sb, 10 + same + sb, sc, n - fb - fc, fb, fc, n);
}

static const char *css =
    "body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:980px;color:#222}"
    ".banner{padding:18px 22px;border-radius:8px;color:#fff;font-size:22px;font-weight:700}"
    ".PASS{background:#2e7d32}.FAIL{background:#c62828}.INCONCLUSIVE{background:#b26a00}"
    "table{border-collapse:collapse;width:100%;margin:10px 0;font-size:13px}td,th{border:1px solid #ddd;padding:4px 6px;"
    "text-align:left;vertical-align:top}th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}"
    ".task{border:1px solid #e0e0e0;border-radius:8px;padding:8px 14px;margin:14px 0;page-break-inside:avoid}"
    ".charts{display:flex;flex-wrap:wrap;gap:12px}.v{font-weight:700}code{word-break:break-all}"
    "@media print{body{margin:0;max-width:none}.task{page-break-inside:avoid}details{display:block}}";

static void render_html(const cJSON *d, struct sbuf *b)
{
    const cJSON *c = jget(d, "comparison"), *p = jget(d, "provenance"), *t;
    const char *v = jstr(d, "verdict");
    sbuf_printf(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>qgate report: ");
    esc_html(b, jstr(c, "candidate"));
    sbuf_printf(b, " vs ");
    esc_html(b, jstr(c, "baseline"));
    sbuf_printf(b, "</title><style>%s</style></head><body>\n<div class=\"banner %s\" id=\"verdict\">%s &#8212; ", css,
                vcode(v) == 0 ? "PASS" : vcode(v) == 1 ? "FAIL" : "INCONCLUSIVE", v);
    esc_html(b, jstr(c, "candidate"));
    sbuf_printf(b, " against ");
    esc_html(b, jstr(c, "baseline"));
    sbuf_printf(b, "</div>\n<p>qgate %s, comparison %.0f of run %.0f, generated %s. Loss &gt; 0 means the candidate is worse; "
                   "PASS when the 90%% interval's upper bound is within the margin, FAIL when its lower bound is beyond it.</p>\n",
                jstr(d, "qgate_version"), jnum(c, "id"), jnum(c, "run"), jstr(d, "generated_at"));
    sbuf_printf(b, "<h2>Summary</h2>\n<table><tr><th>task</th><th>metric</th><th>baseline</th><th>candidate</th><th>loss</th>"
                   "<th>90%% interval</th><th>margin</th><th>noise</th><th>MDE</th><th>p (Holm)</th><th>verdict</th></tr>\n");
    cJSON_ArrayForEach(t, jget(d, "tasks"))
    {
        sbuf_printf(b, "<tr><td>");
        esc_html(b, jstr(t, "task"));
        sbuf_printf(b, "</td><td>%s</td><td class=\"num\">%.4f</td><td class=\"num\">%.4f</td><td class=\"num\">%+.5f</td>"
                       "<td class=\"num\">[%+.5f, %+.5f]</td><td class=\"num\">%.5f</td><td class=\"num\">%.2g</td><td class=\"num\">%.4g</td>"
                       "<td class=\"num\">%.3g (%.3g)</td><td class=\"v\" style=\"color:%s\">%s</td></tr>\n",
                    jstr(t, "metric"), jnum(t, "baseline"), jnum(t, "candidate"), jnum(t, "delta"), jnum(t, "ci_low"), jnum(t, "ci_high"),
                    jnum(t, "margin"), jnum(t, "noise"), jnum(t, "mde"), jnum(t, "p_value"), jnum(t, "p_holm"), vcolor(jstr(t, "verdict")),
                    jstr(t, "verdict"));
    }
    sbuf_printf(b, "</table>\n<h2>Paired loss against the margin</h2>\n<p>Each task's loss and 90%% interval, in units of its "
                   "margin (the red line); green: within the margin.</p>\n");
    forest(d, b);
    cJSON_ArrayForEach(t, jget(d, "tasks"))
    {
        sbuf_printf(b, "<div class=\"task\"><h3>");
        esc_html(b, jstr(t, "task"));
        sbuf_printf(b, " <span style=\"color:%s\">%s</span></h3>\n<p>", vcolor(jstr(t, "verdict")), jstr(t, "verdict"));
        esc_html(b, jstr(t, "reason"));
        sbuf_printf(b, ". Paired SE %.3g over %.0f units (%.0f items).", jnum(t, "se"), jnum(t, "units"), jnum(t, "items"));
        if (!isnan(jnum(t, "ppl_ratio"))) sbuf_printf(b, " PPL ratio %.5f.", jnum(t, "ppl_ratio"));
        if (!isnan(jnum(t, "flips_b")))
            sbuf_printf(b, " Flips: %.0f worse, %.0f better (rate 95%% %.2f&#8211;%.2f%%), McNemar p %.3g.", jnum(t, "flips_b"),
                        jnum(t, "flips_c"), 100 * jnum(t, "flip_rate_low"), 100 * jnum(t, "flip_rate_high"), jnum(t, "p_value"));
        sbuf_printf(b, "</p>\n<div class=\"charts\">\n");
        repeats_chart(t, b);
        const cJSON *k = jget(t, "kld");
        if (k) kld_chart(k, b);
        flips_chart(t, b);
        sbuf_printf(b, "</div>\n");
        if (k) sbuf_printf(b, "<p>Same top-1 token: %.2f%%; mean &#916;p of the actual token: %+.5f.</p>\n", 100 * jnum(k, "same_top1"),
                           jnum(k, "dp_mean"));
        const cJSON *f;
        int any = 0;
        cJSON_ArrayForEach(f, jget(t, "flipped_items"))
        {
            if (!any++) sbuf_printf(b, "<table><tr><th>item</th><th>prompt</th><th>baseline</th><th>candidate</th></tr>\n");
            sbuf_printf(b, "<tr><td>");
            esc_html(b, jstr(f, "id"));
            sbuf_printf(b, "</td><td>");
            esc_html(b, jstr(f, "prompt"));
            sbuf_printf(b, "</td><td>%s ", cJSON_IsTrue(jget(f, "baseline_correct")) ? "&#10003;" : "&#10007;");
            esc_html(b, jstr(f, "baseline_answer"));
            sbuf_printf(b, "</td><td>%s ", cJSON_IsTrue(jget(f, "candidate_correct")) ? "&#10003;" : "&#10007;");
            esc_html(b, jstr(f, "candidate_answer"));
            sbuf_printf(b, "</td></tr>\n");
        }
        if (any) sbuf_printf(b, "</table>\n");
        sbuf_printf(b, "</div>\n");
    }
    sbuf_printf(b, "<h2>Provenance</h2>\n<table>\n");
    static const char *keys[] = {"command", "host", "created_at", "finished_at", "qgate_version", "suite_name", "suite_hash", "uid"};
    for (int i = 0; i < 8; i++) {
        sbuf_printf(b, "<tr><th>%s</th><td><code>", keys[i]);
        esc_html(b, jstr(p, keys[i]));
        sbuf_printf(b, "</code></td></tr>\n");
    }
    const cJSON *pol = jget(c, "policy");
    sbuf_printf(b, "<tr><th>seeds</th><td>run %.0f, bootstrap %.0f (%.0f draws)</td></tr>\n<tr><th>policy</th><td>margin ln PPL %.5f, "
                   "accuracy %.3f, alpha %.3f, beta %.2f</td></tr>\n</table>\n<h3>Models</h3>\n<table><tr><th>name</th><th>file</th>"
                   "<th>sha256</th><th>stored tensor types</th></tr>\n",
                jnum(p, "seed"), jnum(c, "bootstrap_seed"), jnum(pol, "bootstrap"), jnum(pol, "margin_ppl"), jnum(pol, "margin_acc"),
                jnum(pol, "alpha"), jnum(pol, "beta"));
    cJSON_ArrayForEach(t, jget(p, "models"))
    {
        sbuf_printf(b, "<tr><td>");
        esc_html(b, jstr(t, "name"));
        sbuf_printf(b, "</td><td><code>");
        esc_html(b, jstr(t, "path"));
        sbuf_printf(b, "</code></td><td><code>%s</code></td><td>", jstr(t, "sha256"));
        const cJSON *ty;
        int k2 = 0;
        cJSON_ArrayForEach(ty, jget(t, "stored_types"))
        {
            sbuf_printf(b, "%s", k2++ ? ", " : "");
            esc_html(b, jstr(ty, "type"));
            sbuf_printf(b, " &#215;%.0f", jnum(ty, "count"));
        }
        sbuf_printf(b, "</td></tr>\n");
    }
    sbuf_printf(b, "</table>\n<h3>Tasks and data</h3>\n<table><tr><th>task</th><th>kind</th><th>config sha256</th><th>data (path sha256)</th></tr>\n");
    cJSON_ArrayForEach(t, jget(p, "tasks"))
    {
        sbuf_printf(b, "<tr><td>");
        esc_html(b, jstr(t, "name"));
        sbuf_printf(b, "</td><td>");
        esc_html(b, jstr(t, "kind"));
        sbuf_printf(b, "</td><td><code>%s</code></td><td><code>", jstr(t, "config_sha256"));
        esc_html(b, jstr(t, "datasets"));
        sbuf_printf(b, "</code></td></tr>\n");
    }
    sbuf_printf(b, "</table>\n</body></html>\n");
}

static const char *const formats[] = {"text", "md", "html", "json", "junit"};

int report_format_known(const char *f)
{
    for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
        if (!strcmp(formats[i], f)) return 1;
    return 0;
}

int report_render(const cJSON *doc, const char *format, int color, struct sbuf *out)
{
    if (!strcmp(format, "text")) render_text(doc, color, out);
    else if (!strcmp(format, "md")) render_md(doc, out);
    else if (!strcmp(format, "html")) render_html(doc, out);
    else if (!strcmp(format, "junit")) render_junit(doc, out);
    else if (!strcmp(format, "json")) {
        char *s = cJSON_Print(doc);
        if (!s) return QG_ERR_NOMEM;
        sbuf_printf(out, "%s\n", s);
        free(s);
    } else {
        return QG_ERR_USAGE;
    }
    return out->failed ? QG_ERR_NOMEM : QG_OK;
}
