/* report_sweep — a sweep's report (schema qgate-sweep/1, built by
 * cli/cmd_sweep.c): the ranked table of simulated candidates, the
 * recommendation, the W → W+A → W+A+KV ladder of every format as a chart,
 * and the layer × tensor-class heatmap of the sensitivity grid. Every
 * candidate is simulated and every rendering says so. */
#include "reports/report.h"
#include "reports/report_parts.h"
#include "core/json.h"
#include "core/status.h"
#include "reports/escape.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define MAX_LADDERS 16

/* "–" or the number with `decimals` decimals (-1: 4 significant
 * digits, -2: 3), `pct`: times 100 with a % sign */
static void num(struct sbuf *b, double v, int decimals, int pct)
{
    if (isnan(v))
        sbuf_printf(b, "\u2013");
    else if (decimals < 0)
        sbuf_printf(b, "%.*g", decimals == -1 ? 4 : 3, v);
    else
        sbuf_printf(b, "%.*f%s", decimals, pct ? 100 * v : v, pct ? "%" : "");
}

/* One table row per candidate in the document's order (ranked by bits). */
static void table(const cJSON *d, const char *head, const char *row, const char *sep,
                  const char *end, void (*esc)(struct sbuf *, const char *), struct sbuf *b)
{
    sbuf_printf(b, "%s", head);
    const cJSON *c;
    cJSON_ArrayForEach(c, json_get(d, "candidates"))
    {
        sbuf_printf(b, "%s", row);
        esc(b, json_str(c, "name", ""));
        esc(b, " (simulated)");
        sbuf_printf(b, "%s", sep);
        num(b, json_num(c, "bits_per_weight", NAN), 2, 0);
        sbuf_printf(b, "%s", sep);
        num(b, json_num(c, "ppl_ratio", NAN), 4, 0);
        sbuf_printf(b, "%s", sep);
        num(b, json_num(c, "kld", NAN), -1, 0);
        sbuf_printf(b, "%s", sep);
        num(b, json_num(c, "same_top1", NAN), 1, 1);
        sbuf_printf(b, "%s%s%s", sep, json_str(c, "verdict", ""), end);
    }
}

static void esc_plain(struct sbuf *b, const char *s)
{
    esc_term(b, s);
}

static void render_text(const cJSON *d, struct sbuf *b)
{
    sbuf_printf(b, "sweep of ");
    esc_term(b, json_str(d, "baseline", ""));
    sbuf_printf(b, " (every candidate simulated)\n");
    table(d, "candidate\tbits/w\tPPL ratio\tKLD\tsame top1\tverdict\n", "", "\t", "\n", esc_plain,
          b);
    sbuf_printf(b, "recommendation: ");
    esc_term(b, json_str(d, "recommendation", ""));
    sbuf_printf(b, "\n");
}

static void render_md(const cJSON *d, struct sbuf *b)
{
    sbuf_printf(b, "## qgate sweep of ");
    esc_md(b, json_str(d, "baseline", ""));
    sbuf_printf(b, "\n\nEvery candidate is **simulated** (quantized then dequantized at load; "
                   "no file was made).\n\n**Recommendation:** ");
    esc_md(b, json_str(d, "recommendation", ""));
    sbuf_printf(b, "\n\n");
    table(d,
          "| candidate | bits/weight | PPL ratio | KLD | same top-1 | verdict |\n"
          "|---|---:|---:|---:|---:|---|\n",
          "| ", " | ", " |\n", esc_md, b);
}

/* y of a KLD on the chart's log axis from lo to hi, inside [top, top+h] */
static double kld_y(double kld, double lo, double hi, double top, double h)
{
    double v = kld > lo ? log10(kld) : log10(lo);
    return top + h - h * (v - log10(lo)) / (log10(hi) - log10(lo));
}

/* Every format's KLD and verdict at each ladder step, and their range. */
struct ladders {
    const char *fmt[MAX_LADDERS];
    double kld[MAX_LADDERS][3];
    const char *verdict[MAX_LADDERS][3];
    int nf;
    double lo, hi;
};

