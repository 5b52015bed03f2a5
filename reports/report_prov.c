/* report_prov — the HTML report's provenance: the run, the seeds and
 * policy, every model (a served one: what open detected), every task and
 * its data. */
#include "reports/report_parts.h"
#include "core/json.h"
#include "reports/escape.h"

#include <math.h>
#include <stdio.h>

static void html_models(const cJSON *p, struct sbuf *b)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, json_get(p, "models"))
    {
        sbuf_printf(b, "<tr><td>");
        esc_html(b, json_str(t, "name", ""));
        sbuf_printf(b, "</td><td><code>");
        const cJSON *r = json_get(t, "remote");
        if (r) { /* a served model: where, what answered, how it was scored */
            char ctx[64];
            snprintf(ctx, sizeof ctx, "; context %.0f (", json_num(r, "ctx", NAN));
            esc_html(b, json_str(r, "endpoint", ""));
            sbuf_printf(b, "</code> model <code>");
            esc_html(b, json_str(r, "model", ""));
            sbuf_printf(b, "</code></td><td>");
            esc_html(b, json_str(r, "server", ""));
            sbuf_printf(b, "%s", json_get(r, "system_fingerprint") ? ", fingerprint " : "");
            esc_html(b, json_str(r, "system_fingerprint", ""));
            sbuf_printf(b, "; route ");
            esc_html(b, json_str(r, "route", ""));
            esc_html(b, ctx);
            esc_html(b, json_str(r, "ctx_source", ""));
            sbuf_printf(b, ")</td><td>remote</td></tr>\n");
            continue;
        }
        esc_html(b, json_str(t, "path", ""));
        sbuf_printf(b, "</code></td><td><code>%s</code></td><td>", json_str(t, "sha256", ""));
        const cJSON *ty;
        int k2 = 0;
        cJSON_ArrayForEach(ty, json_get(t, "stored_types"))
        {
            sbuf_printf(b, "%s", k2++ ? ", " : "");
            esc_html(b, json_str(ty, "type", ""));
            sbuf_printf(b, " &#215;%.0f", json_num(ty, "count", NAN));
        }
        sbuf_printf(b, "</td></tr>\n");
    }
}

void report_html_provenance(const cJSON *d, struct sbuf *b)
{
    const cJSON *c = json_get(d, "comparison"), *p = json_get(d, "provenance"), *t;
    sbuf_printf(b, "<h2>Provenance</h2>\n<table>\n");
    static const char *keys[] = {"command",    "host",        "kernels",
                                 "created_at", "finished_at", "qgate_version",
                                 "suite_name", "suite_hash",  "uid"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        sbuf_printf(b, "<tr><th>%s</th><td><code>", keys[i]);
        esc_html(b, json_str(p, keys[i], ""));
        sbuf_printf(b, "</code></td></tr>\n");
    }
    const cJSON *pol = json_get(c, "policy");
    sbuf_printf(b,
                "<tr><th>seeds</th><td>run %.0f, bootstrap %.0f (%.0f "
                "draws)</td></tr>\n<tr><th>policy</th><td>margin ln PPL %.5f, "
                "accuracy %.3f, alpha %.3f, beta "
                "%.2f</td></tr>\n</table>\n<h3>Models</h3>\n<table><tr><th>name</th><th>file</th>"
                "<th>sha256</th><th>stored tensor types</th></tr>\n",
                json_num(p, "seed", NAN), json_num(c, "bootstrap_seed", NAN),
                json_num(pol, "bootstrap", NAN), json_num(pol, "margin_ppl", NAN),
                json_num(pol, "margin_acc", NAN), json_num(pol, "alpha", NAN),
                json_num(pol, "beta", NAN));
    html_models(p, b);
    sbuf_printf(
        b, "</table>\n<h3>Tasks and data</h3>\n<table><tr><th>task</th><th>kind</th><th>config "
           "sha256</th><th>data (path sha256)</th></tr>\n");
    cJSON_ArrayForEach(t, json_get(p, "tasks"))
    {
        sbuf_printf(b, "<tr><td>");
        esc_html(b, json_str(t, "name", ""));
        sbuf_printf(b, "</td><td>");
        esc_html(b, json_str(t, "kind", ""));
        sbuf_printf(b, "</td><td><code>%s</code></td><td><code>", json_str(t, "config_sha256", ""));
        esc_html(b, json_str(t, "datasets", ""));
        sbuf_printf(b, "</code></td></tr>\n");
    }
    sbuf_printf(b, "</table>\n");
}
