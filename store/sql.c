/* sql — the store's SQLite helpers: status mapping, errors, binding,
 * stepping and reading columns (store_impl.h). */
#include "store/store.h"
#include "store/store_impl.h"
#include "core/status.h"
#include "core/util.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <stdarg.h>

/* Maps an SQLite result code to a qgate status. */
int sq_map_rc(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_DONE:
    case SQLITE_ROW:
        return QG_OK;
    case SQLITE_NOTADB:
        return QG_ERR_DATA;
    case SQLITE_CORRUPT:
        return QG_ERR_CORRUPT;
    case SQLITE_NOMEM:
        return QG_ERR_NOMEM;
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
        return QG_ERR_DATA;
    case SQLITE_CANTOPEN:
        return QG_ERR_NOINPUT;
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_PROTOCOL:
        return QG_ERR_IO;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return QG_ERR_BUSY;
    }
    return QG_ERR_INTERNAL;
}

/* Records the connection's last error with context and returns its status. */
int sq_fail(struct store *s, const char *what)
{
    int code = sqlite3_extended_errcode(s->db);
    int st = sq_map_rc(code);
    const char *hint = "";
    if (st == QG_ERR_CORRUPT) hint = " (the database file is corrupted; restore it from a copy)";
    if (st == QG_ERR_DATA && (code & 0xff) == SQLITE_NOTADB) hint = " (not an SQLite database)";
    if ((code & 0xff) == SQLITE_BUSY || (code & 0xff) == SQLITE_LOCKED) {
        snprintf(s->err, sizeof s->err,
                 "%s: %s: database is busy (another qgate is writing; waited %.0f s for it)",
                 s->path, what, s->busy_ms / 1000.0);
        return st;
    }
    snprintf(s->err, sizeof s->err, "%s: %s: %s%s", s->path, what, sqlite3_errmsg(s->db), hint);
    return st;
}

int sq_exec(struct store *s, const char *sql, const char *what)
{
    return sqlite3_exec(s->db, sql, NULL, NULL, NULL) == SQLITE_OK ? QG_OK : sq_fail(s, what);
}

int sq_pragma_int(struct store *s, const char *sql, int64_t *out)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *out = sqlite3_column_int64(st, 0);
        rc = SQLITE_OK;
    }
    int status = rc == SQLITE_OK ? QG_OK : sq_fail(s, "reading the database header");
    sqlite3_finalize(st);
    return status;
}

/* ---- binding helpers: NULL strings, NAN doubles and negative "absent"
 * integers become SQL NULL ---- */
