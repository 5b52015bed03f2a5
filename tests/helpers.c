/* helpers — temp dirs, files, running the qgate binary, byte builders. */
#include "tests/test.h"
#include "backends/ggml_types.h"
#include "backends/gguf.h"
#include "backends/llama.h"
#include "backends/dequant.h"
#include "backends/matmul.h"
#include "backends/quant.h"
#include "backends/synth.h"
#include "core/status.h"
#include "core/util.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

const char *t_tmp(void)
{
    const char *d = getenv("QG_TEST_TMP");
    return d ? d : "/tmp";
}

const char *t_path(const char *name)
{
    static char bufs[8][4096];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, sizeof bufs[0], "%s/%s", t_tmp(), name);
    return b;
}

const char *t_shared(const char *rel)
{
    static char bufs[4][4096];
    static int next;
    char *b = bufs[next++ % 4];
    const char *root = getenv("QG_SHARED");
    snprintf(b, sizeof bufs[0], "%s/%s", root ? root : QG_SOURCE_DIR "/../shared", rel);
    return access(b, R_OK) == 0 ? b : NULL;
}

int t_write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int bad = fwrite(data, 1, n, f) != n;
    bad |= fclose(f) != 0;
    return bad ? -1 : 0;
}

char *t_read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, len = 0;
    char *p = malloc(cap);
    size_t r;
    while (p && (r = fread(p + len, 1, cap - len - 1, f)) > 0) {
        len += r;
        if (cap - len - 1 == 0) {
            char *q = realloc(p, cap *= 2);
            if (!q) {
                free(p);
                p = NULL;
            }
            p = q;
        }
    }
    fclose(f);
    if (p) p[len] = '\0';
    if (n) *n = len;
    return p;
}

int t_qgate(struct t_out *o, const char *arg, ...)
{
    const char *args[63];
    int n = 0;
    va_list ap;
    va_start(ap, arg);
    for (const char *a = arg; a && n < 62; a = va_arg(ap, const char *))
        args[n++] = a;
    va_end(ap);
    args[n] = NULL;
    return t_qgate_argv(o, args);
}

int t_qgate_argv(struct t_out *o, const char *const *args)
{
    const char *argv[64];
    int n = 0;
    argv[n++] = QG_BINARY;
    for (int i = 0; args[i] && n < 63; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    return t_run_argv(o, argv);
}

int t_run_argv(struct t_out *o, const char *const *argv)
{
    char outp[4096], errp[4096];
    snprintf(outp, sizeof outp, "%s/.stdout", t_tmp());
    snprintf(errp, sizeof errp, "%s/.stderr", t_tmp());
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int fo = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0) _exit(127);
        dup2(fo, 1);
        dup2(fe, 2);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    o->code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    o->out = t_read_file(outp, NULL);
    o->err = t_read_file(errp, NULL);
    if (!o->out) o->out = calloc(1, 1);
    if (!o->err) o->err = calloc(1, 1);
    return 0;
}

void t_out_free(struct t_out *o)
{
    free(o->out);
    free(o->err);
    o->out = o->err = NULL;
}

void bb_bytes(struct bb *b, const void *data, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n)
            cap *= 2;
        unsigned char *p = realloc(b->p, cap);
        if (!p) abort();
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
}

void bb_u32(struct bb *b, uint32_t v)
{
    unsigned char t[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    bb_bytes(b, t, 4);
}

void bb_u64(struct bb *b, uint64_t v)
{
    bb_u32(b, (uint32_t)v);
    bb_u32(b, (uint32_t)(v >> 32));
}

void bb_str(struct bb *b, const char *s)
{
    bb_u64(b, strlen(s));
    bb_bytes(b, s, strlen(s));
}

void bb_free(struct bb *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

int t_have(const char *prog)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", prog);
    return system(cmd) == 0;
}

int t_synth(const char *name, uint32_t type, uint64_t seed)
{
    struct synth_params p = synth_default_params();
    p.wtype = type;
    p.seed = seed;
    char err[QG_ERRMSG_MAX];
    return synth_write(&p, t_path(name), err, sizeof err);
}

int t_logits(const char *path, int act, const struct simfmt *f, int threads, int n, float *lg)
{
    char err[QG_ERRMSG_MAX];
    struct gguf *g;
    struct llama_model *m;
    struct llama_ctx *c;
    ASSERT_OK(gguf_open(path, &g, err, sizeof err));
    ASSERT_OK(llama_load(g, path, &m, err, sizeof err));
    ASSERT_OK(llama_ctx_new(m, n, &c));
    llama_ctx_set_threads(c, threads);
    if (act != LLAMA_ACT_NONE) ASSERT_OK(llama_ctx_set_act(c, act, f));
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    ASSERT(ids);
    for (int i = 0; i < n; i++)
        ids[i] = 3 + (i * 37) % 200;
    ASSERT_OK(llama_eval(c, ids, n, 0, lg));
    free(ids);
    llama_ctx_free(c);
    llama_free(m);
    return 0;
}

long long t_sql_int(const char *path, const char *sql)
{
    sqlite3 *db;
    sqlite3_stmt *st;
    long long v = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) return -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    } else {
        printf("SQL error: %s\n", sqlite3_errmsg(db));
    }
    sqlite3_close(db);
    return v;
}

