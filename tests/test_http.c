/* Tests of `qgate serve` (serve/serve.c) and the HTTP backend
 * (backends/http/http.c) against each other: a real server on loopback,
 * real HTTP through libcurl, a generated model. */
#include "backends/backend.h"
#include "backends/ggml_types.h"
#include "backends/http/http.h"
#include "backends/synth.h"
#include "datasets/hash.h"
#include "datasets/reader.h"
#include "serve/serve.h"
#include "core/status.h"
#include "core/util.h"
#include "serve/serve_fmt.h"
#include "tests/test.h"
#include "core/utf8.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/time.h>

#define SECRET "qgate-test-secret-7f3a9c"

static size_t collect(char *p, size_t size, size_t n, void *ud)
{
    sbuf_append(ud, p, size * n);
    return size * n;
}

/* One request; returns the HTTP status (or -1), body in *out (malloc'd). */
static long http(const char *url, const char *body, const char *bearer, char **out)
{
    CURL *c = curl_easy_init();
    struct sbuf b;
    sbuf_init(&b, (size_t)1 << 28);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    char auth[256];
    if (bearer) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", bearer);
        h = curl_slist_append(h, auth);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (body) curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
    long code = -1;
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    *out = qg_strdup(b.data ? b.data : "");
    sbuf_release(&b);
    return code;
}

static int synth_model(const char *name)
{
    struct synth_params p = synth_default_params();
    char err[QG_ERRMSG_MAX];
    return synth_write(&p, t_path(name), err, sizeof err);
}

struct srv {
    struct backend b;
    struct server *s;
    int port;
};

static int srv_idle_s;        /* 0: the server's default idle timeout */
static size_t srv_body_total; /* 0: the server's default cap of bodies held at once */
static int srv_latency_ms;    /* every POST takes at least this long: overlap is then certain */

static int srv_start_model(struct srv *v, const char *file, const char *faults, const char *key)
{
    char err[QG_ERRMSG_MAX];
    struct backend_open_params bp = {0};
    int rc = backend_open(t_path(file), &bp, &v->b, err, sizeof err);
    if (rc) return printf("%s\n", err), rc;
    struct serve_params sp = {
        .model_id = "tiny",
        .api_key = key,
        .idle_timeout_s = srv_idle_s,
        .body_grace_s = srv_idle_s ? 1 : 0,
        .max_body = 1 << 20,
        .max_body_total = srv_body_total,
        .testing = {
            .faults = faults, .fault_seed = 7, .stall_ms = 1500, .min_latency_ms = srv_latency_ms}};
    rc = serve_start(&v->b, 1, &sp, &v->s, &v->port, err, sizeof err);
    if (rc) printf("%s\n", err);
    return rc;
}

static int srv_start(struct srv *v, const char *faults, const char *key)
{
    return srv_start_model(v, "m.gguf", faults, key);
}

static void srv_stop(struct srv *v)
{
    serve_stop(v->s);
    backend_close(&v->b);
}

TEST(serve_endpoints, e2e)
{
    ASSERT_OK(synth_model("m.gguf"));
    struct srv v;
    ASSERT_OK(srv_start(&v, NULL, NULL));
    char url[256], *out;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/health", v.port);
    ASSERT_EQ(http(url, NULL, NULL, &out), 200);
    ASSERT_CONTAINS(out, "\"ok\"");
    free(out);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/models", v.port);
    ASSERT_EQ(http(url, NULL, NULL, &out), 200);
    ASSERT_CONTAINS(out, "\"id\":\"tiny\"");
    free(out);
    /* tokenize agrees with the backend */
    snprintf(url, sizeof url, "http://127.0.0.1:%d/tokenize", v.port);
    ASSERT_EQ(http(url, "{\"content\":\"the girl saw the ball\"}", NULL, &out), 200);
    int32_t *ids = NULL; /* tok_encode appends */
    int64_t n = 0;
    ASSERT_OK(backend_tokenize(&v.b, "the girl saw the ball", 21, 1, &ids, &n));
    cJSON *j = cJSON_Parse(out), *t = cJSON_GetObjectItem(j, "tokens");
    ASSERT_EQ(cJSON_GetArraySize(t), n);
    for (int64_t i = 0; i < n; i++)
        ASSERT_EQ((int32_t)cJSON_GetArrayItem(t, (int)i)->valuedouble, ids[i]);
    cJSON_Delete(j);
    free(out);
    /* echo + logprobs equal the backend's own scores; top-1 of top_logprobs
     * is the best token */
    double lp[64];
    struct backend_score req = {.tokens = ids, .n_tokens = (int)n, .from = 1, .logprob = lp};
    ASSERT_OK(backend_score(&v.b, &req));
    struct sbuf body;
    sbuf_init(&body, 0);
    sbuf_printf(&body, "{\"model\":\"tiny\",\"prompt\":[");
    for (int64_t i = 0; i < n; i++)
        sbuf_printf(&body, "%s%d", i ? "," : "", ids[i]);
    sbuf_printf(&body, "],\"echo\":true,\"logprobs\":3,\"max_tokens\":0}");
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/completions", v.port);
    ASSERT_EQ(http(url, body.data, NULL, &out), 200);
    sbuf_release(&body);
    j = cJSON_Parse(out);
    const cJSON *l =
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "logprobs");
    const cJSON *tl = cJSON_GetObjectItem(l, "token_logprobs"),
                *top = cJSON_GetObjectItem(l, "top_logprobs");
    ASSERT_EQ(cJSON_GetArraySize(tl), n);
    ASSERT(cJSON_IsNull(cJSON_GetArrayItem(tl, 0)));
    for (int64_t i = 1; i < n; i++) {
        ASSERT_NEAR(cJSON_GetArrayItem(tl, (int)i)->valuedouble, lp[i - 1], 1e-12);
        const cJSON *ti = cJSON_GetArrayItem(top, (int)i), *e;
        ASSERT(cJSON_GetArraySize(ti) >= 1 && cJSON_GetArraySize(ti) <= 3);
        double best = -INFINITY;
        cJSON_ArrayForEach(e, ti) best = fmax(best, e->valuedouble);
        ASSERT(best >= lp[i - 1] - 1e-6); /* the top entry is at least the actual token's */
    }
    cJSON_Delete(j);
    free(out);
    free(ids);
    /* sampling parameters are range-checked before use (a fuzzer found
     * "seed": -3 converted to an unsigned integer) */
    ASSERT_EQ(http(url, "{\"prompt\":\"the\",\"max_tokens\":2,\"seed\":-3,\"temperature\":0.9}",
                   NULL, &out),
              200);
    free(out);
    ASSERT_EQ(http(url, "{\"prompt\":\"the\",\"max_tokens\":2,\"seed\":1.5}", NULL, &out), 400);
    ASSERT_CONTAINS(out, "seed\\\" must be an integer");
    free(out);
    ASSERT_EQ(http(url, "{\"prompt\":\"the\",\"max_tokens\":2,\"temperature\":1e300}", NULL, &out),
              400);
    free(out);
    ASSERT_EQ(http(url, "{\"prompt\":\"the\",\"max_tokens\":2,\"top_p\":-1e300}", NULL, &out), 400);
    free(out);
    /* greedy generation is deterministic */
    char *a, *b;
    ASSERT_EQ(http(url, "{\"prompt\":\"the girl\",\"max_tokens\":8,\"temperature\":0}", NULL, &a),
              200);
    ASSERT_EQ(http(url, "{\"prompt\":\"the girl\",\"max_tokens\":8,\"temperature\":0}", NULL, &b),
              200);
    j = cJSON_Parse(a);
    ASSERT_EQ((int)cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), "completion_tokens")
                      ->valuedouble <= 8,
              1);
    cJSON_Delete(j);
    cJSON *ja = cJSON_Parse(a), *jb = cJSON_Parse(b);
    ASSERT_STR_EQ(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(ja, "choices"), 0), "text")
            ->valuestring,
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(jb, "choices"), 0), "text")
            ->valuestring);
    cJSON_Delete(ja), cJSON_Delete(jb), free(a), free(b);
    /* chat: the documented template, a chat.completion answer; the HTTP
     * backend's chat=1 generation returns the same reply */
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/chat/completions", v.port);
    ASSERT_EQ(http(url,
                   "{\"messages\":[{\"role\":\"user\",\"content\":\"the "
                   "girl\"}],\"max_tokens\":6,\"temperature\":0}",
                   NULL, &a),
              200);
    ja = cJSON_Parse(a);
    ASSERT_STR_EQ(cJSON_GetObjectItem(ja, "object")->valuestring, "chat.completion");
    const cJSON *msg =
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(ja, "choices"), 0), "message");
    ASSERT_STR_EQ(cJSON_GetObjectItem(msg, "role")->valuestring, "assistant");
    char spec[4400], err[QG_ERRMSG_MAX];
    snprintf(spec, sizeof spec, "http://127.0.0.1:%d/v1?model=tiny&tokenizer=%s&chat=1", v.port,
             t_path("m.gguf"));
    struct backend hb;
    struct backend_open_params hp = {0};
    ASSERT_OK(backend_open(spec, &hp, &hb, err, sizeof err));
    int32_t *pids = NULL;
    int64_t np = 0;
    ASSERT_OK(backend_tokenize(&hb, "the girl", 8, 0, &pids, &np));
    struct backend_gen_params gp = {.max_tokens = 6, .temperature = 0, .top_p = 1};
    char *reply = NULL;
    ASSERT_OK(backend_generate(&hb, pids, np, &gp, &reply, NULL, NULL));
    ASSERT_STR_EQ(reply, cJSON_GetObjectItem(msg, "content")->valuestring);
    free(reply), free(pids), cJSON_Delete(ja), free(a);
    backend_close(&hb);

    /* bad requests: OpenAI-style error bodies */
    struct {
        const char *path, *body;
        long code;
        const char *msg;
    } bad[] = {
        {"/v1/completions", "not json", 400, "not a JSON object"},
        {"/v1/completions", "{\"model\":\"other\",\"prompt\":\"x\"}", 404,
         "model 'other' is not served here"},
        {"/v1/completions", "{\"prompt\":[1,99999]}", 400, "prompt token 1 is not a token id"},
        {"/v1/completions", "{\"prompt\":\"x\",\"logprobs\":99}", 400,
         "\\\"logprobs\\\" must be an integer 0..20"},
        {"/v1/completions", "{\"prompt\":\"x\",\"n\":2}", 400, "only \\\"n\\\": 1"},
        {"/v1/nothing", "{}", 404, "no endpoint POST /v1/nothing"},
        {"/detokenize", "{\"tokens\":[-1]}", 400, "token 0 is not a token id"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}", 400,
         "each message needs"},
        {"/v1/chat/completions", "{\"messages\":[]}", 400, "must be a non-empty array"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(url, sizeof url, "http://127.0.0.1:%d%s", v.port, bad[i].path);
        long code = http(url, bad[i].body, NULL, &out);
        if (code != bad[i].code)
            T_FAIL_("case %zu: HTTP %ld, want %ld: %s", i, code, bad[i].code, out);
        ASSERT_CONTAINS(out, "\"error\":{\"message\":");
        ASSERT_CONTAINS(out, bad[i].msg);
        free(out);
    }
    /* a body over the limit: 413, and the server goes on */
    char *big = malloc((1 << 20) + 64);
    ASSERT(big != NULL);
    memset(big, ' ', (1 << 20) + 63);
    big[(1 << 20) + 63] = '\0';
    big[0] = '{', big[(1 << 20) + 62] = '}';
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/completions", v.port);
    ASSERT_EQ(http(url, big, NULL, &out), 413);
    ASSERT_CONTAINS(out, "request body over 1048576 bytes");
    free(out);
    free(big);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/health", v.port);
    ASSERT_EQ(http(url, NULL, NULL, &out), 200);
    free(out);
    int64_t nreq;
    serve_counts(v.s, &nreq, NULL);
    ASSERT(nreq >= 12);
    srv_stop(&v);
    return 0;
}

