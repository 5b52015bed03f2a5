/* blobs — the HTTP response cache, sampled texts and baseline
 * references (top-K per window). */
#include "store/store.h"
#include "store/store_impl.h"
#include "core/status.h"
#include "core/util.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int store_cache_get(struct store *s, const char *key, char **response)
{
    *response = NULL;
    sqlite3_stmt *st;
    int rc = sq_prepare(s, "SELECT response FROM http_cache WHERE key=?", &st);
    if (rc) return rc;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
    int out = sq_step_row(s, st, "reading the response cache");
    if (!out && !(*response = sq_col_dup(st, 0))) out = QG_ERR_NOMEM;
    sqlite3_finalize(st);
    return out;
}

int store_cache_put(struct store *s, const char *key, const char *endpoint, const char *model,
                    const char *response)
{
    char now[32];
    qg_utc_now(now);
    return sq_run(s, "writing the response cache", NULL,
                  "INSERT OR REPLACE INTO http_cache(key, endpoint, model, response, created_at) "
                  "VALUES(?,?,?,?,?)",
                  "ttttt", key, endpoint, model, response, now);
}

int store_text_put(struct store *s, const char *sha256, const char *origin, const char *content,
                   size_t n)
{
    char now[32];
    qg_utc_now(now);
    return sq_run(
        s, "storing a text", NULL,
        "INSERT OR IGNORE INTO texts(sha256, origin, content, created_at) VALUES(?,?,?,?)", "ttbt",
        sha256, origin, (const void *)content, n, now);
}

int store_text_find(struct store *s, const char *origin, char **content, size_t *n, char sha256[65])
{
    *content = NULL;
    *n = 0;
    sqlite3_stmt *st;
    int rc = sq_prepare(
        s, "SELECT sha256, content FROM texts WHERE origin=? ORDER BY created_at LIMIT 1", &st);
    if (rc) return rc;
    sqlite3_bind_text(st, 1, origin, -1, SQLITE_TRANSIENT);
    int out = sq_step_row(s, st, "reading a stored text");
    if (!out) {
        const char *h = (const char *)sqlite3_column_text(st, 0);
        snprintf(sha256, 65, "%s", h ? h : "");
        if (!(*content = sq_col_blob_dup(st, 1, n))) out = QG_ERR_NOMEM;
    }
    sqlite3_finalize(st);
    return out;
}

int store_ref_put(struct store *s, int64_t trial_id, int64_t idx, const void *blob, size_t n)
{
    return sq_run(s, "storing a baseline reference", NULL,
                  "INSERT OR REPLACE INTO refs(trial_id, idx, data) VALUES(?,?,?)", "llb", trial_id,
                  idx, blob, n);
}

int store_ref_get(struct store *s, int64_t trial_id, int64_t idx, unsigned char **blob, size_t *n)
{
    *blob = NULL;
    *n = 0;
    sqlite3_stmt *st;
    int rc = sq_prepare(s, "SELECT data FROM refs WHERE trial_id=? AND idx=?", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, trial_id);
    sqlite3_bind_int64(st, 2, idx);
    int out = sq_step_row(s, st, "reading a baseline reference");
    if (!out && !(*blob = (unsigned char *)sq_col_blob_dup(st, 0, n))) out = QG_ERR_NOMEM;
    if (out == QG_ERR_NOTFOUND)
        qg_errf(s->err, sizeof s->err, QG_ERR_NOTFOUND,
                "%s: trial %lld keeps no reference of window %lld", s->path, (long long)trial_id,
                (long long)idx);
    sqlite3_finalize(st);
    return out;
}

int store_ref_count(struct store *s, int64_t trial_id, int64_t *n)
{
    sqlite3_stmt *st;
    int rc = sq_prepare(s, "SELECT count(*) FROM refs WHERE trial_id=?", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, trial_id);
    return sq_one_int64(s, st, "counting baseline references", n);
}

int store_pin_get(struct store *s, const char *name, char sha256[65], char *path, size_t pathlen,
                  char when[32])
{
    sha256[0] = when[0] = '\0';
    if (pathlen) path[0] = '\0';
    sqlite3_stmt *st;
    int rc = sq_prepare(s, "SELECT sha256, path, pinned_at FROM pins WHERE name=?", &st);
    if (rc) return rc;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
    int out = sq_step_row(s, st, "reading a data pin");
    if (!out) {
        const char *h = (const char *)sqlite3_column_text(st, 0),
                   *p = (const char *)sqlite3_column_text(st, 1),
                   *w = (const char *)sqlite3_column_text(st, 2);
        snprintf(sha256, 65, "%s", h ? h : "");
        if (pathlen) snprintf(path, pathlen, "%s", p ? p : "");
        snprintf(when, 32, "%s", w ? w : "");
    }
    sqlite3_finalize(st);
    return out;
}

int store_pin_put(struct store *s, const char *name, const char *path, const char *sha256)
{
    char now[32];
    qg_utc_now(now);
    return sq_run(s, "pinning a data file", NULL,
                  "INSERT OR REPLACE INTO pins(name, path, sha256, pinned_at) VALUES(?,?,?,?)",
                  "tttt", name, path, sha256, now);
}
