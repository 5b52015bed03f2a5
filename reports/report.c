/* report — one JSON document per comparison, and its renderers. */
#include "reports/report.h"
#include "reports/report_parts.h"
#include "core/status.h"
#include "metrics/verdict.h"
#include "reports/escape.h"
#include "core/json.h"
#include "core/utf8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small JSON helpers ---- */
/* ---------------------------------------------------------------- text */

/* "comparison 7", or what a report of a comparison not stored says */

/* v with prec digits ('f': after the point, 'g': significant), or "n/a"
 * when it is not a number (a figure too few windows cannot give: null in
 * the JSON). */
static const char *num_s(char *buf, size_t n, char mode, int prec, double v)
{
    if (!isfinite(v))
        snprintf(buf, n, "n/a");
    else if (mode == 'f')
        snprintf(buf, n, "%.*f", prec, v);
    else
        snprintf(buf, n, "%.*g", prec, v);
    return buf;
}

/* "[lo, hi]" of a task's interval, or "(not bounded)" where too few
 * windows gave none (null in the JSON). */
static const char *fmt_iv(const cJSON *t, char *buf, size_t n)
{
    double lo = json_num(t, "ci_low", NAN), hi = json_num(t, "ci_high", NAN);
    if (isfinite(lo) && isfinite(hi))
        snprintf(buf, n, "[%+.5f, %+.5f]", lo, hi);
    else
        snprintf(buf, n, "(not bounded)");
    return buf;
}

static const char *cid_text(const cJSON *c)
{
    static _Thread_local char buf[64];
    double id = json_num(c, "id", NAN);
    if (isnan(id)) return "a comparison computed for this report (not stored)";
    snprintf(buf, sizeof buf, "comparison %.0f", id);
    return buf;
}

/* " (simulated: w=nvfp4)" after a simulated candidate's name (or "") */
static const char *sim_note(const cJSON *c, char *buf, size_t n)
{
    const char *s = json_str(c, "candidate_simulated", NULL);
    if (!s) return "";
    snprintf(buf, n, " (simulated: %s)", s);
    return buf;
}

/* a verdict's value (metrics/verdict.h); anything unknown shows as INCONCLUSIVE */
static int vcode(const char *v)
{
    int k = verdict_from_name(v);
    return k < 0 ? VERDICT_INCONCLUSIVE : k;
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
        while (((unsigned char)p[n + k] & 0xC0) == 0x80)
            k++;
        n += k;
        cols++;
    }
    sbuf_append(b, p, n);
    for (; cols < width; cols++)
        sbuf_append(b, " ", 1);
    sbuf_release(&t);
}

/* "loss PASS; kld 0.0004 [0.0004, 0.0004] <= 0.02 PASS; ..." for a task
 * with gates, as plain text (numbers and fixed names; markup formats escape
 * it for its "<=" and ">="); nothing without. */
static void gates_text(const cJSON *t, struct sbuf *b)
{
    const cJSON *g, *gates = json_get(t, "gates");
    if (cJSON_GetArraySize(gates) < 1) return;
    sbuf_printf(b, "gates: loss %s", verdict_name(vcode(json_str(t, "loss_verdict", ""))));
    cJSON_ArrayForEach(g, gates)
    {
        int v = vcode(json_str(g, "verdict", ""));
        char iv[64];
        double lo = json_num(g, "ci_low", NAN), hi = json_num(g, "ci_high", NAN);
        if (isfinite(lo) && isfinite(hi))
            snprintf(iv, sizeof iv, "[%.4g, %.4g]", lo, hi);
        else
            snprintf(iv, sizeof iv, "(not bounded)");
        sbuf_printf(b, "; %s %.4g %s %s %.4g %s",
                    !strcmp(json_str(g, "gate", ""), "kld")    ? "KLD"
                    : !strcmp(json_str(g, "gate", ""), "top1") ? "top-1"
                                                               : "flip rate",
                    json_num(g, "value", NAN), iv,
                    !strcmp(json_str(g, "bound", ""), "min") ? ">=" : "<=",
                    json_num(g, "limit", NAN), verdict_name(v));
    }
}

