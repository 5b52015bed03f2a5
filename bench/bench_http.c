/* bench_http — items/s of the HTTP backend against `qgate serve`, next to
 * the server's own compute rate for the same requests.
 *
 * usage: bench_http [MODEL.gguf] [--items N] [--len L] [--instances P]
 *                   [--rounds R]
 *
 * Starts the server in-process on loopback with P model instances (default:
 * one per CPU but one, one thread each: the client keeps a core, as it
 * would on its own machine), opens the HTTP backend on it at concurrency 1,
 * 4, 8 and 16, and scores N windows of L token ids (seeded) with
 * backend_score_many. The server's own rate is the same N windows scored
 * directly on P local instances by P threads — what the server could do
 * with no HTTP at all; the ratio is the harness's share. Each figure is the
 * median of R rounds (default 5), taken in turn (direct, 1, 4, 8, 16,
 * direct, ...) so that a slow spell of a shared machine falls on all of
 * them. "server busy" is the share of the wall time the server's instances
 * were held by requests (computing): 100% means the client never left the
 * server waiting, whatever else slowed it. "client CPU" is the calling
 * thread's CPU time per item: the cost of building requests, reading
 * answers and driving libcurl. Without a
 * model it generates a synthetic one (dim 256, 4 layers, vocabulary 2048).
 */
#include "bench/bench_args.h"
#include "backends/backend.h"
#include "backends/synth.h"
#include "harness/serve.h"
#include "core/status.h"
#include "core/util.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct job {
    struct backend *b;
    struct backend_score *reqs;
    int from, to, rc;
};

static void *run_job(void *arg)
{
    struct job *j = arg;
    for (int i = j->from; i < j->to && !j->rc; i++) j->rc = backend_score(j->b, &j->reqs[i]);
    return NULL;
}

static double thread_cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#define N_CONC 4
#define MAX_ROUNDS 64