static void gather_ladders(const cJSON *d, struct ladders *g)
{
    g->nf = 0, g->lo = INFINITY, g->hi = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, json_get(d, "candidates"))
    {
        const char *step = json_str(c, "step", NULL), *f = json_str(c, "format", "");
        int s = step ? (!strcmp(step, "W") ? 0 : !strcmp(step, "W+A") ? 1 : 2) : -1;
        if (s < 0) continue;
        int k = 0;
        while (k < g->nf && strcmp(g->fmt[k], f))
            k++;
        if (k == g->nf) {
            if (g->nf == MAX_LADDERS) continue;
            g->fmt[g->nf] = f;
            for (int j = 0; j < 3; j++)
                g->kld[g->nf][j] = NAN, g->verdict[g->nf][j] = "";
            g->nf++;
        }
        g->kld[k][s] = json_num(c, "kld", NAN);
        g->verdict[k][s] = json_str(c, "verdict", "");
        if (g->kld[k][s] > 0) g->lo = fmin(g->lo, g->kld[k][s]), g->hi = fmax(g->hi, g->kld[k][s]);
    }
}

/* The ladder: for every format, KLD at W, W+A and W+A+KV on a log axis. */
static void ladder_svg(const cJSON *d, struct sbuf *b)
{
    static const char *const steps[] = {"W", "W+A", "W+A+KV"};
    static const char *const hues[] = {"#1565c0", "#c62828", "#2e7d32", "#6a1b9a",
                                       "#ef6c00", "#00838f", "#5d4037", "#ad1457"};
    struct ladders g;
    gather_ladders(d, &g);
    const int nf = g.nf;
    double lo = g.lo, hi = g.hi;
    if (!nf || !(hi > 0)) {
        sbuf_printf(b, "<p>No ladder in this sweep.</p>\n");
        return;
    }
    double limit = json_num(d, "kld_limit", 0); /* the policy's KLD gate, drawn */
    if (limit > 0) lo = fmin(lo, limit), hi = fmax(hi, limit);
    lo = pow(10, floor(log10(lo))), hi = pow(10, ceil(log10(hi)));
    if (hi <= lo) hi = lo * 10;
    const int W = 640, H = 300, L = 70, T = 20, PW = 400, PH = 230;
    sbuf_printf(b,
                "<svg class=\"chart ladder\" id=\"ladder\" width=\"%d\" height=\"%d\" "
                "viewBox=\"0 0 %d %d\" xmlns=\"http://www.w3.org/2000/svg\">\n",
                W, H, W, H);
    for (int k = 0; k < 40 && lo * pow(10, k) <= hi * 1.001; k++) { /* decades */
        double v = lo * pow(10, k);
        double y = kld_y(v, lo, hi, T, PH);
        sbuf_printf(b,
                    "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/><text "
                    "x=\"%d\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%g</text>\n",
                    L, L + PW, y, y, L - 4, y + 3, v);
    }
    if (limit > 0) {
        double y = kld_y(limit, lo, hi, T, PH);
        sbuf_printf(b,
                    "<line class=\"limit\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" "
                    "stroke=\"#c62828\" stroke-dasharray=\"6,3\"/><text x=\"%d\" y=\"%.1f\" "
                    "font-size=\"10\" fill=\"#c62828\" text-anchor=\"end\">KLD limit "
                    "%g</text>\n",
                    L, L + PW, y, y, L + PW, y - 3, limit);
    }
    sbuf_printf(b,
                "<text x=\"14\" y=\"%d\" font-size=\"11\" transform=\"rotate(-90 14 %d)\" "
                "text-anchor=\"middle\">KLD (log scale)</text>\n",
                T + PH / 2, T + PH / 2);
    for (int s = 0; s < 3; s++)
        sbuf_printf(b,
                    "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%s</text>\n",
                    L + 40 + s * (PW - 80) / 2, T + PH + 18, steps[s]);
    for (int k = 0; k < nf; k++) {
        const char *hue = hues[k % 8];
        sbuf_printf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", hue);
        for (int s = 0; s < 3; s++)
            if (g.kld[k][s] > 0)
                sbuf_printf(b, "%d,%.1f ", L + 40 + s * (PW - 80) / 2,
                            kld_y(g.kld[k][s], lo, hi, T, PH));
        sbuf_printf(b, "\"/>\n");
        for (int s = 0; s < 3; s++)
            if (g.kld[k][s] > 0) {
                sbuf_printf(b,
                            "<circle cx=\"%d\" cy=\"%.1f\" r=\"5\" fill=\"%s\" stroke=\"%s\" "
                            "stroke-width=\"2\"><title>",
                            L + 40 + s * (PW - 80) / 2, kld_y(g.kld[k][s], lo, hi, T, PH),
                            report_vcolor(g.verdict[k][s]), hue);
                esc_html(b, g.fmt[k]);
                sbuf_printf(b, " %s (simulated): KLD %.4g, %s</title></circle>\n", steps[s],
                            g.kld[k][s], g.verdict[k][s]);
            }
        sbuf_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"12\" fill=\"%s\">", L + PW + 16,
                    T + 14 + 18 * k, hue);
        esc_html(b, g.fmt[k]);
        sbuf_printf(b, "</text>\n");
    }
    sbuf_printf(b, "</svg>\n");
}