/* A suite of a perplexity task and a multiple-choice task over text the
 * synthetic model's vocabulary covers. */
static int write_suite(void)
{
    struct sbuf d;
    sbuf_init(&d, 0);
    static const char *const w[] = {"ball", "tree", "dog", "cat", "sun", "box"};
    for (int i = 0; i < 24; i++)
        sbuf_printf(
            &d,
            "{\"q\":\"the girl saw the %s and\",\"c\":[\"a %s\",\"the %s\",\"one %s\"],\"g\":%d}\n",
            w[i % 6], w[(i + 1) % 6], w[(i + 2) % 6], w[(i + 3) % 6], i % 3);
    int rc = t_write_file(t_path("mc.jsonl"), d.data, d.len);
    sbuf_release(&d);
    sbuf_init(&d, 0);
    for (int i = 0; i < 30; i++)
        sbuf_printf(&d, "the girl saw the %s and the %s ran to the %s.\n", w[i % 6], w[(i * 5) % 6],
                    w[(i + 4) % 6]);
    if (!rc) rc = t_write_file(t_path("text.txt"), d.data, d.len);
    sbuf_release(&d);
    char s1[65], s2[65], err[QG_ERRMSG_MAX], suite[2048];
    if (!rc) rc = hash_sha256_file(t_path("mc.jsonl"), s1, err, sizeof err);
    if (!rc) rc = hash_sha256_file(t_path("text.txt"), s2, err, sizeof err);
    snprintf(suite, sizeof suite,
             "{\"name\":\"h\",\"tasks\":[{\"name\":\"ppl\",\"kind\":\"perplexity\",\"data\":\"text."
             "txt\",\"sha256\":\"%s\","
             "\"protocol\":\"rolling\",\"ctx\":48},{\"name\":\"mc\",\"kind\":\"custom\",\"data\":"
             "\"mc.jsonl\",\"sha256\":\"%s\","
             "\"fields\":{\"context\":\"q\",\"choices\":\"c\",\"gold\":\"g\"}}]}",
             s2, s1);
    return rc ? rc : t_write_file(t_path("suite.json"), suite, strlen(suite));
}

/* Per-item (nll, correct) of model name in db, in (task, idx) order. */
static int items_of(const char *db, const char *name, double *nll, int *correct, int cap)
{
    sqlite3 *h;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) return -1;
    sqlite3_stmt *st;
    sqlite3_prepare_v2(h,
                       "SELECT i.nll, i.correct FROM items i JOIN trials t ON t.id=i.trial_id JOIN "
                       "models m ON m.id=t.model_id "
                       "WHERE m.name=? AND t.repeat=0 ORDER BY t.task_id, i.idx",
                       -1, &st, NULL);
    sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
    int n = 0;
    while (sqlite3_step(st) == SQLITE_ROW && n < cap) {
        nll[n] = sqlite3_column_double(st, 0);
        correct[n] = sqlite3_column_type(st, 1) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 1);
        n++;
    }
    sqlite3_finalize(st);
    sqlite3_close(h);
    return n;
}

static int run_http(int port, const char *db, const char *extra, struct t_out *o)
{
    char cpu[4400], web[4400];
    snprintf(cpu, sizeof cpu, "cpu=%s", t_path("m.gguf"));
    snprintf(web, sizeof web, "http=http://127.0.0.1:%d/v1?model=tiny&tokenizer=%s%s", port,
             t_path("m.gguf"), extra);
    return t_qgate(o, "run", "--suite", t_path("suite.json"), "--model", cpu, "--model", web,
                   "--db", db, NULL);
}

static int run_http_only(int port, const char *db, const char *flag, struct t_out *o)
{
    char web[4400];
    snprintf(web, sizeof web, "http=http://127.0.0.1:%d/v1?model=tiny&tokenizer=%s", port,
             t_path("m.gguf"));
    return t_qgate(o, "run", "--suite", t_path("suite.json"), "--model", web, "--db", db, flag,
                   NULL);
}

/* How many different summed NLLs the runs of the database hold (-1 on error). */
static int distinct_run_totals(const char *db)
{
    sqlite3 *h;
    sqlite3_stmt *st = NULL;
    int n = -1;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(
            h,
            "SELECT count(DISTINCT printf('%.17g', total)) FROM (SELECT t.run_id, "
            "sum(i.nll) AS total FROM items i JOIN trials t ON t.id=i.trial_id GROUP "
            "BY t.run_id)",
            -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return n;
}

TEST(http_response_cache, e2e)
{
    ASSERT_OK(synth_model("m.gguf"));
    ASSERT_OK(write_suite());
    struct srv v;
    ASSERT_OK(srv_start(&v, NULL, NULL));
    char db[4200];
    snprintf(db, sizeof db, "%s", t_path("c.db"));
    struct t_out o;
    int64_t n0, n1, n2, n3;
    serve_counts(v.s, &n0, NULL);
    ASSERT_OK(run_http_only(v.port, db, NULL, &o));
    ASSERT_EQ(o.code, 0);
    t_out_free(&o);
    serve_counts(v.s, &n1, NULL);
    /* the same run again: every scoring answer comes from the store; only
     * the model list, /props (the context), the tokenizer check and the
     * live fingerprint probe reach the server */
    ASSERT_OK(run_http_only(v.port, db, NULL, &o));
    ASSERT_EQ(o.code, 0);
    t_out_free(&o);
    serve_counts(v.s, &n2, NULL);
    printf("first run %lld requests, repeated run %lld\n", (long long)(n1 - n0),
           (long long)(n2 - n1));
    ASSERT(n1 - n0 > 50);
    ASSERT_EQ(n2 - n1, 4);
    /* --no-cache asks the server again */
    ASSERT_OK(run_http_only(v.port, db, "--no-cache", &o));
    ASSERT_EQ(o.code, 0);
    t_out_free(&o);
    serve_counts(v.s, &n3, NULL);
    ASSERT(n3 - n2 >= n1 - n0); /* more: the first run already reused answers to repeated windows */
    srv_stop(&v);
    /* and all three runs stored the same rows */
    ASSERT_EQ(distinct_run_totals(db), 1);
    return 0;
}

/* Repeats ask the server again (its noise is what they measure); an
 * identical rerun is still served from the cache. */
TEST(http_repeats_bypass_the_cache, e2e)
{
    ASSERT_OK(synth_model("m.gguf"));
    ASSERT_OK(write_suite());
    struct srv v;
    ASSERT_OK(srv_start(&v, NULL, NULL));
    char db[4200];
    snprintf(db, sizeof db, "%s", t_path("r.db"));
    struct t_out o;
    int64_t n0, n1, n2;
    serve_counts(v.s, &n0, NULL);
    ASSERT_OK(run_http_only(v.port, db, NULL, &o)); /* repeat 0 only: fills the cache */
    ASSERT_EQ(o.code, 0);
    t_out_free(&o);
    serve_counts(v.s, &n1, NULL);
    char web[4400];
    snprintf(web, sizeof web, "http=http://127.0.0.1:%d/v1?model=tiny&tokenizer=%s", v.port,
             t_path("m.gguf"));
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("suite.json"), "--model", web, "--db", db,
                      "--repeats", "2", NULL));
    ASSERT_EQ(o.code, 0);
    t_out_free(&o);
    serve_counts(v.s, &n2, NULL);
    printf("repeat 0: %lld requests; repeats 0 and 1 with repeat 0 cached: %lld\n",
           (long long)(n1 - n0), (long long)(n2 - n1));
    /* repeat 0 came from the cache (3 requests: models, tokenizer, probe);
     * repeat 1 asked the server for every window and item again */
    ASSERT(n2 - n1 >= n1 - n0);
    int64_t n3;
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("suite.json"), "--model", web, "--db", db,
                      "--repeats", "2", NULL));
    ASSERT_EQ(o.code, 0);
    t_out_free(&o);
    serve_counts(v.s, &n3, NULL);
    ASSERT_EQ(n3 - n2, 4); /* the identical rerun: both repeats from the cache (open: 4) */
    srv_stop(&v);
    return 0;
}

/* A GSM8K-format file (question, answer with "#### N") of n items. */
static int write_gsm8k(const char *name, int n)
{
    struct sbuf d;
    sbuf_init(&d, 0);
    for (int i = 0; i < n; i++)
        sbuf_printf(&d,
                    "{\"question\":\"The girl saw %d dogs and the boy saw %d more dogs in the "
                    "park near the big tree. How many dogs did they see?\",\"answer\":\"They "
                    "saw %d + %d = %d dogs.\\n#### %d\"}\n",
                    i + 2, i + 3, i + 2, 2 * i + 5, 3 * i + 7, 3 * i + 7);
    int rc = t_write_file(t_path(name), d.data, d.len);
    sbuf_release(&d);
    return rc;
}