int main(int argc, char **argv)
{
    const char *model = NULL;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int items = 256, len = 64, P = ncpu > 1 ? (int)ncpu - 1 : 1, rounds = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--items") && i + 1 < argc) items = bench_int_arg("--items", argv[++i], 1, 1 << 20);
        else if (!strcmp(argv[i], "--len") && i + 1 < argc) len = bench_int_arg("--len", argv[++i], 2, 1 << 20);
        else if (!strcmp(argv[i], "--instances") && i + 1 < argc) P = bench_int_arg("--instances", argv[++i], 1, 32);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = bench_int_arg("--rounds", argv[++i], 1, 64);
        else if (argv[i][0] != '-') model = argv[i];
        else return fprintf(stderr, "usage: bench_http [MODEL.gguf] [--items N] [--len L] [--instances P] [--rounds R]\n"), 64;
    }
    if (P < 1) P = 1;
    if (P > 32) P = 32;
    if (rounds < 1) rounds = 1;
    if (rounds > MAX_ROUNDS) rounds = MAX_ROUNDS;
    if (items < 1) items = 1;
    if (len < 2) len = 2;
    char err[QG_ERRMSG_MAX], path[256];
    if (!model) {
        struct synth_params sp = synth_default_params();
        sp.n_vocab = 2048, sp.dim = 256, sp.n_layers = 4, sp.n_heads = 8, sp.n_kv_heads = 4, sp.ffn = 512, sp.ctx = 256;
        snprintf(path, sizeof path, "/tmp/qgate-bench-http-%ld.gguf", (long)getpid());
        if (synth_write(&sp, path, err, sizeof err)) return fprintf(stderr, "%s\n", err), 70;
        model = path;
    }
    struct backend b[32];
    struct backend_open_params bp = {.n_threads = 1};
    for (int i = 0; i < P; i++)
        if (backend_open(model, &bp, &b[i], err, sizeof err)) return fprintf(stderr, "%s\n", err), 66;
    struct backend_info info;
    backend_info(&b[0], &info);
    if (len + 1 > info.n_ctx_train) len = info.n_ctx_train - 1;
    /* seeded windows of token ids */
    int32_t *ids = malloc((size_t)items * (size_t)len * sizeof *ids);
    double *lp = malloc((size_t)items * (size_t)len * sizeof *lp), *lp2 = malloc((size_t)items * (size_t)len * sizeof *lp2);
    struct backend_score *reqs = calloc((size_t)items, sizeof *reqs), *r2 = calloc((size_t)items, sizeof *r2);
    if (!ids || !lp || !lp2 || !reqs || !r2) return fprintf(stderr, "out of memory\n"), 71;
    uint64_t s = 42;
    for (int i = 0; i < items * len; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((s >> 33) % (uint64_t)info.n_vocab);
    }
    for (int i = 0; i < items; i++) {
        ids[i * len] = info.bos >= 0 ? info.bos : ids[i * len];
        reqs[i] = (struct backend_score){.tokens = ids + (size_t)i * len, .n_tokens = len, .from = 1, .logprob = lp + (size_t)i * len};
        r2[i] = reqs[i], r2[i].logprob = lp2 + (size_t)i * len;
    }
    struct serve_params sp = {.model_id = "bench"};
    struct server *srv;
    int port;
    if (serve_start(b, P, &sp, &srv, &port, err, sizeof err)) return fprintf(stderr, "%s\n", err), 69;
    static const int conc[N_CONC] = {1, 4, 8, 16};
    struct backend hb[N_CONC];
    for (int k = 0; k < N_CONC; k++) {
        char spec[1024];
        snprintf(spec, sizeof spec, "http://127.0.0.1:%d/v1?model=bench&tokenizer=%s&concurrency=%d", port, model, conc[k]);
        struct backend_open_params hp = {0};
        if (backend_open(spec, &hp, &hb[k], err, sizeof err)) return fprintf(stderr, "%s\n", err), 69;
    }
    printf("bench_http: %s, %d windows of %d tokens, server with %d instance(s) x 1 thread on 127.0.0.1:%d, %ld CPUs,\n"
           "median of %d rounds\n\n", model, items, len, P, port, ncpu, rounds);
    double direct[MAX_ROUNDS], rate[N_CONC][MAX_ROUNDS], cpu[N_CONC][MAX_ROUNDS], busy[N_CONC][MAX_ROUNDS], worst = 0;
    for (int r = 0; r < rounds; r++) {
        /* the server's own rate: P threads on P instances, no HTTP */
        pthread_t th[32];
        struct job jobs[32];
        double t0 = qg_now_s();
        for (int i = 0; i < P; i++) {
            jobs[i] = (struct job){.b = &b[i], .reqs = reqs, .from = items * i / P, .to = items * (i + 1) / P};
            pthread_create(&th[i], NULL, run_job, &jobs[i]);
        }
        for (int i = 0; i < P; i++) pthread_join(th[i], NULL);
        direct[r] = items / (qg_now_s() - t0);
        for (int i = 0; i < P; i++)
            if (jobs[i].rc) return fprintf(stderr, "direct scoring failed\n"), 70;
        for (int k = 0; k < N_CONC; k++) {
            double c0 = thread_cpu_s(), b0 = serve_busy_seconds(srv);
            t0 = qg_now_s();
            if (backend_score_many(&hb[k], r2, items)) return fprintf(stderr, "%s\n", backend_errmsg(&hb[k])), 69;
            double wall = qg_now_s() - t0;
            rate[k][r] = items / wall;
            busy[k][r] = (serve_busy_seconds(srv) - b0) / (P * wall);
            cpu[k][r] = 1e3 * (thread_cpu_s() - c0) / items;
            for (int i = 0; i < items * len; i++) /* cJSON prints 15 significant digits when they round-trip within an ulp */
                if (i % len < len - 1) worst = fmax(worst, fabs(lp2[i] - lp[i]) / fmax(1e-300, fabs(lp[i])));
        }
    }
    double d = median(direct, rounds);
    printf("%-22s %10s %10s %10s %12s %18s\n", "client", "items/s", "of server", "overhead", "server busy", "client CPU ms/item");
    printf("%-22s %10.1f %9.1f%% %10s %11.1f%% %18s\n", "server's own (direct)", d, 100.0, "-", 100.0, "-");
    for (int k = 0; k < N_CONC; k++) {
        double m = median(rate[k], rounds), c = median(cpu[k], rounds), u = median(busy[k], rounds);
        char name[32];
        snprintf(name, sizeof name, "http concurrency %d", conc[k]);
        printf("%-22s %10.1f %9.1f%% %9.1f%% %11.1f%% %18.3f\n", name, m, 100.0 * m / d, 100.0 * (d / m - 1), 100.0 * u, c);
    }
    int bad = !(worst < 1e-12);
    printf("\nlargest relative difference of a log-prob through HTTP vs direct: %.3g (%s)\n", worst,
           bad ? "MORE than JSON's last-digit rounding" : "JSON's last-digit rounding");
    for (int k = 0; k < N_CONC; k++) backend_close(&hb[k]);
    serve_stop(srv);
    for (int i = 0; i < P; i++) backend_close(&b[i]);
    if (model == path) remove(path);
    free(ids), free(lp), free(lp2), free(reqs), free(r2);
    return bad ? 1 : 0;
}
