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
/* For a task a gate decided (its verdict not the loss's): which bound of
 * which gate crossed which limit ("flip rate gate FAIL: lower bound 0.07 >
 * limit 0.05"), or for INCONCLUSIVE the interval spanning it; "" else. */
void report_gate_note(const cJSON *t, char *out, size_t n);
const char *report_vcolor(const char *v);

/* JUnit outcome of a task row: 0 pass, 1 failure, 2 skipped, 3 error. */
int report_junit_outcome(const cJSON *t);
/* One comparison's document as JUnit XML (report_junit.c). */
void report_junit_one(const cJSON *d, int color, struct sbuf *b);

/* The candidates x tasks grid of a several-candidate document (a row per
 * candidate, a column per task: verdict and headline number; then size,
 * bits per weight, tokens/s), as Markdown, text and HTML (report_grid.c). */
void report_grid_md(const cJSON *d, struct sbuf *b);
void report_grid_text(const cJSON *d, struct sbuf *b);
void report_grid_html(const cJSON *d, struct sbuf *b);
/* A task's headline number: "PPL +0.82 %" or "acc -1.2 pt". */
void report_grid_headline(const cJSON *t, char *out, size_t n);

/* A pull-request comment's limit is 65,536 characters: Markdown over this
 * is rendered in its short form. */
#define REPORT_MD_LIMIT 60000

/* Renders a several-candidate document (REPORT_SET_SCHEMA). */
int report_set_render(const cJSON *doc, const char *format, int color, struct sbuf *out);
/* Renders a sweep's document (REPORT_SWEEP_SCHEMA) as text, md, html or
 * json; QG_ERR_USAGE for another format. */
int report_sweep_render(const cJSON *doc, const char *format, struct sbuf *out);

#endif
