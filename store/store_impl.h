/* store_impl — what the store's files share (folder-private: only the store/ sources
 * include it): the connection, and the SQLite helpers of sql.c.
 *
 * Every helper that fails records "PATH: WHAT: SQLite's message" in s->err
 * (sq_fail) and returns a QG_ERR_* status mapped from SQLite's code
 * (sq_map_rc: busy is QG_ERR_BUSY, a full disk QG_ERR_IO, a damaged file
 * QG_ERR_CORRUPT, ...). Statements are finalized by the helper that steps
 * them unless cached in s->st[].
 */
#ifndef QG_STORE_IMPL_H
#define QG_STORE_IMPL_H

#include "core/util.h"
#include "store/store.h"

#include <cjson/cJSON.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

enum { ST_ITEM_PUT, ST_COUNT }; /* statements kept prepared for the connection's life */

struct store {
    sqlite3 *db;
    char *path;
    int version;
    int readonly;
    int busy_ms; /* how long a writer waits for another */
    sqlite3_stmt *st[ST_COUNT];
    char err[QG_ERRMSG_MAX];
};

/* SQLite result code -> QG_OK / QG_ERR_*. */
int sq_map_rc(int rc);
/* Records the connection's last error as "PATH: WHAT: message" and
 * returns its status. */
int sq_fail(struct store *s, const char *what);
/* Runs SQL without results (several statements allowed). */
int sq_exec(struct store *s, const char *sql, const char *what);
/* The integer a one-row query (a PRAGMA) returns. */
int sq_pragma_int(struct store *s, const char *sql, int64_t *out);
/* Binds text (NULL binds NULL), a double (NaN binds NULL), an int64 (a
 * negative value binds NULL). */
void sq_bind_text(sqlite3_stmt *st, int i, const char *v);
void sq_bind_f64(sqlite3_stmt *st, int i, double v);
void sq_bind_opt_i64(sqlite3_stmt *st, int i, int64_t v);
/* Prepares sql; on failure *st is NULL and s->err says why. */
int sq_prepare(struct store *s, const char *sql, sqlite3_stmt **st);
/* Steps a write statement to completion; finalizes it unless cached (then
 * resets it); *id (when not NULL) gets the new row's id. */
int sq_step_done(struct store *s, sqlite3_stmt *st, const char *what, int cached, int64_t *id);
/* The one way to run a write statement: prepares sql, binds one argument
 * per letter of types to the ?s in order ('i' int, 'l' int64_t, 'n'
 * int64_t that binds NULL when negative, 'd' double that binds NULL when
 * NaN, 't' const char * that binds NULL when NULL, 'b' a blob as two
 * arguments, const void * and size_t; pass exactly those types), steps it to completion and
 * finalizes it; *id (when not NULL) gets the new row's id. Errors as sq_fail, naming `what`. */
int sq_run(struct store *s, const char *what, int64_t *id, const char *sql, const char *types, ...);
/* 32 random hex digits and a NUL. */
void sq_random_uid(char out[33]);
/* Steps a query once: QG_OK on a row, QG_ERR_NOTFOUND without one, else
 * the error (sq_fail, naming `what`); st stays the caller's to finalize. */
int sq_step_row(struct store *s, sqlite3_stmt *st, const char *what);
/* Steps st once for one integer in column 0 (QG_ERR_NOTFOUND without a
 * row); finalizes st. */
int sq_one_int64(struct store *s, sqlite3_stmt *st, const char *what, int64_t *out);
/* Column i as a double (NULL reads NaN); as malloc'd text (NULL for NULL or
 * no memory); as a malloc'd blob with a NUL after its *n bytes. */
double sq_col_f64(sqlite3_stmt *st, int i);
char *sq_col_dup(sqlite3_stmt *st, int i);
char *sq_col_blob_dup(sqlite3_stmt *st, int i, size_t *n);
/* Runs a statement with up to 3 int64 parameters (np) and no result. */
int sq_exec3(struct store *s, const char *sql, int np, int64_t a, int64_t b, int64_t c,
             const char *what);
/* A query with one optional int64 parameter, its rows as a cJSON array of
 * objects keyed by column name (caller frees *out). */
int sq_query_rows(struct store *s, const char *sql, int64_t param, int has_param, cJSON **out);

/* schema.c: brings the database from version `from` to the newest
 * (migrations in order, each in its own transaction), and reads the
 * version and identity, refusing foreign, newer and damaged files. */
int sq_migrate(struct store *s, const struct store_params *p, int64_t from);
int sq_check_identity(struct store *s, const struct store_params *p, int64_t *version);

#endif