/* A suite of a GSM8K task and a custom exact-match task (generation only). */
static int write_gen_suite(int max_tokens)
{
    char s1[65], s2[65], err[QG_ERRMSG_MAX], suite[2048];
    static const char ex[] = "{\"id\":\"a\",\"prompt\":\"the girl saw the\",\"answer\":\"dog\"}\n"
                             "{\"id\":\"b\",\"prompt\":\"the boy saw the\",\"answer\":\"cat\"}\n";
    int rc = write_gsm8k("gsm.jsonl", 6);
    if (!rc) rc = t_write_file(t_path("ex.jsonl"), ex, strlen(ex));
    if (!rc) rc = hash_sha256_file(t_path("gsm.jsonl"), s1, err, sizeof err);
    if (!rc) rc = hash_sha256_file(t_path("ex.jsonl"), s2, err, sizeof err);
    snprintf(suite, sizeof suite,
             "{\"name\":\"g\",\"tasks\":[{\"name\":\"gsm8k\",\"benchmark\":\"gsm8k\","
             "\"data\":\"gsm.jsonl\",\"sha256\":\"%s\",\"max_tokens\":%d},{\"name\":\"exact\","
             "\"kind\":\"custom\",\"data\":\"ex.jsonl\",\"sha256\":\"%s\",\"fields\":{\"id\":"
             "\"id\",\"prompt\":\"prompt\",\"answer\":\"answer\"},\"max_tokens\":4}]}",
             s1, max_tokens, s2);
    return rc ? rc : t_write_file(t_path("gen.json"), suite, strlen(suite));
}

/* Issue 32, items 1, 3 and 4: the context a request really gets is read
 * from the server (llama-server's /props: one slot's -c / -np) and prompts
 * are fitted to it, so nothing is cut behind qgate's back; a server whose
 * /props is stale cuts them anyway, which usage.prompt_tokens shows: the
 * run stops (65) naming the item, and stores no result as done. What was
 * detected (server, fingerprint, route, context and its source) is
 * printed, stored with the model and shown; the effective max_tokens is
 * recorded. */
TEST(http_context_from_the_server, e2e)
{
    ASSERT_OK(synth_model("m.gguf"));
    ASSERT_OK(write_gen_suite(16));
    struct srv v;
    ASSERT_OK(srv_start(&v, "llama-server,slot-ctx:40", NULL));
    char db[4200], web[4400];
    snprintf(db, sizeof db, "%s", t_path("c.db"));
    snprintf(web, sizeof web, "ls=http://127.0.0.1:%d/v1", v.port);
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("gen.json"), "--model", web, "--db", db, NULL));
    if (o.code) T_FAIL_("run: exit %d: %s", o.code, o.err);
    ASSERT_CONTAINS(o.err, "serves 'tiny' (llama-server b4748-c392e5094, b4748-c392e5094)");
    ASSERT_CONTAINS(o.err, "scoring route: none: generation only; context 39 (/props "
                           "default_generation_settings.n_ctx)");
    t_out_free(&o);
    ASSERT_EQ(t_sql_int(db, "SELECT count(*) FROM models WHERE backend = 'http' AND format = "
                            "'remote' AND json_extract(provenance_json, '$.ctx') = 39 AND "
                            "json_extract(provenance_json, '$.system_fingerprint') = "
                            "'b4748-c392e5094'"),
              1);
    ASSERT_EQ(t_sql_int(db, "SELECT count(*) FROM trials t JOIN tasks k ON k.id = t.task_id "
                            "WHERE k.name = 'gsm8k' AND json_extract(t.metrics_json, "
                            "'$.max_tokens') = 16"),
              1);
    ASSERT_OK(t_qgate(&o, "report", "--run", "1", "--candidate", "ls", "--baseline", "ls",
                      "--format", "json", "--db", db, NULL));
    ASSERT_CONTAINS(o.out, "\"route\":\t\"none: generation only\"");
    ASSERT_CONTAINS(o.out, "\"ctx_source\":\t\"/props default_generation_settings.n_ctx\"");
    t_out_free(&o);
    ASSERT_OK(t_qgate(&o, "show", "1", "--db", db, NULL));
    ASSERT_CONTAINS(o.out, "server llama-server b4748-c392e5094, fingerprint b4748-c392e5094");
    ASSERT_CONTAINS(o.out, "context 39 (/props default_generation_settings.n_ctx)");
    t_out_free(&o);
    /* ctx=N larger than the server's: the server's wins */
    char big[4500];
    snprintf(big, sizeof big, "%s?ctx=4096", web);
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("gen.json"), "--model", big, "--db", db, NULL));
    ASSERT_EQ(o.code, 0);
    ASSERT_CONTAINS(o.err, "context 39 (/props");
    t_out_free(&o);
    srv_stop(&v);
    /* a server whose /props does not say what a slot has: caught by usage */
    ASSERT_OK(srv_start(&v, "llama-server,slot-ctx:40,stale-props", NULL));
    snprintf(web, sizeof web, "ls=http://127.0.0.1:%d/v1", v.port);
    long long runs = t_sql_int(db, "SELECT count(*) FROM runs");
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("gen.json"), "--model", web, "--db", db, NULL));
    ASSERT_EQ(o.code, 65);
    ASSERT_CONTAINS(o.err, "task 'gsm8k', item ");
    ASSERT_CONTAINS(o.err, "prompt tokens of the");
    ASSERT_CONTAINS(o.err, "truncated the prompt or shifted its context");
    t_out_free(&o);
    ASSERT_EQ(t_sql_int(db, "SELECT count(*) FROM runs"), runs + 1);
    ASSERT_EQ(t_sql_int(db, "SELECT count(*) FROM trials t WHERE t.run_id = (SELECT max(id) FROM "
                            "runs) AND t.status = 2"),
              0);
    srv_stop(&v);
    return 0;
}

/* Against a server answering as llama.cpp's llama-server: "Unsupported
 * param: echo" (HTTP 500) is a capability, not a failure. Log-likelihood
 * tasks are refused at once, generation tasks run, tokenize works. */
TEST(http_llama_server_capabilities, e2e)
{
    ASSERT_OK(synth_model("m.gguf"));
    ASSERT_OK(write_suite());
    ASSERT_OK(write_gen_suite(16));
    struct srv v;
    ASSERT_OK(srv_start(&v, "llama-server", NULL));
    char db[4200], web[4400];
    snprintf(db, sizeof db, "%s", t_path("l.db"));
    snprintf(web, sizeof web, "ls=http://127.0.0.1:%d/v1", v.port);
    struct t_out o;
    /* refused, not retried: as many requests as with retries=0 (counted on
     * the server, not timed) */
    int64_t none, requests, faults;
    char once[4500];
    snprintf(once, sizeof once, "%s?retries=0", web);
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("suite.json"), "--model", once, "--db",
                      t_path("once.db"), NULL));
    ASSERT_EQ(o.code, 69);
    t_out_free(&o);
    serve_counts(v.s, &none, &faults);
    ASSERT_OK(
        t_qgate(&o, "run", "--suite", t_path("suite.json"), "--model", web, "--db", db, NULL));
    serve_counts(v.s, &requests, &faults);
    requests -= none;
    printf("perplexity suite against llama-server: exit %d after %lld requests (%lld with "
           "retries=0)\n%s",
           o.code, (long long)requests, (long long)none, o.err);
    ASSERT_EQ(o.code, 69);
    ASSERT_EQ(requests, none);
    ASSERT_CONTAINS(
        o.err,
        "tasks 'ppl' (perplexity), 'mc' (multiple_choice) need the log-probs of prompt tokens");
    ASSERT_CONTAINS(o.err, "Unsupported param: echo");
    t_out_free(&o);
    ASSERT_EQ(t_sql_int(db, "SELECT count(*) FROM trials WHERE status = 2"), 0);
    ASSERT_EQ(t_sql_int(db, "SELECT count(*) FROM runs"), 0);
    /* generation only: GSM8K and exact match run to a verdict */
    char web2[4400];
    snprintf(web2, sizeof web2, "b=http://127.0.0.1:%d/v1", v.port);
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("gen.json"), "--model", web, "--model", web2,
                      "--db", db, NULL));
    if (o.code) T_FAIL_("generation run: exit %d: %s", o.code, o.err);
    t_out_free(&o);
    /* one server's one model under two names: an A/A check, said so */
    ASSERT_OK(t_qgate(&o, "compare", "--baseline", "ls", "--candidate", "b", "--allow-identical",
                      "--db", db, NULL));
    ASSERT(o.code == 0 || o.code == 1 || o.code == 2);
    ASSERT_CONTAINS(o.out, "suite verdict:");
    t_out_free(&o);
    /* tokenize needs only /tokenize */
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1", v.port);
    ASSERT_OK(t_qgate(&o, "tokenize", url, "-p", "the girl saw the dog", NULL));
    ASSERT_EQ(o.code, 0);
    char *remote = qg_strdup(o.out);
    t_out_free(&o);
    ASSERT_OK(t_qgate(&o, "tokenize", t_path("m.gguf"), "-p", "the girl saw the dog", NULL));
    ASSERT_STR_EQ(remote, o.out);
    free(remote);
    t_out_free(&o);
    srv_stop(&v);
    return 0;
}

/* chat=1: the chat template's tokens count against the context, so a
 * prompt fitted to it leaves room for the answer. */
TEST(http_chat_fits_the_template, e2e)
{
    ASSERT_OK(synth_model("m.gguf"));
    ASSERT_OK(write_gen_suite(100)); /* ctx 128: 100 new tokens leave ~28 for the prompt */
    struct srv v;
    ASSERT_OK(srv_start(&v, NULL, NULL));
    char db[4200], web[4400];
    snprintf(db, sizeof db, "%s", t_path("ch.db"));
    snprintf(web, sizeof web, "chat=http://127.0.0.1:%d/v1?model=tiny&chat=1", v.port);
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("gen.json"), "--model", web, "--db", db, NULL));
    if (o.code) T_FAIL_("chat run: exit %d: %s", o.code, o.err);
    t_out_free(&o);
    ASSERT_EQ(t_sql_int(db, "SELECT count(*) FROM trials WHERE status = 2"), 2);
    /* a reserve too small to hold the template fails as it did before */
    snprintf(web, sizeof web, "chat=http://127.0.0.1:%d/v1?model=tiny&chat=1&chat_reserve=0",
             v.port);
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("gen.json"), "--model", web, "--db", db, NULL));
    ASSERT(o.code != 0);
    ASSERT_CONTAINS(o.err, "over the context length");
    t_out_free(&o);
    srv_stop(&v);
    return 0;
}

