/* status — messages and exit codes for enum qg_status. */
#include "core/status.h"

const char *qg_strerror(int status)
{
    switch (status) {
#define QG_X_MSG(name, value, msg, code)                                                           \
    case value:                                                                                    \
        return msg;
        QG_STATUS_LIST(QG_X_MSG)
#undef QG_X_MSG
    }
    return "unknown status";
}

int qg_exit_code(int status)
{
    switch (status) {
#define QG_X_CODE(name, value, msg, code)                                                          \
    case value:                                                                                    \
        return code;
        QG_STATUS_LIST(QG_X_CODE)
#undef QG_X_CODE
    }
    return QG_EX_SOFTWARE;
}
