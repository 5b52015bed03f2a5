/* report_set — one report for several candidates of one run: a candidate x
 * task matrix, the smallest passing candidate, per-task forest plots across
 * candidates, then each candidate's own report. */
#include "reports/report.h"
#include "reports/report_parts.h"
#include "core/json.h"
#include "metrics/verdict.h"
#include "core/status.h"
#include "reports/escape.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a number for a matrix cell (decimals < 0: 4 significant digits) and its
 * unit, or "–" when absent */
static void cell(struct sbuf *b, double v, int decimals, const char *unit)
{
    if (isnan(v))
        sbuf_printf(b, "\u2013");
    else if (decimals < 0)
        sbuf_printf(b, "%.4g%s", v, unit);
    else
        sbuf_printf(b, "%.*f%s", decimals, v, unit);
}

static double bytes_mib(const cJSON *c)
{
    return json_num(c, "file_bytes", NAN) / (1024.0 * 1024.0);
}

/* The matrix: one row per candidate and task. `sep` separates cells,
 * `esc` escapes names for the format. */
struct matrix_style {
    const char *head, *row, *sep, *end;
    void (*esc)(struct sbuf *b, const char *s);
};

static void matrix(const cJSON *d, const struct matrix_style *st, struct sbuf *b)
{
    sbuf_printf(b, "%s", st->head);
    const cJSON *c, *t;
    cJSON_ArrayForEach(c, json_get(d, "candidates"))
    {
        cJSON_ArrayForEach(t, json_get(json_get(c, "report"), "tasks"))
        {
            sbuf_printf(b, "%s", st->row);
            st->esc(b, json_str(c, "name", ""));
            const char *sim = json_str(json_get(json_get(c, "report"), "comparison"),
                                       "candidate_simulated", NULL);
            if (sim) { /* a simulated result always says so */
                st->esc(b, " (simulated: ");
                st->esc(b, sim);
                st->esc(b, ")");
            }
            sbuf_printf(b, "%s", st->sep);
            st->esc(b, json_str(t, "task", ""));
            sbuf_printf(b, "%s%s%s", st->sep, json_str(t, "verdict", ""), st->sep);
            cell(b, json_num(t, "ppl_ratio", NAN), 4, "");
            sbuf_printf(b, "%s", st->sep);
            cell(b, json_num(t, "kld_mean", NAN), -1, "");
            sbuf_printf(b, "%s", st->sep);
            cell(b, 100 * json_num(t, "same_top1", NAN), 1, " %");
            sbuf_printf(b, "%s", st->sep);
            if (isnan(json_num(t, "flips_b", NAN)))
                sbuf_printf(b, "\u2013");
            else
                sbuf_printf(b, "%.0f/%.0f", json_num(t, "flips_b", NAN),
                            json_num(t, "flips_c", NAN));
            sbuf_printf(b, "%s", st->sep);
            cell(b, bytes_mib(c), 2, " MiB");
            sbuf_printf(b, "%s", st->sep);
            cell(b, json_num(c, "bits_per_weight", NAN), 2, "");
            sbuf_printf(b, "%s", st->sep);
            cell(b, json_num(c, "tokens_per_second", NAN), 0, "");
            sbuf_printf(b, "%s", st->end);
        }
    }
}

static void esc_none(struct sbuf *b, const char *s)
{
    esc_term(b, s);
}

