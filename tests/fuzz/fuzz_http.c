/* fuzz_http — libFuzzer target for qgate's network parsers: the first byte
 * picks where the rest goes.
 *   0-3: the body of a POST to a real `qgate serve` server (in-process, on
 *        loopback, over a generated model): /v1/completions,
 *        /v1/chat/completions, /tokenize, /detokenize;
 *   4-191: a /completions answer as the HTTP backend reads it when scoring;
 *   192+: a /tokenize answer as the HTTP backend reads it.
 * Build and run with QG_FUZZ_TARGET=http tests/fuzz/run.sh SECONDS. */
#include "backends/backend.h"
#include "backends/http/http.h"
#include "backends/synth.h"
#include "serve/serve.h"
#include "core/util.h"

#include <curl/curl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct backend model;
static struct server *srv;
static int port;
static CURL *curl;

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
    (void)p, (void)ud;
    return size * n;
}

static int setup(void)
{
    char err[QG_ERRMSG_MAX], path[64];
    struct synth_params sp = synth_default_params();
    sp.ctx = 64;
    snprintf(path, sizeof path, "/tmp/qgate-fuzz-http-%ld.gguf", (long)getpid());
    struct backend_open_params bp = {.n_threads = 1};
    struct serve_params p = {.model_id = "fuzz", .max_body = 1 << 20};
    if (synth_write(&sp, path, err, sizeof err) ||
        backend_open(path, &bp, &model, err, sizeof err) ||
        serve_start(&model, 1, &p, &srv, &port, err, sizeof err)) {
        fprintf(stderr, "fuzz_http setup: %s\n", err);
        abort();
    }
    remove(path);
    curl = curl_easy_init();
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 20L);
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) ready = setup();
    if (size < 1) return 0;
    int which = data[0];
    const char *body = (const char *)data + 1;
    size_t n = size - 1;
    if (which < 4) {
        static const char *const paths[] = {"/v1/completions", "/v1/chat/completions", "/tokenize",
                                            "/detokenize"};
        char url[128];
        snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, paths[which]);
        curl_easy_setopt(curl, CURLOPT_URL, url);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)n);
        if (curl_easy_perform(curl) != CURLE_OK) abort(); /* the server must always answer */
        return 0;
    }
    /* an exact-size heap copy so that AddressSanitizer sees any overread */
    char *copy = malloc(n ? n : 1);
    if (!copy) return 0;
    if (n) memcpy(copy, body, n);
    if (which >= 192) {
        int32_t *tids = NULL;
        int64_t nt = 0;
        char terr[QG_ERRMSG_MAX];
        if (http_parse_tokenize(copy, n, which & 1 ? 320 : 0, &tids, &nt, terr, sizeof terr) ==
            QG_ERR_INTERNAL)
            abort();
        free(tids);
        free(copy);
        return 0;
    }
    int32_t ids[8] = {1, 5, 9, 13, 17, 21, 25, 29};
    double lp[8];
    int32_t top_ids[8 * 3];
    float top_lp[8 * 3];
    struct backend_score r = {.tokens = ids,
                              .n_tokens = 1 + which % 8,
                              .from = 1,
                              .logprob = lp,
                              .top_k = which & 2 ? 3 : 0,
                              .top_ids = top_ids,
                              .top_lp = top_lp};
    if (r.n_tokens < 2) r.n_tokens = 2;
    char err[QG_ERRMSG_MAX];
    (void)http_parse_score(copy, n, which & 1, &r, err, sizeof err);
    free(copy);
    return 0;
}