void report_text_one(const cJSON *d, int color, struct sbuf *b)
{
    const cJSON *c = json_get(d, "comparison"), *pol = json_get(c, "policy"), *t;
    char note[300];
    esc_term(b, json_str(c, "candidate", ""));
    esc_term(b, sim_note(c, note, sizeof note));
    sbuf_printf(b, " vs ");
    esc_term(b, json_str(c, "baseline", ""));
    sbuf_printf(b, " (run %.0f, %s): one-sided alpha %.3g, power %.2g, %.0f bootstrap draws\n",
                json_num(c, "run", NAN), cid_text(c), json_num(pol, "alpha", NAN),
                1 - json_num(pol, "beta", NAN), json_num(pol, "bootstrap", NAN));
    sbuf_printf(b, "%-16s %-13s %10s %10s %10s %23s %9s %9s %9s %9s %9s  %s\n", "task", "metric",
                "baseline", "candidate", "loss", "interval (90%)", "margin", "noise", "MDE",
                "flips -/+", "p", "verdict");
    static const char *col[] = {"\033[32m", "\033[31m", "\033[33m"};
    cJSON_ArrayForEach(t, json_get(d, "tasks"))
    {
        char iv[64];
        fmt_iv(t, iv, sizeof iv);
        const char *v = json_str(t, "verdict", "");
        char fl[48] = "-";
        if (!isnan(json_num(t, "flips_b", NAN)))
            snprintf(fl, sizeof fl, "%.0f/%.0f", json_num(t, "flips_b", NAN),
                     json_num(t, "flips_c", NAN));
        term_cell(b, json_str(t, "task", ""), 16);
        char mde[32];
        sbuf_printf(
            b, " %-13s %10.4f %10.4f %+10.5f %23s %9.5f %9.2g %9s %9s %9.3g  %s%s%s\n",
            json_str(t, "metric", ""), json_num(t, "baseline", NAN), json_num(t, "candidate", NAN),
            json_num(t, "delta", NAN), iv, json_num(t, "margin", NAN), json_num(t, "noise", NAN),
            num_s(mde, sizeof mde, 'f', 5, json_num(t, "mde", NAN)), fl,
            json_num(t, "p_value", NAN), color ? col[vcode(v)] : "", v, color ? "\033[0m" : "");
        if (!isnan(json_num(t, "ppl_ratio", NAN))) {
            char se[32];
            sbuf_printf(b, "%17s PPL ratio %.5f (ln %+.5f +/- %s paired SE)", "",
                        json_num(t, "ppl_ratio", NAN), json_num(t, "delta", NAN),
                        num_s(se, sizeof se, 'f', 5, json_num(t, "se", NAN)));
            if (!isnan(json_num(t, "kld_mean", NAN)))
                sbuf_printf(
                    b, "; KLD mean %.6f, p99 %.6f, max %.4f%s; same top-1 %.2f%%; mean dp %+.5f",
                    json_num(t, "kld_mean", NAN), json_num(t, "kld_p99", NAN),
                    json_num(t, "kld_max", NAN),
                    isnan(json_num(json_get(t, "kld"), "top_k", NAN)) ? "" : " (top-K lower bound)",
                    100 * json_num(t, "same_top1", NAN), json_num(t, "dp_mean", NAN));
            sbuf_printf(b, "\n");
        } else if (!isnan(json_num(t, "flips_b", NAN))) {
            double n = json_num(t, "items", NAN);
            sbuf_printf(b,
                        "%17s flips %.0f worse / %.0f better of %.0f (%.2f%%, 95%% %.2f-%.2f%%); "
                        "McNemar p %.3g\n",
                        "", json_num(t, "flips_b", NAN), json_num(t, "flips_c", NAN), n,
                        100 * (json_num(t, "flips_b", NAN) + json_num(t, "flips_c", NAN)) / n,
                        100 * json_num(t, "flip_rate_low", NAN),
                        100 * json_num(t, "flip_rate_high", NAN), json_num(t, "p_value", NAN));
        }
        if (cJSON_GetArraySize(json_get(t, "gates")) > 0) {
            sbuf_printf(b, "%17s ", "");
            gates_text(t, b);
            sbuf_printf(b, "\n");
        }
        const cJSON *det = json_get(t, "deterministic");
        sbuf_printf(b, "%17s ", "");
        esc_term(b, json_str(t, "reason", ""));
        double ph = json_num(t, "p_holm", NAN);
        char phs[32]; /* "0" reads as certainty: say how small */
        snprintf(phs, sizeof phs, ph < 1e-15 ? "< 1e-15" : "%.3g", ph);
        char nz[96] = "";
        if (cJSON_IsFalse(det))
            snprintf(nz, sizeof nz, "; reruns of the baseline move it by +-%.3g (1 SD)",
                     json_num(t, "noise", NAN));
        sbuf_printf(b, "%s%s; Holm-adjusted p %s\n",
                    cJSON_IsTrue(det) ? "; baseline repeats identical (deterministic)" : "", nz,
                    phs);
    }
    const char *v = json_str(d, "verdict", "");
    static const char *bold[] = {"\033[1;32m", "\033[1;31m", "\033[1;33m"};
    sbuf_printf(b, "suite verdict: %s%s%s\n", color ? bold[vcode(v)] : "", v,
                color ? "\033[0m" : "");
}

/* ---------------------------------------------------------------- md */

