/* hash — sha256 through libcrypto's EVP interface. */
#include "datasets/hash.h"
#include "harness/status.h"
#include "harness/util.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
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
    FILE *f = fopen(path, "rb");
    if (!f) return qg_errf(err, errlen, QG_ERR_NOINPUT, "%s: %s", path, strerror(errno));
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