static void render_text(const cJSON *d, int color, struct sbuf *b)
{
    sbuf_printf(b, "%d candidates against ", cJSON_GetArraySize(json_get(d, "candidates")));
    esc_term(b, json_str(d, "baseline", ""));
    sbuf_printf(b, " (run %.0f): %s\n", json_num(d, "run", NAN), json_str(d, "verdict", ""));
    report_grid_text(d, b);
    static const struct matrix_style st = {"\ncandidate | task | verdict | PPL ratio | KLD | same "
                                           "top-1 | flips -/+ | size | bits/weight "
                                           "| tokens/s\n",
                                           "", " | ", "\n", esc_none};
    matrix(d, &st, b);
    const char *small = json_str(d, "smallest_passing", NULL);
    sbuf_printf(b, "smallest passing candidate: ");
    esc_term(b, small ? small : "none");
    sbuf_printf(b, "\n");
    const cJSON *c;
    cJSON_ArrayForEach(c, json_get(d, "candidates"))
    {
        esc_term(b, json_str(c, "summary", ""));
        sbuf_printf(b, "\n");
    }
    cJSON_ArrayForEach(c, json_get(d, "candidates"))
    {
        sbuf_printf(b, "\n");
        report_text_one(json_get(c, "report"), color, b);
    }
}

/* The Markdown's head: the verdict, the grid, the smallest passing
 * candidate. */
static void md_head(const cJSON *d, struct sbuf *b)
{
    static const char *badge[] = {"✅ PASS", "❌ FAIL", "⚠️ INCONCLUSIVE"};
    const char *v = json_str(d, "verdict", "");
    int k = verdict_from_name(v);
    k = k < 0 ? VERDICT_INCONCLUSIVE : k;
    sbuf_printf(b, "## qgate: **%s** — %d candidates against ", badge[k],
                cJSON_GetArraySize(json_get(d, "candidates")));
    esc_md(b, json_str(d, "baseline", ""));
    sbuf_printf(b, "\n\n");
    report_grid_md(d, b);
    const char *small = json_str(d, "smallest_passing", NULL);
    sbuf_printf(b, "\nSmallest passing candidate: **");
    esc_md(b, small ? small : "none");
    sbuf_printf(b, "**\n\n");
}

static void render_md_full(const cJSON *d, int color, struct sbuf *b)
{
    md_head(d, b);
    const cJSON *c;
    cJSON_ArrayForEach(c, json_get(d, "candidates"))
    {
        sbuf_printf(b, "- ");
        esc_md(b, json_str(c, "summary", ""));
        sbuf_printf(b, "\n");
    }
    static const struct matrix_style st = {
        "\n<details><summary>every figure</summary>\n\n| candidate | task | verdict | PPL ratio | "
        "KLD | same top-1 | flips −/+ | size | bits/weight | tokens/s |\n"
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n",
        "| ", " | ", " |\n", esc_md};
    matrix(d, &st, b);
    sbuf_printf(b, "\n</details>\n");
    cJSON_ArrayForEach(c, json_get(d, "candidates"))
    {
        sbuf_printf(b, "\n<details><summary>");
        esc_md(b, json_str(c, "name", ""));
        sbuf_printf(b, ": %s</summary>\n\n", json_str(c, "verdict", ""));
        report_md_one(json_get(c, "report"), color, b);
        sbuf_printf(b, "\n</details>\n");
    }
}

/* The short form, for a pull-request comment: the grid, every candidate
 * that did not pass with its failing tasks, the passing ones named, and
 * where the full report is. */
/* One candidate's line, "- ...\n", unless it would take what was written
 * since start past budget characters: 1 written, 0 left out. */
static int md_line(struct sbuf *b, const cJSON *c, size_t start, size_t budget)
{
    size_t at = b->len;
    sbuf_printf(b, "- ");
    esc_md(b, json_str(c, "summary", ""));
    sbuf_printf(b, "\n");
    if (b->len - start <= budget) return 1;
    b->len = at; /* over: left out, and counted */
    if (b->data) b->data[at] = '\0';
    return 0;
}

