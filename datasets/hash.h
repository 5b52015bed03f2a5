/* hash — sha256 of files and buffers (OpenSSL libcrypto), as lowercase hex. */
#ifndef QG_HASH_H
#define QG_HASH_H

#include <stddef.h>

#define HASH_HEX_LEN 64

/* sha256 of n bytes into hex (65 bytes with the NUL). QG_OK or QG_ERR_INTERNAL. */
int hash_sha256_mem(const void *data, size_t n, char hex[HASH_HEX_LEN + 1]);

/* sha256 of a whole file, read in chunks. QG_OK, QG_ERR_NOINPUT (cannot
 * open; err says why) or QG_ERR_IO. */
int hash_sha256_file(const char *path, char hex[HASH_HEX_LEN + 1], char *err, size_t errlen);

/* sha256 of a directory: of the listing `sha256sum` prints for every file
 * below it, sorted by path ("HASH  ./REL/PATH\n" lines, bytewise order), so
 * `find . -type f | sort | xargs sha256sum | sha256sum` run inside the
 * directory gives the same value. Statuses as hash_sha256_file. */
int hash_sha256_dir(const char *dir, char hex[HASH_HEX_LEN + 1], char *err, size_t errlen);

/* sha256 of a file or a directory, whichever path is. */
int hash_sha256_path(const char *path, char hex[HASH_HEX_LEN + 1], char *err, size_t errlen);

#endif
