/* report — renders a stored comparison for a terminal, a CI system and a
 * release sign-off.
 *
 * report_build assembles one versioned JSON document (schema
 * "qgate-report/1", docs/report-schema.md) from the store: the comparison's
 * verdict rows, provenance (command, host, time, models with sha256 and
 * stored tensor types, datasets, seeds, policy), per-repeat metric values,
 * KLD percentiles and the items that flipped. Every renderer reads only that
 * document, and escapes every string for its format.
 *
 * How to add a format: write a render_NAME(doc, out) below, add it to the
 * formats table in report.c, and document it in docs/report-schema.md.
 */
#ifndef QG_REPORT_H
#define QG_REPORT_H

#include "harness/store.h"
#include "harness/util.h"

#include <cjson/cJSON.h>
#include <stdint.h>

#define REPORT_SCHEMA "qgate-report/1"
#define REPORT_MAX_FLIPS 20

/* The document of comparison id (<= 0: the newest). QG_OK, or
 * QG_ERR_NOTFOUND / a store error with err filled. Caller frees *doc. */
int report_build(struct store *s, int64_t comparison_id, cJSON **doc, char *err, size_t errlen);

/* Appends the document rendered as format ("text", "md", "html", "json",
 * "junit") to out; color only affects text. QG_OK or QG_ERR_USAGE for an
 * unknown format. */
int report_render(const cJSON *doc, const char *format, int color, struct sbuf *out);

/* 1 for a known format name. */
int report_format_known(const char *format);

#endif
