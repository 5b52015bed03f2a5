/* store — opening, checking and closing the results database;
 * transactions. The rest of store.h is in this folder's other files. */
#include "store/store.h"
#include "store/store_impl.h"
#include "core/status.h"
#include "core/util.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

struct store_params store_default_params(void)
{
    struct store_params p = {.readonly = 0, .busy_timeout_ms = 10000};
    return p;
}

const char *store_errmsg(const struct store *s)
{
    return s ? s->err : "no store";
}

const char *store_path(const struct store *s)
{
    return s->path;
}

int store_schema_version(const struct store *s)
{
    return s->version;
}

/* A non-empty file must start with SQLite's header; checked before SQLite
 * touches it, so that qgate never rewrites a file that is not a database. */
static int check_header(const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO: refused, not waited on */
    if (fd < 0) {
        if (errno == ENOENT) return QG_OK;
        return qg_errf(err, errlen, QG_ERR_NOINPUT, "%s: %s", path, strerror(errno));
    }
    struct stat stt;
    char head[16] = {0};
    int rc = QG_OK;
    if (fstat(fd, &stt) != 0 || !S_ISREG(stt.st_mode))
        rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: not a regular file", path);
    else if (stt.st_size > 0 &&
             (read(fd, head, 16) != 16 || memcmp(head, "SQLite format 3", 16) != 0))
        rc = qg_errf(err, errlen, QG_ERR_DATA,
                     "%s: not an SQLite database (refusing to overwrite it; check --db)", path);
    close(fd);
    return rc;
}

static int quick_check(struct store *s)
{
    struct stat stt;
    if (stat(s->path, &stt) != 0 || stt.st_size > ((off_t)64 << 20)) return QG_OK;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "PRAGMA quick_check(1)", -1, &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    int status = QG_OK;
    if (rc == SQLITE_ROW) {
        const char *r = (const char *)sqlite3_column_text(st, 0);
        if (!r || strcmp(r, "ok") != 0)
            status = qg_errf(s->err, sizeof s->err, QG_ERR_CORRUPT,
                             "%s: the database file is corrupted (%s); restore it from a copy",
                             s->path, r ? r : "?");
    } else {
        status = sq_fail(s, "checking integrity");
    }
    sqlite3_finalize(st);
    return status;
}

/* "file:" URI of path with ?immutable=1: the file read as it is, with no
 * locks and no -shm (for read-only media). NULL when out of memory. */
static char *immutable_uri(const char *path)
{
    struct sbuf b;
    sbuf_init(&b, 0);
    sbuf_printf(&b, "file:");
    for (const unsigned char *c = (const unsigned char *)path; *c; c++)
        if (*c == '%' || *c == '?' || *c == '#' || *c < 0x21 || *c > 0x7e)
            sbuf_printf(&b, "%%%02X", *c);
        else
            sbuf_printf(&b, "%c", *c);
    sbuf_printf(&b, "?immutable=1");
    if (b.failed) {
        sbuf_release(&b);
        return NULL;
    }
    return b.data;
}

/* A read-only open that could not make the -shm file WAL mode needs (a
 * read-only mount or directory) reads the file as immutable instead —
 * unless a -wal file holds changes that such a read would miss. */
static int reopen_immutable(struct store *s)
{
    int code = sqlite3_extended_errcode(s->db) & 0xff;
    if (code != SQLITE_CANTOPEN && code != SQLITE_READONLY && code != SQLITE_IOERR)
        return QG_ERR_NOTFOUND;
    char wal[4200];
    struct stat st;
    snprintf(wal, sizeof wal, "%s-wal", s->path);
    if (stat(wal, &st) == 0 && st.st_size > 0)
        return qg_errf(s->err, sizeof s->err, QG_ERR_NOINPUT,
                       "%s: cannot be read here: its write-ahead log %s holds changes, and "
                       "reading them needs write access to the folder (copy both files to a "
                       "writable place)",
                       s->path, wal);
    char *uri = immutable_uri(s->path);
    if (!uri) return qg_errf(s->err, sizeof s->err, QG_ERR_NOMEM, "out of memory");
    sqlite3_close(s->db);
    s->db = NULL;
    int rc = sqlite3_open_v2(uri, &s->db,
                             SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL);
    free(uri);
    if (rc != SQLITE_OK)
        return s->db ? sq_fail(s, "cannot open")
                     : qg_errf(s->err, sizeof s->err, QG_ERR_NOMEM, "out of memory");
    sqlite3_extended_result_codes(s->db, 1);
    return QG_OK;
}