/* background of a heatmap cell: white (lo) to deep red (hi) by log KLD */
static void heat_color(double kld, double lo, double hi, struct sbuf *b)
{
    double t = kld > 0 && hi > lo ? (log10(kld) - log10(lo)) / (log10(hi) - log10(lo)) : 0;
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    sbuf_printf(b, "rgb(255,%d,%d);color:%s", (int)(255 - 190 * t), (int)(255 - 215 * t),
                t > 0.6 ? "#fff" : "#222");
}

/* The candidate with that layer (-1: none) and class (NULL: none), or NULL. */
static const cJSON *scan_of(const cJSON *d, int layer, const char *klass)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, json_get(d, "candidates"))
    {
        const char *k = json_str(c, "class", NULL);
        if (json_int(c, "layer", -1) == layer && !json_str(c, "step", NULL) &&
            (klass ? k && !strcmp(k, klass) : !k))
            return c;
    }
    return NULL;
}

static void heat_cell(const cJSON *c, double lo, double hi, struct sbuf *b)
{
    if (!c) {
        sbuf_printf(b, "<td>\u2013</td>");
        return;
    }
    double v = json_num(c, "kld", NAN);
    sbuf_printf(b, "<td style=\"background:");
    heat_color(v, lo, hi, b);
    sbuf_printf(b, "\" title=\"");
    esc_html(b, json_str(c, "name", ""));
    sbuf_printf(b, " (simulated): %s\">", json_str(c, "verdict", ""));
    num(b, v, -2, 0);
    sbuf_printf(b, "</td>");
}

/* The grid: a row per layer (and one for all layers: the class scan), a
 * column per tensor class (and one for the whole layer), each cell the KLD
 * with just that simulated and every other tensor kept. */
