/* test_robust — nothing silently wrong (issue 16): each case that used to
 * give a wrong answer without a warning now gives a clear error. */
#include "backends/ggml_types.h"
#include "backends/gguf.h"
#include "backends/synth.h"
#include "core/status.h"
#include "core/util.h"
#include "datasets/hash.h"
#include "store/store.h"
#include "tests/test.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

static int write_text(const char *name, const char *text)
{
    return t_write_file(t_path(name), text, strlen(text));
}

static int synth(const char *name, uint32_t type)
{
    struct synth_params p = synth_default_params();
    p.wtype = type;
    char err[QG_ERRMSG_MAX];
    return synth_write(&p, t_path(name), err, sizeof err);
}

/* A suite of one custom task over data (written as mc.jsonl) with extra
 * task keys; checked with `qgate suite check`. */
static int check_custom(const char *data, const char *extra, struct t_out *o)
{
    char sha[65], err[QG_ERRMSG_MAX], suite[4096];
    if (write_text("mc.jsonl", data)) return -1;
    if (hash_sha256_file(t_path("mc.jsonl"), sha, err, sizeof err)) return -1;
    snprintf(suite, sizeof suite,
             "{\"name\":\"s\",\"tasks\":[{\"name\":\"t\",\"kind\":\"custom\",\"data\":\"mc.jsonl\","
             "\"sha256\":\"%s\",%s}]}",
             sha, extra);
    if (write_text("suite.json", suite)) return -1;
    return t_qgate(o, "suite", "check", t_path("suite.json"), NULL);
}

static const char *mc_fields =
    "\"fields\":{\"id\":\"id\",\"context\":\"q\",\"choices\":\"c\",\"gold\":\"g\"}";

TEST(robust_compare_without_tasks_refused, e2e)
{
    /* a run with models but no tasks (killed during setup) has nothing to
     * judge: no PASS over an empty table */
    struct store *s;
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(store_open(t_path("e.db"), NULL, &s, err, sizeof err));
    int64_t run, m;
    struct store_run_new rn = {.command = "qgate run", .suite_hash = "h", .repeats = 1};
    ASSERT_OK(store_run_create(s, &rn, &run));
    struct store_model_new a = {.name = "a", .spec = "a=x.gguf", .backend = "cpu"},
                           b = {.name = "b", .spec = "b=y.gguf", .backend = "cpu"};
    ASSERT_OK(store_model_add(s, run, &a, &m));
    ASSERT_OK(store_model_add(s, run, &b, &m));
    store_close(s);
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "compare", "--baseline", "a", "--candidate", "b", "--db", t_path("e.db"),
                      NULL));
    ASSERT_EQ(o.code, 65);
    ASSERT_CONTAINS(o.err, "has no tasks");
    t_out_free(&o);
    return 0;
}

TEST(robust_readers_strict, e2e)
{
    struct t_out o;
    /* CR-only line endings: refused, not 20 items read as 1 */
    ASSERT_OK(check_custom("{\"id\":\"a\",\"q\":\"x\",\"c\":[\"y\",\"z\"],\"g\":0}\r"
                           "{\"id\":\"b\",\"q\":\"x\",\"c\":[\"y\",\"z\"],\"g\":1}\r",
                           mc_fields, &o));
    ASSERT_EQ(o.code, 65);
    ASSERT_CONTAINS(o.err, "mc.jsonl:1: a carriage return inside the line");
    t_out_free(&o);
    /* trailing text after the object */
    ASSERT_OK(check_custom("{\"id\":\"a\",\"q\":\"x\",\"c\":[\"y\",\"z\"],\"g\":0} trailing\n",
                           mc_fields, &o));
    ASSERT_EQ(o.code, 65);
    ASSERT_CONTAINS(o.err, "mc.jsonl:1: text after the JSON object");
    t_out_free(&o);
    /* unknown keys inside fields, pipelines and normalize */
    ASSERT_OK(check_custom("{\"id\":\"a\",\"q\":\"x\",\"c\":[\"y\",\"z\"],\"g\":0}\n",
                           "\"fields\":{\"id\":\"id\",\"context\":\"q\",\"choices\":\"c\","
                           "\"gold\":\"g\",\"contxt\":\"q\"}",
                           &o));
    ASSERT_EQ(o.code, 65);
    ASSERT_CONTAINS(o.err, "unknown key \"contxt\" in \"fields\" (did you mean \"context\"?)");
    t_out_free(&o);
    const char *gen = "{\"id\":\"a\",\"p\":\"2+2=\",\"a\":\"4\"}\n";
    ASSERT_OK(check_custom(gen,
                           "\"fields\":{\"id\":\"id\",\"prompt\":\"p\",\"answer\":\"a\"},"
                           "\"pipelines\":[{\"name\":\"n\",\"regex\":\"([0-9]+)\",\"gruop\":1}]",
                           &o));
    ASSERT_EQ(o.code, 65);
    ASSERT_CONTAINS(o.err, "unknown key \"gruop\" in pipeline 'n' (did you mean \"group\"?)");
    t_out_free(&o);
    ASSERT_OK(check_custom(gen,
                           "\"fields\":{\"id\":\"id\",\"prompt\":\"p\",\"answer\":\"a\"},"
                           "\"normalize\":{\"ignore_cas\":true}",
                           &o));
    ASSERT_EQ(o.code, 65);
    ASSERT_CONTAINS(o.err, "unknown key \"ignore_cas\" in \"normalize\" (did you mean");
    t_out_free(&o);
    return 0;
}

TEST(robust_duplicate_ids_linear_and_numeric, e2e)
{
    /* numeric ids are ids (not line numbers); a duplicate 120,000 lines
     * apart is caught, in linear time */
    struct sbuf d;
    sbuf_init(&d, 0);
    for (int i = 0; i < 150000; i++)
        sbuf_printf(&d, "{\"id\":%d,\"q\":\"x\",\"c\":[\"y\",\"z\"],\"g\":0}\n",
                    i == 130000 ? 10000 : i);
    double t0 = qg_now_s();
    struct t_out o;
    ASSERT_OK(check_custom(d.data, mc_fields, &o));
    sbuf_release(&d);
    ASSERT_EQ(o.code, 65);
    ASSERT_CONTAINS(o.err, "duplicate item id '10000' (items 10001 and 130001)");
    printf("150,000 items checked in %.2f s\n", qg_now_s() - t0);
    t_out_free(&o);
    ASSERT_OK(check_custom("{\"id\":{\"x\":1},\"q\":\"x\",\"c\":[\"y\",\"z\"],\"g\":0}\n",
                           mc_fields, &o));
    ASSERT_EQ(o.code, 65);
    ASSERT_CONTAINS(o.err, "field \"id\" must be a string or a number");
    t_out_free(&o);
    return 0;
}

