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
#include "serve/serve.h"
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
    for (int i = j->from; i < j->to && !j->rc; i++)
        j->rc = backend_score(j->b, &j->reqs[i]);
    return NULL;
}

static double thread_cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define N_CONC 4
#define MAX_ROUNDS 64

struct bench {
    int items, len, P, rounds;
    long ncpu;
    struct backend b[32];      /* P local instances, served */
    struct backend hb[N_CONC]; /* the HTTP backend at each concurrency */
    struct backend_score *reqs, *r2;
    double *lp, *lp2;
    int32_t *ids;
    struct server *srv;
    double direct[MAX_ROUNDS], rate[N_CONC][MAX_ROUNDS], cpu[N_CONC][MAX_ROUNDS],
        busy[N_CONC][MAX_ROUNDS], worst;
};

static const int conc[N_CONC] = {1, 4, 8, 16};

/* Seeded windows of token ids; reqs score them into lp, r2 into lp2. */
static int make_windows(struct bench *B, const struct backend_info *info)
{
    size_t n = (size_t)B->items * (size_t)B->len;
    B->ids = malloc(n * sizeof *B->ids);
    B->lp = malloc(n * sizeof *B->lp), B->lp2 = malloc(n * sizeof *B->lp2);
    B->reqs = calloc((size_t)B->items, sizeof *B->reqs),
    B->r2 = calloc((size_t)B->items, sizeof *B->r2);
    if (!B->ids || !B->lp || !B->lp2 || !B->reqs || !B->r2) return -1;
    uint64_t s = 42;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        B->ids[i] = (int32_t)((s >> 33) % (uint64_t)info->n_vocab);
    }
    for (int i = 0; i < B->items; i++) {
        size_t at = (size_t)i * (size_t)B->len;
        B->ids[at] = info->bos >= 0 ? info->bos : B->ids[at];
        B->reqs[i] = (struct backend_score){
            .tokens = B->ids + at, .n_tokens = B->len, .from = 1, .logprob = B->lp + at};
        B->r2[i] = B->reqs[i], B->r2[i].logprob = B->lp2 + at;
    }
    return 0;
}

/* One round: the server's own rate (P threads on P instances, no HTTP),
 * then the HTTP backend at each concurrency. */
static int round_once(struct bench *B, int r)
{
    pthread_t th[32];
    struct job jobs[32];
    double t0 = qg_now_s();
    for (int i = 0; i < B->P; i++) {
        jobs[i] = (struct job){.b = &B->b[i],
                               .reqs = B->reqs,
                               .from = B->items * i / B->P,
                               .to = B->items * (i + 1) / B->P};
        pthread_create(&th[i], NULL, run_job, &jobs[i]);
    }
    for (int i = 0; i < B->P; i++)
        pthread_join(th[i], NULL);
    B->direct[r] = B->items / (qg_now_s() - t0);
    for (int i = 0; i < B->P; i++)
        if (jobs[i].rc) return fprintf(stderr, "direct scoring failed\n"), 70;
    for (int k = 0; k < N_CONC; k++) {
        double c0 = thread_cpu_s(), b0 = serve_busy_seconds(B->srv);
        t0 = qg_now_s();
        if (backend_score_many(&B->hb[k], B->r2, B->items))
            return fprintf(stderr, "%s\n", backend_errmsg(&B->hb[k])), 69;
        double wall = qg_now_s() - t0;
        B->rate[k][r] = B->items / wall;
        B->busy[k][r] = (serve_busy_seconds(B->srv) - b0) / (B->P * wall);
        B->cpu[k][r] = 1e3 * (thread_cpu_s() - c0) / B->items;
        for (int i = 0; i < B->items * B->len;
             i++) /* cJSON prints 15 significant digits when they round-trip within an ulp */
            if (i % B->len < B->len - 1)
                B->worst =
                    fmax(B->worst, fabs(B->lp2[i] - B->lp[i]) / fmax(1e-300, fabs(B->lp[i])));
    }
    return 0;
}