static void render_md_short(const cJSON *d, struct sbuf *b)
{
    size_t start = b->len, budget = REPORT_MD_LIMIT - 1000; /* room for the closing lines */
    md_head(d, b);
    const cJSON *c;
    int passing = 0, left_out = 0;
    cJSON_ArrayForEach(c, json_get(d, "candidates"))
    {
        if (!strcmp(json_str(c, "verdict", ""), "PASS")) {
            passing++;
            continue;
        }
        left_out += !md_line(b, c, start, budget);
    }
    if (left_out)
        sbuf_printf(b,
                    "- \u2026 and %d more that did not pass (their lines would not fit a "
                    "comment): see the full report\n",
                    left_out);
    if (passing && !left_out) {
        sbuf_printf(b, "\n<details><summary>%d passing candidate%s</summary>\n\n", passing,
                    passing > 1 ? "s" : "");
        cJSON_ArrayForEach(
            c, json_get(d, "candidates")) if (!strcmp(json_str(c, "verdict", ""), "PASS"))
            left_out += !md_line(b, c, start, budget);
        if (left_out) sbuf_printf(b, "- \u2026 and %d more (see the full report)\n", left_out);
        sbuf_printf(b, "\n</details>\n");
    }
    sbuf_printf(b,
                "\nThe short form (the full report is over %d characters). Every figure: `qgate "
                "report --run %.0f --format html -o report.html` with this run's database.\n",
                REPORT_MD_LIMIT, json_num(d, "run", NAN));
}

/* Markdown: the full report when it fits a pull-request comment
 * (REPORT_MD_LIMIT characters), else the short form. */
static void render_md(const cJSON *d, int color, struct sbuf *b)
{
    struct sbuf full;
    sbuf_init(&full, (size_t)1 << 30);
    render_md_full(d, color, &full);
    if (!full.failed && full.len <= REPORT_MD_LIMIT)
        sbuf_append(b, sbuf_str(&full), full.len);
    else
        render_md_short(d, b);
    sbuf_release(&full);
}

/* A task's loss for every candidate, in units of its margin (the margin at
 * 1), every point labelled with its value, also when it lies off scale. */