/* The official OpenAI Node client (tests/sdk, pinned by its lockfile)
 * against `qgate serve`: list, retrieve, completions with echo and
 * log-probs, streaming of both endpoints, batch prompts, chat with
 * log-probs, and the error classes of a bad request, a wrong key and an
 * unknown model. */
TEST(serve_openai_sdk, e2e)
{
    char pkg[4200], script[4200];
    snprintf(pkg, sizeof pkg, "%s/tests/sdk/node_modules/openai/package.json", QG_SOURCE_DIR);
    snprintf(script, sizeof script, "%s/tests/sdk/openai_sdk.mjs", QG_SOURCE_DIR);
    if (!t_have("node")) SKIP("node is not installed (.ci/deps installs Node.js and the SDK)");
    if (access(pkg, R_OK))
        SKIP("the openai npm package is not installed: run 'npm ci --prefix tests/sdk' (.ci/deps "
             "does)");
    ASSERT_OK(synth_model("m.gguf"));
    struct srv v;
    ASSERT_OK(srv_start(&v, NULL, "sk-sdk-test"));
    char base[128];
    snprintf(base, sizeof base, "http://127.0.0.1:%d/v1", v.port);
    const char *argv[] = {"node", script, base, "sk-sdk-test", "tiny", "the girl saw the dog",
                          NULL};
    struct t_out o;
    ASSERT_OK(t_run_argv(&o, argv));
    srv_stop(&v);
    printf("%s%s", o.out, o.err);
    ASSERT_EQ(o.code, 0);
    ASSERT_CONTAINS(o.out, "all SDK checks passed");
    t_out_free(&o);
    return 0;
}

/* Issue 32: the official OpenAI Python client (tests/sdk/.venv, from
 * tests/sdk/requirements.txt; .ci/deps installs it) against `qgate serve`:
 * completions and chat, both streamed with their log-probs, which spell
 * the text; chat ids "chatcmpl-"; typed errors. */
TEST(serve_openai_python_sdk, shared)
{
    const char *real = t_shared("models/stories260K/gguf/stories260K-F32.gguf");
    if (!real || access(real, R_OK))
        SKIP("../shared/models/stories260K is absent (a real vocabulary: its tokens spell the "
             "text, which a random model's byte tokens need not)");
    char py[4200], script[4200];
    snprintf(py, sizeof py, "%s/tests/sdk/.venv/bin/python", QG_SOURCE_DIR);
    snprintf(script, sizeof script, "%s/tests/sdk/openai_sdk.py", QG_SOURCE_DIR);
    if (access(py, X_OK))
        SKIP("tests/sdk/.venv is absent: .ci/deps makes it (python3 -m venv, pip install -r "
             "tests/sdk/requirements.txt from PyPI)");
    const char *check[] = {py, "-c", "import openai", NULL};
    struct t_out o;
    ASSERT_OK(t_run_argv(&o, check));
    int have = o.code == 0;
    t_out_free(&o);
    if (!have) SKIP("the openai package is not in tests/sdk/.venv (PyPI unreachable?)");
    ASSERT_EQ(symlink(real, t_path("real.gguf")), 0);
    struct srv v;
    ASSERT_OK(srv_start_model(&v, "real.gguf", NULL, "sk-sdk-test"));
    char base[128];
    snprintf(base, sizeof base, "http://127.0.0.1:%d/v1", v.port);
    const char *argv[] = {py, script, base, "sk-sdk-test", "tiny", "Once upon a time", NULL};
    ASSERT_OK(t_run_argv(&o, argv));
    srv_stop(&v);
    printf("%s%s", o.out, o.err);
    ASSERT_EQ(o.code, 0);
    ASSERT_CONTAINS(o.out, "all Python SDK checks passed");
    t_out_free(&o);
    return 0;
}

/* The largest relative difference of the per-item NLLs of models a and b
 * in db (their item counts in *n, -1 when they differ), and their
 * correctness agreeing. */
static double worst_item_diff(const char *db, const char *a, const char *b, int *n)
{
    double x[256], y[256];
    int cx[256], cy[256];
    int na = items_of(db, a, x, cx, 256), nb = items_of(db, b, y, cy, 256);
    double worst = 0;
    *n = na == nb ? na : -1;
    for (int i = 0; i < na && na == nb; i++) {
        worst = fmax(worst, fabs(x[i] - y[i]) / fmax(1, fabs(x[i])));
        if (cx[i] != cy[i]) worst = INFINITY;
    }
    return worst;
}

/* Issue 32, item 6: SGLang's and TGI's native scoring routes, against
 * loopback emulations answering in the shapes of their sources (SGLang
 * 0.5 /generate input_token_logprobs, TGI 3.x /generate details.prefill,
 * /info, /tokenize {"inputs"}): detected without api=, they score as the
 * local model does (SGLang: perplexity and multiple choice; TGI, which
 * takes text only: multiple choice, whose prompts round-trip as text). A
 * TGI started without --enable-prefill-logprobs is refused for scoring
 * (69, saying so), and TGI without tokenizer= is a usage error. */
TEST(http_sglang_and_tgi_native_routes, e2e)
{
    ASSERT_OK(synth_model("m.gguf"));
    ASSERT_OK(write_suite());
    struct srv v;
    char db[4200], cpu[4400], web[4400];
    snprintf(db, sizeof db, "%s", t_path("n.db"));
    snprintf(cpu, sizeof cpu, "cpu=%s", t_path("m.gguf"));
    struct t_out o;
    ASSERT_OK(srv_start(&v, "sglang", NULL));
    snprintf(web, sizeof web, "sglang=http://127.0.0.1:%d/v1?model=tiny", v.port);
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("suite.json"), "--model", cpu, "--model", web,
                      "--db", db, NULL));
    if (o.code) T_FAIL_("sglang run: exit %d: %s", o.code, o.err);
    ASSERT_CONTAINS(o.err, "(sglang); scoring route: SGLang /generate input_token_logprobs");
    t_out_free(&o);
    srv_stop(&v);
    int n;
    double w = worst_item_diff(db, "cpu", "sglang", &n);
    printf("SGLang: %d items, largest relative NLL difference %.3g\n", n, w);
    ASSERT(n > 30);
    ASSERT(w < 1e-12); /* measured 2e-16: the same positions in the same batch shape */
    /* TGI: multiple choice, with the served model's tokenizer */
    ASSERT_OK(srv_start(&v, "tgi", NULL));
    snprintf(web, sizeof web, "tgi=http://127.0.0.1:%d/v1?model=tiny&tokenizer=%s", v.port,
             t_path("m.gguf"));
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("suite.json"), "--tasks", "mc", "--model", cpu,
                      "--model", web, "--db", t_path("t.db"), NULL));
    if (o.code) T_FAIL_("tgi run: exit %d: %s", o.code, o.err);
    ASSERT_CONTAINS(o.err, "(text-generation-inference 3.3.6-dev0); scoring route: TGI /generate "
                           "details.prefill, text");
    t_out_free(&o);
    w = worst_item_diff(t_path("t.db"), "cpu", "tgi", &n);
    printf("TGI: %d items, largest relative NLL difference %.3g\n", n, w);
    ASSERT(n >= 20);
    /* measured 3.3e-9: TGI evaluates the whole prompt's log-probs, local
     * multiple choice only the continuation's rows, and the engine's float32
     * output kernels round by the rows' count */
    ASSERT(w < 1e-8);
    snprintf(web, sizeof web, "tgi=http://127.0.0.1:%d/v1?model=tiny", v.port);
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("suite.json"), "--tasks", "mc", "--model", web,
                      "--db", t_path("t2.db"), NULL));
    ASSERT_EQ(o.code, 64);
    ASSERT_CONTAINS(o.err, "give tokenizer=PATH.gguf");
    t_out_free(&o);
    srv_stop(&v);
    ASSERT_OK(srv_start(&v, "tgi-no-prefill", NULL));
    snprintf(web, sizeof web, "tgi=http://127.0.0.1:%d/v1?model=tiny&tokenizer=%s", v.port,
             t_path("m.gguf"));
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("suite.json"), "--tasks", "mc", "--model", web,
                      "--db", t_path("t3.db"), NULL));
    ASSERT_EQ(o.code, 69);
    ASSERT_CONTAINS(o.err, "--enable-prefill-logprobs");
    t_out_free(&o);
    srv_stop(&v);
    return 0;
}

TEST(http_backend_matches_cpu_and_survives_faults, e2e)
{
    ASSERT_OK(synth_model("m.gguf"));
    ASSERT_OK(write_suite());
    struct srv v;
    ASSERT_OK(srv_start(&v, NULL, NULL));
    char db[3][4200];
    for (int i = 0; i < 3; i++)
        snprintf(db[i], sizeof db[i], "%s/h%d.db", t_tmp(), i);
    struct t_out o;
    ASSERT_OK(run_http(v.port, db[0], "", &o));
    if (o.code) T_FAIL_("run: exit %d: %s", o.code, o.err);
    t_out_free(&o);
    srv_stop(&v);
    /* the same per-item scores through the server as on the CPU */
    double a[256], b[256];
    int ca[256], cb[256];
    int na = items_of(db[0], "cpu", a, ca, 256), nb = items_of(db[0], "http", b, cb, 256);
    printf("%d items per model\n", na);
    ASSERT(na > 30);
    ASSERT_EQ(na, nb);
    double worst = 0;
    for (int i = 0; i < na; i++) {
        worst = fmax(worst, fabs(a[i] - b[i]) / fmax(1, fabs(a[i])));
        ASSERT_EQ(ca[i], cb[i]);
    }
    printf("largest relative per-item NLL difference cpu vs http: %.3g\n", worst);
    ASSERT(worst < 1e-5);
    /* and the same verdict: the server's model is the same model */
    ASSERT_OK(
        t_qgate(&o, "compare", "--baseline", "cpu", "--candidate", "http", "--db", db[0], NULL));
    ASSERT_CONTAINS(o.out, "ln_ppl_ratio");
    ASSERT(o.code == 0 || o.code == 2);
    ASSERT(!strstr(o.out, "FAIL"));
    t_out_free(&o);

    /* 20% injected faults: identical rows */
    ASSERT_OK(srv_start(&v, "500:0.05,429:0.04,reset:0.04,stall:0.02,truncate:0.03,malformed:0.02",
                        NULL));
    ASSERT_OK(run_http(v.port, db[1], "&timeout=1", &o));
    if (o.code) T_FAIL_("run with faults: exit %d: %s", o.code, o.err);
    t_out_free(&o);
    int64_t nreq, nfault;
    serve_counts(v.s, &nreq, &nfault);
    printf("faulty server: %lld requests, %lld faults injected\n", (long long)nreq,
           (long long)nfault);
    ASSERT(nfault > 5);
    srv_stop(&v);
    double f[256];
    int cf[256];
    ASSERT_EQ(items_of(db[1], "http", f, cf, 256), nb);
    for (int i = 0; i < nb; i++) {
        ASSERT_EQ(f[i], b[i]);
        ASSERT_EQ(cf[i], cb[i]);
    }

    /* a server that always fails: exit 69 naming the endpoint, no run
     * stored as complete */
    ASSERT_OK(srv_start(&v, "500:1", NULL));
    ASSERT_OK(run_http(v.port, db[2], "&retries=2", &o));
    ASSERT_EQ(o.code, 69);
    ASSERT_CONTAINS(o.err, "no answer after 3 attempts; last: HTTP 500");
    t_out_free(&o);
    srv_stop(&v);
    ASSERT_OK(t_qgate(&o, "runs", "--db", db[2], "--json", NULL));
    ASSERT(!strstr(o.out, "\"done\"") && !strstr(o.out, "complete"));
    t_out_free(&o);
    return 0;
}

