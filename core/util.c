/* util — error buffers, bounded strings, checked parsing, time. */
#include "core/util.h"
#include "core/status.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

int qg_errf(char *buf, size_t n, int status, const char *fmt, ...)
{
    if (buf && n > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, n, fmt, ap);
        va_end(ap);
    }
    return status;
}

/* Writes msg to stderr with control characters shown, never obeyed: C0
 * (but tab and newline), DEL and C1 (UTF-8 U+0080..U+009F) as \xNN or
 * \uNNNN, so a task name or path cannot move the cursor or retitle the
 * terminal. */
static void put_safe(const char *msg)
{
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
        if ((*p < 0x20 && *p != '\n' && *p != '\t') || *p == 0x7f)
            fprintf(stderr, "\\x%02x", *p);
        else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
            fprintf(stderr, "\\u%04x", *++p);
        else
            fputc(*p, stderr);
    }
}

static void vreport(const char *prefix, const char *fmt, va_list ap) QG_PRINTF(2, 0);
static void vreport(const char *prefix, const char *fmt, va_list ap)
{
    char msg[4 * QG_ERRMSG_MAX];
    vsnprintf(msg, sizeof msg, fmt, ap);
    fputs(prefix, stderr);
    put_safe(msg);
    fputc('\n', stderr);
}

int qg_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport("qgate: error: ", fmt, ap);
    va_end(ap);
    return -1;
}

void qg_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport("qgate: warning: ", fmt, ap);
    va_end(ap);
}

void *qg_alloc_aligned(size_t n)
{
    if (n > SIZE_MAX - 64) return NULL;
    return aligned_alloc(64, (n + 63) / 64 * 64 + (n ? 0 : 64)); /* a multiple of 64, as C11 asks */
}

char *qg_strdup(const char *s)
{
    return s ? qg_strndup(s, strlen(s)) : NULL;
}

char *qg_strndup(const char *s, size_t n)
{
    if (!s || n == SIZE_MAX) return NULL;
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

void sbuf_init(struct sbuf *b, size_t cap)
{
    memset(b, 0, sizeof *b);
    b->cap = cap ? cap : (size_t)1 << 30;
}

void sbuf_release(struct sbuf *b)
{
    if (!b) return;
    free(b->data);
    memset(b, 0, sizeof *b);
}

int sbuf_append(struct sbuf *b, const char *s, size_t n)
{
    if (b->failed) return QG_ERR_NOMEM;
    if (n > b->cap || b->len > b->cap - n) {
        b->failed = 1;
        return QG_ERR_NOMEM;
    }
    if (b->len + n + 1 > b->alloc) {
        size_t want = b->alloc ? b->alloc : 64;
        while (want < b->len + n + 1)
            want *= 2;
        char *p = realloc(b->data, want);
        if (!p) {
            b->failed = 1;
            return QG_ERR_NOMEM;
        }
        b->data = p;
        b->alloc = want;
    }
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return QG_OK;
}

int sbuf_printf(struct sbuf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return QG_ERR_INTERNAL;
    if ((size_t)n < sizeof small) return sbuf_append(b, small, (size_t)n);
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->failed = 1;
        return QG_ERR_NOMEM;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    int rc = sbuf_append(b, big, (size_t)n);
    free(big);
    return rc;
}

const char *sbuf_str(const struct sbuf *b)
{
    return b->data ? b->data : "";
}

int qg_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    if (!s || !*s) return QG_ERR_USAGE;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end != '\0' || v < lo || v > hi) return QG_ERR_USAGE;
    *out = v;
    return QG_OK;
}

int qg_parse_f64(const char *s, double *out)
{
    if (!s || !*s) return QG_ERR_USAGE;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end != '\0' || !isfinite(v)) return QG_ERR_USAGE;
    *out = v;
    return QG_OK;
}

double qg_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void qg_utc_now(char buf[32])
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void qg_human_bytes(uint64_t bytes, char buf[32])
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, 32, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, 32, "%.1f %s", v, units[u]);
}

int qg_use_color(int fd)
{
    const char *nc = getenv("NO_COLOR");
    if (nc && *nc) return 0;
    return isatty(fd);
}

FILE *qg_fopen_regular(const char *path, int *status, char *err, size_t errlen)
{
    /* O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused
     * next); a regular file reads the same either way */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *status = qg_errf(err, errlen, QG_ERR_NOINPUT, "%s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        *status = qg_errf(err, errlen, QG_ERR_NOINPUT, "%s: not a regular file", path);
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        *status = qg_errf(err, errlen, QG_ERR_NOMEM, "%s: %s", path, strerror(errno));
    }
    return f;
}

