/* cpu_select — forcing a kernel set for a whole process (QG_CPU, --cpu).
 *
 * The engine's kernels switch at once (backends/kernel_set.h), but OpenBLAS
 * chose its core when it loaded; so when the set asks for another core
 * than the environment's OPENBLAS_CORETYPE, cpu_select sets OPENBLAS_CORETYPE
 * and QG_CPU and starts this program again (execv of /proc/self/exe with the
 * same argv), before any work. The new process finds both set and goes on.
 * Used by cli/main.c, the test runner and the bench programs.
 */
#ifndef QG_CPU_SELECT_H
#define QG_CPU_SELECT_H

#include <stddef.h>

/* Forces the kernel set `name` (NULL: the value of $QG_CPU; when that is
 * unset or empty, nothing is forced and QG_OK returned). `what` names the
 * source in messages ("--cpu"; "QG_CPU" when name is NULL). May not return
 * (re-executes argv, see above). Returns QG_OK, or QG_ERR_USAGE with a
 * message in err (an unknown set, one this CPU lacks), or QG_ERR_INTERNAL
 * when the program cannot be started again. */
int cpu_select(const char *name, const char *what, char **argv, char *err, size_t errn);

#endif