/* A table of the flipped items in one markup: head, row open, cell
 * separator, row close, tail, the right/wrong marks and the escaping. */
struct table_style {
    const char *head, *row, *sep, *end, *tail, *yes, *no;
    void (*esc)(struct sbuf *b, const char *s);
};

static const struct table_style md_table = {
    "\n| item | prompt | baseline | candidate |\n|---|---|---|---|\n",
    "| ",
    " | ",
    " |\n",
    "",
    "✓",
    "✗",
    esc_md};
static const struct table_style html_table = {
    "<table><tr><th>item</th><th>prompt</th><th>baseline</th><th>candidate</th></tr>\n",
    "<tr><td>",
    "</td><td>",
    "</td></tr>\n",
    "</table>\n",
    "&#10003;",
    "&#10007;",
    esc_html};

static void flips_table(const cJSON *t, const struct table_style *st, struct sbuf *b)
{
    const cJSON *f;
    int any = 0;
    cJSON_ArrayForEach(f, json_get(t, "flipped_items"))
    {
        if (!any++) sbuf_printf(b, "%s", st->head);
        sbuf_printf(b, "%s", st->row);
        st->esc(b, json_str(f, "id", ""));
        sbuf_printf(b, "%s", st->sep);
        st->esc(b, json_str(f, "prompt", ""));
        sbuf_printf(b, "%s%s ", st->sep,
                    cJSON_IsTrue(json_get(f, "baseline_correct")) ? st->yes : st->no);
        st->esc(b, json_str(f, "baseline_answer", ""));
        sbuf_printf(b, "%s%s ", st->sep,
                    cJSON_IsTrue(json_get(f, "candidate_correct")) ? st->yes : st->no);
        st->esc(b, json_str(f, "candidate_answer", ""));
        sbuf_printf(b, "%s", st->end);
    }
    if (any) sbuf_printf(b, "%s", st->tail);
}

/* One task's details in Markdown (a collapsed block). */
static void md_task(const cJSON *t, struct sbuf *b)
{
    sbuf_printf(b, "\n<details><summary>");
    esc_html(b, json_str(t, "task", ""));
    sbuf_printf(b, ": %s</summary>\n\n", json_str(t, "verdict", ""));
    sbuf_printf(b, "- reason: ");
    esc_md(b, json_str(t, "reason", ""));
    if (cJSON_GetArraySize(json_get(t, "gates")) > 0) {
        struct sbuf g;
        sbuf_init(&g, 1 << 16);
        gates_text(t, &g);
        sbuf_printf(b, "\n- ");
        esc_md(b, sbuf_str(&g));
        sbuf_release(&g);
    }
    if (cJSON_IsFalse(json_get(t, "critical")))
        sbuf_printf(b, "\n- informational: not counted in the suite verdict");
    char se[32], mde[32];
    sbuf_printf(b, "\n- paired SE %s, MDE %s, p %.3g (Holm %.3g), %.0f units / %.0f items\n",
                num_s(se, sizeof se, 'g', 3, json_num(t, "se", NAN)),
                num_s(mde, sizeof mde, 'g', 3, json_num(t, "mde", NAN)),
                json_num(t, "p_value", NAN), json_num(t, "p_holm", NAN), json_num(t, "units", NAN),
                json_num(t, "items", NAN));
    if (!isnan(json_num(t, "ppl_ratio", NAN)))
        sbuf_printf(b, "- PPL ratio %.5f\n", json_num(t, "ppl_ratio", NAN));
    const cJSON *k = json_get(t, "kld");
    if (k)
        sbuf_printf(b, "- KLD mean %.3g, median %.3g, p99 %.3g, max %.3g; same top-1 %.2f%%\n",
                    json_num(k, "mean", NAN), json_num(k, "median", NAN), json_num(k, "p99", NAN),
                    json_num(k, "max", NAN), 100 * json_num(k, "same_top1", NAN));
    if (k && !isnan(json_num(k, "top_k", NAN)))
        sbuf_printf(b,
                    "- the KLD comes from the candidate's top-%.0f log-probs (one bucket for "
                    "the rest): a lower bound\n",
                    json_num(k, "top_k", NAN));
    if (!isnan(json_num(t, "flips_b", NAN)))
        sbuf_printf(b, "- flips: %.0f worse, %.0f better (McNemar p %.3g)\n",
                    json_num(t, "flips_b", NAN), json_num(t, "flips_c", NAN),
                    json_num(t, "p_value", NAN));
    flips_table(t, &md_table, b);
    sbuf_printf(b, "\n</details>\n");
}

