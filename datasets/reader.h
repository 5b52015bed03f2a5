/* reader — streaming readers for frozen data files: lines, JSONL and CSV.
 *
 * Every reader works line by line (a CSV record may span lines inside
 * quotes), validates UTF-8, caps line length, and reports problems as
 * "FILE:LINE: what is wrong" with QG_ERR_DATA (QG_ERR_NOINPUT when the file
 * cannot be opened). A trailing "\r" (CRLF files) is removed; a "\r" inside
 * a line (CR-only line endings) is an error. A path ending
 * in ".bz2" is read through `bunzip2 -c` (Debian's bzip2 package) in a child
 * process; a corrupt archive is an error at its end.
 */
#ifndef QG_READER_H
#define QG_READER_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#define READER_MAX_LINE ((size_t)16 << 20)

struct lines;

int lines_open(const char *path, struct lines **out, char *err, size_t errlen);
void lines_close(struct lines *l); /* accepts NULL */
/* Next line (without its newline; borrowed until the next call). Returns 1
 * for a line, 0 at end of file, or a negative status with err filled. */
int lines_next(struct lines *l, const char **line, size_t *len);
/* 1-based number of the line last returned. */
int64_t lines_lineno(const struct lines *l);
const char *lines_path(const struct lines *l);
/* Formats "PATH:LINE: message" into the reader's error and returns QG_ERR_DATA. */
int lines_fail(struct lines *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *lines_errmsg(const struct lines *l);

/* JSONL: the next non-blank line parsed as a JSON object (caller frees with
 * cJSON_Delete). Returns 1, 0 at end, or QG_ERR_DATA ("PATH:LINE: not a JSON
 * object" ...). */
int jsonl_next(struct lines *l, cJSON **obj);

/* CSV (RFC 4180): the next record's fields, NUL-terminated copies in *fields
 * (an array of *n strings, freed with csv_fields_free). Quoted fields may
 * contain commas, doubled quotes and newlines. Returns 1, 0 at end, or
 * QG_ERR_DATA. Blank lines are skipped. */
int csv_next(struct lines *l, char ***fields, int *n);
void csv_fields_free(char **fields, int n);

#endif