static void forest_task(const cJSON *d, const char *task, int id, struct sbuf *b)
{
    double lo = -1.5, hi = 2.5;
    int n = 0;
    const cJSON *c, *t;
    cJSON_ArrayForEach(c, json_get(d, "candidates"))
    {
        cJSON_ArrayForEach(t, json_get(json_get(c, "report"), "tasks"))
        {
            double m = json_num(t, "margin", NAN);
            if (strcmp(json_str(t, "task", ""), task) || !(m > 0)) continue;
            lo = fmin(lo, json_num(t, "ci_low", NAN) / m - 0.5);
            hi = fmax(hi, json_num(t, "ci_high", NAN) / m + 0.5);
            n++;
        }
    }
    lo = fmax(lo, -10);
    hi = fmin(hi, 20);
    int W = 860, L = 170, R = 150, rowh = 30, H = 40 + rowh * n + 30;
    double sx = (W - L - R) / (hi - lo);
#define X(v) (L + (fmax(lo, fmin(hi, (v))) - lo) * sx)
    sbuf_printf(b,
                "<svg class=\"chart forest\" id=\"forest-%d\" width=\"%d\" height=\"%d\" "
                "viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"loss of every candidate on one "
                "task against the margin\" xmlns=\"http://www.w3.org/2000/svg\">\n",
                id, W, H, W, H);
    sbuf_printf(b, "<rect x=\"%d\" y=\"30\" width=\"%.1f\" height=\"%d\" fill=\"#dff3df\"/>\n", L,
                X(1.0) - L, rowh * n);
    sbuf_printf(b,
                "<line x1=\"%.1f\" y1=\"26\" x2=\"%.1f\" y2=\"%d\" stroke=\"#c62828\"/>\n<text "
                "x=\"%.1f\" y=\"20\" font-size=\"11\" fill=\"#c62828\">margin</text>\n",
                X(1.0), X(1.0), 34 + rowh * n, X(1.0) + 3);
    sbuf_printf(b,
                "<line x1=\"%.1f\" y1=\"26\" x2=\"%.1f\" y2=\"%d\" stroke=\"#777\" "
                "stroke-dasharray=\"3,3\"/>\n",
                X(0), X(0), 34 + rowh * n);
    int i = 0;
    cJSON_ArrayForEach(c, json_get(d, "candidates"))
    {
        cJSON_ArrayForEach(t, json_get(json_get(c, "report"), "tasks"))
        {
            double m = json_num(t, "margin", NAN), y = 30 + rowh * i + rowh / 2.0;
            if (strcmp(json_str(t, "task", ""), task) || !(m > 0)) continue;
            double e = json_num(t, "delta", NAN) / m;
            double cl = json_num(t, "ci_low", NAN) / m, ch = json_num(t, "ci_high", NAN) / m;
            if (!isfinite(cl) || !isfinite(ch)) cl = ch = e; /* not bounded: the point alone */
            const char *col = report_vcolor(json_str(t, "verdict", ""));
            char note[256];
            report_gate_note(t, note, sizeof note);
            if (note[0]) { /* a gate decided: which bound crossed which limit */
                sbuf_printf(b,
                            "<text class=\"gate\" x=\"%d\" y=\"%.1f\" font-size=\"9\" "
                            "fill=\"%s\">",
                            L, y + 14, col);
                esc_html(b, note);
                sbuf_printf(b, "</text>\n");
            }
            sbuf_printf(b, "<text x=\"8\" y=\"%.1f\" font-size=\"12\">", y + 4);
            esc_html(b, json_str(c, "name", ""));
            sbuf_printf(b,
                        "</text>\n<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                        "stroke=\"%s\" stroke-width=\"3\"/>\n<circle cx=\"%.1f\" cy=\"%.1f\" "
                        "r=\"5\" fill=\"%s\"/>\n",
                        X(cl), y, X(ch), y, col, X(e), y, col);
            int off = e > hi || e < lo; /* off scale: an arrow at the edge, the value named */
            sbuf_printf(b,
                        "<text class=\"point\" x=\"%d\" y=\"%.1f\" font-size=\"11\" "
                        "fill=\"%s\">%s%.3g&#215; margin</text>\n",
                        W - R + 6, y + 4, col, off ? (e > hi ? "&#8594; " : "&#8592; ") : "", e);
            i++;
        }
    }
    for (int k = (int)ceil(lo); k <= (int)floor(hi); k += hi - lo > 12 ? 5 : 1)
        sbuf_printf(
            b,
            "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\">%d&#215;</text>\n",
            X(k), 46 + rowh * n, k);
    sbuf_printf(b, "</svg>\n");
#undef X
}

static void html_matrix(const cJSON *d, struct sbuf *b)
{
    sbuf_printf(b, "<table id=\"figures\"><tr><th>candidate</th><th>task</th><th>verdict</th>"
                   "<th>PPL ratio</th><th>KLD</th><th>same top-1</th><th>flips &#8722;/+</th>"
                   "<th>size</th><th>bits/weight</th><th>tokens/s</th></tr>\n");
    const cJSON *c, *t;
    cJSON_ArrayForEach(c, json_get(d, "candidates"))
    {
        cJSON_ArrayForEach(t, json_get(json_get(c, "report"), "tasks"))
        {
            const char *v = json_str(t, "verdict", "");
            sbuf_printf(b, "<tr><td>");
            esc_html(b, json_str(c, "name", ""));
            const char *sim = json_str(json_get(json_get(c, "report"), "comparison"),
                                       "candidate_simulated", NULL);
            if (sim) {
                sbuf_printf(b, " <i>(simulated: ");
                esc_html(b, sim);
                sbuf_printf(b, ")</i>");
            }
            sbuf_printf(b, "</td><td>");
            esc_html(b, json_str(t, "task", ""));
            sbuf_printf(b, "</td><td class=\"v\" style=\"color:%s\">%s</td><td class=\"num\">",
                        report_vcolor(v), v);
            cell(b, json_num(t, "ppl_ratio", NAN), 4, "");
            sbuf_printf(b, "</td><td class=\"num\">");
            cell(b, json_num(t, "kld_mean", NAN), -1, "");
            sbuf_printf(b, "</td><td class=\"num\">");
            cell(b, 100 * json_num(t, "same_top1", NAN), 1, " %");
            sbuf_printf(b, "</td><td class=\"num\">");
            if (isnan(json_num(t, "flips_b", NAN)))
                sbuf_printf(b, "&#8211;");
            else
                sbuf_printf(b, "%.0f/%.0f", json_num(t, "flips_b", NAN),
                            json_num(t, "flips_c", NAN));
            sbuf_printf(b, "</td><td class=\"num\">");
            cell(b, bytes_mib(c), 2, " MiB");
            sbuf_printf(b, "</td><td class=\"num\">");
            cell(b, json_num(c, "bits_per_weight", NAN), 2, "");
            sbuf_printf(b, "</td><td class=\"num\">");
            cell(b, json_num(c, "tokens_per_second", NAN), 0, "");
            sbuf_printf(b, "</td></tr>\n");
        }
    }
    sbuf_printf(b, "</table>\n");
}