void report_md_one(const cJSON *d, int color, struct sbuf *b)
{
    (void)color; /* only text is coloured */
    const cJSON *c = json_get(d, "comparison"), *t, *p = json_get(d, "provenance");
    const char *v = json_str(d, "verdict", "");
    static const char *badge[] = {"✅ PASS", "❌ FAIL", "⚠️ INCONCLUSIVE"};
    char note[300];
    sbuf_printf(b, "## qgate: **%s** — ", badge[vcode(v)]);
    esc_md(b, json_str(c, "candidate", ""));
    esc_md(b, sim_note(c, note, sizeof note));
    sbuf_printf(b, " vs ");
    esc_md(b, json_str(c, "baseline", ""));
    sbuf_printf(b, "\n\n| task | metric | baseline | candidate | loss | 90%% interval | margin | "
                   "noise | verdict |\n"
                   "|---|---|---:|---:|---:|---|---:|---:|---|\n");
    cJSON_ArrayForEach(t, json_get(d, "tasks"))
    {
        sbuf_printf(b, "| ");
        esc_md(b, json_str(t, "task", ""));
        char iv[64];
        sbuf_printf(b, " | %s | %.4f | %.4f | %+.5f | %s | %.5f | %.2g | %s |\n",
                    json_str(t, "metric", ""), json_num(t, "baseline", NAN),
                    json_num(t, "candidate", NAN), json_num(t, "delta", NAN),
                    fmt_iv(t, iv, sizeof iv), json_num(t, "margin", NAN), json_num(t, "noise", NAN),
                    badge[vcode(json_str(t, "verdict", ""))]);
    }
    cJSON_ArrayForEach(t, json_get(d, "tasks")) md_task(t, b);
    sbuf_printf(b, "\n<details><summary>Provenance</summary>\n\n- qgate %s, run %.0f, %s, host ",
                json_str(p, "qgate_version", ""), json_num(c, "run", NAN), cid_text(c));
    esc_md(b, json_str(p, "host", ""));
    sbuf_printf(b, " (kernels ");
    const char *k = json_str(p, "kernels", "");
    esc_md(b, *k ? k : "not recorded");
    sbuf_printf(b, "), %s\n- command: ", json_str(p, "created_at", ""));
    esc_md(b, json_str(p, "command", ""));
    sbuf_printf(b, "\n- suite ");
    esc_md(b, json_str(p, "suite_name", ""));
    sbuf_printf(b, " (sha256 %s), seed %.0f, bootstrap seed %.0f\n", json_str(p, "suite_hash", ""),
                json_num(p, "seed", NAN), json_num(c, "bootstrap_seed", NAN));
    cJSON_ArrayForEach(t, json_get(p, "models"))
    {
        sbuf_printf(b, "- model ");
        esc_md(b, json_str(t, "name", ""));
        sbuf_printf(b, ": ");
        esc_md(b, json_str(t, "path", ""));
        sbuf_printf(b, " (sha256 %s)\n", json_str(t, "sha256", ""));
    }
    sbuf_printf(b, "\n</details>\n");
}

/* ---------------------------------------------------------------- html */

const char *report_vcolor(const char *v)
{
    return !strcmp(v, "PASS") ? "#2e7d32" : !strcmp(v, "FAIL") ? "#c62828" : "#b26a00";
}

/* forest plot: each task's loss and interval in units of its margin, so
 * every task shares one axis where the margin is at 1 */
void report_gate_note(const cJSON *t, char *out, size_t n)
{
    out[0] = '\0';
    const char *v = json_str(t, "verdict", "");
    if (!strcmp(v, "PASS") || !strcmp(v, json_str(t, "loss_verdict", v))) return;
    size_t used = 0;
    const cJSON *g;
    cJSON_ArrayForEach(g, json_get(t, "gates"))
    {
        if (strcmp(json_str(g, "verdict", ""), v) || used >= n) continue;
        const char *name = json_str(g, "gate", "");
        name = !strcmp(name, "kld") ? "KLD" : !strcmp(name, "top1") ? "top-1" : "flip rate";
        int min = !strcmp(json_str(g, "bound", ""), "min");
        double lo = json_num(g, "ci_low", NAN), hi = json_num(g, "ci_high", NAN),
               lim = json_num(g, "limit", NAN);
        int k;
        if (!strcmp(v, "FAIL")) /* the bound that crossed */
            k = snprintf(out + used, n - used, "%s%s gate FAIL: %s %.3g %s limit %.3g",
                         used ? "; " : "", name, min ? "upper bound" : "lower bound", min ? hi : lo,
                         min ? "<" : ">", lim);
        else
            k = snprintf(out + used, n - used, "%s%s gate: [%.3g, %.3g] spans limit %.3g",
                         used ? "; " : "", name, lo, hi, lim);
        used = k > 0 && (size_t)k < n - used ? used + (size_t)k : n;
    }
}

/* Under a row of a forest plot: the gate that decided (report_gate_note),
 * when it was not the loss. */