static int open_db(struct store *s, const struct store_params *p)
{
    int flags = (p->readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
                SQLITE_OPEN_NOMUTEX;
    int rc = sqlite3_open_v2(s->path, &s->db, flags, NULL);
    if (rc != SQLITE_OK) {
        if (!s->db)
            return qg_errf(s->err, sizeof s->err, QG_ERR_NOMEM, "%s: out of memory", s->path);
        int st = sq_fail(s, p->readonly ? "cannot open" : "cannot open or create");
        return st == QG_ERR_NOINPUT && !p->readonly ? QG_ERR_CANTCREAT : st;
    }
    sqlite3_extended_result_codes(s->db, 1);
    s->busy_ms = p->busy_timeout_ms > 0 ? p->busy_timeout_ms : 10000;
    sqlite3_busy_timeout(s->db, s->busy_ms);
    int64_t version = 0;
    rc = sq_check_identity(s, p, &version);
    if (rc && p->readonly) {
        int r2 = reopen_immutable(s);
        if (r2 != QG_ERR_NOTFOUND) rc = r2 ? r2 : sq_check_identity(s, p, &version);
    }
    if (rc) return rc;
    if ((rc = quick_check(s))) return rc;
    if ((rc = sq_exec(s, "PRAGMA foreign_keys=ON", "enabling foreign keys"))) return rc;
    if (p->readonly) {
        /* an older schema is read as it is: readers use only the tables
         * of v1 (a writer migrates it) */
        if (version == 0)
            return qg_errf(s->err, sizeof s->err, QG_ERR_NOINPUT, "%s: empty database (no runs)",
                           s->path);
        s->version = (int)version;
        return QG_OK;
    }
    /* switching to WAL needs a moment alone with the file: another qgate
     * creating it at the same time can hold it briefly */
    for (int tries = 0; (rc = sq_exec(s, "PRAGMA journal_mode=WAL", "enabling WAL")) &&
                        tries < 200 && (sqlite3_extended_errcode(s->db) & 0xff) == SQLITE_BUSY;
         tries++)
        usleep(20000);
    if (rc || (rc = sq_exec(s, "PRAGMA synchronous=NORMAL", "setting synchronous"))) return rc;
    return sq_migrate(s, p, version);
}

int store_open(const char *path, const struct store_params *p, struct store **out, char *err,
               size_t errlen)
{
    *out = NULL;
    struct store_params def = store_default_params();
    if (!p) p = &def;
    int rc = check_header(path, err, errlen);
    if (rc) return rc;
    if (p->readonly && access(path, F_OK) != 0)
        return qg_errf(err, errlen, QG_ERR_NOINPUT, "%s: no such database", path);
    struct store *s = calloc(1, sizeof *s);
    if (!s || !(s->path = qg_strdup(path))) {
        free(s);
        return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    }
    s->readonly = p->readonly;
    rc = open_db(s, p);
    if (rc) {
        qg_errf(err, errlen, rc, "%s", s->err);
        store_close(s);
        return rc;
    }
    *out = s;
    return QG_OK;
}

void store_close(struct store *s)
{
    if (!s) return;
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(s->st[i]);
    sqlite3_close(s->db);
    free(s->path);
    free(s);
}

int store_begin(struct store *s)
{
    return sq_exec(s, "BEGIN IMMEDIATE", "starting a transaction");
}

int store_commit(struct store *s)
{
    return sq_exec(s, "COMMIT", "committing");
}

int store_rollback(struct store *s)
{
    /* a failed COMMIT or a busy BEGIN may have ended the transaction already */
    if (sqlite3_get_autocommit(s->db)) return QG_OK;
    return sq_exec(s, "ROLLBACK", "rolling back");
}
