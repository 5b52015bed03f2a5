/* kernel_set — which CPU kernels compute qgate's numbers, and forcing them.
 *
 * The engine picks its kernels at run time: its own decode and
 * elementwise kernels (matmul.h, vecmath.h) come in four sets, and
 * OpenBLAS, whose sgemm computes every prefill product, picks its own
 * kernels by CPU as well ("core"). The sets round differently in the last
 * bits (docs/engine.md, "Numbers across kernel sets"), so a number
 * measured on one CPU is reproduced on another only to within their
 * measured spread. Forcing a set (QG_CPU, or `--cpu`) makes this CPU
 * compute as a CPU that has only that set: the engine's kernels of that
 * set and the OpenBLAS core such a CPU gets. Any set at or below the best
 * this CPU runs can be forced; once forced, the sets above it are refused
 * as on such a CPU. Real CPUs without AVX2 may get another OpenBLAS core
 * (Sandybridge, Nehalem) than the one forced for `portable`; its bits lie
 * within the spread docs/engine.md states.
 *
 *   set          engine kernels                     OpenBLAS core forced
 *   portable     C only                             Prescott (SSE3)
 *   avx2         AVX2 + FMA + F16C                  Haswell
 *   avx512       AVX-512 F/BW/VL/DQ                 SkylakeX
 *   avx512vnni   avx512 + integer K-quant kernels   SkylakeX
 *                (VNNI, VBMI, GFNI)
 *
 * OpenBLAS reads its core once, when the library loads (OPENBLAS_CORETYPE),
 * so a forced core takes a fresh process: kernel_set_blas_env says which
 * value the environment must hold, and the caller (cli/cpu_select.h)
 * starts the program again with it. Not thread-safe: choose before any
 * product runs.
 */
#ifndef QG_KERNEL_SET_H
#define QG_KERNEL_SET_H

#include <stddef.h>

/* The sets from the lowest up: "portable", "avx2", "avx512", "avx512vnni". */
#define KERNEL_SET_COUNT 4
const char *kernel_set_nth(int i);

/* The set in use (the best this CPU runs, unless one was forced). */
const char *kernel_set_name(void);

/* The best set this CPU runs; once a set was forced, that set (the
 * process computes as a CPU with only that set). */
const char *kernel_set_best(void);

/* Uses set `name` for the engine's own kernels from now on. Returns QG_OK,
 * or QG_ERR_USAGE with a message in err that names the set and what this
 * CPU runs when `name` is not a set or this CPU lacks it. `what` names
 * where the value came from in that message ("QG_CPU", "--cpu"). */
int kernel_set_use(const char *name, const char *what, char *err, size_t errn);

/* The OpenBLAS core a CPU with only set `name` gets (see above), or NULL
 * for an unknown name. */
const char *kernel_set_blas_core(const char *name);

/* The OpenBLAS core in use in this process ("Cooperlake", "Haswell" ...). */
const char *kernel_set_blas_in_use(void);

/* One line for provenance: "avx512vnni, OpenBLAS Cooperlake"; a forced set
 * adds " (forced)", or, when OpenBLAS did not take the core asked for (a
 * build for one CPU), says so: "portable (forced), OpenBLAS Haswell (not
 * Prescott: this OpenBLAS picks its own)". */
void kernel_set_describe(char *out, size_t n);

/* OpenBLAS runs single-threaded from here on and its worker threads stop.
 * It starts them as it loads, before main, and each spins on sched_yield
 * for some 0.1 s waiting for work that never comes: qgate's own pool does
 * the threading and every BLAS call is single-threaded (llama_ctx_new).
 * On two cores that spin took a share of the CPU from every short run.
 * Uses OpenBLAS's blas_thread_shutdown_ (what it calls itself before a
 * fork; a later threaded call would start them again) where the library
 * has it. Once per process (later calls do nothing; concurrent first
 * calls are safe), before any thread makes a BLAS call (the stop must not
 * meet one in flight): qgate's main calls it first thing, llama_ctx_new
 * again for programs that embed the engine. Nothing else may set
 * OpenBLAS's thread count afterwards: OpenBLAS 0.3 starts the threads
 * again when it is set after a stop (bench_ppl does so on purpose, in a
 * child that measures plain OpenBLAS). */
void kernel_set_blas_one_thread(void);

#endif