static void render_html(const cJSON *d, int color, struct sbuf *b)
{
    (void)color;
    const char *v = json_str(d, "verdict", ""), *small = json_str(d, "smallest_passing", NULL);
    int n = cJSON_GetArraySize(json_get(d, "candidates"));
    sbuf_printf(b,
                "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>qgate "
                "report: %d candidates against ",
                n);
    esc_html(b, json_str(d, "baseline", ""));
    sbuf_printf(b,
                "</title><style>%s</style></head><body>\n<div class=\"banner %s\" "
                "id=\"verdict\">%s &#8212; %d candidates against ",
                report_css, v, v, n);
    esc_html(b, json_str(d, "baseline", ""));
    sbuf_printf(b, "</div>\n<p id=\"smallest\">Smallest passing candidate: <b>");
    esc_html(b, small ? small : "none");
    sbuf_printf(b, "</b> (by file size). qgate %s, run %.0f, generated %s.</p>\n<ul>\n",
                json_str(d, "qgate_version", ""), json_num(d, "run", NAN),
                json_str(d, "generated_at", ""));
    const cJSON *c, *t;
    cJSON_ArrayForEach(c, json_get(d, "candidates"))
    {
        sbuf_printf(b, "<li style=\"color:%s\">", report_vcolor(json_str(c, "verdict", "")));
        esc_html(b, json_str(c, "summary", ""));
        sbuf_printf(b, "</li>\n");
    }
    sbuf_printf(b, "</ul>\n<h2>Candidates &#215; tasks</h2>\n");
    report_grid_html(d, b);
    sbuf_printf(b, "<details><summary>Every figure</summary>\n");
    html_matrix(d, b);
    sbuf_printf(b, "</details>\n");
    sbuf_printf(b, "<h2>Loss against the margin, per task</h2>\n<p>Each candidate's loss and 90%% "
                   "interval in units of the task's margin (the red line); green: within the "
                   "margin. Points off the scale are drawn at its edge with their value.</p>\n");
    const cJSON *first = json_get(cJSON_GetArrayItem(json_get(d, "candidates"), 0), "report");
    int id = 0;
    cJSON_ArrayForEach(t, json_get(first, "tasks"))
    {
        sbuf_printf(b, "<h3>");
        esc_html(b, json_str(t, "task", ""));
        sbuf_printf(b, "</h3>\n");
        forest_task(d, json_str(t, "task", ""), id++, b);
    }
    cJSON_ArrayForEach(c, json_get(d, "candidates"))
    {
        const cJSON *one = json_get(c, "report");
        sbuf_printf(b, "<section class=\"candidate\"><h2>");
        esc_html(b, json_str(c, "name", ""));
        sbuf_printf(b, " <span style=\"color:%s\">%s</span></h2>\n",
                    report_vcolor(json_str(c, "verdict", "")), json_str(c, "verdict", ""));
        report_html_summary(one, b);
        report_forest(one, b);
        cJSON_ArrayForEach(t, json_get(one, "tasks")) report_html_task(t, b);
        sbuf_printf(b, "</section>\n");
    }
    if (first) report_html_provenance(first, b);
    sbuf_printf(b, "</body></html>\n");
}