TEST(http_api_key_never_leaks, e2e)
{
    ASSERT_OK(synth_model("m.gguf"));
    ASSERT_OK(write_suite());
    struct srv v;
    ASSERT_OK(srv_start(&v, NULL, SECRET));
    char db[4200], bad_db[4200];
    snprintf(db, sizeof db, "%s", t_path("k.db"));
    snprintf(bad_db, sizeof bad_db, "%s", t_path("bad.db"));
    struct t_out o;
    /* the right key, from the variable the spec names */
    setenv("QG_TEST_KEY", SECRET, 1);
    ASSERT_OK(run_http(v.port, db, "&api_key_env=QG_TEST_KEY", &o));
    if (o.code) T_FAIL_("run: exit %d: %s", o.code, o.err);
    ASSERT(!strstr(o.out, SECRET) && !strstr(o.err, SECRET));
    t_out_free(&o);
    /* a wrong key: refused with 69, and neither key is echoed */
    setenv("QG_TEST_KEY", "wrong-" SECRET, 1);
    ASSERT_OK(run_http(v.port, bad_db, "&api_key_env=QG_TEST_KEY", &o));
    ASSERT_EQ(o.code, 69);
    ASSERT_CONTAINS(o.err, "HTTP 401");
    ASSERT(!strstr(o.out, SECRET) && !strstr(o.err, SECRET));
    t_out_free(&o);
    unsetenv("QG_TEST_KEY");
    srv_stop(&v);
    /* not in the store (any byte of it, WAL included), nor in any report */
    ASSERT_OK(t_qgate(&o, "compare", "--baseline", "cpu", "--candidate", "http", "--db", db, NULL));
    t_out_free(&o);
    const char *formats[] = {"text", "md", "html", "json", "junit"};
    for (int i = 0; i < 5; i++) {
        ASSERT_OK(t_qgate(&o, "report", "--db", db, "--format", formats[i], NULL));
        ASSERT_EQ(o.code, 0);
        if (strstr(o.out, SECRET)) T_FAIL_("the API key is in the %s report", formats[i]);
        t_out_free(&o);
    }
    const char *files[] = {db, bad_db};
    for (int i = 0; i < 2; i++) {
        char path[4300];
        for (int k = 0; k < 2; k++) {
            snprintf(path, sizeof path, "%s%s", files[i], k ? "-wal" : "");
            size_t n;
            char *bytes = t_read_file(path, &n);
            if (!bytes) continue;
            ASSERT(memmem(bytes, n, SECRET, strlen(SECRET)) == NULL);
            free(bytes);
        }
    }
    return 0;
}

/* metric of model name's perplexity trial in db (NAN when absent) */
static double trial_metric(const char *db, const char *name, const char *key)
{
    sqlite3 *h;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) return NAN;
    sqlite3_stmt *st;
    double v = NAN;
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT json_extract(t.metrics_json, '$.%s') FROM trials t JOIN models m ON "
             "m.id=t.model_id "
             "JOIN tasks k ON k.id=t.task_id WHERE m.name=? AND k.kind=0 AND t.repeat=0",
             key);
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
            v = sqlite3_column_double(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(h);
    return v;
}

TEST(http_topk_kld_is_a_lower_bound, e2e)
{
    /* baseline F32 locally; the Q4_0 model both locally (full rows) and
     * behind the server (top-20 log-probs) */
    struct synth_params sp = synth_default_params();
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(synth_write(&sp, t_path("m.gguf"), err, sizeof err));
    sp.wtype = GGML_Q4_0;
    ASSERT_OK(synth_write(&sp, t_path("q.gguf"), err, sizeof err));
    ASSERT_OK(write_suite());
    struct srv v;
    ASSERT_OK(srv_start_model(&v, "q.gguf", NULL, NULL));
    char db[4200], ma[4400], mq[4400], mw[4400];
    snprintf(db, sizeof db, "%s", t_path("k.db"));
    snprintf(ma, sizeof ma, "f32=%s", t_path("m.gguf"));
    snprintf(mq, sizeof mq, "q4=%s", t_path("q.gguf"));
    snprintf(mw, sizeof mw, "web=http://127.0.0.1:%d/v1?model=tiny&tokenizer=%s", v.port,
             t_path("m.gguf"));
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("suite.json"), "--model", ma, "--model", mq,
                      "--model", mw, "--db", db, NULL));
    if (o.code) T_FAIL_("run: exit %d: %s", o.code, o.err);
    t_out_free(&o);
    srv_stop(&v);
    double full = trial_metric(db, "q4", "kld_mean"), topk = trial_metric(db, "web", "kld_mean");
    double t1_full = trial_metric(db, "q4", "top1_agree"),
           t1_web = trial_metric(db, "web", "top1_agree");
    printf("KLD mean: full rows %.6g, top-20 through HTTP %.6g; same top-1 %.4f vs %.4f\n", full,
           topk, t1_full, t1_web);
    ASSERT(full > 0 && topk > 0);
    ASSERT(topk <= full * (1 + 1e-6)); /* merging the tail never raises a KL divergence */
    ASSERT_EQ(trial_metric(db, "web", "kld_top_k"), 20);
    ASSERT(isnan(trial_metric(db, "q4", "kld_top_k")));
    ASSERT_NEAR(t1_web, t1_full, 0.01); /* top-1 is exact from top-K (up to float ties) */
    /* the report says which KLD it shows */
    ASSERT_OK(t_qgate(&o, "compare", "--baseline", "f32", "--candidate", "web", "--db", db, NULL));
    ASSERT_CONTAINS(o.out, "(top-K lower bound)");
    t_out_free(&o);
    return 0;
}

