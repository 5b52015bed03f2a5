/* reader — line, JSONL and RFC 4180 CSV readers with file:line errors. */
#include "datasets/reader.h"
#include "core/status.h"
#include "core/util.h"
#include "core/utf8.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct lines {
    FILE *f;
    pid_t child; /* bunzip2 feeding f through a pipe, or 0 */
    char *path;
    char *buf;
    size_t cap;
    int64_t lineno;
    char err[2 * QG_ERRMSG_MAX];
};

/* Starts `bunzip2 -c -- path` and returns its output stream. */
static FILE *open_bz2(const char *path, pid_t *child)
{
    int fds[2];
    if (pipe(fds) != 0) return NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return NULL;
    }
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execlp("bunzip2", "bunzip2", "-c", "--", path, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    *child = pid;
    return fdopen(fds[0], "rb");
}

static int ends_with_bz2(const char *p)
{
    size_t n = strlen(p);
    return n > 4 && strcmp(p + n - 4, ".bz2") == 0;
}

int lines_open(const char *path, struct lines **out, char *err, size_t errlen)
{
    *out = NULL;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return qg_errf(err, errlen, QG_ERR_NOINPUT, "%s: is a directory, expected a file", path);
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) /* a FIFO or a device would never end */
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: not a regular file", path);
    pid_t child = 0;
    FILE *f;
    if (ends_with_bz2(path)) { /* decompressed by the bzip2 package's program */
        if (access(path, R_OK) != 0)
            return qg_errf(err, errlen, QG_ERR_NOINPUT, "%s: %s", path, strerror(errno));
        f = open_bz2(path, &child);
        if (!f)
            return qg_errf(err, errlen, QG_ERR_NOINPUT, "%s: cannot start bunzip2: %s", path,
                           strerror(errno));
    } else {
        f = fopen(path, "rb");
    }
    if (!f) return qg_errf(err, errlen, QG_ERR_NOINPUT, "%s: %s", path, strerror(errno));
    struct lines *l = calloc(1, sizeof *l);
    if (!l || !(l->path = qg_strdup(path))) {
        free(l);
        fclose(f);
        return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    }
    l->f = f;
    l->child = child;
    *out = l;
    return QG_OK;
}

void lines_close(struct lines *l)
{
    if (!l) return;
    if (l->f) fclose(l->f);
    if (l->child > 0) { /* closing the pipe ends bunzip2 if it was still writing */
        int st;
        waitpid(l->child, &st, 0);
    }
    free(l->buf);
    free(l->path);
    free(l);
}

int64_t lines_lineno(const struct lines *l)
{
    return l->lineno;
}
const char *lines_path(const struct lines *l)
{
    return l->path;
}
const char *lines_errmsg(const struct lines *l)
{
    return l->err;
}

