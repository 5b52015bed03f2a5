/* parallel — fork-join over a persistent pool of blocking workers. */
#include "backends/parallel.h"
#include "core/util.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

enum {
    MAX_THREADS = 64,
    SPIN_PAUSES = 256,
    SPIN = SPIN_PAUSES + 64,
    UNITS = 32,
    WINDOW = 32,
    SOLO_CALLS = 32 * WINDOW,
    SOLO_MAX = 256 * WINDOW
};

struct job {
    parallel_fn fn;
    void *ctx;
    int64_t n, grain, n_units; /* items, items per unit, units */
    uint32_t gen;
    int n_threads; /* workers numbered from here on sit this one out */
};

/* The pool: workers 1..n_workers wait for a new generation of work, then
 * take units of it until none is left. Thread t owns a contiguous range of
 * units, range[t], and takes them from its front one at a time, so that
 * its rows stream through memory in order (a matrix-vector product cut
 * into interleaved pieces restarts the prefetchers at each piece: 17%
 * slower); a thread whose range is empty steals the back half of the
 * fullest range left. Each range word holds the generation in its high 32
 * bits, the range's first unit in bits 16..31 and its end in bits 0..15,
 * so that a worker that wakes late, after its generation is over, can take
 * no unit of the next one. One caller at a time holds `busy`. */
_Static_assert(UNITS *MAX_THREADS <= 0xffff, "a range word holds unit numbers in 16 bits");

struct range {
    uint64_t w;
    char pad[56]; /* a cache line each: owners take units without sharing */
};

static struct {
    pthread_mutex_t busy, lock;
    pthread_cond_t work, done;
    int n_workers;
    unsigned long generation;
    struct job job; /* the current generation's */
    int64_t finished;
    struct range range[MAX_THREADS] __attribute__((aligned(64)));
} pool = {.busy = PTHREAD_MUTEX_INITIALIZER,
          .lock = PTHREAD_MUTEX_INITIALIZER,
          .work = PTHREAD_COND_INITIALIZER,
          .done = PTHREAD_COND_INITIALIZER};

static uint64_t range_word(uint32_t gen, int64_t lo, int64_t hi)
{
    return (uint64_t)gen << 32 | (uint64_t)lo << 16 | (uint64_t)hi;
}

/* the fields of a range word */
static uint32_t range_gen(uint64_t w)
{
    return (uint32_t)(w >> 32);
}

static int64_t range_lo(uint64_t w)
{
    return (int64_t)(w >> 16 & 0xffff);
}

static int64_t range_hi(uint64_t w)
{
    return (int64_t)(w & 0xffff);
}

/* Wait i of a spin: SPIN_PAUSES pauses (about 5 us on the machine of
 * the measurements: most waits end there), then yields, which give the
 * core to any other thread that wants it. A spin of 4000 pauses held the
 * core for about 80 us: with the other core busy (`yes`), the caller, its
 * spinning worker and the other program shared two cores, and the
 * default thread count ran `qgate gate` 2-3 % slower than `--threads 1`.
 * Yields alone made that equal but cost the idle gate 9 % (a yield is a
 * system call, about 1.2 us there, on each of its 95,000 fork-joins). */
static void spin_wait(int i)
{
    if (i < SPIN_PAUSES) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    } else {
        sched_yield();
    }
}

/* One unit from the front of range v of generation gen: its number, or -1
 * when the range is empty or of another generation. */