/* A perplexity suite over text.txt (written) and one model a.gguf. */
static int ppl_suite(const char *text)
{
    char sha[65], err[QG_ERRMSG_MAX], suite[2048];
    if (write_text("text.txt", text)) return -1;
    if (hash_sha256_file(t_path("text.txt"), sha, err, sizeof err)) return -1;
    snprintf(suite, sizeof suite,
             "{\"name\":\"s\",\"tasks\":[{\"name\":\"story\",\"kind\":\"perplexity\",\"data\":"
             "\"text.txt\",\"sha256\":\"%s\",\"ctx\":64}]}",
             sha);
    return write_text("suite.json", suite);
}

TEST(robust_short_text_names_task_and_file, e2e)
{
    ASSERT_OK(synth("a.gguf", GGML_F32));
    ASSERT_OK(ppl_suite("the girl saw the ball"));
    char m[4200];
    snprintf(m, sizeof m, "a=%s", t_path("a.gguf"));
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("suite.json"), "--model", m, "--db",
                      t_path("r.db"), "-q", NULL));
    ASSERT_EQ(o.code, 65); /* a data problem, not a usage error */
    ASSERT_CONTAINS(o.err, "task 'story'");
    ASSERT_CONTAINS(o.err, "text.txt");
    ASSERT_CONTAINS(o.err, "needs at least 2 x ctx");
    t_out_free(&o);
    return 0;
}

TEST(robust_resume_checks_model_shard_and_id, e2e)
{
    ASSERT_OK(synth("a.gguf", GGML_F32));
    struct sbuf d;
    sbuf_init(&d, 0);
    for (int i = 0; i < 400; i++)
        sbuf_printf(&d, "the girl saw the %s ball. ", i % 3 ? "red" : "big");
    ASSERT_OK(ppl_suite(d.data));
    sbuf_release(&d);
    char m[4200];
    snprintf(m, sizeof m, "a=%s", t_path("a.gguf"));
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("suite.json"), "--model", m, "--db",
                      t_path("r.db"), "-q", NULL));
    ASSERT_EQ(o.code, 0);
    t_out_free(&o);
    /* a negative run id is an error, not a new run */
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("suite.json"), "--model", m, "--resume", "-5",
                      "--db", t_path("r.db"), "-q", NULL));
    ASSERT_EQ(o.code, 64);
    ASSERT_CONTAINS(o.err, "--resume takes a run id");
    t_out_free(&o);
    /* another shard than the run's */
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("suite.json"), "--model", m, "--resume", "1",
                      "--shard", "2/2", "--db", t_path("r.db"), "-q", NULL));
    ASSERT_EQ(o.code, 65);
    ASSERT_CONTAINS(o.err, "is shard 1/1");
    t_out_free(&o);
    /* another --limit: another item set, which one run may not mix */
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("suite.json"), "--model", m, "--resume", "1",
                      "--limit", "3", "--db", t_path("r.db"), "-q", NULL));
    ASSERT_EQ(o.code, 65);
    ASSERT_CONTAINS(o.err, "run 1's task 'story' was run with other settings");
    t_out_free(&o);
    /* the model file replaced by another model at the same path */
    ASSERT_OK(synth("a.gguf", GGML_Q4_0));
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("suite.json"), "--model", m, "--resume", "1",
                      "--db", t_path("r.db"), "-q", NULL));
    ASSERT_EQ(o.code, 65);
    ASSERT_CONTAINS(o.err, "changed since run 1");
    t_out_free(&o);
    return 0;
}

TEST(robust_terminal_output_escaped, e2e)
{
    /* a model name with an escape sequence (OSC title, colour) never
     * reaches the terminal raw from show, runs or compare */
    ASSERT_OK(synth("a.gguf", GGML_F32));
    struct sbuf d;
    sbuf_init(&d, 0);
    for (int i = 0; i < 400; i++)
        sbuf_printf(&d, "the girl saw the %s ball. ", i % 3 ? "red" : "big");
    ASSERT_OK(ppl_suite(d.data));
    sbuf_release(&d);
    char m1[4200], m2[4200];
    snprintf(m1, sizeof m1, "x\033]0;owned\007=%s", t_path("a.gguf"));
    snprintf(m2, sizeof m2, "y\033[31m=%s", t_path("a.gguf"));
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("suite.json"), "--model", m1, "--model", m2,
                      "--db", t_path("r.db"), NULL));
    ASSERT_EQ(o.code, 0);
    ASSERT_CONTAINS(o.out, " windows  ppl "); /* run's per-trial lines, escaped */
    if (strchr(o.out, '\033')) T_FAIL_("run printed a raw ESC:\n%s", o.out);
    t_out_free(&o);
    /* error messages: a name that is not in the run is quoted, escaped */
    ASSERT_OK(t_qgate(&o, "compare", "--baseline",
                      "z\033[2J\xc2\x9b"
                      "1m",
                      "--candidate", "w", "--db", t_path("r.db"), NULL));
    ASSERT(o.code > 2);
    ASSERT_CONTAINS(o.err, "z\\x1b[2J\\u009b1m");
    if (strchr(o.err, '\033') || strstr(o.err, "\xc2\x9b"))
        T_FAIL_("an error message carried a raw control:\n%s", o.err);
    t_out_free(&o);
    const char *cmds[][7] = {{"show", "1", "--db", t_path("r.db"), NULL},
                             {"runs", "--db", t_path("r.db"), NULL},
                             {"compare", "--baseline", "x\033]0;owned\007", "--candidate",
                              "y\033[31m", "--allow-identical", NULL}};
    for (int k = 0; k < 3; k++) {
        const char *args[10];
        int n = 0;
        for (; cmds[k][n]; n++)
            args[n] = cmds[k][n];
        if (k == 2) args[n++] = "--db", args[n++] = t_path("r.db");
        args[n] = NULL;
        ASSERT_OK(t_qgate_argv(&o, args));
        if (o.code > 2) T_FAIL_("%s: exit %d: %s", cmds[k][0], o.code, o.err);
        if (strchr(o.out, '\033')) T_FAIL_("%s printed a raw ESC:\n%s", cmds[k][0], o.out);
        t_out_free(&o);
    }
    return 0;
}

/* An F32 model file with one NaN in tensor `tensor` (element 7), as nan.gguf. */
static int nan_model(const char *tensor)
{
    if (synth("a.gguf", GGML_F32)) return -1;
    struct gguf *g;
    char err[QG_ERRMSG_MAX];
    if (gguf_open(t_path("a.gguf"), &g, err, sizeof err)) return -1;
    const struct gguf_tensor *t = gguf_find_tensor(g, tensor);
    size_t off = t ? (size_t)((const char *)t->data - (const char *)gguf_bytes(g)) + 4 * 7 : 0;
    gguf_close(g);
    size_t n;
    char *bytes = t_read_file(t_path("a.gguf"), &n);
    int rc = t && bytes && off + 4 <= n ? 0 : -1;
    const uint32_t qnan = 0x7fc00000u;
    if (!rc) memcpy(bytes + off, &qnan, 4);
    if (!rc) rc = t_write_file(t_path("nan.gguf"), bytes, n);
    free(bytes);
    return rc;
}

