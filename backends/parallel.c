/* parallel — per-call pthreads fork-join. */
#include "backends/parallel.h"

#include <pthread.h>
#include <unistd.h>

enum { MAX_THREADS = 64 };

struct part {
    parallel_fn fn;
    void *ctx;
    int64_t begin, end;
    int thread;
};

static void *run_part(void *arg)
{
    struct part *p = arg;
    p->fn(p->ctx, p->begin, p->end, p->thread);
    return NULL;
}

void parallel_for(int n_threads, int64_t n, parallel_fn fn, void *ctx)
{
    if (n <= 0) return;
    if (n_threads > MAX_THREADS) n_threads = MAX_THREADS;
    if (n_threads > n) n_threads = (int)n;
    if (n_threads <= 1) {
        fn(ctx, 0, n, 0);
        return;
    }
    struct part parts[MAX_THREADS];
    pthread_t tids[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int t = 0; t < n_threads; t++)
        parts[t] = (struct part){fn, ctx, n * t / n_threads, n * (t + 1) / n_threads, t};
    for (int t = 1; t < n_threads; t++)
        started[t] = pthread_create(&tids[t], NULL, run_part, &parts[t]) == 0;
    fn(ctx, parts[0].begin, parts[0].end, 0);
    for (int t = 1; t < n_threads; t++) {
        if (started[t])
            pthread_join(tids[t], NULL);
        else
            fn(ctx, parts[t].begin, parts[t].end, t); /* could not start: do it here */
    }
}

int parallel_threads_for(int n_threads, double work)
{
    return work < 1 << 20 ? 1 : n_threads; /* ~0.1-1 ms of work pays for a thread */
}

int parallel_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : (int)n;
}