TEST(http_refuses_endpoint_without_prompt_logprobs, e2e)
{
    /* a server that gives log-probs of generated tokens only (as some
     * chat-first servers do) must be refused for log-likelihood tasks, never
     * scored as if it had answered */
    ASSERT_OK(synth_model("m.gguf"));
    ASSERT_OK(write_suite());
    struct backend b;
    char err[QG_ERRMSG_MAX];
    struct backend_open_params bp = {0};
    ASSERT_OK(backend_open(t_path("m.gguf"), &bp, &b, err, sizeof err));
    struct serve_params sp = {.model_id = "tiny",
                              .testing = {.no_prompt_logprobs = 1, .no_vllm_prompt_logprobs = 1}};
    struct server *srv;
    int port;
    ASSERT_OK(serve_start(&b, 1, &sp, &srv, &port, err, sizeof err));
    char db[4200];
    snprintf(db, sizeof db, "%s", t_path("n.db"));
    struct t_out o;
    ASSERT_OK(run_http(port, db, "", &o));
    ASSERT_EQ(o.code, 69);
    ASSERT_CONTAINS(o.err, "need the log-probs of prompt tokens");
    ASSERT_CONTAINS(o.err, "this endpoint cannot score prompts");
    ASSERT_CONTAINS(o.err, "Servers that give them: vLLM");
    t_out_free(&o);
    serve_stop(srv);
    backend_close(&b);
    /* nothing of the remote model is stored as done */
    sqlite3 *h;
    ASSERT_EQ(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st;
    ASSERT_EQ(sqlite3_prepare_v2(h,
                                 "SELECT count(*) FROM trials t JOIN models m ON m.id=t.model_id "
                                 "WHERE m.name='http' AND t.status=2",
                                 -1, &st, NULL),
              SQLITE_OK);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    ASSERT_EQ(sqlite3_column_int(st, 0), 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return 0;
}

/* A run of the suite with cpu=m.gguf and one more model per spec; exit code. */
static int run_models(const char *db, const char *const *specs, int n, struct t_out *o)
{
    char cpu[4400];
    snprintf(cpu, sizeof cpu, "cpu=%s", t_path("m.gguf"));
    const char *argv[24] = {"run", "--suite", t_path("suite.json"), "--model", cpu, "--db", db};
    int k = 7;
    for (int i = 0; i < n && k < 22; i++)
        argv[k++] = "--model", argv[k++] = specs[i];
    argv[k] = NULL;
    return t_qgate_argv(o, argv);
}

TEST(http_server_side_tokenizer, e2e)
{
    /* no tokenizer= in the spec: the server tokenizes, detokenizes and names
     * token texts, and every number comes out as with the local tokenizer */
    ASSERT_OK(synth_model("m.gguf"));
    ASSERT_OK(write_suite());
    char err[QG_ERRMSG_MAX];
    struct backend_open_params bp = {0};
    struct backend local;
    ASSERT_OK(backend_open(t_path("m.gguf"), &bp, &local, err, sizeof err));
    struct backend_info li;
    backend_info(&local, &li);
    static const char *const texts[] = {"the girl saw the ball and", "Hello, world! 3 + 4 = 7",
                                        "  two  spaces\nand a line",
                                        "caf\xc3\xa9 \xc3\xbc \xe2\x82\xac", ""};
    for (int mode = 0; mode < 2; mode++) { /* 0: with_pieces; 1: ids only (as vLLM) */
        struct serve_params sp = {.model_id = "tiny", .testing = {.plain_tokenize = mode}};
        struct server *srv;
        int port;
        ASSERT_OK(serve_start(&local, 1, &sp, &srv, &port, err, sizeof err));
        char spec[256];
        snprintf(spec, sizeof spec, "http://127.0.0.1:%d/v1?model=tiny", port);
        struct backend hb;
        if (backend_open(spec, &bp, &hb, err, sizeof err)) T_FAIL_("open %s: %s", spec, err);
        struct backend_info hi;
        backend_info(&hb, &hi);
        ASSERT_EQ(hi.n_vocab, li.n_vocab);
        ASSERT_EQ(hi.bos, li.bos);
        ASSERT_EQ(hi.add_bos, li.add_bos);
        int64_t r0, r1, r2;
        for (size_t t = 0; t < sizeof texts / sizeof *texts; t++) {
            for (int add = 0; add < 2; add++) {
                int32_t *a = NULL, *b = NULL;
                int64_t na = 0, nb = 0;
                ASSERT_OK(backend_tokenize(&local, texts[t], strlen(texts[t]), add, &a, &na));
                ASSERT_OK(backend_tokenize(&hb, texts[t], strlen(texts[t]), add, &b, &nb));
                ASSERT_EQ(na, nb);
                for (int64_t i = 0; i < na; i++)
                    ASSERT_EQ(a[i], b[i]);
                char *da = backend_detokenize(&local, a, na), *db = backend_detokenize(&hb, b, nb);
                ASSERT(da && db);
                ASSERT_STR_EQ(da, db);
                free(da), free(db), free(a), free(b);
            }
        }
        /* with_pieces: the texts of tokens already seen cost no request */
        int32_t *seen = NULL;
        int64_t n_seen = 0;
        ASSERT_OK(backend_tokenize(&hb, texts[0], strlen(texts[0]), 0, &seen, &n_seen));
        serve_counts(srv, &r0, NULL);
        char pa[512], pb[512];
        for (int64_t i = 0; i < n_seen; i++)
            ASSERT(backend_piece(&hb, seen[i], pb, sizeof pb) >= 0);
        serve_counts(srv, &r1, NULL);
        if (mode == 0)
            ASSERT_EQ(r1, r0);
        else
            ASSERT(r1 > r0);
        free(seen);
        if (mode == 0) { /* with_pieces sends a byte token that is not UTF-8 as its bytes */
            ASSERT_OK(backend_tokenize(&hb, texts[3], strlen(texts[3]), 0, &seen, &n_seen));
            int bytes = 0;
            for (int64_t i = 0; i < n_seen; i++) {
                int la = backend_piece(&local, seen[i], pa, sizeof pa),
                    lb = backend_piece(&hb, seen[i], pb, sizeof pb);
                ASSERT_EQ(la, lb);
                ASSERT(!memcmp(pa, pb, (size_t)la));
                bytes += la == 1 && (unsigned char)pa[0] >= 0x80;
            }
            ASSERT(bytes >= 2);
            free(seen);
        }
        /* every token's text, as the local tokenizer has it (a byte token
         * that is not UTF-8 on its own comes back from /detokenize as
         * U+FFFD: those only with with_pieces, which sends bytes) */
        int same = 0, skipped = 0;
        for (int32_t id = 0; id < li.n_vocab; id++) {
            int la = backend_piece(&local, id, pa, sizeof pa),
                lb = backend_piece(&hb, id, pb, sizeof pb);
            ASSERT(la >= 0 && la < (int)sizeof pa);
            size_t bad;
            if (!utf8_valid(pa, (size_t)la, &bad) || memchr(pa, 0, (size_t)la)) {
                skipped++;
                continue;
            }
            if (lb != la || memcmp(pa, pb, (size_t)la))
                T_FAIL_("token %d: local piece '%.*s', server's '%.*s'", id, la, pa,
                        lb < 0 ? 0 : lb, pb);
            same++;
        }
        serve_counts(srv, &r2, NULL);
        printf("mode %d: %d token texts agree, %d byte tokens skipped; %lld requests for them\n",
               mode, same, skipped, (long long)(r2 - r1));
        ASSERT(same > 50);
        /* asked once: the texts are remembered */
        for (int32_t id = 0; id < li.n_vocab; id++)
            backend_piece(&hb, id, pb, sizeof pb);
        serve_counts(srv, &r1, NULL);
        ASSERT_EQ(r1, r2);
        backend_close(&hb);
        if (mode == 0) { /* qgate tokenize through the server: the local ids */
            struct t_out o, l;
            ASSERT_OK(t_qgate(&o, "tokenize", spec, "--prompt", texts[1], NULL));
            ASSERT_OK(t_qgate(&l, "tokenize", t_path("m.gguf"), "--prompt", texts[1], NULL));
            ASSERT_EQ(o.code, 0);
            ASSERT_STR_EQ(o.out, l.out);
            t_out_free(&o), t_out_free(&l);
        }
        if (mode == 0) { /* a whole run: the same per-item scores and byte counts */
            char db[4200], web[300];
            snprintf(db, sizeof db, "%s", t_path("s.db"));
            snprintf(web, sizeof web, "http=%s", spec);
            const char *specs[] = {web};
            struct t_out o;
            ASSERT_OK(run_models(db, specs, 1, &o));
            if (o.code) T_FAIL_("run: exit %d: %s", o.code, o.err);
            t_out_free(&o);
            double x[256], y[256];
            int cx[256], cy[256];
            int nx = items_of(db, "cpu", x, cx, 256), ny = items_of(db, "http", y, cy, 256);
            ASSERT(nx > 30);
            ASSERT_EQ(nx, ny);
            for (int i = 0; i < nx; i++) {
                ASSERT_NEAR(x[i], y[i], 1e-5 * fmax(1, fabs(x[i])));
                ASSERT_EQ(cx[i], cy[i]);
            }
            ASSERT_EQ(trial_metric(db, "cpu", "bytes"), trial_metric(db, "http", "bytes"));
            ASSERT_NEAR(trial_metric(db, "cpu", "bits_per_byte"),
                        trial_metric(db, "http", "bits_per_byte"), 1e-6);
        }
        serve_stop(srv);
    }
    backend_close(&local);
    return 0;
}

TEST(http_scores_through_vllm_prompt_logprobs, e2e)
{
    /* a server whose echo gives no prompt log-probs but which has vLLM's
     * prompt_logprobs: scored through it, with the same per-item numbers
     * and the same top-K KLD as through echo */
    struct synth_params p = synth_default_params();
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(synth_write(&p, t_path("m.gguf"), err, sizeof err));
    p.wtype = GGML_Q4_0;
    ASSERT_OK(synth_write(&p, t_path("q.gguf"), err, sizeof err));
    ASSERT_OK(write_suite());
    struct backend bq[2];
    struct backend_open_params bp = {0};
    struct server *srv[2];
    int port[2];
    char specs[2][4400];
    for (int i = 0; i < 2; i++) {
        ASSERT_OK(backend_open(t_path("q.gguf"), &bp, &bq[i], err, sizeof err));
        struct serve_params sp = {.model_id = "tiny", .testing = {.no_prompt_logprobs = i}};
        ASSERT_OK(serve_start(&bq[i], 1, &sp, &srv[i], &port[i], err, sizeof err));
        snprintf(specs[i], sizeof specs[i], "%s=http://127.0.0.1:%d/v1?model=tiny&tokenizer=%s",
                 i ? "vllm" : "echo", port[i], t_path("m.gguf"));
    }
    char db[4200];
    snprintf(db, sizeof db, "%s", t_path("v.db"));
    const char *sp2[] = {specs[0], specs[1]};
    struct t_out o;
    ASSERT_OK(run_models(db, sp2, 2, &o));
    if (o.code) T_FAIL_("run: exit %d: %s", o.code, o.err);
    t_out_free(&o);
    for (int i = 0; i < 2; i++)
        serve_stop(srv[i]), backend_close(&bq[i]);
    double x[256], y[256];
    int cx[256], cy[256];
    int nx = items_of(db, "echo", x, cx, 256), ny = items_of(db, "vllm", y, cy, 256);
    ASSERT(nx > 30);
    ASSERT_EQ(nx, ny);
    for (int i = 0; i < nx; i++) {
        ASSERT_NEAR(x[i], y[i], 1e-9 * fmax(1, fabs(x[i])));
        ASSERT_EQ(cx[i], cy[i]);
    }
    double ke = trial_metric(db, "echo", "kld_mean"), kv = trial_metric(db, "vllm", "kld_mean");
    printf("top-20 KLD mean through echo %.9g, through prompt_logprobs %.9g\n", ke, kv);
    ASSERT(ke > 0);
    ASSERT_NEAR(kv, ke, 1e-6 * ke);
    ASSERT_EQ(trial_metric(db, "vllm", "kld_top_k"), 20);
    ASSERT_NEAR(trial_metric(db, "vllm", "top1_agree"), trial_metric(db, "echo", "top1_agree"),
                1e-12);
    return 0;
}

TEST(http_text_prompts_when_ids_are_refused, e2e)
{
    /* a server that takes text prompts only and answers without token ids:
     * items go as text, each answer's token texts are checked against the
     * ids meant, and the numbers are those of the CPU backend */
    ASSERT_OK(synth_model("m.gguf"));
    ASSERT_OK(write_suite());
    char err[QG_ERRMSG_MAX];
    struct backend_open_params bp = {0};
    struct backend b;
    ASSERT_OK(backend_open(t_path("m.gguf"), &bp, &b, err, sizeof err));
    struct serve_params sp = {.model_id = "tiny", .testing = {.text_prompts_only = 1}};
    struct server *srv;
    int port;
    ASSERT_OK(serve_start(&b, 1, &sp, &srv, &port, err, sizeof err));
    /* the token-id request itself is refused, as such servers do */
    char url[128], *out;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/completions", port);
    ASSERT_EQ(http(url, "{\"prompt\":[1,5,9],\"max_tokens\":1}", NULL, &out), 400);
    free(out);
    char db[4200], web[4400], cpu[4400], s1[65], suite[1024];
    snprintf(db, sizeof db, "%s", t_path("t.db"));
    snprintf(web, sizeof web, "text=http://127.0.0.1:%d/v1?model=tiny&tokenizer=%s", port,
             t_path("m.gguf"));
    snprintf(cpu, sizeof cpu, "cpu=%s", t_path("m.gguf"));
    /* perplexity windows start inside the text: they cannot go as text,
     * and the run says so (exit 65) */
    const char *specs[] = {web};
    struct t_out o;
    ASSERT_OK(run_models(db, specs, 1, &o));
    ASSERT_EQ(o.code, 65);
    ASSERT_CONTAINS(
        o.err,
        "takes text prompts only, and a window that starts inside a text does not re-tokenize");
    t_out_free(&o);
    /* multiple choice: every item */
    ASSERT_OK(hash_sha256_file(t_path("mc.jsonl"), s1, err, sizeof err));
    snprintf(suite, sizeof suite,
             "{\"name\":\"mc\",\"tasks\":[{\"name\":\"mc\",\"kind\":\"custom\",\"data\":\"mc."
             "jsonl\",\"sha256\":\"%s\","
             "\"fields\":{\"context\":\"q\",\"choices\":\"c\",\"gold\":\"g\"}}]}",
             s1);
    ASSERT_OK(t_write_file(t_path("mc.json"), suite, strlen(suite)));
    snprintf(db, sizeof db, "%s", t_path("t2.db"));
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("mc.json"), "--model", cpu, "--model", web,
                      "--db", db, NULL));
    int code = o.code;
    if (code) printf("run: exit %d\n%s", o.code, o.err);
    t_out_free(&o);
    serve_stop(srv);
    backend_close(&b);
    ASSERT_EQ(code, 0);
    double x[256], y[256];
    int cx[256], cy[256];
    int nx = items_of(db, "cpu", x, cx, 256), ny = items_of(db, "text", y, cy, 256);
    ASSERT(nx >= 24);
    ASSERT_EQ(nx, ny);
    for (int i = 0; i < nx; i++) {
        ASSERT_NEAR(x[i], y[i], 1e-5 * fmax(1, fabs(x[i])));
        ASSERT_EQ(cx[i], cy[i]);
    }
    return 0;
}