static void gate_note_svg(const cJSON *t, int x, double y, const char *color, struct sbuf *b)
{
    char note[256];
    report_gate_note(t, note, sizeof note);
    if (!note[0]) return;
    sbuf_printf(b, "<text class=\"gate\" x=\"%d\" y=\"%.1f\" font-size=\"9\" fill=\"%s\">", x, y,
                color);
    esc_html(b, note);
    sbuf_printf(b, "</text>\n");
}

void report_forest(const cJSON *d, struct sbuf *b)
{
    int n = cJSON_GetArraySize(json_get(d, "tasks"));
    double lo = -1.5, hi = 2.5;
    const cJSON *t;
    cJSON_ArrayForEach(t, json_get(d, "tasks"))
    {
        double m = json_num(t, "margin", NAN);
        if (!(m > 0)) continue;
        lo = fmin(lo, json_num(t, "ci_low", NAN) / m - 0.5);
        hi = fmax(hi, json_num(t, "ci_high", NAN) / m + 0.5);
    }
    lo = fmax(lo, -20);
    hi = fmin(hi, 20);
    int W = 760, L = 170, R = 30, rowh = 34, H = 40 + rowh * n + 30;
    double sx = (W - L - R) / (hi - lo);
#define X(v) (L + ((v)-lo) * sx)
    sbuf_printf(b,
                "<svg class=\"chart forest\" id=\"forest\" width=\"%d\" height=\"%d\" viewBox=\"0 "
                "0 %d %d\" role=\"img\" "
                "aria-label=\"paired loss per task against the margin\" "
                "xmlns=\"http://www.w3.org/2000/svg\">\n",
                W, H, W, H);
    double x1 = X(fmax(lo, fmin(hi, 1.0)));
    sbuf_printf(b, "<rect x=\"%d\" y=\"30\" width=\"%.1f\" height=\"%d\" fill=\"#dff3df\"/>\n", L,
                x1 - L, rowh * n);
    sbuf_printf(b, "<rect x=\"%.1f\" y=\"30\" width=\"%.1f\" height=\"%d\" fill=\"#fbe3e3\"/>\n",
                x1, W - R - x1, rowh * n);
    sbuf_printf(b,
                "<line x1=\"%.1f\" y1=\"26\" x2=\"%.1f\" y2=\"%d\" stroke=\"#777\" "
                "stroke-dasharray=\"3,3\"/>\n",
                X(0), X(0), 34 + rowh * n);
    sbuf_printf(b, "<line x1=\"%.1f\" y1=\"26\" x2=\"%.1f\" y2=\"%d\" stroke=\"#c62828\"/>\n", x1,
                x1, 34 + rowh * n);
    sbuf_printf(b,
                "<text x=\"%.1f\" y=\"20\" font-size=\"11\" text-anchor=\"end\">no change</text>\n",
                X(0) - 3);
    sbuf_printf(b,
                "<text x=\"%.1f\" y=\"20\" font-size=\"11\" text-anchor=\"start\" "
                "fill=\"#c62828\">margin</text>\n",
                x1 + 3);
    int i = 0;
    cJSON_ArrayForEach(t, json_get(d, "tasks"))
    {
        double m = json_num(t, "margin", NAN), y = 30 + rowh * i + rowh / 2.0;
        if (!(m > 0)) m = 1;
        double raw = json_num(t, "delta", NAN) / m, e = fmax(lo, fmin(hi, raw));
        double cl = json_num(t, "ci_low", NAN), ch = json_num(t, "ci_high", NAN);
        if (!isfinite(cl) || !isfinite(ch)) cl = ch = raw * m; /* not bounded: the point alone */
        double a = fmax(lo, fmin(hi, cl / m)), z = fmax(lo, fmin(hi, ch / m));
        const char *c = report_vcolor(json_str(t, "verdict", ""));
        sbuf_printf(b, "<text x=\"8\" y=\"%.1f\" font-size=\"12\">", y + 4);
        esc_html(b, json_str(t, "task", ""));
        sbuf_printf(b,
                    "</text>\n<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                    "stroke-width=\"3\"/>\n",
                    X(a), y, X(z), y, c);
        sbuf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\"/>\n", X(e), y, c);
        gate_note_svg(t, 8, y + 15, c, b);
        if (raw > hi || raw < lo) /* off scale: drawn at the edge, its value named */
            sbuf_printf(b,
                        "<text class=\"point\" x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
                        "text-anchor=\"%s\" fill=\"%s\">%s%.3g&#215;</text>\n",
                        X(e) + (raw > hi ? -8 : 8), y - 8, raw > hi ? "end" : "start", c,
                        raw > hi ? "&#8594; " : "&#8592; ", raw);
        i++;
    }
    for (int k = (int)ceil(lo); k <= (int)floor(hi); k++)
        sbuf_printf(
            b,
            "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\">%d&#215;</text>\n",
            X(k), 46 + rowh * n, k);
    sbuf_printf(b, "</svg>\n");
