/* util — small helpers shared by every module: error buffers, growable
 * strings with a hard ceiling, checked number parsing, time stamps.
 */
#ifndef QG_UTIL_H
#define QG_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define QG_ERRMSG_MAX 512

#if defined(__GNUC__)
#define QG_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define QG_PRINTF(a, b)
#endif

/* Formats into buf (always NUL-terminated, truncated to n) and returns
 * status, so call sites read `return qg_errf(err, n, QG_ERR_DATA, "...")`. */
int qg_errf(char *buf, size_t n, int status, const char *fmt, ...) QG_PRINTF(4, 5);

/* Prints "qgate: error: <msg>\n" to stderr and returns -1; control
 * characters in msg (C0 but tab and newline, DEL, C1) are shown as \xNN or
 * \uNNNN, never sent to the terminal raw. */
int qg_error(const char *fmt, ...) QG_PRINTF(1, 2);

/* Prints "qgate: warning: <msg>\n" to stderr, escaped as qg_error. */
void qg_warn(const char *fmt, ...) QG_PRINTF(1, 2);

/* n bytes (at least 1) aligned to 64 (a cache line, an AVX-512 vector),
 * released with free(); NULL on overflow or allocation failure. */
void *qg_alloc_aligned(size_t n);

/* strdup that returns NULL on NULL input or allocation failure. */
char *qg_strdup(const char *s);
/* Copies n bytes and NUL-terminates; NULL on allocation failure. */
char *qg_strndup(const char *s, size_t n);

/* Growable string with a ceiling: appends fail (and set .failed) once the
 * content would exceed cap bytes. The string is always NUL-terminated. */
struct sbuf {
    char *data;
    size_t len, alloc, cap;
    int failed; /* set after an allocation failure or ceiling hit */
};
void sbuf_init(struct sbuf *b, size_t cap);
void sbuf_release(struct sbuf *b);
int sbuf_append(struct sbuf *b, const char *s, size_t n);
int sbuf_printf(struct sbuf *b, const char *fmt, ...) QG_PRINTF(2, 3);
/* Returns the string (never NULL; "" when empty); owned by b. */
const char *sbuf_str(const struct sbuf *b);

/* Parses a whole decimal integer in [lo, hi]; QG_OK or QG_ERR_USAGE. */
int qg_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
/* Parses a whole finite double; QG_OK or QG_ERR_USAGE. */
int qg_parse_f64(const char *s, double *out);

/* Opens path for reading only if it is a regular file: a FIFO or a
 * device is refused without blocking on it. The stream, or NULL with
 * *status (QG_ERR_NOINPUT: missing, unreadable, not a regular file) and err
 * naming the path. */
FILE *qg_fopen_regular(const char *path, int *status, char *err, size_t errlen);

/* Reads a whole file (at most max bytes) into a malloc'd NUL-terminated
 * buffer. QG_OK; QG_ERR_NOINPUT (cannot open), QG_ERR_DATA (larger than
 * max), QG_ERR_IO or QG_ERR_NOMEM, with err saying which. */
int qg_read_file(const char *path, size_t max, char **out, size_t *n, char *err, size_t errlen);

/* Peak resident set size of this process in bytes (getrusage). */
uint64_t qg_peak_rss(void);

/* Current UTC time as "YYYY-MM-DDTHH:MM:SSZ" into buf (at least 21 bytes). */
void qg_utc_now(char buf[32]);
/* Seconds on the monotonic clock (for durations; the origin is arbitrary). */
double qg_now_s(void);

/* Formats a byte count with a binary unit ("1.2 MiB") into buf. */
void qg_human_bytes(uint64_t bytes, char buf[32]);

/* Writes n bytes to path through a temporary file in the same directory and
 * a rename, so a reader never sees a partial file. A symlink is followed
 * (the file it names is replaced, the link stays); a path that is not a
 * regular file (/dev/stdout, a pipe, a FIFO) is written in place. QG_OK or
 * QG_ERR_CANTCREAT / QG_ERR_IO with err filled. */
int qg_write_file_atomic(const char *path, const char *data, size_t n, char *err, size_t errlen);

/* Checks, before any work, that qg_write_file_atomic(path) can succeed:
 * its folder exists and is writable, and path is not a folder. QG_OK, or
 * QG_ERR_CANTCREAT with err naming the path and why. */
int qg_output_check(const char *path, char *err, size_t errlen);

/* 1 when a and b are the same existing file (device and inode), so that
 * writing one would destroy the other. */
int qg_same_file(const char *a, const char *b);

/* The file name of path without its folder and last extension ("a/b/Q4_K.gguf" -> "Q4_K";
 * "a/.x" -> ".x") into out (n bytes). */
void qg_path_stem(const char *path, char *out, size_t n);
/* The file of a local model spec (PATH.gguf?w=...&device=cuda -> PATH.gguf);
 * a URL (with "://") is copied whole. */
void qg_spec_file(const char *spec, char *out, size_t n);

/* 1 when stdout (fd) is a terminal and colour is allowed (NO_COLOR unset). */
int qg_use_color(int fd);

#endif
