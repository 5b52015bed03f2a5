/* parallel — fork-join over a persistent pool of blocking workers. */
#include "backends/parallel.h"

#include <pthread.h>
#include <unistd.h>

enum { MAX_THREADS = 64, SPIN = 4000 };

struct part {
    parallel_fn fn;
    void *ctx;
    int64_t begin, end;
    int thread;
};

/* The pool: workers 1..n_workers wait for a new generation of work; worker
 * t runs parts[t] when t < n_parts. One caller at a time holds `busy`. */
static struct {
    pthread_mutex_t busy, lock;
    pthread_cond_t work, done;
    int n_workers, n_parts, pending;
    unsigned long generation;
    struct part parts[MAX_THREADS];
} pool = {.busy = PTHREAD_MUTEX_INITIALIZER,
          .lock = PTHREAD_MUTEX_INITIALIZER,
          .work = PTHREAD_COND_INITIALIZER,
          .done = PTHREAD_COND_INITIALIZER};

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    unsigned long seen = 0;
    for (;;) {
        /* a short spin catches the next phase without a futex round trip */
        for (int i = 0; i < SPIN && __atomic_load_n(&pool.generation, __ATOMIC_ACQUIRE) == seen;
             i++)
            cpu_relax();
        pthread_mutex_lock(&pool.lock);
        while (pool.generation == seen)
            pthread_cond_wait(&pool.work, &pool.lock);
        seen = pool.generation;
        int mine = t < pool.n_parts;
        pthread_mutex_unlock(&pool.lock);
        if (!mine) continue;
        struct part *p = &pool.parts[t];
        p->fn(p->ctx, p->begin, p->end, p->thread);
        pthread_mutex_lock(&pool.lock);
        if (--pool.pending == 0) pthread_cond_signal(&pool.done);
        pthread_mutex_unlock(&pool.lock);
    }
    return NULL;
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
    n_threads = pool_grow(n_threads) < n_threads ? pool_grow(n_threads) : n_threads;
    pthread_mutex_lock(&pool.lock);
    for (int t = 0; t < n_threads; t++)
        pool.parts[t] = (struct part){fn, ctx, n * t / n_threads, n * (t + 1) / n_threads, t};
    pool.n_parts = n_threads;
    pool.pending = n_threads - 1;
    __atomic_store_n(&pool.generation, pool.generation + 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&pool.work);
    pthread_mutex_unlock(&pool.lock);
    fn(ctx, pool.parts[0].begin, pool.parts[0].end, 0);
    pthread_mutex_lock(&pool.lock);
    while (pool.pending > 0)
        pthread_cond_wait(&pool.done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
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