#undef X
}

/* small chart of per-repeat values of both models */
static void repeats_chart(const cJSON *t, struct sbuf *b)
{
    const cJSON *r = json_get(t, "repeats"), *bs = json_get(r, "baseline"),
                *cs = json_get(r, "candidate"), *v;
    double lo = INFINITY, hi = -INFINITY;
    cJSON_ArrayForEach(v, bs) if (cJSON_IsNumber(v)) lo = fmin(lo, v->valuedouble),
                                                     hi = fmax(hi, v->valuedouble);
    cJSON_ArrayForEach(v, cs) if (cJSON_IsNumber(v)) lo = fmin(lo, v->valuedouble),
                                                     hi = fmax(hi, v->valuedouble);
    if (!isfinite(lo)) return;
    double pad = fmax((hi - lo) * 0.15, fmax(fabs(hi), fabs(lo)) * 0.02 + 1e-9);
    lo -= pad, hi += pad;
    int W = 360, H = 90;
    sbuf_printf(b,
                "<svg class=\"chart repeats\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                "role=\"img\" aria-label=\"metric per repeat\" "
                "xmlns=\"http://www.w3.org/2000/svg\">\n<text x=\"4\" y=\"12\" "
                "font-size=\"11\">%s per repeat (run-to-run noise)</text>\n",
                W, H, W, H,
                !strcmp(json_str(t, "kind", ""), "perplexity") ? "perplexity (PPL)"
                                                               : "accuracy (fraction correct)");
    const cJSON *sides[2] = {bs, cs};
    const char *cols[2] = {"#1565c0", "#ef6c00"}, *lab[2] = {"baseline", "candidate"};
    for (int s2 = 0; s2 < 2; s2++) {
        double y = 35 + 28 * s2;
        sbuf_printf(b, "<text x=\"4\" y=\"%.0f\" font-size=\"10\">%s</text>\n", y + 3, lab[s2]);
        cJSON_ArrayForEach(v, sides[s2])
        {
            if (!cJSON_IsNumber(v)) continue;
            double x = 80 + (v->valuedouble - lo) / (hi - lo) * (W - 100);
            sbuf_printf(
                b, "<circle cx=\"%.1f\" cy=\"%.0f\" r=\"4\" fill=\"%s\" fill-opacity=\"0.7\"/>\n",
                x, y, cols[s2]);
        }
    }
    sbuf_printf(b,
                "<text x=\"80\" y=\"86\" font-size=\"9\">%.5g</text><text x=\"%d\" y=\"86\" "
                "font-size=\"9\" text-anchor=\"end\">%.5g</text>\n</svg>\n",
                lo, W - 20, hi);
}

static void kld_chart(const cJSON *k, struct sbuf *b)
{
    static const char *keys[] = {"median", "mean", "p90", "p99", "p99.9", "max"};
    double mx = 0;
    for (int i = 0; i < 6; i++)
        mx = fmax(mx, json_num(k, keys[i], NAN));
    if (!(mx > 0)) return;
    int W = 360, H = 30 + 18 * 6;
    sbuf_printf(b,
                "<svg class=\"chart kld\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                "role=\"img\" aria-label=\"KLD distribution\" "
                "xmlns=\"http://www.w3.org/2000/svg\">\n<text x=\"4\" y=\"12\" "
                "font-size=\"11\">KL(base || candidate) per token, "
                "nats (square-root scale)%s</text>\n",
                W, H, W, H, isnan(json_num(k, "top_k", NAN)) ? "" : "; top-K: a lower bound");
    for (int i = 0; i < 6; i++) {
        double v = json_num(k, keys[i], NAN), w = isnan(v) ? 0 : sqrt(v / mx) * (W - 170);
        sbuf_printf(b,
                    "<text x=\"4\" y=\"%d\" font-size=\"10\">%s</text><rect x=\"50\" y=\"%d\" "
                    "width=\"%.1f\" height=\"12\" fill=\"#6a1b9a\"/>"
                    "<text x=\"%.1f\" y=\"%d\" font-size=\"10\">%.3g</text>\n",
                    30 + 18 * i, keys[i], 20 + 18 * i, w, 56 + w, 30 + 18 * i, v);
    }
    sbuf_printf(b, "</svg>\n");
}