TEST(robust_nan_weights_refused, e2e)
{
    /* a model whose weights hold a NaN is refused at load, naming the
     * tensor, instead of being scored to exit 0 */
    ASSERT_OK(nan_model("blk.0.ffn_up.weight"));
    ASSERT_OK(write_text("t.txt", "the girl saw the big red ball and the dog was happy"));
    struct t_out o;
    ASSERT_OK(
        t_qgate(&o, "ppl", t_path("nan.gguf"), "--text", t_path("t.txt"), "--ctx", "8", NULL));
    ASSERT_EQ(o.code, 65);
    ASSERT_CONTAINS(o.err,
                    "tensor 'blk.0.ffn_up.weight' holds a non-finite weight (NaN at element 7)");
    t_out_free(&o);
    return 0;
}

TEST(robust_nan_output_layer_refused_by_run_and_gate, e2e)
{
    /* a NaN in output.weight leaves the hidden states finite: only the
     * logits show it. run (multiple choice) and gate (perplexity) stop with
     * exit 65 naming the tensor, and no verdict is stored */
    ASSERT_OK(nan_model("output.weight"));
    struct t_out o;
    ASSERT_OK(check_custom("{\"id\":\"1\",\"q\":\"the girl saw the\",\"c\":[\" big ball\","
                           "\" red dog\"],\"g\":0}\n{\"id\":\"2\",\"q\":\"the dog was\","
                           "\"c\":[\" happy\",\" sad\"],\"g\":1}\n",
                           mc_fields, &o));
    ASSERT_EQ(o.code, 0);
    t_out_free(&o);
    char a[4200], nan[4200], db[4200];
    snprintf(a, sizeof a, "a=%s", t_path("a.gguf"));
    snprintf(nan, sizeof nan, "nan=%s", t_path("nan.gguf"));
    snprintf(db, sizeof db, "%s", t_path("r.db"));
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("suite.json"), "--model", a, "--model", nan,
                      "--db", db, "-q", NULL));
    ASSERT_EQ(o.code, 65);
    ASSERT_CONTAINS(o.err, "tensor 'output.weight' holds a non-finite weight (NaN at element 7)");
    t_out_free(&o);
    ASSERT_OK(t_qgate(&o, "gate", t_path("a.gguf"), t_path("nan.gguf"), "--sample-tokens", "200",
                      "--db", t_path("g.db"), "-q", NULL));
    ASSERT_EQ(o.code, 65);
    ASSERT_CONTAINS(o.err, "'output.weight' holds a non-finite weight");
    ASSERT_EQ(t_sql_int(t_path("g.db"), "SELECT count(*) FROM verdict_rows"), 0);
    t_out_free(&o);
    return 0;
}

TEST(robust_fifo_and_device_data_refused, e2e)
{
    /* a FIFO or a device as a data path is refused at once, not read forever */
    ASSERT_OK(mkfifo(t_path("pipe"), 0600));
    const char *paths[] = {t_path("pipe"), "/dev/zero"};
    for (int k = 0; k < 2; k++) {
        char suite[4096];
        snprintf(
            suite, sizeof suite,
            "{\"name\":\"s\",\"tasks\":[{\"name\":\"t\",\"kind\":\"perplexity\",\"data\":\"%s\","
            "\"sha256\":\"%064d\"}]}",
            paths[k], 0);
        ASSERT_OK(write_text("suite.json", suite));
        struct t_out o; /* a read forever would end at the runner's timeout */
        ASSERT_OK(t_qgate(&o, "suite", "check", t_path("suite.json"), NULL));
        ASSERT_EQ(o.code, 65);
        ASSERT_CONTAINS(o.err, "not a regular file or directory");
        t_out_free(&o);
    }
    return 0;
}

/* A model (a.gguf) and a perplexity suite big enough that a run takes
 * seconds: time for a signal or another process to act during it. */
static int slow_ppl_setup(void)
{
    struct synth_params sp = synth_default_params();
    sp.dim = 256, sp.ffn = 512, sp.n_layers = 4, sp.ctx = 128;
    char err[QG_ERRMSG_MAX];
    if (synth_write(&sp, t_path("a.gguf"), err, sizeof err)) return -1;
    struct sbuf d;
    sbuf_init(&d, 0);
    for (int i = 0; i < 2500; i++)
        sbuf_printf(&d, "the girl saw the %s ball. ", i % 3 ? "red" : "big");
    int rc = ppl_suite(d.data);
    sbuf_release(&d);
    return rc;
}

/* Runs qgate with argv (argv[0] "qgate"), sends it SIGINT after 1 s,
 * and gives its wait status and what it printed on stderr. 0 or -1. */
static int interrupted_after_1s(const char *const *argv, char *msg, size_t cap, int *st)
{
    int errfd[2];
    if (pipe(errfd)) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(errfd[1], 2);
        close(errfd[0]);
        execv(QG_BINARY, (char *const *)argv);
        _exit(127);
    }
    close(errfd[1]);
    usleep(1000 * 1000);
    kill(pid, SIGINT);
    waitpid(pid, st, 0);
    size_t got = 0;
    ssize_t n;
    while (got + 1 < cap && (n = read(errfd[0], msg + got, cap - 1 - got)) > 0)
        got += (size_t)n;
    close(errfd[0]);
    msg[got] = '\0';
    return 0;
}

TEST(robust_sigint_marks_run_interrupted, e2e)
{
    /* a real SIGINT during a run: the rows done are kept, the run is marked
     * interrupted, the message says how to resume, and resuming finishes */
    ASSERT_OK(slow_ppl_setup());
    char m[4200];
    snprintf(m, sizeof m, "a=%s", t_path("a.gguf"));
    const char *argv[] = {
        "qgate",     "run", "--suite", t_path("suite.json"), "--model", m,   "--threads", "1",
        "--repeats", "2",   "--db",    t_path("r.db"),       "-q",      NULL};
    char msg[4096];
    int st;
    ASSERT_OK(interrupted_after_1s(argv, msg, sizeof msg, &st));
    ASSERT(WIFEXITED(st));
    if (WEXITSTATUS(st) == 0) SKIP("the run finished before the signal (a very fast machine)");
    ASSERT_EQ(WEXITSTATUS(st), 130);
    ASSERT_CONTAINS(msg, "--resume 1");
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "runs", "--json", "--db", t_path("r.db"), NULL));
    ASSERT_CONTAINS(o.out, "\"interrupted\"");
    t_out_free(&o);
    /* resumed under another kernel set: the run names both */
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("suite.json"), "--model", m, "--repeats", "2",
                      "--resume", "1", "--cpu", "portable", "--db", t_path("r.db"), "-q", NULL));
    ASSERT_EQ(o.code, 0);
    t_out_free(&o);
    ASSERT_EQ(t_sql_int(t_path("r.db"), "SELECT count(*) FROM runs WHERE kernels LIKE '%; "
                                        "portable%(forced)%' OR kernels LIKE 'portable%'"),
              1);
    return 0;
}

/* A listening socket on 127.0.0.1 (any free port, in *port) and a child
 * process to serve it: returns 0 in the child (with *fd), the child's pid
 * in the parent, -1 on failure. */
