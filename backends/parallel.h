/* parallel — fork-join over a range on one persistent pool.
 *
 * The pool's workers are created once per process (as many as the widest
 * call asked for) and reused by every phase of every model: a decode step
 * makes some 100 calls, and creating threads per call cost more than the
 * work. Between calls a worker spins briefly (256 pauses, then 64 yields
 * that give the core to any thread that wants it: about 80 us on an idle
 * machine, for the next phase of the same pass) and then blocks on a condition
 * variable, so idle workers take no CPU (a pool that spins for long cost
 * 40% of throughput on two cores when OpenBLAS also had threads); the
 * caller likewise spins before it sleeps on the workers' last chunks. One
 * caller uses the pool at a time: a concurrent caller (another serve
 * instance) or a call from inside a part runs its work on its own thread.
 *
 * The pool watches whether it pays: when over a window of 32 calls it
 * saved under 10% of the time the caller alone would have taken (a loaded
 * machine runs workers late, and the caller waits for their chunks), the
 * next 1024 calls run on the caller alone, then the pool is tried again
 * (each further window in a row that does not pay doubles that, up to
 * 8192 calls).
 * Results do not change: callers' outputs never depend on the split.
 */
#ifndef QG_PARALLEL_H
#define QG_PARALLEL_H

#include <stdint.h>

/* Work on items [begin, end) as thread number `thread` (0-based). */
typedef void (*parallel_fn)(void *ctx, int64_t begin, int64_t end, int thread);

/* Runs fn over [0, n) on the calling thread and n_threads - 1 workers,
 * and returns when all is done: each item is done exactly once, by one
 * call of fn, whose `thread` is that thread's number (< n_threads; a
 * thread may make several calls, a worker none). The items are cut into
 * units [u g, (u + 1) g), g = ceil(n / (32 T)) for the T threads used
 * (fewer when n < 32 T: one item each), one call of fn per unit; where the
 * cuts fall depends on n and T alone, which thread runs a unit on timing.
 * Each thread owns a contiguous 1/T of the units and takes them from the
 * front, in order (a matrix-vector product then streams each thread's rows
 * through memory in one run); a thread whose share is done steals the back
 * half of the largest share left, so on a loaded machine the threads that
 * run take the work of one that does not. Runs everything on the caller
 * (one call of fn) when n_threads <= 1, the pool is busy or does not pay
 * (see above); fewer threads when workers cannot be created. */
void parallel_for(int n_threads, int64_t n, parallel_fn fn, void *ctx);

/* 1 (the default): the pool steps aside when it does not pay (see above);
 * 0: every call with n_threads > 1 uses the pool, for tests that must
 * exercise it whatever the machine's load. Not while a call runs. */
void parallel_set_adaptive(int on);

/* Test hook: the clock (seconds) the rule above reads, three times per
 * pooled call: before the work is handed out, when the caller's own units
 * are done, and when all are; NULL puts back the real one (qg_now_s). With
 * a clock of its own a test decides what the rule sees, so what it asserts
 * does not depend on the machine's load. Not while a call runs. */
void parallel_set_clock(double (*now)(void));

/* n_threads when `work` (any unit: flops, elements) is worth splitting,
 * else 1. */
int parallel_threads_for(int n_threads, double work);

/* Number of online CPUs (at least 1). */
int parallel_cpus(void);

#endif
