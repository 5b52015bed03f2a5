/* status — the one status enum of qgate.
 *
 * Library functions return an int: QG_OK (0) on success, a negative QG_ERR_*
 * on failure, with details in the object's error buffer. Only cli/main.c
 * and cmd_*.c turn a status into a process exit code (sysexits). Values are
 * append-only: they may be persisted.
 */
#ifndef QG_STATUS_H
#define QG_STATUS_H

/* X(name, value, message, exit code) */
#define QG_STATUS_LIST(X)                                                                          \
    X(QG_OK, 0, "success", 0)                                                                      \
    X(QG_ERR_USAGE, -1, "usage error", 64)                                                         \
    X(QG_ERR_DATA, -2, "bad input data", 65)                                                       \
    X(QG_ERR_NOINPUT, -3, "cannot open input", 66)                                                 \
    X(QG_ERR_UNAVAILABLE, -4, "service unavailable", 69)                                           \
    X(QG_ERR_INTERNAL, -5, "internal error", 70)                                                   \
    X(QG_ERR_IO, -6, "input/output error", 74)                                                     \
    X(QG_ERR_NOMEM, -7, "out of memory", 71)                                                       \
    X(QG_ERR_UNSUPPORTED, -8, "not supported", 69)                                                 \
    X(QG_ERR_NOTFOUND, -9, "not found", 66)                                                        \
    X(QG_ERR_CORRUPT, -10, "corrupt file", 65)                                                     \
    X(QG_ERR_VERSION, -11, "file made by a newer version", 65)                                     \
    X(QG_ERR_CANTCREAT, -12, "cannot create output", 73)                                           \
    X(QG_ERR_INTERRUPTED, -13, "interrupted", 130)                                                 \
    X(QG_ERR_BUSY, -14, "busy, try again later", 75)

enum qg_status {
#define QG_X_ENUM(name, value, msg, code) name = value,
    QG_STATUS_LIST(QG_X_ENUM)
#undef QG_X_ENUM
};

/* Short static description of a status; "unknown status" for other values. */
const char *qg_strerror(int status);

/* The sysexits code for a status (0 for QG_OK, 70 for unknown values). */
int qg_exit_code(int status);

/* sysexits values used by commands (sysexits.h is not C11) */
enum {
    QG_EX_OK = 0,
    QG_EX_USAGE = 64,
    QG_EX_DATAERR = 65,
    QG_EX_NOINPUT = 66,
    QG_EX_UNAVAILABLE = 69,
    QG_EX_SOFTWARE = 70,
    QG_EX_OSERR = 71,
    QG_EX_CANTCREAT = 73,
    QG_EX_IOERR = 74,
};

#endif
