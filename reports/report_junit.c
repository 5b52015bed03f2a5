/* report_junit — one comparison as JUnit XML: a test suite per task, a
 * FAIL a failure, an INCONCLUSIVE skipped, a row without a result an error. */
#include "core/json.h"
#include "metrics/verdict.h"
#include "reports/escape.h"
#include "reports/report_parts.h"

#include <math.h>
#include <stdio.h>

/* JUnit outcome of a row: 0 pass, 1 failure, 2 skipped (INCONCLUSIVE: the
 * suite cannot tell, which is neither a pass nor a regression; CI shows it
 * and the exit code 2 of `qgate gate` carries it), 3 error (a row without a
 * finite result or with an unknown verdict) */
int report_junit_outcome(const cJSON *t)
{
    const char *v = json_str(t, "verdict", "");
    int k = verdict_from_name(v);
    /* an interval too few windows cannot give is null: only INCONCLUSIVE may lack it */
    int no_ci = !isfinite(json_num(t, "ci_low", NAN)) || !isfinite(json_num(t, "ci_high", NAN));
    if (!isfinite(json_num(t, "delta", NAN)) || (no_ci && k != VERDICT_INCONCLUSIVE)) return 3;
    return k < 0 ? 3 : k;
}

void report_junit_one(const cJSON *d, int color, struct sbuf *b)
{
    (void)color; /* only text is coloured */
    const cJSON *c = json_get(d, "comparison"), *t;
    int n = 0, counts[4] = {0};
    cJSON_ArrayForEach(t, json_get(d, "tasks"))
    {
        n++;
        counts[report_junit_outcome(t)]++;
    }
    sbuf_printf(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"qgate ");
    esc_xml(b, json_str(c, "candidate", ""));
    sbuf_printf(b, " vs ");
    esc_xml(b, json_str(c, "baseline", ""));
    sbuf_printf(b, "\" tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\">\n", n, counts[1],
                counts[3], counts[2]);
    static const char *const tag[] = {NULL, "failure", "skipped", "error"};
    cJSON_ArrayForEach(t, json_get(d, "tasks"))
    {
        const char *v = json_str(t, "verdict", "");
        int o = report_junit_outcome(t);
        sbuf_printf(b, "  <testsuite name=\"");
        esc_xml(b, json_str(t, "task", ""));
        sbuf_printf(b,
                    "\" tests=\"1\" failures=\"%d\" errors=\"%d\" skipped=\"%d\">\n    <testcase "
                    "classname=\"qgate.",
                    o == 1, o == 3, o == 2);
        esc_xml(b, json_str(t, "task", ""));
        sbuf_printf(b, "\" name=\"");
        esc_xml(b, json_str(t, "metric", ""));
        sbuf_printf(b, "\">\n");
        char nums[512], iv[64], mde[32] = "n/a";
        double lo = json_num(t, "ci_low", NAN), hi = json_num(t, "ci_high", NAN);
        if (isfinite(lo) && isfinite(hi))
            snprintf(iv, sizeof iv, "[%+.6f, %+.6f]", lo, hi);
        else
            snprintf(iv, sizeof iv, "(not bounded)");
        if (isfinite(json_num(t, "mde", NAN)))
            snprintf(mde, sizeof mde, "%.3g", json_num(t, "mde", NAN));
        snprintf(nums, sizeof nums,
                 "loss %+.6f, 90%% interval %s, margin %.6f, noise %.3g, MDE %s, baseline %.6f, "
                 "candidate %.6f",
                 json_num(t, "delta", NAN), iv, json_num(t, "margin", NAN),
                 json_num(t, "noise", NAN), mde, json_num(t, "baseline", NAN),
                 json_num(t, "candidate", NAN));
        if (o) {
            sbuf_printf(b, "      <%s message=\"", tag[o]);
            esc_xml(b, v);
            sbuf_printf(b, ": ");
            esc_xml(b, json_str(t, "reason", ""));
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