static pid_t fork_loopback_server(int *port, int *fd)
{
    int one = 1;
    *fd = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(*fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (bind(*fd, (struct sockaddr *)&a, sizeof a) || listen(*fd, 8) ||
        getsockname(*fd, (struct sockaddr *)&a, &al))
        return -1;
    *port = ntohs(a.sin_port);
    pid_t pid = fork();
    if (pid != 0) close(*fd);
    return pid;
}

/* A loopback server that answers every request with HTTP 400 and an error
 * message echoing the request's Authorization header (as some proxies do).
 * Returns its pid; *port is where it listens. */
static pid_t echo_auth_server(int *port)
{
    int fd;
    pid_t pid = fork_loopback_server(port, &fd);
    if (pid != 0) return pid;
    for (int k = 0; k < 50; k++) { /* bounded: the client retries at most a few times */
        int c = accept(fd, NULL, NULL);
        if (c < 0) _exit(0);
        char req[8192];
        ssize_t n = read(c, req, sizeof req - 1);
        req[n > 0 ? n : 0] = '\0';
        char *auth = strstr(req, "Authorization: ");
        char *end = auth ? strstr(auth, "\r\n") : NULL;
        if (end) *end = '\0';
        char body[1024], resp[2048];
        snprintf(body, sizeof body, "{\"error\":{\"message\":\"rejected header: %.200s\"}}",
                 auth ? auth : "none");
        int m = snprintf(resp, sizeof resp,
                         "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                         "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                         strlen(body), body);
        if (write(c, resp, (size_t)m) < 0) _exit(1);
        close(c);
    }
    _exit(0);
}

TEST(robust_api_key_redacted_from_server_errors, e2e)
{
    int port;
    pid_t srv = echo_auth_server(&port);
    ASSERT(srv > 0);
    static const char key[] = "sk-qgate-test-secret-0123456789";
    setenv("QGATE_API_KEY", key, 1);
    char spec[256];
    snprintf(spec, sizeof spec, "http://127.0.0.1:%d/v1?model=m&retries=0", port);
    struct t_out o;
    int rc = t_qgate(&o, "tokenize", spec, "--prompt", "hi", NULL);
    kill(srv, SIGKILL);
    waitpid(srv, NULL, 0);
    ASSERT_OK(rc);
    ASSERT(o.code != 0);
    ASSERT_CONTAINS(o.err, "rejected header: Authorization: Bearer [redacted]");
    if (strstr(o.err, key) || strstr(o.out, key)) T_FAIL_("the key was printed:\n%s", o.err);
    t_out_free(&o);
    return 0;
}

TEST(robust_two_processes_create_one_database, e2e)
{
    /* two qgate processes creating the same new database at once: both
     * migrate safely (one waits, re-reads the version and skips) */
    for (int k = 0; k < 10; k++) {
        char db[64], *errs[2];
        snprintf(db, sizeof db, "new%d.db", k);
        pid_t pid[2];
        int fds[2][2];
        for (int i = 0; i < 2; i++) {
            ASSERT_OK(pipe(fds[i]));
            pid[i] = fork();
            if (pid[i] == 0) {
                dup2(fds[i][1], 2);
                close(fds[i][0]);
                /* run creates the database, then stops on the missing suite */
                execl(QG_BINARY, "qgate", "run", "--suite", t_path("none.json"), "--model",
                      "a=none.gguf", "--db", t_path(db), (char *)NULL);
                _exit(127);
            }
            close(fds[i][1]);
        }
        for (int i = 0; i < 2; i++) {
            int st;
            char buf[2048];
            size_t got = 0;
            ssize_t n;
            while ((n = read(fds[i][0], buf + got, sizeof buf - 1 - got)) > 0)
                got += (size_t)n; /* to the end: a closed pipe would kill the writer */
            buf[got] = '\0';
            close(fds[i][0]);
            waitpid(pid[i], &st, 0);
            errs[i] = buf;
            /* the missing suite (66), never a failed migration (70) */
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 66 || strstr(errs[i], "migrating"))
                T_FAIL_("try %d, process %d: exit %d: %s", k, i, WEXITSTATUS(st), errs[i]);
        }
    }
    return 0;
}

/* A loopback server that serves one model and answers completions with
 * the given log-prob for every prompt token after the first (the count
 * right, the number impossible), or a 200 with an error body when lp is
 * NAN. */
static pid_t bad_numbers_server(double lp, int *port)
{
    int fd;
    pid_t pid = fork_loopback_server(port, &fd);
    if (pid != 0) return pid;
    for (int k = 0; k < 50; k++) {
        int c = accept(fd, NULL, NULL);
        if (c < 0) _exit(0);
        char req[65536];
        size_t got = 0;
        ssize_t n;
        char *body = NULL;
        while (got < sizeof req - 1 && (n = read(c, req + got, sizeof req - 1 - got)) > 0) {
            got += (size_t)n;
            req[got] = '\0';
            char *h = strstr(req, "\r\n\r\n"), *cl = strstr(req, "Content-Length: ");
            if (h && (!cl || got >= (size_t)(h + 4 - req) + strtoul(cl + 16, NULL, 10))) {
                body = h + 4;
                break;
            }
        }
        struct sbuf out;
        sbuf_init(&out, 0);
        int status = 200;
        if (!strncmp(req, "GET /v1/models", 14)) {
            sbuf_printf(&out, "{\"data\":[{\"id\":\"m\"}]}");
        } else if (strstr(req, "POST /v1/completions") && body) {
            cJSON *j = cJSON_Parse(body);
            int np = cJSON_GetArraySize(cJSON_GetObjectItem(j, "prompt"));
            cJSON_Delete(j);
            if (isnan(lp)) {
                sbuf_printf(&out, "{\"error\":{\"message\":\"model m is still loading\"}}");
            } else {
                sbuf_printf(&out,
                            "{\"choices\":[{\"text\":\"\",\"logprobs\":{\"token_logprobs\":[null");
                for (int i = 1; i < np; i++)
                    sbuf_printf(&out, ",%.17g", i == 1 ? lp : -1.0);
                sbuf_printf(&out, "]}}]}");
            }
        } else {
            status = 404;
            sbuf_printf(&out, "{\"error\":{\"message\":\"no such endpoint\"}}");
        }
        char head[256];
        int hl = snprintf(head, sizeof head,
                          "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: "
                          "%zu\r\nConnection: close\r\n\r\n",
                          status, out.len);
        if (write(c, head, (size_t)hl) < 0 || write(c, out.data, out.len) < 0) _exit(1);
        sbuf_release(&out);
        close(c);
    }
    _exit(0);
}

