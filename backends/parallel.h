/* parallel — fork-join over a range with plain pthreads.
 *
 * Threads are created per call and joined before it returns, so nothing
 * spins between calls: the cores stay free for OpenBLAS's own threads in
 * the sgemm phases between our elementwise phases (a spinning OpenMP pool
 * cost 40% of throughput on two cores). Creating a thread costs tens of
 * microseconds; use it for work of a millisecond or more.
 */
#ifndef QG_PARALLEL_H
#define QG_PARALLEL_H

#include <stdint.h>

/* Work on items [begin, end) as thread number `thread` (0-based). */
typedef void (*parallel_fn)(void *ctx, int64_t begin, int64_t end, int thread);

/* Splits [0, n) into n_threads contiguous parts and runs fn on each, the
 * first on the calling thread. Runs everything on the caller when
 * n_threads <= 1 or thread creation fails. */
void parallel_for(int n_threads, int64_t n, parallel_fn fn, void *ctx);

/* n_threads when `work` (any unit: flops, elements) is worth splitting,
 * else 1. */
int parallel_threads_for(int n_threads, double work);

/* Number of online CPUs (at least 1). */
int parallel_cpus(void);

#endif