static void junit_candidate(const cJSON *c, int *tot, struct sbuf *b)
{
    const cJSON *t, *tasks = json_get(json_get(c, "report"), "tasks");
    int counts[4] = {0}, n = 0;
    cJSON_ArrayForEach(t, tasks)
    {
        counts[report_junit_outcome(t)]++;
        n++;
    }
    for (int k = 0; k < 4; k++)
        tot[k] += counts[k];
    sbuf_printf(b, "  <testsuite name=\"");
    esc_xml(b, json_str(c, "name", ""));
    sbuf_printf(b, "\" tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\">\n", n, counts[1],
                counts[3], counts[2]);
    static const char *const tag[] = {NULL, "failure", "skipped", "error"};
    cJSON_ArrayForEach(t, tasks)
    {
        int o = report_junit_outcome(t);
        sbuf_printf(b, "    <testcase classname=\"qgate.");
        esc_xml(b, json_str(c, "name", ""));
        sbuf_printf(b, "\" name=\"");
        esc_xml(b, json_str(t, "task", ""));
        sbuf_printf(b, " ");
        esc_xml(b, json_str(t, "metric", ""));
        sbuf_printf(b, "\">\n");
        char nums[512];
        snprintf(nums, sizeof nums,
                 "loss %+.6f, 90%% interval [%+.6f, %+.6f], margin %.6f, noise %.3g, MDE %.3g",
                 json_num(t, "delta", NAN), json_num(t, "ci_low", NAN), json_num(t, "ci_high", NAN),
                 json_num(t, "margin", NAN), json_num(t, "noise", NAN), json_num(t, "mde", NAN));
        if (o) {
            sbuf_printf(b, "      <%s message=\"%s: ", tag[o], json_str(t, "verdict", ""));
            esc_xml(b, json_str(t, "reason", ""));
            sbuf_printf(b, "\" type=\"%s\">", json_str(t, "verdict", ""));
            esc_xml(b, nums);
            sbuf_printf(b, "</%s>\n", tag[o]);
        }
        sbuf_printf(b, "      <system-out>");
        esc_xml(b, nums);
        sbuf_printf(b, "</system-out>\n    </testcase>\n");
    }
    sbuf_printf(b, "  </testsuite>\n");
}

static void render_junit(const cJSON *d, int color, struct sbuf *b)
{
    (void)color;
    struct sbuf body;
    sbuf_init(&body, (size_t)1 << 28);
    int tot[4] = {0};
    const cJSON *c;
    cJSON_ArrayForEach(c, json_get(d, "candidates")) junit_candidate(c, tot, &body);
    sbuf_printf(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"qgate: "
                   "candidates vs ");
    esc_xml(b, json_str(d, "baseline", ""));
    sbuf_printf(b, "\" tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\">\n",
                tot[0] + tot[1] + tot[2] + tot[3], tot[1], tot[3], tot[2]);
    sbuf_append(b, sbuf_str(&body), body.len);
    if (body.failed) b->failed = 1;
    sbuf_release(&body);
    sbuf_printf(b, "</testsuites>\n");
}

int report_set_render(const cJSON *doc, const char *format, int color, struct sbuf *out)
{
    static const struct {
        const char *name;
        void (*render)(const cJSON *doc, int color, struct sbuf *out);
    } formats[] = {{"text", render_text},
                   {"md", render_md},
                   {"html", render_html},
                   {"json", report_json_one},
                   {"junit", render_junit}};
    for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
        if (!strcmp(formats[i].name, format)) {
            formats[i].render(doc, color, out);
            return out->failed ? QG_ERR_NOMEM : QG_OK;
        }
    return QG_ERR_USAGE;
}