TEST(robust_impossible_remote_numbers_refused, e2e)
{
    ASSERT_OK(synth("tok.gguf", GGML_F32)); /* a local tokenizer for the spec */
    static const struct {
        double lp;
        const char *want;
    } cases[] = {{-1e308, "which no probability has"},
                 {7.0, "which no probability has"},
                 {NAN, "the server answered 200 with an error: model m is still loading"}};
    for (int k = 0; k < 3; k++) {
        int port;
        pid_t srv = bad_numbers_server(cases[k].lp, &port);
        ASSERT(srv > 0);
        char spec[4400];
        snprintf(spec, sizeof spec, "http://127.0.0.1:%d/v1?model=m&retries=0&tokenizer=%s", port,
                 t_path("tok.gguf"));
        ASSERT_OK(write_text("t.txt", "the girl saw the big red ball and the dog was happy"));
        struct t_out o;
        int rc = t_qgate(&o, "ppl", spec, "--text", t_path("t.txt"), "--ctx", "8", NULL);
        kill(srv, SIGKILL);
        waitpid(srv, NULL, 0);
        ASSERT_OK(rc);
        if (o.code == 0) T_FAIL_("case %d scored: %s", k, o.out);
        ASSERT_CONTAINS(o.err, cases[k].want);
        t_out_free(&o);
    }
    return 0;
}

TEST(robust_piqa_extra_labels_refused, e2e)
{
    ASSERT_OK(write_text("p.jsonl",
                         "{\"goal\":\"open a jar\",\"sol1\":\"twist\",\"sol2\":\"smash\"}\n"
                         "{\"goal\":\"dry a cup\",\"sol1\":\"towel\",\"sol2\":\"oven\"}\n"));
    ASSERT_OK(write_text("p.lst", "0\n0\n1\n"));
    char h1[65], h2[65], err[QG_ERRMSG_MAX], suite[2048];
    ASSERT_OK(hash_sha256_file(t_path("p.jsonl"), h1, err, sizeof err));
    ASSERT_OK(hash_sha256_file(t_path("p.lst"), h2, err, sizeof err));
    snprintf(
        suite, sizeof suite,
        "{\"name\":\"s\",\"tasks\":[{\"name\":\"piqa\",\"benchmark\":\"piqa\",\"data\":{\"data\":"
        "\"p.jsonl\",\"labels\":\"p.lst\"},\"sha256\":{\"data\":\"%s\",\"labels\":\"%s\"}}]}",
        h1, h2);
    ASSERT_OK(write_text("suite.json", suite));
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "suite", "check", t_path("suite.json"), NULL));
    ASSERT_EQ(o.code, 65);
    ASSERT_CONTAINS(o.err, "p.lst:3: more labels than items");
    t_out_free(&o);
    /* a directory as perplexity data: refused by suite check, as run would */
    ASSERT_OK(mkdir(t_path("texts"), 0755));
    ASSERT_OK(write_text("texts/a.txt", "the girl saw the ball"));
    ASSERT_OK(hash_sha256_path(t_path("texts"), h1, err, sizeof err));
    snprintf(suite, sizeof suite,
             "{\"name\":\"s\",\"tasks\":[{\"name\":\"ppl\",\"kind\":\"perplexity\",\"data\":"
             "\"texts\",\"sha256\":\"%s\"}]}",
             h1);
    ASSERT_OK(write_text("suite.json", suite));
    ASSERT_OK(t_qgate(&o, "suite", "check", t_path("suite.json"), NULL));
    ASSERT_EQ(o.code, 65);
    ASSERT_CONTAINS(o.err, "must be a file");
    t_out_free(&o);
    return 0;
}

TEST(robust_writer_waits_only_for_inserts, e2e)
{
    /* a second writer (another process) while a run computes rows (two
     * models in lockstep, then one alone): the run holds the write lock only
     * to insert, so a writer that does not wait (1 ms) gets it on most tries;
     * a run that held it while computing would refuse nearly all. Counted,
     * not timed: a load slows the inserts and the computing alike. */
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(slow_ppl_setup());
    char m[4200], m2[4200];
    snprintf(m, sizeof m, "a=%s", t_path("a.gguf"));
    snprintf(m2, sizeof m2, "b=%s", t_path("a.gguf")); /* two models: lockstep */
    struct store *w;
    ASSERT_OK(store_open(t_path("r.db"), NULL, &w, err, sizeof err)); /* created, migrated */
    store_close(w);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1), dup2(null, 2);
        execl(QG_BINARY, "qgate", "run", "--suite", t_path("suite.json"), "--model", m, "--model",
              m2, "--threads", "1", "--db", t_path("r.db"), "-q", (char *)NULL);
        _exit(127);
    }
    struct store_params wp = {.busy_timeout_ms = 1};
    ASSERT_OK(store_open(t_path("r.db"), &wp, &w, err, sizeof err));
    int tries = 0, busy = 0, during = 0, st = 0;
    char why[QG_ERRMSG_MAX] = "";
    while (waitpid(pid, &st, WNOHANG) == 0) {
        int rc = store_begin(w);
        if (!rc) rc = store_commit(w);
        if (rc) {
            busy++;
            snprintf(why, sizeof why, "%s", store_errmsg(w));
            store_rollback(w);
        }
        int64_t rows = 0;
        if (store_item_count(w, 1, &rows) == QG_OK && rows > 0) during++;
        tries++;
        usleep(20 * 1000);
    }
    store_close(w);
    ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    if (during < 5) SKIP("the run finished before a writer could try (a very fast machine)");
    printf("%d of %d writes found the lock taken (%d during the run)\n", busy, tries, during);
    if (2 * busy > tries) T_FAIL_("%d of %d writes found the lock taken: %s", busy, tries, why);
    /* show: a perplexity task's size is its windows (not "-1 items"), and
     * lockstep trials record the joint pass's seconds (not 0.00) */
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "show", "1", "--db", t_path("r.db"), NULL));
    ASSERT_EQ(o.code, 0);
    ASSERT(!strstr(o.out, "-1 items") && strstr(o.out, "windows"));
    ASSERT(!strstr(o.out, "    0.00"));
    t_out_free(&o);
    return 0;
}

TEST(robust_busy_database_says_so, unit)
{
    /* a writer that cannot get the lock in its wait says who holds it */
    struct store *a, *b;
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(store_open(t_path("b.db"), NULL, &a, err, sizeof err));
    struct store_params bp = {.busy_timeout_ms = 100};
    ASSERT_OK(store_open(t_path("b.db"), &bp, &b, err, sizeof err));
    ASSERT_OK(store_begin(a));
    ASSERT_EQ(store_begin(b), QG_ERR_BUSY);
    ASSERT_CONTAINS(store_errmsg(b), "database is busy (another qgate is writing");
    ASSERT_OK(store_rollback(b)); /* nothing to roll back: not an error */
    ASSERT_EQ(qg_exit_code(QG_ERR_BUSY), 75);
    ASSERT_OK(store_commit(a));
    store_close(a);
    store_close(b);
    return 0;
}

/* `qgate ARGS... --db db` as a user who cannot write to db's folder (as
 * root: the user nobody); its exit code, or -1 when that user cannot run
 * qgate here at all. */