static void heatmap(const cJSON *d, struct sbuf *b)
{
    const cJSON *classes = json_get(d, "classes"), *c, *k;
    int max_layer = -1;
    double lo = INFINITY, hi = 0;
    cJSON_ArrayForEach(c, json_get(d, "candidates"))
    {
        if (json_str(c, "step", NULL)) continue;
        max_layer = (int)fmax(max_layer, (double)json_int(c, "layer", -1));
        double v = json_num(c, "kld", NAN);
        if (v > 0) lo = fmin(lo, v), hi = fmax(hi, v);
    }
    if (max_layer < 0) {
        sbuf_printf(b, "<p>No layer &#215; class grid in this sweep (run it with "
                       "<code>--per-layer</code>).</p>\n");
        if (!scan_of(d, -1, json_str(cJSON_GetArrayItem(classes, 0), NULL, NULL))) return;
    }
    sbuf_printf(b, "<table class=\"heatmap\" id=\"heatmap\"><tr><th>layer</th>");
    cJSON_ArrayForEach(k, classes)
    {
        sbuf_printf(b, "<th>");
        esc_html(b, k->valuestring ? k->valuestring : "");
        sbuf_printf(b, "</th>");
    }
    sbuf_printf(b, "<th>whole layer</th></tr>\n");
    for (int l = 0; l <= max_layer + 1; l++) {
        int layer = l <= max_layer ? l : -1; /* the last row: every layer at once */
        if (layer >= 0)
            sbuf_printf(b, "<tr><th>blk.%d</th>", l);
        else
            sbuf_printf(b, "<tr><th>all layers</th>");
        cJSON_ArrayForEach(k, classes) heat_cell(scan_of(d, layer, k->valuestring), lo, hi, b);
        heat_cell(layer >= 0 ? scan_of(d, layer, NULL) : NULL, lo, hi, b);
        sbuf_printf(b, "</tr>\n");
    }
    sbuf_printf(b, "</table>\n");
}

static void render_html(const cJSON *d, struct sbuf *b)
{
    sbuf_printf(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>qgate "
                   "sweep of ");
    esc_html(b, json_str(d, "baseline", ""));
    sbuf_printf(b,
                "</title><style>%s.heatmap td{text-align:center;min-width:64px}"
                ".heatmap th{padding:4px 8px}</style></head><body>\n<h1>Sweep of ",
                report_css);
    esc_html(b, json_str(d, "baseline", ""));
    sbuf_printf(b, "</h1>\n<p><b>Every result on this page is simulated</b>: each format is "
                   "applied by quantizing then dequantizing at load; no quantized file was "
                   "made.</p>\n<p id=\"recommendation\"><b>Recommendation:</b> ");
    esc_html(b, json_str(d, "recommendation", ""));
    sbuf_printf(b, "</p>\n<p>qgate %s, generated %s; runs ", json_str(d, "qgate_version", ""),
                json_str(d, "generated_at", ""));
    const cJSON *r;
    int first = 1;
    cJSON_ArrayForEach(r, json_get(d, "runs"))
    {
        sbuf_printf(b, "%s%.0f", first ? "" : ", ", r->valuedouble);
        first = 0;
    }
    sbuf_printf(b, ".</p>\n<h2>The ladder</h2>\n<p>KLD against the baseline as weights, then "
                   "every matrix input, then the KV cache take the format (simulated). Points "
                   "are coloured by verdict; hover for values.</p>\n");
    ladder_svg(d, b);
    sbuf_printf(b, "<h2>Layer &#215; tensor class</h2>\n<p>KLD with one tensor (a row: one "
                   "layer; the last row: that class in every layer; the last column: the whole "
                   "layer) simulated in the first format and every other kept (darker: more "
                   "sensitive).</p>\n");
    heatmap(d, b);
    sbuf_printf(b, "<h2>All candidates</h2>\n");
    table(d,
          "<table><tr><th>candidate</th><th>bits/weight</th><th>PPL ratio</th><th>KLD</th>"
          "<th>same top-1</th><th>verdict</th></tr>\n",
          "<tr><td>", "</td><td>", "</td></tr>\n", esc_html, b);
    sbuf_printf(b, "</table>\n</body></html>\n");
}

int report_sweep_render(const cJSON *doc, const char *format, struct sbuf *out)
{
    if (!strcmp(format, "html"))
        render_html(doc, out);
    else if (!strcmp(format, "md"))
        render_md(doc, out);
    else if (!strcmp(format, "json"))
        report_json_one(doc, 0, out);
    else if (!strcmp(format, "text"))
        render_text(doc, out);
    else
        return QG_ERR_USAGE;
    return out->failed ? QG_ERR_NOMEM : QG_OK;
}