static void flips_chart(const cJSON *t, struct sbuf *b)
{
    double fb = json_num(t, "flips_b", NAN), fc = json_num(t, "flips_c", NAN),
           n = json_num(t, "items", NAN);
    if (isnan(fb) || !(n > 0)) return;
    int W = 360, H = 70;
    double sb = fb / n * (W - 20), sc = fc / n * (W - 20), same = W - 20 - sb - sc;
    sbuf_printf(b,
                "<svg class=\"chart flips\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                "role=\"img\" aria-label=\"flips\" "
                "xmlns=\"http://www.w3.org/2000/svg\">\n<text x=\"4\" y=\"12\" "
                "font-size=\"11\">items: same answer correctness, "
                "worse, better</text>\n<rect x=\"10\" y=\"22\" width=\"%.1f\" height=\"18\" "
                "fill=\"#9e9e9e\"/>"
                "<rect x=\"%.1f\" y=\"22\" width=\"%.1f\" height=\"18\" fill=\"#c62828\"/><rect "
                "x=\"%.1f\" y=\"22\" width=\"%.1f\" "
                "height=\"18\" fill=\"#2e7d32\"/>\n<text x=\"10\" y=\"58\" font-size=\"10\">%.0f "
                "unchanged, %.0f worse, %.0f better of %.0f</text>\n</svg>\n",
                W, H, W, H, same, 10 + same, sb, 10 + same + sb, sc, n - fb - fc, fb, fc, n);
}

const char *const report_css =
    "body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px "
    "auto;max-width:980px;color:#222}"
    ".banner{padding:18px 22px;border-radius:8px;color:#fff;font-size:22px;font-weight:700}"
    ".PASS{background:#2e7d32}.FAIL{background:#c62828}.INCONCLUSIVE{background:#b26a00}"
    "table{border-collapse:collapse;width:100%;margin:10px 0;font-size:13px}td,th{border:1px solid "
    "#ddd;padding:4px 6px;"
    "text-align:left;vertical-align:top}th{background:#f4f4f4}td.num{text-align:right;font-variant-"
    "numeric:tabular-nums}"
    ".task{border:1px solid #e0e0e0;border-radius:8px;padding:8px 14px;margin:14px "
    "0;page-break-inside:avoid}"
    ".charts{display:flex;flex-wrap:wrap;gap:12px}.v{font-weight:700}code{word-break:break-all}"
    "@media "
    "print{body{margin:0;max-width:none}.task{page-break-inside:avoid}details{display:block}}";