static int qgate_readonly(const char *db, const char *a1, const char *a2)
{
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1), dup2(null, 2);
        if (getuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(126);
        if (access(QG_BINARY, X_OK) != 0 || access(db, R_OK) != 0) _exit(126);
        if (a2)
            execl(QG_BINARY, "qgate", a1, a2, "--db", db, (char *)NULL);
        else
            execl(QG_BINARY, "qgate", a1, "--db", db, (char *)NULL);
        _exit(126);
    }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -2;
    return WEXITSTATUS(st) == 126 ? -1 : WEXITSTATUS(st);
}

TEST(robust_readonly_folder_still_readable, e2e)
{
    /* a database in a folder the reader cannot write (a read-only mount
     * behaves the same: WAL's -shm file cannot be made): runs and show
     * read it as an immutable file */
    char dir[4200], db[4300];
    snprintf(dir, sizeof dir, "%s", t_path("ro"));
    snprintf(db, sizeof db, "%s/r.db", dir);
    ASSERT_OK(mkdir(dir, 0755));
    struct store *s;
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(store_open(db, NULL, &s, err, sizeof err));
    int64_t run, m;
    struct store_run_new rn = {.command = "qgate run", .suite_hash = "h", .repeats = 1};
    ASSERT_OK(store_run_create(s, &rn, &run));
    struct store_model_new a = {.name = "a", .spec = "a=x.gguf", .backend = "cpu"};
    ASSERT_OK(store_model_add(s, run, &a, &m));
    store_close(s); /* a clean close removes -wal and -shm */
    ASSERT(access(t_path("ro/r.db-shm"), F_OK) != 0);
    ASSERT_OK(chmod(dir, 0555));
    ASSERT_OK(chmod(t_path(""), 0755)); /* the user nobody may pass through */
    int code = qgate_readonly(db, "runs", NULL);
    if (code == -1) SKIP("another user cannot run qgate from this folder");
    ASSERT_EQ(code, 0);
    ASSERT_EQ(qgate_readonly(db, "show", "1"), 0);
    ASSERT(access(t_path("ro/r.db-shm"), F_OK) != 0); /* nothing was written */
    /* a -wal with changes an immutable read would miss: refused, saying so */
    ASSERT_OK(chmod(dir, 0755));
    ASSERT_OK(t_write_file(t_path("ro/r.db-wal"), "x", 1));
    ASSERT_OK(chmod(dir, 0555));
    ASSERT_EQ(qgate_readonly(db, "runs", NULL), 66);
    ASSERT_OK(chmod(dir, 0755));
    return 0;
}

TEST(robust_setup_is_atomic, e2e)
{
    /* setup fails after the run and its models are written (here a trigger
     * refuses the task rows): nothing of the run is left half-made */
    ASSERT_OK(synth("a.gguf", GGML_F32));
    struct sbuf d;
    sbuf_init(&d, 0);
    for (int i = 0; i < 100; i++)
        sbuf_printf(&d, "the girl saw the %s ball. ", i % 3 ? "red" : "big");
    ASSERT_OK(ppl_suite(d.data));
    sbuf_release(&d);
    struct store *s;
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(store_open(t_path("r.db"), NULL, &s, err, sizeof err));
    store_close(s);
    sqlite3 *db;
    ASSERT_EQ(sqlite3_open(t_path("r.db"), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "CREATE TRIGGER no_tasks BEFORE INSERT ON tasks "
                           "BEGIN SELECT RAISE(ABORT, 'tasks refused'); END",
                           NULL, NULL, NULL),
              SQLITE_OK);
    sqlite3_close(db);
    char m[4200];
    snprintf(m, sizeof m, "a=%s", t_path("a.gguf"));
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("suite.json"), "--model", m, "--db",
                      t_path("r.db"), "-q", NULL));
    ASSERT(o.code != 0);
    ASSERT_CONTAINS(o.err, "tasks refused");
    t_out_free(&o);
    ASSERT_OK(t_qgate(&o, "runs", "--db", t_path("r.db"), NULL));
    ASSERT_CONTAINS(o.out, "no runs"); /* none was left half-made */
    t_out_free(&o);
    ASSERT_EQ(sqlite3_open(t_path("r.db"), &db), SQLITE_OK);
    sqlite3_stmt *st;
    ASSERT_EQ(
        sqlite3_prepare_v2(db, "SELECT (SELECT count(*) FROM runs) + (SELECT count(*) FROM models)",
                           -1, &st, NULL),
        SQLITE_OK);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    int left = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    ASSERT_EQ(left, 0);
    return 0;
}

TEST(robust_outputs_never_clobber, e2e)
{
    /* outputs are checked before the run: a missing folder fails at once
     * (73) and stores nothing; an output that names the suite is refused
     * (64) and the suite is intact; a symlinked output keeps its link; and
     * compare or report never create an empty database */
    ASSERT_OK(synth("a.gguf", GGML_F32));
    struct sbuf d;
    sbuf_init(&d, 0);
    for (int i = 0; i < 200; i++)
        sbuf_printf(&d, "the girl saw the %s ball. ", i % 3 ? "red" : "big");
    ASSERT_OK(ppl_suite(d.data));
    sbuf_release(&d);
    char base[4200], cand[4200];
    snprintf(base, sizeof base, "a=%s", t_path("a.gguf"));
    snprintf(cand, sizeof cand, "b=%s", t_path("a.gguf"));
    size_t n0, n1;
    char *suite0 = t_read_file(t_path("suite.json"), &n0);
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "gate", "--suite", t_path("suite.json"), "--baseline", base,
                      "--candidate", cand, "--allow-identical", "--db", t_path("g.db"), "--report",
                      t_path("no/such/dir/r.html"), "-q", NULL));
    ASSERT_EQ(o.code, 73);
    ASSERT_CONTAINS(o.err, "does not exist");
    ASSERT(access(t_path("g.db"), F_OK) != 0); /* nothing ran, nothing stored */
    t_out_free(&o);
    ASSERT_OK(t_qgate(&o, "gate", "--suite", t_path("suite.json"), "--baseline", base,
                      "--candidate", cand, "--allow-identical", "--db", t_path("g.db"), "--json",
                      t_path("suite.json"), "-q", NULL));
    ASSERT_EQ(o.code, 64);
    ASSERT_CONTAINS(o.err, "writing it would destroy it");
    char *suite1 = t_read_file(t_path("suite.json"), &n1);
    ASSERT(suite0 && suite1 && n0 == n1 && !memcmp(suite0, suite1, n0));
    free(suite0);
    free(suite1);
    t_out_free(&o);
    /* a symlink as output: the file it names gets the report, the link stays */
    ASSERT_OK(symlink(t_path("real.json"), t_path("link.json")));
    ASSERT_OK(t_qgate(&o, "gate", "--suite", t_path("suite.json"), "--baseline", base,
                      "--candidate", cand, "--allow-identical", "--db", t_path("g.db"), "--json",
                      t_path("link.json"), "-q", NULL));
    ASSERT(o.code <= 2);
    /* -q: only the verdict line, not the table */
    ASSERT_CONTAINS(o.out, "b: ");                  /* "b: PASS — perplexity ..." */
    ASSERT(!strchr(strchr(o.out, '\n') + 1, '\n')); /* one line */
    ASSERT(!strstr(o.out, "stored as comparison"));
    t_out_free(&o);
    struct stat st;
    ASSERT(lstat(t_path("link.json"), &st) == 0 && S_ISLNK(st.st_mode));
    ASSERT(stat(t_path("real.json"), &st) == 0 && st.st_size > 100);
    /* /dev/stdout: written in place, the symlink untouched */
    ASSERT_OK(t_qgate(&o, "report", "--comparison", "1", "--format", "json", "--output",
                      "/dev/stdout", "--db", t_path("g.db"), NULL));
    ASSERT_EQ(o.code, 0);
    ASSERT_CONTAINS(o.out, "\"verdict\"");
    ASSERT(lstat("/dev/stdout", &st) == 0 && S_ISLNK(st.st_mode));
    t_out_free(&o);
    /* no database: compare and report say so and create nothing */
    ASSERT_OK(t_qgate(&o, "compare", "--baseline", "a", "--candidate", "b", "--db",
                      t_path("none.db"), NULL));
    ASSERT_EQ(o.code, 66);
    ASSERT_CONTAINS(o.err, "no such database");
    t_out_free(&o);
    ASSERT_OK(t_qgate(&o, "report", "--run", "1", "--baseline", "a", "--candidate", "b", "--db",
                      t_path("none.db"), NULL));
    ASSERT_EQ(o.code, 66);
    t_out_free(&o);
    ASSERT(access(t_path("none.db"), F_OK) != 0);
    return 0;
}