void sq_bind_text(sqlite3_stmt *st, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

void sq_bind_f64(sqlite3_stmt *st, int i, double v)
{
    if (isnan(v))
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_double(st, i, v);
}

void sq_bind_opt_i64(sqlite3_stmt *st, int i, int64_t v)
{
    if (v < 0)
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_int64(st, i, v);
}

int sq_prepare(struct store *s, const char *sql, sqlite3_stmt **st)
{
    return sqlite3_prepare_v2(s->db, sql, -1, st, NULL) == SQLITE_OK
               ? QG_OK
               : sq_fail(s, "preparing a query");
}

/* Steps a write statement to completion; finalizes it unless cached. */
int sq_step_done(struct store *s, sqlite3_stmt *st, const char *what, int cached, int64_t *id)
{
    int rc = sqlite3_step(st);
    int status = rc == SQLITE_DONE ? QG_OK : sq_fail(s, what);
    if (!status && id) *id = sqlite3_last_insert_rowid(s->db);
    if (cached) {
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
    } else {
        sqlite3_finalize(st);
    }
    return status;
}

void sq_random_uid(char out[33])
{
    unsigned char b[16];
    FILE *f = fopen("/dev/urandom", "rb");
    size_t n = f ? fread(b, 1, sizeof b, f) : 0;
    if (f) fclose(f);
    if (n != sizeof b) sqlite3_randomness((int)sizeof b, b);
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
}

int sq_step_row(struct store *s, sqlite3_stmt *st, const char *what)
{
    int rc = sqlite3_step(st);
    return rc == SQLITE_ROW ? QG_OK : rc == SQLITE_DONE ? QG_ERR_NOTFOUND : sq_fail(s, what);
}

int sq_one_int64(struct store *s, sqlite3_stmt *st, const char *what, int64_t *out)
{
    int status = sq_step_row(s, st, what);
    if (!status) *out = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return status;
}

double sq_col_f64(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

char *sq_col_dup(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL
               ? NULL
               : qg_strdup((const char *)sqlite3_column_text(st, i));
}

/* Column i's blob, copied into malloc'd memory with a NUL after it (*n
 * bytes); NULL when out of memory. */
char *sq_col_blob_dup(sqlite3_stmt *st, int i, size_t *n)
{
    size_t len = (size_t)sqlite3_column_bytes(st, i);
    const void *b = sqlite3_column_blob(st, i);
    char *out = malloc(len + 1);
    if (!out) return NULL;
    if (len) memcpy(out, b, len);
    out[len] = '\0';
    *n = len;
    return out;
}

/* runs a statement with up to 3 int64 parameters and no result */
int sq_exec3(struct store *s, const char *sql, int np, int64_t a, int64_t b, int64_t c,
             const char *what)
{
    sqlite3_stmt *st;
    int rc = sq_prepare(s, sql, &st);
    if (rc) return rc;
    int64_t v[3] = {a, b, c};
    for (int i = 0; i < np; i++)
        sqlite3_bind_int64(st, i + 1, v[i]);
    return sq_step_done(s, st, what, 0, NULL);
}

/* Adds column i of the current row to obj under its name, typed. */
static int add_column(cJSON *obj, sqlite3_stmt *st, int i)
{
    const char *name = sqlite3_column_name(st, i);
    cJSON *v = NULL;
    switch (sqlite3_column_type(st, i)) {
    case SQLITE_INTEGER:
        v = cJSON_CreateNumber((double)sqlite3_column_int64(st, i));
        break;
    case SQLITE_FLOAT:
        v = cJSON_CreateNumber(sqlite3_column_double(st, i));
        break;
    case SQLITE_NULL:
        v = cJSON_CreateNull();
        break;
    default:
        v = cJSON_CreateString((const char *)sqlite3_column_text(st, i));
        break;
    }
    return v && cJSON_AddItemToObject(obj, name, v) ? QG_OK : QG_ERR_NOMEM;
}

/* Runs a query with one optional int64 parameter and returns its rows as an
 * array of objects keyed by column name. */
int sq_query_rows(struct store *s, const char *sql, int64_t param, int has_param, cJSON **out)
{
    sqlite3_stmt *st;
    *out = NULL;
    int rc = sq_prepare(s, sql, &st);
    if (rc) return rc;
    if (has_param) sqlite3_bind_int64(st, 1, param);
    cJSON *arr = cJSON_CreateArray();
    int status = arr ? QG_OK : QG_ERR_NOMEM;
    while (!status && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        cJSON *row = cJSON_CreateObject();
        if (!row || !cJSON_AddItemToArray(arr, row)) {
            cJSON_Delete(row);
            status = QG_ERR_NOMEM;
            break;
        }
        for (int i = 0; i < sqlite3_column_count(st) && !status; i++)
            status = add_column(row, st, i);
    }
    if (!status && rc != SQLITE_DONE) status = sq_fail(s, "reading");
    sqlite3_finalize(st);
    if (status) {
        cJSON_Delete(arr);
        return status;
    }
    *out = arr;
    return QG_OK;
}

/* binds the arguments as `types` says (store_impl.h); 0, or the column
 * number of an unknown type letter */
static int bind_va(sqlite3_stmt *st, const char *types, va_list ap)
{
    for (int i = 0; types[i]; i++) {
        int col = i + 1;
        switch (types[i]) {
        case 'i':
            sqlite3_bind_int(st, col, va_arg(ap, int));
            break;
        case 'l':
            sqlite3_bind_int64(st, col, va_arg(ap, int64_t));
            break;
        case 'n':
            sq_bind_opt_i64(st, col, va_arg(ap, int64_t));
            break;
        case 'd':
            sq_bind_f64(st, col, va_arg(ap, double));
            break;
        case 't':
            sq_bind_text(st, col, va_arg(ap, const char *));
            break;
        case 'b': {
            const void *p = va_arg(ap, const void *);
            sqlite3_bind_blob64(st, col, p, (sqlite3_uint64)va_arg(ap, size_t), SQLITE_TRANSIENT);
            break;
        }
        default:
            return col;
        }
    }
    return 0;
}

int sq_run(struct store *s, const char *what, int64_t *id, const char *sql, const char *types, ...)
{
    sqlite3_stmt *st;
    int rc = sq_prepare(s, sql, &st);
    if (rc) return rc;
    va_list ap;
    va_start(ap, types);
    int bad = bind_va(st, types, ap);
    va_end(ap);
    if (bad) {
        sqlite3_finalize(st);
        return qg_errf(s->err, sizeof s->err, QG_ERR_INTERNAL, "%s: %s: bad parameter type %d",
                       s->path, what, bad);
    }
    return sq_step_done(s, st, what, 0, id);
}