int lines_fail(struct lines *l, const char *fmt, ...)
{
    char msg[QG_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(l->err, sizeof l->err, "%.400s:%lld: %s", l->path, (long long)l->lineno, msg);
    return QG_ERR_DATA;
}

int lines_next(struct lines *l, const char **line, size_t *len)
{
    errno = 0;
    ssize_t n = getline(&l->buf, &l->cap, l->f);
    if (n < 0) {
        if (ferror(l->f)) {
            snprintf(l->err, sizeof l->err, "%s: read error: %s", l->path, strerror(errno));
            return QG_ERR_IO;
        }
        if (l->child > 0) { /* the whole stream was read: did bunzip2 succeed? */
            int st;
            pid_t c = l->child;
            l->child = 0;
            if (waitpid(c, &st, 0) == c && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
                snprintf(l->err, sizeof l->err,
                         "%s: bunzip2 failed (exit %d): not a valid .bz2 file, or bzip2 is not "
                         "installed",
                         l->path, WIFEXITED(st) ? WEXITSTATUS(st) : 128);
                return QG_ERR_DATA;
            }
        }
        return 0;
    }
    l->lineno++;
    size_t k = (size_t)n;
    if (k > READER_MAX_LINE) return lines_fail(l, "line longer than %zu bytes", READER_MAX_LINE);
    if (k && l->buf[k - 1] == '\n') k--;
    if (k && l->buf[k - 1] == '\r') k--;
    l->buf[k] = '\0';
    size_t bad;
    if (!utf8_valid(l->buf, k, &bad))
        return lines_fail(l, "not valid UTF-8 (byte %zu of the line)", bad + 1);
    if (memchr(l->buf, '\0', k)) return lines_fail(l, "contains a NUL byte");
    if (memchr(l->buf, '\r', k))
        return lines_fail(l, "a carriage return inside the line: CR-only line endings are not "
                             "read (convert them: tr '\\r' '\\n')");
    *line = l->buf;
    *len = k;
    return 1;
}

/* The offset of a \u0000 escape in the n bytes of JSON at s, or -1: a NUL
 * would cut the C string it ends up in (a prompt or an answer) silently. */
static long nul_escape_at(const char *s, size_t n)
{
    for (size_t i = 0; i + 1 < n; i++) {
        if (s[i] != '\\') continue;
        if (s[i + 1] == 'u' && i + 5 < n && s[i + 2] == '0' && s[i + 3] == '0' && s[i + 4] == '0' &&
            s[i + 5] == '0')
            return (long)i;
        i++; /* the escaped character (a backslash too) */
    }
    return -1;
}

int jsonl_next(struct lines *l, cJSON **obj)
{
    *obj = NULL;
    for (;;) {
        const char *s;
        size_t n;
        int rc = lines_next(l, &s, &n);
        if (rc <= 0) return rc;
        size_t i = 0;
        while (i < n && (s[i] == ' ' || s[i] == '\t'))
            i++;
        if (i == n) continue; /* blank line */
        long nul = nul_escape_at(s, n);
        if (nul >= 0)
            return lines_fail(l,
                              "a \\u0000 (NUL) inside a string at byte %ld: qgate's text cannot "
                              "hold it (it would cut the string short)",
                              nul + 1);
        const char *end = NULL;
        cJSON *j = cJSON_ParseWithLengthOpts(s, n, &end, 0);
        if (!j)
            return lines_fail(l, "invalid JSON near byte %zu",
                              end ? (size_t)(end - s) + 1 : (size_t)0);
        if (!cJSON_IsObject(j)) {
            cJSON_Delete(j);
            return lines_fail(l, "not a JSON object");
        }
        size_t at = end ? (size_t)(end - s) : n;
        while (at < n && (s[at] == ' ' || s[at] == '\t'))
            at++;
        if (at < n) {
            cJSON_Delete(j);
            return lines_fail(l, "text after the JSON object at byte %zu (one object per line)",
                              at + 1);
        }
        *obj = j;
        return 1;
    }
}

void csv_fields_free(char **fields, int n)
{
    for (int i = 0; fields && i < n; i++)
        free(fields[i]);
    free(fields);
}

/* Appends the field's text to *fields (a copy); QG_OK or the failure. */
static int csv_push_field(struct lines *l, char ***fields, int *nf, struct sbuf *field)
{
    char **p = realloc(*fields, (size_t)(*nf + 1) * sizeof *p);
    if (p) *fields = p;
    char *copy = p && !field->failed ? qg_strndup(sbuf_str(field), field->len) : NULL;
    if (!copy) return lines_fail(l, "out of memory or field too long");
    (*fields)[(*nf)++] = copy;
    field->len = 0;
    return QG_OK;
}

/* One character c (at s[*i]) of a field; a doubled quote inside quotes
 * consumes the second. QG_OK or the syntax error. */
static int csv_char(struct lines *l, const char *s, size_t n, size_t *i, struct sbuf *field,
                    int *quoted, int *in_quotes, int nf)
{
    char c = s[*i];
    if (*in_quotes) {
        if (c == '"' && *i + 1 < n && s[*i + 1] == '"') {
            sbuf_append(field, "\"", 1);
            (*i)++;
        } else if (c == '"') {
            *in_quotes = 0;
        } else {
            sbuf_append(field, &c, 1);
        }
    } else if (c == '"') {
        if (field->len > 0 || *quoted)
            return lines_fail(l, "field %d: quote inside an unquoted field", nf + 1);
        *in_quotes = *quoted = 1;
    } else {
        if (*quoted) return lines_fail(l, "field %d: text after the closing quote", nf + 1);
        sbuf_append(field, &c, 1);
    }
    return QG_OK;
}

int csv_next(struct lines *l, char ***fields_out, int *n_out)
{
    *fields_out = NULL;
    *n_out = 0;
    const char *s;
    size_t n;
    int rc;
    do { /* skip blank lines */
        if ((rc = lines_next(l, &s, &n)) <= 0) return rc;
    } while (n == 0);
    struct sbuf field;
    sbuf_init(&field, READER_MAX_LINE);
    sbuf_append(&field, "", 0);
    char **fields = NULL;
    int nf = 0, quoted = 0, in_quotes = 0;
    int64_t start_line = lines_lineno(l);
    for (size_t i = 0;; i++) {
        if (i == n && in_quotes) { /* the quoted field continues on the next line */
            sbuf_append(&field, "\n", 1);
            if ((rc = lines_next(l, &s, &n)) <= 0) {
                if (rc == 0) {
                    l->lineno = start_line;
                    rc = lines_fail(l, "quoted field never closed");
                }
                break;
            }
            i = (size_t)-1;
            continue;
        }
        if (i == n || (!in_quotes && s[i] == ',')) { /* end of field */
            if ((rc = csv_push_field(l, &fields, &nf, &field))) break;
            quoted = 0;
            if (i == n) {
                rc = 1;
                break;
            }
            continue;
        }
        if ((rc = csv_char(l, s, n, &i, &field, &quoted, &in_quotes, nf))) break;
    }
    sbuf_release(&field);
    if (rc != 1) {
        csv_fields_free(fields, nf);
        return rc;
    }
    *fields_out = fields;
    *n_out = nf;
    return 1;
}
