/* report_doc — builds the report document of a stored comparison.
 *
 * The document (schema REPORT_SCHEMA, docs/report-schema.md) holds the
 * comparison's verdict rows, provenance (command, host, time, models with
 * sha256 and stored tensor types, datasets, seeds, policy), per-repeat
 * metric values, KLD percentiles and the items that flipped. reports/
 * renders it and knows nothing of the store.
 */
#ifndef QG_REPORT_DOC_H
#define QG_REPORT_DOC_H

#include "store/store.h"

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

/* The document of comparison id (<= 0: the newest). QG_OK, or
 * QG_ERR_NOTFOUND / a store error with err filled. Caller frees *doc. */
int report_doc_build(struct store *s, int64_t comparison_id, cJSON **doc, char *err, size_t errlen);

/* The document of a comparison summary (as compare computes it) of run_id:
 * cid 0 and created NULL for one computed now and not stored. */
int report_doc_from_summary(struct store *s, int64_t cid, int64_t run_id, const cJSON *sum,
                            const char *created, cJSON **doc, char *err, size_t errlen);

/* One document covering several comparisons of one run (schema
 * REPORT_SET_SCHEMA): each candidate's verdict, plain summary, file size,
 * bits per weight, tokens/s and its whole single document; the worst
 * verdict; the smallest passing candidate by file size; the provenance. */
int report_doc_build_set(struct store *s, const int64_t *ids, int n, cJSON **doc, char *err,
                         size_t errlen);

#endif
