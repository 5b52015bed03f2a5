/* extract — answer extraction and exact-match scoring for generation tasks.
 *
 * A pipeline is a PCRE2 regex applied to the model's output, as
 * lm-evaluation-harness's RegexFilter: all matches are found, the first or
 * last is selected, and from it the chosen capture group — or, by default,
 * the first non-empty group (the whole match when the regex has none). No
 * match gives the fallback ("[invalid]"). Several named pipelines can score
 * the same output side by side (GSM8K's strict-match and flexible-extract).
 *
 * Normalisation, applied to the extracted answer and to every target before
 * comparing: regexes whose matches are deleted (lm-eval's
 * regexes_to_ignore), case folding, punctuation removal, whitespace
 * trimming/collapsing, and numeric comparison ("1,000" equals "1000.0").
 */
#ifndef QG_EXTRACT_H
#define QG_EXTRACT_H

#include <stddef.h>

#include <cjson/cJSON.h>

struct normalizer;
struct pipeline;

/* From JSON {"ignore_case": bool, "ignore_punctuation": bool, "whitespace":
 * bool (default true), "numbers": bool, "ignore": ["regex", ...]}; NULL
 * spec = defaults. QG_OK or QG_ERR_DATA with err ("where: ...", including
 * PCRE2's message and offset for a bad regex). */
int extract_normalizer_new(const cJSON *spec, const char *where, struct normalizer **out, char *err,
                           size_t errlen);
void extract_normalizer_free(struct normalizer *n);
/* Normalised copy of s (malloc'd; NULL on allocation failure). */
char *extract_normalize(const struct normalizer *n, const char *s);
/* 1 when a and b are equal after normalisation (numerically when both are
 * numbers and the normalizer compares numbers). */
int extract_normalized_equal(const struct normalizer *n, const char *a, const char *b);

/* From JSON {"name": str, "regex": str, "group": int, "select": "first" |
 * "last", "fallback": str}. */
int extract_pipeline_new(const cJSON *spec, const char *where, struct pipeline **out, char *err,
                         size_t errlen);
void extract_pipeline_free(struct pipeline *p);
const char *extract_pipeline_name(const struct pipeline *p);
/* The extracted answer (malloc'd): the fallback when nothing matches.
 * Invalid UTF-8 in text is matched as U+FFFD. NULL on allocation failure
 * or a match error (PCRE2's match or depth limit): never a silent miss. */
char *extract_pipeline_extract(const struct pipeline *p, const char *text);

/* Compiles a regex or explains why not: QG_ERR_DATA with
 * "where: invalid regex '...': PCRE2 message at offset N". */
int extract_regex_compile(const char *pattern, const char *where, void **out, char *err,
                          size_t errlen);
void extract_regex_free(void *re);

#endif
