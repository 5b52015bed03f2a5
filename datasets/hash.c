/* hash — sha256 through libcrypto's EVP interface. */
#include "datasets/hash.h"
#include "core/status.h"
#include "core/util.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <sys/stat.h>
#include <string.h>

static void to_hex(const unsigned char *md, char hex[HASH_HEX_LEN + 1])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[HASH_HEX_LEN] = '\0';
}

int hash_sha256_mem(const void *data, size_t n, char hex[HASH_HEX_LEN + 1])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (!EVP_Digest(data, n, md, &len, EVP_sha256(), NULL) || len != 32) return QG_ERR_INTERNAL;
    to_hex(md, hex);
    return QG_OK;
}

int hash_sha256_file(const char *path, char hex[HASH_HEX_LEN + 1], char *err, size_t errlen)
{
    int status = QG_OK;
    FILE *f = qg_fopen_regular(path, &status, err, errlen); /* a FIFO would never end */
    if (!f) return status;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int rc = QG_OK;
    if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) rc = QG_ERR_INTERNAL;
    enum { CHUNK = 1 << 16 };
    unsigned char *buf = malloc(CHUNK);
    if (!buf) rc = QG_ERR_NOMEM;
    size_t n;
    while (rc == QG_OK && (n = fread(buf, 1, CHUNK, f)) > 0)
        if (!EVP_DigestUpdate(ctx, buf, n)) rc = QG_ERR_INTERNAL;
    if (rc == QG_OK && ferror(f)) rc = qg_errf(err, errlen, QG_ERR_IO, "%s: read error", path);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (rc == QG_OK && (!EVP_DigestFinal_ex(ctx, md, &len) || len != 32)) rc = QG_ERR_INTERNAL;
    if (rc == QG_OK) to_hex(md, hex);
    EVP_MD_CTX_free(ctx);
    free(buf);
    fclose(f);
    return rc;
}

struct names {
    char **v;
    size_t n, cap;
};

static int collect(const char *root, const char *rel, struct names *out, int depth)
{
    if (depth > 32) return QG_ERR_DATA;
    char path[4096];
    int len = snprintf(path, sizeof path, "%s%s%s", root, *rel ? "/" : "", rel);
    if (len < 0 || (size_t)len >= sizeof path) return QG_ERR_DATA; /* path too long */
    DIR *d = opendir(path);
    if (!d) return QG_ERR_NOINPUT;
    struct dirent *e;
    int rc = QG_OK;
    while (!rc && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char sub[4096], full[8192];
        int ls = snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
        int lf = ls < 0 || (size_t)ls >= sizeof sub
                     ? -1
                     : snprintf(full, sizeof full, "%s/%s", root, sub);
        if (lf < 0 || (size_t)lf >= sizeof full) {
            rc = QG_ERR_DATA; /* a path longer than the buffers: refused, not truncated */
            break;
        }
        struct stat st;
        if (stat(full, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            rc = collect(root, sub, out, depth + 1);
        } else if (S_ISREG(st.st_mode)) {
            if (out->n == out->cap) {
                size_t cap = out->cap ? out->cap * 2 : 64;
                char **v = realloc(out->v, cap * sizeof *v);
                if (!v) {
                    rc = QG_ERR_NOMEM;
                    break;
                }
                out->v = v;
                out->cap = cap;
            }
            if (!(out->v[out->n++] = qg_strdup(sub))) rc = QG_ERR_NOMEM;
        }
    }
    closedir(d);
    return rc;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int hash_sha256_dir(const char *dir, char hex[HASH_HEX_LEN + 1], char *err, size_t errlen)
{
    struct names nm = {0};
    int rc = collect(dir, "", &nm, 0);
    if (rc)
        qg_errf(err, errlen, rc,
                rc == QG_ERR_DATA ? "%s: a path inside is too long or nested too deep"
                                  : "%s: cannot list the directory",
                dir);
    qsort(nm.v, nm.n, sizeof *nm.v, cmp_names);
    struct sbuf listing;
    sbuf_init(&listing, 0);
    for (size_t i = 0; i < nm.n && !rc; i++) {
        char full[8192], h[HASH_HEX_LEN + 1];
        snprintf(full, sizeof full, "%s/%s", dir, nm.v[i]);
        rc = hash_sha256_file(full, h, err, errlen);
        if (!rc) sbuf_printf(&listing, "%s  ./%s\n", h, nm.v[i]);
    }
    if (!rc && nm.n == 0)
        rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: the directory has no files", dir);
    if (!rc) rc = hash_sha256_mem(listing.data ? listing.data : "", listing.len, hex);
    for (size_t i = 0; i < nm.n; i++)
        free(nm.v[i]);
    free(nm.v);
    sbuf_release(&listing);
    return rc;
}

int hash_sha256_path(const char *path, char hex[HASH_HEX_LEN + 1], char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return qg_errf(err, errlen, QG_ERR_NOINPUT, "%s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) /* a FIFO or a device would never end */
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: not a regular file or directory", path);
    return S_ISDIR(st.st_mode) ? hash_sha256_dir(path, hex, err, errlen)
                               : hash_sha256_file(path, hex, err, errlen);
}