TEST(robust_missing_pin_says_what_to_pin, e2e)
{
    /* a task without a sha256 pin: the error gives the hash to pin */
    ASSERT_OK(write_text("mc.jsonl", "{\"id\":1,\"q\":\"a\",\"c\":[\"x\",\"y\"],\"g\":0}\n"));
    char sha[65], err[QG_ERRMSG_MAX], suite[1024];
    ASSERT_OK(hash_sha256_file(t_path("mc.jsonl"), sha, err, sizeof err));
    snprintf(suite, sizeof suite,
             "{\"name\":\"s\",\"tasks\":[{\"name\":\"t\",\"kind\":\"custom\",\"data\":\"mc.jsonl\","
             "%s}]}",
             mc_fields);
    ASSERT_OK(write_text("suite.json", suite));
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "suite", "check", t_path("suite.json"), NULL));
    ASSERT_EQ(o.code, 65);
    ASSERT_CONTAINS(o.err, "has no sha256 pin");
    ASSERT_CONTAINS(o.err, sha);
    t_out_free(&o);
    return 0;
}

TEST(robust_selection_and_secrets, e2e)
{
    /* issue 30, items 6 and 9: an "items" index past the data is an error,
     * not a silently shorter run; an items_file pointed at a secret never
     * prints its line; --tasks "" is no selection of nothing */
    static const char *data = "{\"id\":\"1\",\"q\":\"the girl saw the\",\"c\":[\" big ball\","
                              "\" red dog\"],\"g\":0}\n{\"id\":\"2\",\"q\":\"the dog was\","
                              "\"c\":[\" happy\",\" sad\"],\"g\":1}\n";
    struct t_out o;
    char extra[512];
    snprintf(extra, sizeof extra, "%s,\"items\":[1,5]", mc_fields);
    ASSERT_OK(check_custom(data, extra, &o));
    t_out_free(&o);
    ASSERT_OK(synth("a.gguf", GGML_F32));
    char m[4200], db[4200];
    snprintf(m, sizeof m, "a=%s", t_path("a.gguf"));
    snprintf(db, sizeof db, "%s", t_path("r.db"));
    ASSERT_OK(
        t_qgate(&o, "run", "--suite", t_path("suite.json"), "--model", m, "--db", db, "-q", NULL));
    ASSERT_EQ(o.code, 65);
    ASSERT_CONTAINS(o.err, "task 't': \"items\" names item 5, but its data has 2 items (0..1)");
    t_out_free(&o);
    ASSERT_OK(write_text(".env", "OPENAI_API_KEY=sk-secret-123\n"));
    snprintf(extra, sizeof extra, "%s,\"items_file\":\".env\"", mc_fields);
    ASSERT_OK(check_custom(data, extra, &o));
    ASSERT_EQ(o.code, 65);
    ASSERT_CONTAINS(o.err, ".env:1: not an item index (the line holds 28 bytes of text, not shown");
    ASSERT(!strstr(o.err, "sk-secret") && !strstr(o.out, "sk-secret"));
    t_out_free(&o);
    ASSERT_OK(check_custom(data, mc_fields, &o));
    t_out_free(&o);
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("suite.json"), "--model", m, "--tasks", "",
                      "--db", t_path("e.db"), "-q", NULL));
    ASSERT_EQ(o.code, 64);
    ASSERT_CONTAINS(o.err, "--tasks names no task");
    ASSERT(access(t_path("e.db"), F_OK) != 0);
    t_out_free(&o);
    return 0;
}

TEST(robust_fifo_everywhere_refused, e2e)
{
    /* issue 30, item 11: a FIFO as model, text, database, suite or policy
     * is refused at once (opened without blocking, then checked), and
     * /dev/zero as text is not hashed forever */
    ASSERT_OK(synth("a.gguf", GGML_F32));
    ASSERT_OK(mkfifo(t_path("p"), 0600));
    ASSERT_OK(write_text("t.txt", "the girl saw the big red ball and the dog was happy"));
    char a[4200], p[4200], t[4200], db[4200];
    snprintf(a, sizeof a, "%s", t_path("a.gguf"));
    snprintf(p, sizeof p, "%s", t_path("p"));
    snprintf(t, sizeof t, "%s", t_path("t.txt"));
    snprintf(db, sizeof db, "%s", t_path("r.db"));
    const char *cmds[][10] = {
        {"ppl", p, "--text", t, NULL},
        {"ppl", a, "--text", p, NULL},
        {"ppl", a, "--text", "/dev/zero", NULL},
        {"gate", a, a, "--allow-identical", "--db", p, "-q", NULL},
        {"gate", "--suite", p, a, a, "--allow-identical", "--db", db, NULL},
        {"gate", a, a, "--allow-identical", "--policy", p, "--db", db, "-q", NULL},
        {"compare", "-b", "x", "-c", "y", "--db", p, NULL},
    };
    struct t_out o;
    for (size_t k = 0; k < sizeof cmds / sizeof *cmds; k++) {
        ASSERT_OK(t_qgate_argv(&o, cmds[k]));
        if (o.code != 65 && o.code != 66)
            T_FAIL_("case %zu (%s): exit %d: %s", k, cmds[k][0], o.code, o.err);
        ASSERT_CONTAINS(o.err, "not a regular file");
        t_out_free(&o);
    }
    return 0;
}

