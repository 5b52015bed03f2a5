/* report_grid — the candidates x tasks grid of a several-candidate report:
 * a row per candidate, a column per task, each cell the verdict (colour and
 * word) and the headline number, then size, bits per weight and tokens/s. */
#include "reports/report_parts.h"
#include "core/json.h"
#include "reports/escape.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { GRID_MAX_TASKS = 64 };

/* the task names of every candidate, in first-seen order */
static int grid_tasks(const cJSON *d, const char **names)
{
    int n = 0;
    const cJSON *c, *t;
    cJSON_ArrayForEach(c, json_get(d, "candidates"))
    {
        cJSON_ArrayForEach(t, json_get(json_get(c, "report"), "tasks"))
        {
            const char *name = json_str(t, "task", "");
            int seen = 0;
            for (int i = 0; i < n && !seen; i++)
                seen = !strcmp(names[i], name);
            if (!seen && n < GRID_MAX_TASKS) names[n++] = name;
        }
    }
    return n;
}

static const cJSON *task_of(const cJSON *c, const char *name)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, json_get(json_get(c, "report"),
                                   "tasks")) if (!strcmp(json_str(t, "task", ""), name)) return t;
    return NULL;
}

void report_grid_headline(const cJSON *t, char *out, size_t n)
{
    double r = json_num(t, "ppl_ratio", NAN), d = json_num(t, "delta", NAN);
    if (isfinite(r))
        snprintf(out, n, "PPL %+.2f %%", 100 * (r - 1));
    else if (isfinite(d))
        snprintf(out, n, "acc %+.1f pt", -100 * d);
    else
        snprintf(out, n, "\u2013");
}

/* size, bits per weight and tokens/s of a candidate, "\u2013" when unknown */
static void facts(const cJSON *c, char (*f)[32])
{
    double mib = json_num(c, "file_bytes", NAN) / (1024.0 * 1024.0),
           bpw = json_num(c, "bits_per_weight", NAN), tps = json_num(c, "tokens_per_second", NAN);
    snprintf(f[0], 32, isfinite(mib) ? "%.2f MiB" : "\u2013", mib);
    snprintf(f[1], 32, isfinite(bpw) ? "%.2f" : "\u2013", bpw);
    snprintf(f[2], 32, isfinite(tps) ? "%.0f" : "\u2013", tps);
}

static const char *md_badge(const char *v)
{
    return !strcmp(v, "PASS") ? "\u2705" : !strcmp(v, "FAIL") ? "\u274c" : "\u26a0\ufe0f";
}

void report_grid_md(const cJSON *d, struct sbuf *b)
{
    const char *names[GRID_MAX_TASKS];
    int n = grid_tasks(d, names);
    sbuf_printf(b, "| candidate |");
    for (int i = 0; i < n; i++) {
        sbuf_printf(b, " ");
        esc_md(b, names[i]);
        sbuf_printf(b, " |");
    }
    sbuf_printf(b, " size | bits/weight | tokens/s |\n|---|");
    for (int i = 0; i < n + 3; i++)
        sbuf_printf(b, "%s", i < n ? "---|" : "---:|");
    sbuf_printf(b, "\n");
    const cJSON *c;
    cJSON_ArrayForEach(c, json_get(d, "candidates"))
    {
        sbuf_printf(b, "| **");
        esc_md(b, json_str(c, "name", ""));
        sbuf_printf(b, "** |");
        for (int i = 0; i < n; i++) {
            const cJSON *t = task_of(c, names[i]);
            char h[64];
            if (!t) {
                sbuf_printf(b, " \u2013 |");
                continue;
            }
            report_grid_headline(t, h, sizeof h);
            const char *v = json_str(t, "verdict", "");
            sbuf_printf(b, " %s %s %s |", md_badge(v), v, h);
        }
        char f[3][32];
        facts(c, f);
        sbuf_printf(b, " %s | %s | %s |\n", f[0], f[1], f[2]);
    }
}