int qg_read_file(const char *path, size_t max, char **out, size_t *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    int status = QG_OK;
    FILE *f = qg_fopen_regular(path, &status, err, errlen);
    if (!f) return status;
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
        return qg_errf(err, errlen, QG_ERR_IO, "%s: %s", path, strerror(errno));
    }
    if ((uint64_t)st.st_size > max) {
        fclose(f);
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: %lld bytes is more than the limit of %zu",
                       path, (long long)st.st_size, max);
    }
    char *p = malloc((size_t)st.st_size + 1);
    if (!p) {
        fclose(f);
        return qg_errf(err, errlen, QG_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t got = fread(p, 1, (size_t)st.st_size, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || got != (size_t)st.st_size) {
        free(p);
        return qg_errf(err, errlen, QG_ERR_IO, "%s: read error", path);
    }
    p[got] = '\0';
    *out = p;
    *n = got;
    return QG_OK;
}

uint64_t qg_peak_rss(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (uint64_t)ru.ru_maxrss * 1024;
}

/* The file path names once symlinks are followed (malloc'd): path itself
 * when it is not a link or names nothing yet. */
static char *resolve_output(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISLNK(st.st_mode)) return qg_strdup(path);
    char *r = realpath(path, NULL);
    if (r) return r;
    /* a link to a file not made yet: the name it holds, from its folder */
    char link[4096];
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n <= 0) return qg_strdup(path);
    link[n] = '\0';
    const char *slash = strrchr(path, '/');
    if (link[0] == '/' || !slash) return qg_strdup(link);
    size_t len = (size_t)(slash - path) + 1 + (size_t)n + 1;
    char *out = malloc(len);
    if (out) snprintf(out, len, "%.*s/%s", (int)(slash - path), path, link);
    return out;
}

/* Writes in place: for targets that are not regular files. */
static int write_in_place(const char *path, const char *data, size_t n, char *err, size_t errlen)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return qg_errf(err, errlen, QG_ERR_CANTCREAT, "%s: cannot open: %s", path, strerror(errno));
    int bad = n && fwrite(data, 1, n, f) != n;
    bad |= fclose(f) != 0;
    return bad ? qg_errf(err, errlen, QG_ERR_IO, "%s: cannot write: %s", path, strerror(errno))
               : QG_OK;
}

int qg_write_file_atomic(const char *path, const char *data, size_t n, char *err, size_t errlen)
{
    char *target = resolve_output(path);
    if (!target) return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    struct stat st;
    if (stat(target, &st) == 0 && !S_ISREG(st.st_mode)) {
        int rc = S_ISDIR(st.st_mode)
                     ? qg_errf(err, errlen, QG_ERR_CANTCREAT, "%s: is a folder", path)
                     : write_in_place(target, data, n, err, errlen);
        free(target);
        return rc;
    }
    size_t plen = strlen(target);
    char *tmp = malloc(plen + 32);
    if (!tmp) {
        free(target);
        return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    }
    snprintf(tmp, plen + 32, "%s.tmp.%ld", target, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    int rc = QG_OK;
    if (!f) {
        rc = qg_errf(err, errlen, QG_ERR_CANTCREAT, "%s: cannot create: %s", path, strerror(errno));
    } else {
        int bad = n && fwrite(data, 1, n, f) != n;
        bad |= fflush(f) != 0;
        bad |= fclose(f) != 0;
        if (bad || rename(tmp, target) != 0) {
            rc = qg_errf(err, errlen, QG_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
            remove(tmp);
        }
    }
    free(tmp);
    free(target);
    return rc;
}

int qg_output_check(const char *path, char *err, size_t errlen)
{
    char *target = resolve_output(path);
    if (!target) return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    struct stat st;
    int rc = QG_OK;
    if (stat(target, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            rc = qg_errf(err, errlen, QG_ERR_CANTCREAT, "%s: is a folder, not a file", path);
        else if (!S_ISREG(st.st_mode) && access(target, W_OK) != 0)
            rc = qg_errf(err, errlen, QG_ERR_CANTCREAT, "%s: not writable: %s", path,
                         strerror(errno));
    }
    if (!rc && (stat(target, &st) != 0 || S_ISREG(st.st_mode))) {
        /* a new or replaced file: its folder must take a new entry */
        char *slash = strrchr(target, '/');
        const char *dir = slash ? (slash == target ? "/" : target) : ".";
        if (slash && slash != target) *slash = '\0';
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
            rc = qg_errf(err, errlen, QG_ERR_CANTCREAT, "%s: the folder %s does not exist", path,
                         dir);
        else if (access(dir, W_OK) != 0)
            rc = qg_errf(err, errlen, QG_ERR_CANTCREAT, "%s: the folder %s is not writable: %s",
                         path, dir, strerror(errno));
    }
    free(target);
    return rc;
}

int qg_same_file(const char *a, const char *b)
{
    struct stat x, y;
    return a && b && stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev &&
           x.st_ino == y.st_ino;
}

void qg_path_stem(const char *path, char *out, size_t n)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    const char *dot = strrchr(b, '.');
    snprintf(out, n, "%.*s", (int)(dot && dot > b ? (size_t)(dot - b) : strlen(b)), b);
}

void qg_spec_file(const char *spec, char *out, size_t n)
{
    const char *q = strstr(spec, "://") ? NULL : strchr(spec, '?');
    snprintf(out, n, "%.*s", q ? (int)(q - spec) : (int)strlen(spec), spec);
}