static int print_table(struct bench *B)
{
    double d = bench_median(B->direct, B->rounds);
    printf("%-22s %10s %10s %10s %12s %18s\n", "client", "items/s", "of server", "overhead",
           "server busy", "client CPU ms/item");
    printf("%-22s %10.1f %9.1f%% %10s %11.1f%% %18s\n", "server's own (direct)", d, 100.0, "-",
           100.0, "-");
    for (int k = 0; k < N_CONC; k++) {
        double m = bench_median(B->rate[k], B->rounds), c = bench_median(B->cpu[k], B->rounds),
               u = bench_median(B->busy[k], B->rounds);
        char name[32];
        snprintf(name, sizeof name, "http concurrency %d", conc[k]);
        printf("%-22s %10.1f %9.1f%% %9.1f%% %11.1f%% %18.3f\n", name, m, 100.0 * m / d,
               100.0 * (d / m - 1), 100.0 * u, c);
    }
    int bad = !(B->worst < 1e-12);
    printf("\nlargest relative difference of a log-prob through HTTP vs direct: %.3g (%s)\n",
           B->worst, bad ? "MORE than JSON's last-digit rounding" : "JSON's last-digit rounding");
    return bad;
}

/* Options; 0, or 64 after printing the usage. */
static int parse_args(int argc, char **argv, struct bench *B, const char **model)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--items") && i + 1 < argc)
            B->items = bench_int_arg("--items", argv[++i], 1, 1 << 20);
        else if (!strcmp(argv[i], "--len") && i + 1 < argc)
            B->len = bench_int_arg("--len", argv[++i], 2, 1 << 20);
        else if (!strcmp(argv[i], "--instances") && i + 1 < argc)
            B->P = bench_int_arg("--instances", argv[++i], 1, 32);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            B->rounds = bench_int_arg("--rounds", argv[++i], 1, MAX_ROUNDS);
        else if (argv[i][0] != '-')
            *model = argv[i];
        else
            return fprintf(stderr, "usage: bench_http [MODEL.gguf] [--items N] [--len L] "
                                   "[--instances P] [--rounds R]\n"),
                   64;
    }
    return 0;
}

/* The server on P local instances and the HTTP backends against it. */
static int start(struct bench *B, const char *model, int *port, char *err, size_t errlen)
{
    struct backend_open_params bp = {.n_threads = 1};
    for (int i = 0; i < B->P; i++)
        if (backend_open(model, &bp, &B->b[i], err, errlen))
            return fprintf(stderr, "%s\n", err), 66;
    struct backend_info info;
    backend_info(&B->b[0], &info);
    if (B->len + 1 > info.n_ctx_train) B->len = info.n_ctx_train - 1;
    if (make_windows(B, &info)) return fprintf(stderr, "out of memory\n"), 71;
    struct serve_params sp = {.model_id = "bench"};
    if (serve_start(B->b, B->P, &sp, &B->srv, port, err, errlen))
        return fprintf(stderr, "%s\n", err), 69;
    for (int k = 0; k < N_CONC; k++) {
        char spec[1024];
        snprintf(spec, sizeof spec,
                 "http://127.0.0.1:%d/v1?model=bench&tokenizer=%s&concurrency=%d", *port, model,
                 conc[k]);
        struct backend_open_params hp = {0};
        if (backend_open(spec, &hp, &B->hb[k], err, errlen))
            return fprintf(stderr, "%s\n", err), 69;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static struct bench B;
    const char *model = NULL;
    B.ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    B.items = 256, B.len = 64, B.P = B.ncpu > 1 ? (int)B.ncpu - 1 : 1, B.rounds = 5;
    int code = parse_args(argc, argv, &B, &model);
    if (code) return code;
    char err[QG_ERRMSG_MAX], path[256];
    if (!model) {
        struct synth_params sp = synth_default_params();
        sp.n_vocab = 2048, sp.dim = 256, sp.n_layers = 4, sp.n_heads = 8, sp.n_kv_heads = 4,
        sp.ffn = 512, sp.ctx = 256;
        snprintf(path, sizeof path, "/tmp/qgate-bench-http-%ld.gguf", (long)getpid());
        if (synth_write(&sp, path, err, sizeof err)) return fprintf(stderr, "%s\n", err), 70;
        model = path;
    }
    int port;
    if ((code = start(&B, model, &port, err, sizeof err))) return code;
    printf("bench_http: %s, %d windows of %d tokens, server with %d instance(s) x 1 thread on "
           "127.0.0.1:%d, %ld CPUs,\n"
           "median of %d rounds\n\n",
           model, B.items, B.len, B.P, port, B.ncpu, B.rounds);
    for (int r = 0; r < B.rounds; r++)
        if ((code = round_once(&B, r))) return code;
    int bad = print_table(&B);
    for (int k = 0; k < N_CONC; k++)
        backend_close(&B.hb[k]);
    serve_stop(B.srv);
    for (int i = 0; i < B.P; i++)
        backend_close(&B.b[i]);
    if (model == path) remove(path);
    free(B.ids), free(B.lp), free(B.lp2), free(B.reqs), free(B.r2);
    return bad ? 1 : 0;
}
