/* report — renders a comparison's report document for a terminal, a CI
 * system and a release sign-off.
 *
 * The document is one versioned JSON object (schema "qgate-report/1",
 * docs/report-schema.md) that harness/report_doc.c builds from the store.
 * Every renderer reads only that document, and escapes every string for
 * its format.
 *
 * How to add a format: write a static render_NAME(doc, color, out) in
 * report.c that reads only the document and escapes every string
 * (reports/escape.h), add {"NAME", render_NAME} to its formats table (the
 * one list: report_format_known and report_render read it), and document it
 * in docs/report-schema.md.
 */
#ifndef QG_REPORT_H
#define QG_REPORT_H

#include "core/util.h"

#include <cjson/cJSON.h>
#include <stdint.h>

#define REPORT_SCHEMA "qgate-report/1"
#define REPORT_SET_SCHEMA "qgate-report-set/1" /* several candidates of one run */
#define REPORT_SWEEP_SCHEMA "qgate-sweep/1"    /* a sweep's simulated candidates */
#define REPORT_MAX_FLIPS 20

/* Appends the document rendered as format ("text", "md", "html", "json",
 * "junit") to out; color only affects text. QG_OK or QG_ERR_USAGE for an
 * unknown format. */
int report_render(const cJSON *doc, const char *format, int color, struct sbuf *out);

/* 1 for a known format name. */
int report_format_known(const char *format);

#endif