TEST(http_perplexity_windows_in_flight_together, e2e)
{
    /* a perplexity task through the HTTP backend keeps several windows in
     * flight (groups of windows through score_many), with the numbers of
     * one at a time */
    ASSERT_OK(synth_model("m.gguf"));
    ASSERT_OK(write_suite());
    char err[QG_ERRMSG_MAX], s2[65], suite[1024];
    ASSERT_OK(hash_sha256_file(t_path("text.txt"), s2, err, sizeof err));
    snprintf(suite, sizeof suite,
             "{\"name\":\"p\",\"tasks\":[{\"name\":\"ppl\",\"kind\":\"perplexity\",\"data\":\"text."
             "txt\",\"sha256\":\"%s\","
             "\"protocol\":\"stride\",\"stride\":8,\"ctx\":48}]}",
             s2);
    ASSERT_OK(t_write_file(t_path("p.json"), suite, strlen(suite)));
    struct srv v;
    /* a tiny model answers in microseconds, so one request could end before
     * the next arrives; 20 ms per request stands for a real round trip and
     * makes requests sent together overlap on the server whatever the load */
    srv_latency_ms = 20;
    ASSERT_OK(srv_start(&v, NULL, NULL));
    char db[4200], cpu[4400], web[4400];
    snprintf(db, sizeof db, "%s", t_path("p.db"));
    snprintf(cpu, sizeof cpu, "cpu=%s", t_path("m.gguf"));
    snprintf(web, sizeof web, "http=http://127.0.0.1:%d/v1?model=tiny&tokenizer=%s&concurrency=6",
             v.port, t_path("m.gguf"));
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("p.json"), "--model", cpu, "--model", web,
                      "--db", db, "--no-cache", NULL));
    if (o.code) T_FAIL_("run: exit %d: %s", o.code, o.err);
    t_out_free(&o);
    int64_t most = serve_max_in_flight(v.s);
    srv_stop(&v);
    double x[512], y[512];
    int cx[512], cy[512];
    int nx = items_of(db, "cpu", x, cx, 512), ny = items_of(db, "http", y, cy, 512);
    printf("%d windows; at most %lld requests at once on the server\n", nx, (long long)most);
    ASSERT(nx > 20);
    ASSERT_EQ(nx, ny);
    for (int i = 0; i < nx; i++)
        ASSERT_NEAR(x[i], y[i], 1e-5 * fmax(1, fabs(x[i])));
    ASSERT(most >= 2); /* one at a time before; up to the server's 4 connection threads */
    /* qgate ppl through the server: the same groups, the same numbers */
    ASSERT_OK(srv_start(&v, NULL, NULL));
    snprintf(web, sizeof web, "http://127.0.0.1:%d/v1?model=tiny&tokenizer=%s&concurrency=6",
             v.port, t_path("m.gguf"));
    ASSERT_OK(t_qgate(&o, "ppl", web, "--text", t_path("text.txt"), "--ctx", "48", "--json", NULL));
    if (o.code) T_FAIL_("ppl: exit %d: %s", o.code, o.err);
    most = serve_max_in_flight(v.s);
    srv_stop(&v);
    srv_latency_ms = 0;
    struct t_out l;
    ASSERT_OK(t_qgate(&l, "ppl", t_path("m.gguf"), "--text", t_path("text.txt"), "--ctx", "48",
                      "--json", NULL));
    ASSERT_EQ(l.code, 0);
    cJSON *a = cJSON_Parse(o.out), *b = cJSON_Parse(l.out);
    ASSERT(a && b);
    double pa = cJSON_GetObjectItem(a, "ppl")->valuedouble,
           pb = cJSON_GetObjectItem(b, "ppl")->valuedouble;
    printf("qgate ppl: http %.9g, local %.9g; at most %lld requests at once\n", pa, pb,
           (long long)most);
    ASSERT_NEAR(pa, pb, 1e-6 * pb);
    ASSERT(most >= 2);
    cJSON_Delete(a), cJSON_Delete(b);
    t_out_free(&o), t_out_free(&l);
    return 0;
}

TEST(serve_command_starts_and_stops_cleanly, e2e)
{
    /* `qgate serve` as a process: --port 0 --port-file, --parallel, an API
     * key from the environment, and a clean stop on SIGTERM */
    ASSERT_OK(synth_model("m.gguf"));
    char portfile[4200], log[4200];
    snprintf(portfile, sizeof portfile, "%s", t_path("port"));
    snprintf(log, sizeof log, "%s", t_path("serve.log"));
    setenv("QG_SERVE_KEY", SECRET, 1);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) dup2(fd, 2), dup2(fd, 1);
        execl(QG_BINARY, "qgate", "serve", t_path("m.gguf"), "--port", "0", "--port-file", portfile,
              "--parallel", "2", "--model-id", "tiny", "--api-key-env", "QG_SERVE_KEY",
              (char *)NULL);
        _exit(127);
    }
    unsetenv("QG_SERVE_KEY");
    int port = 0;
    for (int i = 0; i < 200 && !port; i++) { /* up to 10 s */
        char *txt = t_read_file(portfile, NULL);
        int64_t pv = 0;
        if (txt)
            txt[strcspn(txt, "\r\n ")] = '\0',
                             port = qg_parse_i64(txt, 1, 65535, &pv) ? 0 : (int)pv, free(txt);
        else
            usleep(50000);
    }
    ASSERT(port > 0);
    char url[128], tok[128], *out;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/models", port);
    snprintf(tok, sizeof tok, "http://127.0.0.1:%d/tokenize", port);
    ASSERT_EQ(http(tok, "{\"content\":\"a\"}", NULL, &out), 401); /* no key */
    free(out);
    ASSERT_EQ(http(url, NULL, NULL, &out), 200); /* the model list is open, as llama.cpp's */
    free(out);
    ASSERT_EQ(http(url, NULL, SECRET, &out), 200);
    ASSERT_CONTAINS(out, "\"tiny\"");
    free(out);
    ASSERT_EQ(kill(pid, SIGTERM), 0);
    int status;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char *text = t_read_file(log, NULL);
    ASSERT(text != NULL);
    ASSERT_CONTAINS(text, "(2 instances)");
    ASSERT_CONTAINS(text, "API key required");
    ASSERT_CONTAINS(text, "stopping on signal 15 after 3 requests");
    ASSERT(!strstr(text, SECRET));
    free(text);
    return 0;
}

TEST(http_cache_redeployed_server, e2e)
{
    /* the same address and model id, redeployed with another model: the
     * cache must not answer for it (it did: PPL 4.2706 instead of 4.5800) */
    struct synth_params p = synth_default_params();
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(synth_write(&p, t_path("m.gguf"), err, sizeof err));
    p.wtype = GGML_Q4_0;
    ASSERT_OK(synth_write(&p, t_path("q.gguf"), err, sizeof err));
    ASSERT_OK(write_suite());
    struct srv v;
    ASSERT_OK(srv_start_model(&v, "m.gguf", NULL, NULL));
    int port = v.port;
    char db[4200];
    snprintf(db, sizeof db, "%s", t_path("c.db"));
    struct t_out o;
    ASSERT_OK(run_http_only(port, db, NULL, &o));
    ASSERT_EQ(o.code, 0);
    t_out_free(&o);
    srv_stop(&v);
    /* the other model on the same port */
    struct backend_open_params bp = {0};
    ASSERT_OK(backend_open(t_path("q.gguf"), &bp, &v.b, err, sizeof err));
    struct serve_params sp = {.model_id = "tiny", .port = port, .max_body = 1 << 20};
    ASSERT_OK(serve_start(&v.b, 1, &sp, &v.s, &v.port, err, sizeof err));
    ASSERT_EQ(v.port, port);
    int64_t n0, n1;
    serve_counts(v.s, &n0, NULL);
    ASSERT_OK(run_http_only(port, db, NULL, &o));
    ASSERT_EQ(o.code, 0);
    ASSERT_CONTAINS(o.err, "answers differently from the last run");
    t_out_free(&o);
    serve_counts(v.s, &n1, NULL);
    ASSERT(n1 - n0 > 50); /* scored by the server, not the cache */
    srv_stop(&v);
    /* the two runs' perplexities differ, as the two models do */
    ASSERT_EQ(distinct_run_totals(db), 2);
    return 0;
}