void report_grid_text(const cJSON *d, struct sbuf *b)
{
    const char *names[GRID_MAX_TASKS];
    int n = grid_tasks(d, names);
    int w0 = 9;
    const cJSON *c;
    cJSON_ArrayForEach(c, json_get(d, "candidates"))
    {
        int k = (int)strlen(json_str(c, "name", ""));
        w0 = k > w0 ? k : w0;
    }
    sbuf_printf(b, "%-*s", w0, "candidate");
    for (int i = 0; i < n; i++) {
        sbuf_printf(b, "  ");
        struct sbuf t;
        sbuf_init(&t, 0);
        esc_term(&t, names[i]);
        sbuf_printf(b, "%-26s", sbuf_str(&t));
        sbuf_release(&t);
    }
    sbuf_printf(b, "  %10s %11s %9s\n", "size", "bits/weight", "tokens/s");
    cJSON_ArrayForEach(c, json_get(d, "candidates"))
    {
        struct sbuf t;
        sbuf_init(&t, 0);
        esc_term(&t, json_str(c, "name", ""));
        sbuf_printf(b, "%-*s", w0, sbuf_str(&t));
        sbuf_release(&t);
        for (int i = 0; i < n; i++) {
            const cJSON *x = task_of(c, names[i]);
            char h[64], cellv[96];
            if (x) report_grid_headline(x, h, sizeof h);
            snprintf(cellv, sizeof cellv, "%s %s", x ? json_str(x, "verdict", "") : "\u2013",
                     x ? h : "");
            sbuf_printf(b, "  %-26s", cellv);
        }
        char f[3][32];
        facts(c, f);
        sbuf_printf(b, "  %10s %11s %9s\n", f[0], f[1], f[2]);
    }
}

void report_grid_html(const cJSON *d, struct sbuf *b)
{
    const char *names[GRID_MAX_TASKS];
    int n = grid_tasks(d, names);
    sbuf_printf(b, "<table id=\"matrix\" class=\"grid\"><tr><th>candidate</th>");
    for (int i = 0; i < n; i++) {
        sbuf_printf(b, "<th>");
        esc_html(b, names[i]);
        sbuf_printf(b, "</th>");
    }
    sbuf_printf(b, "<th>size</th><th>bits/weight</th><th>tokens/s</th></tr>\n");
    const cJSON *c;
    cJSON_ArrayForEach(c, json_get(d, "candidates"))
    {
        sbuf_printf(b, "<tr><th>");
        esc_html(b, json_str(c, "name", ""));
        const char *sim =
            json_str(json_get(json_get(c, "report"), "comparison"), "candidate_simulated", NULL);
        if (sim) {
            sbuf_printf(b, " <i>(simulated: ");
            esc_html(b, sim);
            sbuf_printf(b, ")</i>");
        }
        sbuf_printf(b, "</th>");
        for (int i = 0; i < n; i++) {
            const cJSON *t = task_of(c, names[i]);
            char h[64];
            if (!t) {
                sbuf_printf(b, "<td>&#8211;</td>");
                continue;
            }
            report_grid_headline(t, h, sizeof h);
            const char *v = json_str(t, "verdict", "");
            sbuf_printf(b, "<td class=\"cell %s\" style=\"border-left:6px solid %s\"><b>%s</b> ", v,
                        report_vcolor(v), v);
            esc_html(b, h);
            sbuf_printf(b, "</td>");
        }
        char f[3][32];
        facts(c, f);
        sbuf_printf(b, "<td class=\"num\">");
        esc_html(b, f[0]);
        sbuf_printf(b, "</td><td class=\"num\">");
        esc_html(b, f[1]);
        sbuf_printf(b, "</td><td class=\"num\">");
        esc_html(b, f[2]);
        sbuf_printf(b, "</td></tr>\n");
    }
    sbuf_printf(b, "</table>\n");
}