static int64_t take_front(int v, uint32_t gen)
{
    uint64_t cur = __atomic_load_n(&pool.range[v].w, __ATOMIC_ACQUIRE);
    for (;;) {
        int64_t lo = range_lo(cur), hi = range_hi(cur);
        if (range_gen(cur) != gen || lo >= hi) return -1;
        if (__atomic_compare_exchange_n(&pool.range[v].w, &cur, range_word(gen, lo + 1, hi), 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return lo;
    }
}

/* Moves the back half of the fullest range of generation gen into thread
 * t's (empty) range; 0 when every range is empty. */
static int steal_half(const struct job *j, int t)
{
    for (;;) {
        int v = -1;
        int64_t most = 0;
        uint64_t seen = 0;
        for (int u = 0; u < j->n_threads; u++) {
            uint64_t cur = __atomic_load_n(&pool.range[u].w, __ATOMIC_ACQUIRE);
            int64_t left = range_hi(cur) - range_lo(cur);
            if (u != t && range_gen(cur) == j->gen && left > most) v = u, most = left, seen = cur;
        }
        if (v < 0) return 0;
        int64_t hi = range_hi(seen), cut = hi - (most + 1) / 2;
        uint64_t lo_word = range_word(j->gen, range_lo(seen), cut);
        if (!__atomic_compare_exchange_n(&pool.range[v].w, &seen, lo_word, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            continue;
        /* t's range is empty, so nobody steals from it: a plain store */
        __atomic_store_n(&pool.range[t].w, range_word(j->gen, cut, hi), __ATOMIC_RELEASE);
        return 1;
    }
}

/* Takes units of job j as thread t while its generation lasts (its own
 * range, then stolen halves); then adds them to the finished count (the
 * last one wakes the caller). */
static int64_t run_units(const struct job *j, int t)
{
    int64_t ran = 0;
    for (;;) {
        int64_t u = take_front(t, j->gen);
        if (u < 0) {
            if (steal_half(j, t)) continue;
            break;
        }
        int64_t b = u * j->grain, e = j->n - b > j->grain ? b + j->grain : j->n;
        j->fn(j->ctx, b, e, t);
        ran++;
    }
    if (!ran || __atomic_add_fetch(&pool.finished, ran, __ATOMIC_ACQ_REL) != j->n_units) return ran;
    /* the last unit: wake the caller if it went to sleep (it checks the
     * count under the lock before it waits, so this cannot come between) */
    pthread_mutex_lock(&pool.lock);
    pthread_cond_signal(&pool.done);
    pthread_mutex_unlock(&pool.lock);
    return ran;
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    unsigned long seen = 0;
    for (;;) {
        /* a short spin catches the next phase without a futex round trip */
        for (int i = 0; i < SPIN && __atomic_load_n(&pool.generation, __ATOMIC_ACQUIRE) == seen;
             i++)
            spin_wait(i);
        pthread_mutex_lock(&pool.lock);
        while (pool.generation == seen)
            pthread_cond_wait(&pool.work, &pool.lock);
        seen = pool.generation;
        struct job j = pool.job;
        pthread_mutex_unlock(&pool.lock);
        if (t < j.n_threads) run_units(&j, t);
    }
    return NULL;
}

/* Whether the pool pays. On a loaded machine (other processes on the
 * cores) the system runs a worker late and the caller waits for its
 * units; the default thread count must not then be slower than one
 * thread. Over each window of calls (those the caller ran units of), the time one thread would have
 * taken is estimated from the caller's own units (its time x units / its units); when the pool
 * saved under 10% of it in two windows in a row, the next SOLO_CALLS calls run on the caller
 * alone, then the pool is tried again; each further window in a row that does not pay doubles that
 * (up to SOLO_MAX), so that trying costs little under a lasting load. One window is not enough: on
 * a virtual machine a window of 32 calls (12 ms of a 1.1B model's decode) sometimes loses the
 * other core for a while, and 1024 calls alone then cost compute-bound kernels half their speed
 * (bench_decode --1b under a=llamacpp: about one run in ten at half speed, IQ1_S and IQ2_S).
 * The split of the work, and so every result, is the same either way. Touched only by the holder
 * of `busy`. */
static struct {
    int off, calls, solo_left, solo_len, strikes;
    double t_pool, t_one;
} adapt = {.solo_len = SOLO_CALLS};

static double (*pool_clock)(void) = qg_now_s;

void parallel_set_clock(double (*now)(void))
{
    pthread_mutex_lock(&pool.busy);
    pool_clock = now ? now : qg_now_s;
    pthread_mutex_unlock(&pool.busy);
}

void parallel_set_adaptive(int on)
{
    pthread_mutex_lock(&pool.busy);
    adapt.off = !on;
    adapt.calls = adapt.solo_left = adapt.strikes = 0;
    adapt.solo_len = SOLO_CALLS;
    adapt.t_pool = adapt.t_one = 0;
    pthread_mutex_unlock(&pool.busy);
}

/* accounts one pooled call: it took `wall`, the caller ran `ran` of the
 * `n_units` units in `own` seconds */
static void adapt_note(double wall, double own, int64_t ran, int64_t n_units)
{
    /* a call in which the workers took every unit gives no estimate of one
     * thread's time: it is not counted (a window of such calls used to read
     * as one that paid) */
    if (ran <= 0) return;
    adapt.t_pool += wall;
    adapt.t_one += own * (double)n_units / (double)ran;
    if (adapt.off || ++adapt.calls < WINDOW) return;
    if (adapt.t_one > 0 && adapt.t_pool > 0.9 * adapt.t_one) {
        if (++adapt.strikes >= 2) {
            adapt.solo_left = adapt.solo_len;
            adapt.solo_len = adapt.solo_len < SOLO_MAX / 2 ? 2 * adapt.solo_len : SOLO_MAX;
        }
    } else {
        adapt.solo_len = SOLO_CALLS;
        adapt.strikes = 0;
    }
    adapt.calls = 0;
    adapt.t_pool = adapt.t_one = 0;
}

/* Workers up to n - 1 (created once, kept for the process); the count there is. */
static int pool_grow(int n)
{
    while (pool.n_workers < n - 1) {
        pthread_t tid;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        int ok = pthread_create(&tid, &a, worker, (void *)(intptr_t)(pool.n_workers + 1)) == 0;
        pthread_attr_destroy(&a);
        if (!ok) break;
        pool.n_workers++;
    }
    return pool.n_workers + 1;
}

void parallel_for(int n_threads, int64_t n, parallel_fn fn, void *ctx)
{
    if (n <= 0) return;
    if (n_threads > MAX_THREADS) n_threads = MAX_THREADS;
    if (n_threads > n) n_threads = (int)n;
    /* one thread, or the pool is in use (another caller, or a call from
     * inside a part): all of it here */
    if (n_threads <= 1 || pthread_mutex_trylock(&pool.busy) != 0) {
        fn(ctx, 0, n, 0);
        return;
    }
    if (adapt.solo_left > 0) {
        adapt.solo_left--;
        pthread_mutex_unlock(&pool.busy);
        fn(ctx, 0, n, 0);
        return;
    }
    int got = pool_grow(n_threads);
    if (got < n_threads) n_threads = got;
    /* units of at least 1 / (UNITS x threads) of the work: what one take
     * or the last steal moves (UNITS x MAX_THREADS fits a range word) */
    int64_t units = (int64_t)n_threads * UNITS < n ? (int64_t)n_threads * UNITS : n;
    struct job j = {fn, ctx, n, n / units + (n % units != 0), 0, 0, n_threads};
    j.n_units = n / j.grain + (n % j.grain != 0);
    double t0 = pool_clock();
    pthread_mutex_lock(&pool.lock);
    j.gen = (uint32_t)(pool.generation + 1);
    pool.job = j;
    __atomic_store_n(&pool.finished, 0, __ATOMIC_RELAXED);
    for (int t = 0; t < n_threads; t++) /* thread t: units [t U / T, (t + 1) U / T) */
        __atomic_store_n(
            &pool.range[t].w,
            range_word(j.gen, j.n_units * t / n_threads, j.n_units * (t + 1) / n_threads),
            __ATOMIC_RELEASE);
    __atomic_store_n(&pool.generation, pool.generation + 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&pool.work);
    pthread_mutex_unlock(&pool.lock);
    int64_t ran = run_units(&j, 0);
    double t_own = pool_clock() - t0;
    /* the workers' last units are usually a few microseconds away: a spin
     * saves the futex round trip of a sleep (tens of microseconds on a
     * virtual machine, on every product of a decode step) */
    for (int i = 0; i < SPIN && __atomic_load_n(&pool.finished, __ATOMIC_ACQUIRE) < j.n_units; i++)
        spin_wait(i);
    pthread_mutex_lock(&pool.lock);
    while (__atomic_load_n(&pool.finished, __ATOMIC_ACQUIRE) < j.n_units)
        pthread_cond_wait(&pool.done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
    adapt_note(pool_clock() - t0, t_own, ran, j.n_units);
    pthread_mutex_unlock(&pool.busy);
}

int parallel_threads_for(int n_threads, double work)
{
    return work < 1 << 18 ? 1 : n_threads; /* ~25-250 us of work pays for a pool wake-up */
}

int parallel_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : (int)n;
}