/* Sends raw bytes to the server and reads its answer's status line. */
static int raw_request(int port, const char *req, size_t n, char *status, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) || write(fd, req, n) != (ssize_t)n) {
        close(fd);
        return -1;
    }
    ssize_t got = read(fd, status, cap - 1);
    close(fd);
    status[got > 0 ? got : 0] = '\0';
    char *eol = strstr(status, "\r\n");
    if (eol) *eol = '\0';
    return got > 0 ? 0 : -1;
}

TEST(serve_key_checked_before_the_body, e2e)
{
    ASSERT_OK(synth_model("m.gguf"));
    struct srv v;
    ASSERT_OK(srv_start(&v, NULL, "sk-serve-key"));
    char st[512];
    /* a keyless upload announcing 15 MiB: refused at once, its body never
     * read (the body is never sent: a server waiting for it could only
     * close the connection at its idle timeout, never answer 401) */
    static const char big[] = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                              "application/json\r\nContent-Length: 15728640\r\n\r\n{\"prompt\":";
    ASSERT_OK(raw_request(v.port, big, sizeof big - 1, st, sizeof st));
    ASSERT_CONTAINS(st, "401");
    static const char ok[] =
        "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-serve-key\r\n\r\n";
    ASSERT_OK(raw_request(v.port, ok, sizeof ok - 1, st, sizeof st));
    ASSERT_CONTAINS(st, "200");
    srv_stop(&v);
    return 0;
}

/* A TCP connection to the server from source address src (127.0.0.x). */
static int connect_from(const char *src, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in me = {.sin_family = AF_INET},
                       a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    inet_pton(AF_INET, src, &me.sin_addr);
    if (fd < 0 || bind(fd, (struct sockaddr *)&me, sizeof me) ||
        connect(fd, (struct sockaddr *)&a, sizeof a)) {
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

/* 1 when the server has closed fd (reads end or fail) within secs. */
static int closed_within(int fd, double secs)
{
    struct timeval tv = {.tv_sec = (time_t)secs,
                         .tv_usec = (suseconds_t)((secs - (time_t)secs) * 1e6)};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char b[256];
    ssize_t n;
    while ((n = read(fd, b, sizeof b)) > 0) {
    }
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

TEST(serve_bounded_under_idle_and_slow_clients, e2e)
{
    /* bounded loopback load: 1100 idle connections from one address (over
     * the server's limit in all, 1024), a client trickling its body. Another
     * address is still served (the per-address limit, 256, kept the first
     * from filling the server); the slow and silent ones are cut. */
    signal(SIGPIPE, SIG_IGN); /* writes to a cut connection fail, not kill */
    ASSERT_OK(synth_model("m.gguf"));
    struct srv v;
    srv_idle_s = 2;
    ASSERT_OK(srv_start(&v, NULL, NULL));
    srv_idle_s = 0;
    enum { N = 1100 };
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < N + 200) {
        rl.rlim_cur = rl.rlim_max < N + 200 ? rl.rlim_max : N + 200;
        setrlimit(RLIMIT_NOFILE, &rl);
        if (rl.rlim_cur < N + 200) SKIP("fewer than 1300 file descriptors allowed here");
    }
    static int idle[N];
    int n_open = 0;
    for (int i = 0; i < N; i++)
        if ((idle[i] = connect_from("127.0.0.1", v.port)) >= 0) n_open++;
    ASSERT_EQ(n_open, N); /* the kernel accepts them; the server drops those over its limit */
    char st[512];
    int ok = connect_from("127.0.0.2", v.port);
    ASSERT(ok >= 0);
    static const char req[] = "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    ASSERT(write(ok, req, sizeof req - 1) == (ssize_t)(sizeof req - 1));
    ssize_t got = read(ok, st, sizeof st - 1);
    if (got <= 0) T_FAIL_("read %zd errno %s", got, strerror(errno));
    close(ok);
    st[got] = '\0';
    ASSERT_CONTAINS(st, "200"); /* served, beside 1100 idle connections (not timed: a load) */
    /* a body trickled at 20 bytes/s: cut off once its grace (1 s) is over */
    int slow = connect_from("127.0.0.3", v.port);
    static const char head[] = "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: "
                               "application/json\r\nContent-Length: 100000\r\n\r\n";
    ASSERT(write(slow, head, sizeof head - 1) == (ssize_t)(sizeof head - 1));
    int cut = 0;
    for (int i = 0; i < 40 && !cut; i++) {
        if (write(slow, "xx", 2) != 2) cut = 1;
        usleep(100 * 1000);
        struct pollfd pf = {.fd = slow, .events = POLLIN};
        if (poll(&pf, 1, 0) > 0) cut = closed_within(slow, 0.1);
    }
    close(slow);
    ASSERT(cut); /* within 4 s, not after the 100 kB */
    /* the silent ones: closed after the 2 s idle timeout */
    int closed = 0;
    for (int i = 0; i < N; i++) {
        closed += closed_within(idle[i], 4.0);
        close(idle[i]);
    }
    ASSERT_EQ(closed, N);
    srv_stop(&v);
    return 0;
}

TEST(http_score_contradicting_its_top_k_refused, unit)
{
    /* issue 30, item 3: a server that claims p = 1 (log-prob 0) for every
     * prompt token while its own top-K in the same answer lists the token
     * lower, or lists others above it without it, is refused; an honest
     * answer is read */
    int32_t tokens[3] = {1, 5, 7};
    double lp[2];
    int32_t top_ids[4];
    float top_lp[4];
    struct backend_score r = {.tokens = tokens,
                              .n_tokens = 3,
                              .from = 1,
                              .logprob = lp,
                              .top_k = 2,
                              .top_ids = top_ids,
                              .top_lp = top_lp};
    char err[QG_ERRMSG_MAX];
    static const char *const honest =
        "{\"choices\":[{\"logprobs\":{\"token_logprobs\":[null,-2.5,-0.2],"
        "\"token_ids\":[1,5,7],\"top_token_ids\":[null,[[9,-0.1],[5,-2.5]],[[7,-0.2],[3,-1.9]]]}}]"
        "}";
    ASSERT_OK(http_parse_score(honest, strlen(honest), 0, &r, err, sizeof err));
    ASSERT_NEAR(lp[0], -2.5, 1e-12);
    static const char *const listed_lower =
        "{\"choices\":[{\"logprobs\":{\"token_logprobs\":[null,0,0],"
        "\"token_ids\":[1,5,7],\"top_token_ids\":[null,[[9,-0.1],[5,-2.5]],[[7,0],[3,-9]]]}}]}";
    ASSERT_EQ(http_parse_score(listed_lower, strlen(listed_lower), 0, &r, err, sizeof err),
              QG_ERR_DATA);
    ASSERT_CONTAINS(err, "prompt token 1 has log-prob 0, but the same answer's top-2 lists it at "
                         "-2.5");
    static const char *const unlisted_above =
        "{\"choices\":[{\"logprobs\":{\"token_logprobs\":[null,0,0],"
        "\"token_ids\":[1,5,7],\"top_token_ids\":[null,[[9,-0.05],[3,-3.2]],[[7,0],[3,-9]]]}}]}";
    ASSERT_EQ(http_parse_score(unlisted_above, strlen(unlisted_above), 0, &r, err, sizeof err),
              QG_ERR_DATA);
    ASSERT_CONTAINS(err, "above every one of the same answer's top-2");
    return 0;
}

TEST(serve_caps_bodies_held_at_once, e2e)
{
    /* issue 30, item 10: bodies held in memory are capped over all
     * connections together; past the cap a request is answered 503 and not
     * buffered, and the room comes back when it ends */
    ASSERT_OK(synth_model("m.gguf"));
    struct srv v;
    srv_body_total = 4096;
    int rc = srv_start(&v, NULL, NULL);
    srv_body_total = 0;
    ASSERT_OK(rc);
    char big[8192], st[512];
    int body = 6000;
    int k = snprintf(big, sizeof big,
                     "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     "application/json\r\nContent-Length: %d\r\n\r\n",
                     body);
    memset(big + k, ' ', (size_t)body);
    ASSERT_OK(raw_request(v.port, big, (size_t)k + (size_t)body, st, sizeof st));
    ASSERT_CONTAINS(st, "503");
    static const char small[] = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                                "application/json\r\nContent-Length: 2\r\n\r\n{}";
    ASSERT_OK(raw_request(v.port, small, sizeof small - 1, st, sizeof st));
    ASSERT(!strstr(st, "503")); /* the room came back: a 4xx about the request itself */
    srv_stop(&v);
    return 0;
}

TEST(http_malformed_url_is_a_usage_error, e2e)
{
    /* a model spec whose URL curl cannot parse is refused at once (exit 64,
     * naming it), not retried nine times as if the server were down */
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "tokenize", "http://[::1:bad/v1?model=x", "--prompt", "hi", NULL));
    ASSERT_EQ(o.code, 64);
    ASSERT_CONTAINS(o.err, "http://[::1:bad/v1/models: URL using bad/illegal format");
    ASSERT(!strstr(o.err, "attempts"));
    t_out_free(&o);
    return 0;
}

/* The stream's chunks carry every generated token's log-probs: one token
 * per matching piece, the rest with the last chunk, and tokens of no text
 * in one empty chunk (review of issue 32's streaming). */
TEST(serve_chunks_carry_every_token, unit)
{
    const char *pieces[] = {" Once", " upon", "", " a"};
    cJSON *tokens = NULL, *c = serve_chunks(" Once upon a", pieces, 4, &tokens);
    ASSERT(c && tokens);
    ASSERT_EQ(cJSON_GetArraySize(c), 3);
    int sum = 0;
    for (int i = 0; i < cJSON_GetArraySize(tokens); i++)
        sum += (int)cJSON_GetArrayItem(tokens, i)->valuedouble;
    ASSERT_EQ(sum, 4); /* the empty piece rides with " a" */
    ASSERT_EQ((int)cJSON_GetArrayItem(tokens, 2)->valuedouble, 2);
    cJSON_Delete(c), cJSON_Delete(tokens);
    const char *bytes[] = {"\xe2", "\x80"}; /* two tokens spelling no whole character */
    c = serve_chunks("", bytes, 2, &tokens);
    ASSERT(c && tokens);
    ASSERT_EQ(cJSON_GetArraySize(c), 1);
    ASSERT_STR_EQ(cJSON_GetArrayItem(c, 0)->valuestring, "");
    ASSERT_EQ((int)cJSON_GetArrayItem(tokens, 0)->valuedouble, 2);
    cJSON_Delete(c), cJSON_Delete(tokens);
    return 0;
}
