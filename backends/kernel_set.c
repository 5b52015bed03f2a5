/* kernel_set — the engine's kernel sets and the OpenBLAS core beside them. */
#include "backends/kernel_set.h"
#include "backends/matmul.h"
#include "backends/matmul_impl.h"
#include "core/status.h"
#include "core/util.h"

#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const names[KERNEL_SET_COUNT] = {"portable", "avx2", "avx512", "avx512vnni"};
static const char *const blas_cores[KERNEL_SET_COUNT] = {"Prescott", "Haswell", "SkylakeX",
                                                         "SkylakeX"};
static int forced = -1; /* the set forced, or -1 */

const char *kernel_set_nth(int i)
{
    return i >= 0 && i < KERNEL_SET_COUNT ? names[i] : NULL;
}

const char *kernel_set_name(void)
{
    return matmul_kernel_name();
}

static int index_of(const char *name)
{
    for (int i = 0; name && i < KERNEL_SET_COUNT; i++)
        if (!strcmp(name, names[i])) return i;
    return -1;
}

const char *kernel_set_best(void)
{
    return names[mv_isa_best()];
}

int kernel_set_use(const char *name, const char *what, char *err, size_t errn)
{
    int k = index_of(name), cpu = (int)mv_isa_detect(), held = (int)mv_isa_best();
    if (k < 0)
        return qg_errf(err, errn, QG_ERR_USAGE,
                       "%s%s: not a kernel set (sets: portable, avx2, avx512, avx512vnni; this "
                       "CPU runs up to %s)",
                       what, name ? name : "", names[cpu]);
    if (k > cpu)
        return qg_errf(err, errn, QG_ERR_USAGE,
                       "%s%s: this CPU lacks the %s kernel set (it runs up to %s)", what, name,
                       name, names[cpu]);
    if (k > held)
        return qg_errf(err, errn, QG_ERR_USAGE,
                       "%s%s: above %s, the kernel set this process was held to", what, name,
                       names[held]);
    if (matmul_cap_kernel(name) != QG_OK)
        return qg_errf(err, errn, QG_ERR_INTERNAL, "%s%s: the kernel set could not be chosen", what,
                       name);
    forced = k;
    return QG_OK;
}

const char *kernel_set_blas_core(const char *name)
{
    int k = index_of(name);
    return k < 0 ? NULL : blas_cores[k];
}

const char *kernel_set_blas_in_use(void)
{
    const char *c = openblas_get_corename();
    return c && *c ? c : "unknown";
}

/* OpenBLAS's own (driver/others/blas_server.c), not in its headers: weak,
 * for a BLAS without it */
extern int blas_thread_shutdown_(void) __attribute__((weak));

/* once per process: OpenBLAS 0.3's openblas_set_num_threads starts the
 * threads again after a shutdown (its lazy start after a fork), so the
 * order is set, then stop, and neither again */
static void blas_one_thread_once(void)
{
    openblas_set_num_threads(1);
    if (blas_thread_shutdown_) blas_thread_shutdown_();
}

void kernel_set_blas_one_thread(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, blas_one_thread_once);
}

void kernel_set_describe(char *out, size_t n)
{
    const char *core = kernel_set_blas_in_use();
    if (forced < 0)
        snprintf(out, n, "%s, OpenBLAS %s", kernel_set_name(), core);
    else if (!strcasecmp(core, blas_cores[forced]))
        snprintf(out, n, "%s, OpenBLAS %s (forced)", kernel_set_name(), core);
    else /* an OpenBLAS built for one CPU, which ignores OPENBLAS_CORETYPE */
        snprintf(out, n, "%s (forced), OpenBLAS %s (not %s: this OpenBLAS picks its own)",
                 kernel_set_name(), core, blas_cores[forced]);
}
