/* report_parts — the pieces of one comparison's rendering that the
 * several-candidate report (report_set.c) reuses. Internal to reports/. */
#ifndef QG_REPORT_PARTS_H
#define QG_REPORT_PARTS_H

#include "core/util.h"

#include <cjson/cJSON.h>

/* One comparison's document (REPORT_SCHEMA) as text / Markdown. */
void report_text_one(const cJSON *d, int color, struct sbuf *b);
void report_md_one(const cJSON *d, int color, struct sbuf *b);
/* Any document as pretty JSON (both schemas). */
void report_json_one(const cJSON *d, int color, struct sbuf *b);

/* HTML pieces of one comparison: the summary table, its forest plot, a
 * task's section, the provenance tables; the stylesheet and the colour
 * of a verdict. */
void report_html_summary(const cJSON *d, struct sbuf *b);
void report_forest(const cJSON *d, struct sbuf *b);
void report_html_task(const cJSON *t, struct sbuf *b);
void report_html_provenance(const cJSON *d, struct sbuf *b);
extern const char *const report_css;
const char *report_vcolor(const char *v);

/* JUnit outcome of a task row: 0 pass, 1 failure, 2 skipped, 3 error. */
int report_junit_outcome(const cJSON *t);
/* One comparison's document as JUnit XML (report_junit.c). */
void report_junit_one(const cJSON *d, int color, struct sbuf *b);

/* Renders a several-candidate document (REPORT_SET_SCHEMA). */
int report_set_render(const cJSON *doc, const char *format, int color, struct sbuf *out);
/* Renders a sweep's document (REPORT_SWEEP_SCHEMA) as text, md, html or
 * json; QG_ERR_USAGE for another format. */
int report_sweep_render(const cJSON *doc, const char *format, struct sbuf *out);

#endif
