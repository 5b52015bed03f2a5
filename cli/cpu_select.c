/* cpu_select — a forced kernel set, with OpenBLAS's core, for the process. */
#include "cli/cpu_select.h"
#include "backends/kernel_set.h"
#include "core/status.h"
#include "core/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

int cpu_select(const char *name, const char *what, char **argv, char *err, size_t errn)
{
    if (!name) {
        name = getenv("QG_CPU");
        what = "QG_CPU=";
        if (!name || !*name) return QG_OK;
    }
    int rc = kernel_set_use(name, what, err, errn);
    if (rc) return rc;
#if !defined(__x86_64__) && !defined(__i386__)
    return QG_OK; /* OpenBLAS's x86 cores: nothing to force elsewhere */
#endif
    const char *core = kernel_set_blas_core(name), *env = getenv("OPENBLAS_CORETYPE");
    if (env && !strcasecmp(env, core)) return QG_OK;
    /* OpenBLAS picked its core at load: start again with the one asked for
     * (once: the new process finds OPENBLAS_CORETYPE set) */
    if (setenv("OPENBLAS_CORETYPE", core, 1) || setenv("QG_CPU", name, 1))
        return qg_errf(err, errn, QG_ERR_INTERNAL, "%s%s: cannot set the environment: %s", what,
                       name, strerror(errno));
    execv("/proc/self/exe", argv);
    return qg_errf(err, errn, QG_ERR_INTERNAL,
                   "%s%s: cannot start again with OPENBLAS_CORETYPE=%s: %s", what, name, core,
                   strerror(errno));
}
