/* bench_http — items/s of the HTTP backend against `qgate serve`, next to
 * the server's own compute rate for the same requests.
 *
 * usage: bench_http [MODEL.gguf] [--items N] [--len L] [--instances P]
 *
 * Starts the server in-process on loopback with P model instances (default:
 * the CPU count, one thread each), opens the HTTP backend on it at
 * concurrency 1, 4, 8 and 16, and scores N windows of L token ids (seeded)
 * with backend_score_many. The server's own rate is the same N windows
 * scored directly on P local instances by P threads — what the server could
 * do with no HTTP at all; the ratio is the harness's share. Without a model
 * it generates a synthetic one (dim 256, 4 layers, vocabulary 2048).
 */
#include "backends/backend.h"
#include "backends/synth.h"
#include "harness/serve.h"
#include "harness/status.h"
#include "harness/util.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

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

int main(int argc, char **argv)
{
    const char *model = NULL;
    int items = 256, len = 64, P = (int)sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--items") && i + 1 < argc) items = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--len") && i + 1 < argc) len = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--instances") && i + 1 < argc) P = atoi(argv[++i]);
        else if (argv[i][0] != '-') model = argv[i];
        else return fprintf(stderr, "usage: bench_http [MODEL.gguf] [--items N] [--len L] [--instances P]\n"), 64;
    }
    if (P < 1) P = 1;
    if (P > 32) P = 32;
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
    struct backend_score *reqs = calloc((size_t)items, sizeof *reqs);
    if (!ids || !lp || !lp2 || !reqs) return fprintf(stderr, "out of memory\n"), 71;
    uint64_t s = 42;
    for (int i = 0; i < items * len; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((s >> 33) % (uint64_t)info.n_vocab);
    }
    for (int i = 0; i < items; i++) {
        ids[i * len] = info.bos >= 0 ? info.bos : ids[i * len];
        reqs[i] = (struct backend_score){.tokens = ids + (size_t)i * len, .n_tokens = len, .from = 1, .logprob = lp + (size_t)i * len};
    }
    /* the server's own rate: P threads on P instances, no HTTP */
    pthread_t th[32];
    struct job jobs[32];
    double t0 = now_s();
    for (int i = 0; i < P; i++) {
        jobs[i] = (struct job){.b = &b[i], .reqs = reqs, .from = items * i / P, .to = items * (i + 1) / P};
        pthread_create(&th[i], NULL, run_job, &jobs[i]);
    }
    for (int i = 0; i < P; i++) pthread_join(th[i], NULL);
    double direct = items / (now_s() - t0);
    for (int i = 0; i < P; i++)
        if (jobs[i].rc) return fprintf(stderr, "direct scoring failed\n"), 70;

    struct serve_params sp = {.model_id = "bench"};
    struct server *srv;
    int port;
    if (serve_start(b, P, &sp, &srv, &port, err, sizeof err)) return fprintf(stderr, "%s\n", err), 69;
    printf("bench_http: %s, %d windows of %d tokens, server with %d instance(s) x 1 thread on 127.0.0.1:%d\n\n", model, items, len,
           P, port);
    printf("%-22s %12s %12s\n", "client", "items/s", "of server");
    printf("%-22s %12.1f %11.1f%%\n", "server's own (direct)", direct, 100.0);
    int conc[] = {1, 4, 8, 16};
    double worst = 0;
    for (int k = 0; k < 4; k++) {
        char spec[1024];
        snprintf(spec, sizeof spec, "http://127.0.0.1:%d/v1?model=bench&tokenizer=%s&concurrency=%d", port, model, conc[k]);
        struct backend hb;
        struct backend_open_params hp = {0};
        if (backend_open(spec, &hp, &hb, err, sizeof err)) return fprintf(stderr, "%s\n", err), 69;
        struct backend_score *r2 = calloc((size_t)items, sizeof *r2);
        for (int i = 0; i < items; i++) r2[i] = reqs[i], r2[i].logprob = lp2 + (size_t)i * len;
        t0 = now_s();
        int rc = backend_score_many(&hb, r2, items);
        double rate = items / (now_s() - t0);
        if (rc) return fprintf(stderr, "%s\n", backend_errmsg(&hb)), 69;
        for (int i = 0; i < items * len; i++) /* cJSON prints 15 significant digits when they round-trip within an ulp */
            if (i % len < len - 1) worst = fmax(worst, fabs(lp2[i] - lp[i]) / fmax(1e-300, fabs(lp[i])));
        char name[32];
        snprintf(name, sizeof name, "http concurrency %d", conc[k]);
        printf("%-22s %12.1f %11.1f%%\n", name, rate, 100.0 * rate / direct);
        free(r2);
        backend_close(&hb);
    }
    int bad = !(worst < 1e-12);
    printf("\nlargest relative difference of a log-prob through HTTP vs direct: %.3g (%s)\n", worst,
           bad ? "MORE than JSON's last-digit rounding" : "JSON's last-digit rounding");
    serve_stop(srv);
    for (int i = 0; i < P; i++) backend_close(&b[i]);
    if (model == path) remove(path);
    free(ids), free(lp), free(lp2), free(reqs);
    return bad ? 1 : 0;
}