double t_ppl(const char *model, const char *text, const char *chunks)
{
    struct t_out o;
    if (t_qgate(&o, "ppl", model, "--text", text, "--ctx", "128", "--chunks", chunks, "--threads",
                "2", "--json", NULL))
        return -1;
    double v = -2;
    cJSON *j = o.code == 0 ? cJSON_Parse(o.out) : NULL;
    const cJSON *p = cJSON_GetObjectItem(j, "ppl");
    if (cJSON_IsNumber(p)) v = p->valuedouble;
    if (!j) fprintf(stderr, "%s: exit %d: %s\n", model, o.code, o.err);
    cJSON_Delete(j);
    t_out_free(&o);
    return v;
}

double t_nmse(const float *a, const float *b, size_t n)
{
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        e += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return e / s;
}

double t_logprob(const float *row, int V, int tok)
{
    double mx = row[0], z = 0;
    for (int v = 1; v < V; v++)
        mx = row[v] > mx ? row[v] : mx;
    for (int v = 0; v < V; v++)
        z += exp(row[v] - mx);
    return row[tok] - mx - log(z);
}

/* the fp16 bits of block b's d, where its type keeps it (IQ1_M: the top
 * nibbles of its four scale words; TQ1_0, TQ2_0 after their codes; the
 * others first) */
/* where a block keeps its fp16 d (IQ1_M's is spread: t_block_d) */
static size_t block_d_at(uint32_t type)
{
    switch (type) {
    case GGML_TQ1_0:
        return 52;
    case GGML_TQ2_0:
        return 64;
    case GGML_Q2_K:
        return 80;
    case GGML_Q3_K:
        return 108;
    case GGML_Q6_K:
        return 208;
    default:
        return 0;
    }
}

uint16_t t_block_d(uint32_t type, const uint8_t *b)
{
    if (type == GGML_IQ1_M)
        return (uint16_t)(b[49] >> 4 | (b[51] & 0xF0) | (b[53] >> 4) << 8 | (b[55] & 0xF0) << 8);
    const size_t at = block_d_at(type);
    return (uint16_t)(b[at] | b[at + 1] << 8);
}

void t_set_block_d(uint32_t type, uint8_t *b, uint16_t h)
{
    if (type == GGML_IQ1_M) {
        for (int k = 0; k < 4; k++) /* nibble k of d in the top of scale word k */
            b[49 + 2 * k] = (uint8_t)((b[49 + 2 * k] & 0x0F) | ((h >> 4 * k) & 0xF) << 4);
        return;
    }
    const size_t at = block_d_at(type);
    b[at] = (uint8_t)h, b[at + 1] = (uint8_t)(h >> 8);
}

float t_repacked_dot(const struct wmat *W, int64_t r, const struct matmul_q8 *a, int per)
{
    static const int8_t nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                  1,    13,   25,  38,  53,  69,  89,  113};
    static const int8_t fp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    const uint32_t ty = W->type;
    const struct ggml_type_info *ti = ggml_type_get(ty);
    float acc = 0, accm = 0;
    for (int64_t k0 = 0; k0 < W->in; k0 += per) {
        const uint8_t *b =
            W->data + (size_t)r * W->row_bytes + (size_t)(k0 / ti->block) * ti->type_size;
        int32_t I = 0, M = 0;
        float dw, dm = 0;
        for (int64_t e = k0 % ti->block; e < k0 % ti->block + per; e++) {
            const int q = a->q[k0 - k0 % ti->block + e];
            int u, sc = 1, mn = 0;
            if (ti->block == 32) {
                const int mx = ty == GGML_MXFP4,
                          n = e < 16 ? b[2 - mx + e] & 0xF : b[2 - mx + e - 16] >> 4;
                u = ty == GGML_Q4_0 ? n - 8 : mx ? fp4[n] : nl[n];
            } else if (ty == GGML_Q4_K) {
                const uint8_t byte = b[16 + 32 * (e / 64) + e % 32];
                u = e % 64 < 32 ? byte & 0xF : byte >> 4;
                dequant_k4_scale_min((int)(e / 32), b + 4, &sc, &mn);
            } else { /* Q2_K */
                u = b[16 + 32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32)) & 3;
                sc = b[e / 16] & 0xF, mn = b[e / 16] >> 4;
            }
            I += sc * u * q, M += mn * q;
        }
        if (ti->block == 32) {
            dw = quant_f16_to_f32((uint16_t)(b[0] | b[1] << 8));
            if (ty == GGML_MXFP4) { /* ggml's E8M0 halved */
                uint32_t bits = b[0] < 2 ? 0x00200000u << b[0] : (uint32_t)(b[0] - 1) << 23;
                memcpy(&dw, &bits, 4);
            }
        } else {
            const int at = ty == GGML_Q4_K ? 0 : 80;
            dw = quant_f16_to_f32((uint16_t)(b[at] | b[at + 1] << 8));
            dm = quant_f16_to_f32((uint16_t)(b[at + 2] | b[at + 3] << 8));
        }
        const float dx = a->d[k0 / (ti->block == 32 ? 32 : 256)];
        acc = fmaf((float)I, dw * dx, acc);
        if (ti->block == 256) accm = fmaf((float)M, dm * dx, accm);
    }
    return acc - accm;
}