TEST(robust_outputs_never_overwrite_suite_data, e2e)
{
    /* issue 30, item 8: `gate --json choices.jsonl`, a task's own data, or
     * its items file, is refused before anything runs; the file is intact */
    static const char *data = "{\"id\":\"1\",\"q\":\"the girl saw the\",\"c\":[\" big ball\","
                              "\" red dog\"],\"g\":0}\n";
    struct t_out o;
    ASSERT_OK(write_text("items.txt", "0\n"));
    char extra[512];
    snprintf(extra, sizeof extra, "%s,\"items_file\":\"items.txt\"", mc_fields);
    ASSERT_OK(check_custom(data, extra, &o));
    ASSERT_EQ(o.code, 0);
    t_out_free(&o);
    ASSERT_OK(synth("a.gguf", GGML_F32));
    char a[4200];
    snprintf(a, sizeof a, "%s", t_path("a.gguf"));
    static const char *const victims[] = {"mc.jsonl", "items.txt"};
    for (int k = 0; k < 2; k++) {
        ASSERT_OK(t_qgate(&o, "gate", "--suite", t_path("suite.json"), a, a, "--allow-identical",
                          "--json", t_path(victims[k]), "--db", t_path("g.db"), "-q", NULL));
        ASSERT_EQ(o.code, 64);
        ASSERT_CONTAINS(o.err, "writing it would destroy it");
        t_out_free(&o);
    }
    size_t n;
    char *back = t_read_file(t_path("mc.jsonl"), &n);
    ASSERT(back && n == strlen(data) && !memcmp(back, data, n));
    free(back);
    ASSERT(access(t_path("g.db"), F_OK) != 0);
    return 0;
}

TEST(robust_gate_resume_after_sigint, e2e)
{
    /* issue 30, item 13: a gate stopped by SIGINT says "--resume N"; the
     * same gate with --resume N finishes the run (every baseline repeat
     * kept) and judges it; a refused resume leaves the run interrupted */
    ASSERT_OK(slow_ppl_setup());
    struct synth_params sp = synth_default_params();
    sp.dim = 256, sp.ffn = 512, sp.n_layers = 4, sp.ctx = 128, sp.wtype = GGML_Q8_0;
    char err[QG_ERRMSG_MAX], a[4200], b[4200], db[4200];
    ASSERT_OK(synth_write(&sp, t_path("b.gguf"), err, sizeof err));
    snprintf(a, sizeof a, "%s", t_path("a.gguf"));
    snprintf(b, sizeof b, "%s", t_path("b.gguf"));
    snprintf(db, sizeof db, "%s", t_path("g.db"));
    const char *argv[] = {"qgate", "gate", "--suite",   t_path("suite.json"),
                          a,       b,      "--threads", "1",
                          "--db",  db,     "-q",        NULL};
    char msg[4096];
    int st;
    ASSERT_OK(interrupted_after_1s(argv, msg, sizeof msg, &st));
    ASSERT(WIFEXITED(st));
    if (WEXITSTATUS(st) <= 2) SKIP("the gate finished before the signal (a very fast machine)");
    ASSERT_EQ(WEXITSTATUS(st), 130);
    ASSERT_CONTAINS(msg, "--resume 1");
    struct t_out o;
    /* refused (another model list): the run stays interrupted, not failed */
    ASSERT_OK(t_qgate(&o, "gate", "--suite", t_path("suite.json"), a, a, "--allow-identical",
                      "--resume", "1", "--db", db, "-q", NULL));
    ASSERT_EQ(o.code, 65);
    t_out_free(&o);
    ASSERT_EQ(t_sql_int(db, "SELECT count(*) FROM runs WHERE status = 3"), 1); /* interrupted */
    ASSERT_OK(t_qgate(&o, "gate", "--suite", t_path("suite.json"), a, b, "--resume", "1", "--db",
                      db, "-q", NULL));
    if (o.code > 2) T_FAIL_("gate --resume 1: exit %d: %s", o.code, o.err);
    t_out_free(&o);
    /* every trial done, the baseline's two repeats among them, one verdict */
    ASSERT_EQ(t_sql_int(db, "SELECT count(*) FROM trials WHERE status NOT IN (2, 4)"), 0);
    ASSERT_EQ(t_sql_int(db, "SELECT count(DISTINCT repeat) FROM trials t JOIN models m ON "
                            "m.id = t.model_id WHERE m.role = 0"),
              2);
    ASSERT_EQ(t_sql_int(db, "SELECT count(*) FROM comparisons"), 1);
    return 0;
}

TEST(robust_stored_baseline_one_vocabulary_every_reference, e2e)
{
    /* issue 30, item 7: a candidate whose vocabulary differs from the
     * stored baseline's (which lockstep refuses) is refused on the
     * stored-baseline path too, naming both sizes */
    struct sbuf d;
    sbuf_init(&d, 0);
    for (int i = 0; i < 400; i++)
        sbuf_printf(&d, "the girl saw the %s ball. ", i % 3 ? "red" : "big");
    ASSERT_OK(ppl_suite(d.data));
    sbuf_release(&d);
    char err[QG_ERRMSG_MAX], a[4200], b[4200], c[4200], db[4200];
    struct synth_params sp = synth_default_params();
    ASSERT_OK(synth_write(&sp, t_path("a.gguf"), err, sizeof err));
    sp.wtype = GGML_Q8_0;
    ASSERT_OK(synth_write(&sp, t_path("b.gguf"), err, sizeof err));
    sp.n_vocab += 1; /* one more token */
    ASSERT_OK(synth_write(&sp, t_path("c.gguf"), err, sizeof err));
    snprintf(a, sizeof a, "%s", t_path("a.gguf"));
    snprintf(b, sizeof b, "%s", t_path("b.gguf"));
    snprintf(c, sizeof c, "%s", t_path("c.gguf"));
    snprintf(db, sizeof db, "%s", t_path("g.db"));
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "gate", "--suite", t_path("suite.json"), a, b, "--db", db, "-q", NULL));
    if (o.code > 2) T_FAIL_("gate: exit %d: %s", o.code, o.err);
    t_out_free(&o);
    ASSERT_OK(t_qgate(&o, "gate", "--suite", t_path("suite.json"), a, c, "--baseline-run", "1",
                      "--db", db, "-q", NULL));
    ASSERT_EQ(o.code, 65);
    ASSERT_CONTAINS(o.err, "tokens, the stored baseline (run 1)");
    ASSERT_CONTAINS(o.err, "need one vocabulary");
    t_out_free(&o);
    /* a baseline whose references cover only some windows (resumed
     * without them) cannot stand in: refused up front, not "window N: no
     * stored baseline reference" halfway */
    sqlite3 *h;
    ASSERT_EQ(sqlite3_open(db, &h), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(h, "DELETE FROM refs WHERE idx >= 2", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
    ASSERT_OK(t_qgate(&o, "gate", "--suite", t_path("suite.json"), a, b, "--baseline-run", "1",
                      "--db", db, "-q", NULL));
    ASSERT(o.code > 2);
    ASSERT_CONTAINS(o.err, "keeps top-K references of 2 of the");
    t_out_free(&o);
    return 0;
}