static void html_head(const cJSON *d, struct sbuf *b)
{
    const cJSON *c = json_get(d, "comparison");
    const char *v = json_str(d, "verdict", "");
    sbuf_printf(
        b,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>qgate report: ");
    esc_html(b, json_str(c, "candidate", ""));
    sbuf_printf(b, " vs ");
    esc_html(b, json_str(c, "baseline", ""));
    sbuf_printf(b,
                "</title><style>%s</style></head><body>\n<div class=\"banner %s\" "
                "id=\"verdict\">%s &#8212; ",
                report_css, verdict_name(vcode(v)), v);
    char note[300];
    esc_html(b, json_str(c, "candidate", ""));
    esc_html(b, sim_note(c, note, sizeof note));
    sbuf_printf(b, " against ");
    esc_html(b, json_str(c, "baseline", ""));
    sbuf_printf(b,
                "</div>\n<p>qgate %s, %s of run %.0f, generated %s. Loss &gt; 0 means "
                "the candidate is worse; "
                "PASS when the 90%% interval's upper bound is within the margin, FAIL when its "
                "lower bound is beyond it.</p>\n",
                json_str(d, "qgate_version", ""), cid_text(c), json_num(c, "run", NAN),
                json_str(d, "generated_at", ""));
}

void report_html_summary(const cJSON *d, struct sbuf *b)
{
    const cJSON *t;
    sbuf_printf(b, "<h2>Summary</h2>\n<table><tr><th>task</th><th>metric</th><th>baseline</"
                   "th><th>candidate</th><th>loss</th>"
                   "<th>90%% interval</th><th>margin</th><th>noise</th><th>MDE</th><th>p "
                   "(Holm)</th><th>verdict</th></tr>\n");
    cJSON_ArrayForEach(t, json_get(d, "tasks"))
    {
        char iv[64], mde[32];
        sbuf_printf(b, "<tr><td>");
        esc_html(b, json_str(t, "task", ""));
        sbuf_printf(
            b,
            "</td><td>%s</td><td class=\"num\">%.4f</td><td class=\"num\">%.4f</td><td "
            "class=\"num\">%+.5f</td>"
            "<td class=\"num\">%s</td><td class=\"num\">%.5f</td><td "
            "class=\"num\">%.2g</td><td class=\"num\">%s</td>"
            "<td class=\"num\">%.3g (%.3g)</td><td class=\"v\" style=\"color:%s\">%s</td></tr>\n",
            json_str(t, "metric", ""), json_num(t, "baseline", NAN), json_num(t, "candidate", NAN),
            json_num(t, "delta", NAN), fmt_iv(t, iv, sizeof iv), json_num(t, "margin", NAN),
            json_num(t, "noise", NAN), num_s(mde, sizeof mde, 'g', 4, json_num(t, "mde", NAN)),
            json_num(t, "p_value", NAN), json_num(t, "p_holm", NAN),
            report_vcolor(json_str(t, "verdict", "")), json_str(t, "verdict", ""));
    }
    sbuf_printf(b, "</table>\n<h2>Paired loss against the margin</h2>\n<p>Each task's loss and "
                   "90%% interval, in units of its "
                   "margin (the red line); green: within the margin.</p>\n");
}

void report_html_task(const cJSON *t, struct sbuf *b)
{
    sbuf_printf(b, "<div class=\"task\"><h3>");
    esc_html(b, json_str(t, "task", ""));
    sbuf_printf(b, " <span style=\"color:%s\">%s</span></h3>\n<p>",
                report_vcolor(json_str(t, "verdict", "")), json_str(t, "verdict", ""));
    esc_html(b, json_str(t, "reason", ""));
    if (cJSON_GetArraySize(json_get(t, "gates")) > 0) {
        sbuf_printf(b, ". ");
        struct sbuf g;
        sbuf_init(&g, 1 << 16);
        gates_text(t, &g);
        esc_html(b, sbuf_str(&g));
        sbuf_release(&g);
    }
    if (cJSON_IsFalse(json_get(t, "critical")))
        sbuf_printf(b, ". Informational: not counted in the suite verdict");
    char se[32];
    sbuf_printf(b, ". Paired SE %s over %.0f units (%.0f items).",
                num_s(se, sizeof se, 'g', 3, json_num(t, "se", NAN)), json_num(t, "units", NAN),
                json_num(t, "items", NAN));
    if (!isnan(json_num(t, "ppl_ratio", NAN)))
        sbuf_printf(b, " PPL ratio %.5f.", json_num(t, "ppl_ratio", NAN));
    if (!isnan(json_num(t, "flips_b", NAN)))
        sbuf_printf(
            b, " Flips: %.0f worse, %.0f better (rate 95%% %.2f&#8211;%.2f%%), McNemar p %.3g.",
            json_num(t, "flips_b", NAN), json_num(t, "flips_c", NAN),
            100 * json_num(t, "flip_rate_low", NAN), 100 * json_num(t, "flip_rate_high", NAN),
            json_num(t, "p_value", NAN));
    sbuf_printf(b, "</p>\n<div class=\"charts\">\n");
    repeats_chart(t, b);
    const cJSON *k = json_get(t, "kld");
    if (k) kld_chart(k, b);
    flips_chart(t, b);
    sbuf_printf(b, "</div>\n");
    if (k)
        sbuf_printf(b,
                    "<p>Same top-1 token: %.2f%%; mean &#916;p of the actual token: %+.5f.</p>\n",
                    100 * json_num(k, "same_top1", NAN), json_num(k, "dp_mean", NAN));
    flips_table(t, &html_table, b);
    sbuf_printf(b, "</div>\n");
}

static void render_html(const cJSON *d, int color, struct sbuf *b)
{
    (void)color; /* only text is coloured */
    const cJSON *t;
    html_head(d, b);
    report_html_summary(d, b);
    report_forest(d, b);
    cJSON_ArrayForEach(t, json_get(d, "tasks")) report_html_task(t, b);
    report_html_provenance(d, b);
    sbuf_printf(b, "</body></html>\n");
}

void report_json_one(const cJSON *d, int color, struct sbuf *b)
{
    (void)color;
    char *s = cJSON_Print(d);
    if (!s) {
        b->failed = 1;
        return;
    }
    sbuf_printf(b, "%s\n", s);
    free(s);
}

/* The one list of formats: how to add one is in reports/report.h. */
static const struct {
    const char *name;
    void (*render)(const cJSON *doc, int color, struct sbuf *out);
} formats[] = {
    {"text", report_text_one}, {"md", report_md_one},       {"html", render_html},
    {"json", report_json_one}, {"junit", report_junit_one},
};

int report_format_known(const char *f)
{
    for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
        if (!strcmp(formats[i].name, f)) return 1;
    return 0;
}

int report_render(const cJSON *doc, const char *format, int color, struct sbuf *out)
{
    if (!strcmp(json_str(doc, "schema", ""), REPORT_SET_SCHEMA))
        return report_set_render(doc, format, color, out);
    if (!strcmp(json_str(doc, "schema", ""), REPORT_SWEEP_SCHEMA))
        return report_sweep_render(doc, format, out);
    for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
        if (!strcmp(formats[i].name, format)) {
            formats[i].render(doc, color, out);
            return out->failed ? QG_ERR_NOMEM : QG_OK;
        }
    return QG_ERR_USAGE;
}
