/* cmd_ppl — `qgate ppl MODEL --text FILE`: perplexity of one model. */
#include "backends/backend.h"
#include "cli/commands.h"
#include "harness/progress.h"
#include "core/status.h"
#include "core/util.h"
#include "tasks/perplexity.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct cli_opt opts[] = {
    {"text", 0, CLI_STR, "FILE", "corpus to score (UTF-8 text)", 0},
    CLI_OPT_DEVICE,
    {"ctx", 0, CLI_INT, "N", "window size in tokens (default: min(512, the model's context))", 0},
    {"chunks", 0, CLI_INT, "K", "score at most K windows (default: all)", 0},
    {"protocol", 0, CLI_STR, "NAME", "llamacpp (default, as llama-perplexity), rolling or stride",
     0},
    {"stride", 0, CLI_INT, "S", "window step for --protocol stride (default ctx/2)", 0},
    {"threads", 't', CLI_INT, "T", "threads (default: one per CPU)", 0},
    CLI_OPT_CPU,
    CLI_OPT_JSON,
    {"quiet", 'q', CLI_FLAG, NULL, "no progress bar", 0},
    CLI_OPT_END,
};

static int on_progress(void *ud, int64_t w, int64_t total, const struct ppl_window_stat *ws)
{
    (void)ws;
    progress_update(ud, w + 1, total, "windows");
    return 0;
}

static void print_text(const char *model, const char *text, const struct backend_info *info,
                       int64_t n_tokens, size_t n_bytes, const struct ppl_params *p,
                       const struct ppl_run *r)
{
    const struct ppl_result *x = &r->result;
    char hb[32];
    qg_human_bytes(info->weight_bytes, hb);
    printf("model          %s (%s, %s of weights in memory, as stored)\n", model, info->arch, hb);
    printf("text           %s: %zu bytes, %lld tokens\n", text, n_bytes, (long long)n_tokens);
    printf("protocol       %s, ctx %d", ppl_protocol_name(p->protocol), p->n_ctx);
    if (p->protocol == PPL_STRIDE) printf(", stride %d", p->stride);
    printf(", %lld windows, %lld tokens scored\n", (long long)x->windows, (long long)x->tokens);
    printf("token PPL      %.4f +/- %.5f (per-token SE, as llama.cpp)  +/- %.5f (per-window "
           "cluster SE)\n",
           x->ppl, x->ppl_se_iid, x->ppl_se_cluster);
    printf("mean NLL       %.6f nats/token\n", x->nll_mean);
    printf("word PPL       %.4f (%lld words)\n", x->word_ppl, (long long)x->words);
    printf("byte PPL       %.4f (%lld bytes), %.4f bits per byte\n", x->byte_ppl,
           (long long)x->bytes, x->bits_per_byte);
    printf("speed          %.0f tokens/s (%lld positions evaluated in %.2f s)\n",
           r->seconds > 0 ? (double)r->tokens_evaluated / r->seconds : 0.0,
           (long long)r->tokens_evaluated, r->seconds);
    char rss[32];
    qg_human_bytes(qg_peak_rss(), rss);
    printf("peak memory    %s (resident)\n", rss);
}

static cJSON *to_json(const char *model, const char *text, int64_t n_tokens,
                      const struct ppl_params *p, const struct ppl_run *r)
{
    const struct ppl_result *x = &r->result;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", model);
    cJSON_AddStringToObject(o, "text", text);
    cJSON_AddNumberToObject(o, "text_tokens", (double)n_tokens);
    cJSON_AddStringToObject(o, "protocol", ppl_protocol_name(p->protocol));
    cJSON_AddNumberToObject(o, "ctx", p->n_ctx);
    if (p->protocol == PPL_STRIDE) cJSON_AddNumberToObject(o, "stride", p->stride);
    cJSON_AddNumberToObject(o, "windows", (double)x->windows);
    cJSON_AddNumberToObject(o, "ppl", x->ppl);
    cJSON_AddNumberToObject(o, "ppl_se_iid", x->ppl_se_iid);
    cJSON_AddNumberToObject(o, "ppl_se_cluster", x->ppl_se_cluster);
    cJSON_AddNumberToObject(o, "nll_mean", x->nll_mean);
    cJSON_AddNumberToObject(o, "nll_se_iid", x->nll_se_iid);
    cJSON_AddNumberToObject(o, "nll_se_cluster", x->nll_se_cluster);
    cJSON_AddNumberToObject(o, "tokens_scored", (double)x->tokens);
    cJSON_AddNumberToObject(o, "tokens_evaluated", (double)r->tokens_evaluated);
    if (isnan(x->word_ppl))
        cJSON_AddNullToObject(o, "word_ppl");
    else
        cJSON_AddNumberToObject(o, "word_ppl", x->word_ppl);
    cJSON_AddNumberToObject(o, "words", (double)x->words);
    if (isnan(x->byte_ppl))
        cJSON_AddNullToObject(o, "byte_ppl");
    else
        cJSON_AddNumberToObject(o, "byte_ppl", x->byte_ppl);
    if (isnan(x->bits_per_byte))
        cJSON_AddNullToObject(o, "bits_per_byte");
    else
        cJSON_AddNumberToObject(o, "bits_per_byte", x->bits_per_byte);
    cJSON_AddNumberToObject(o, "bytes", (double)x->bytes);
    cJSON_AddNumberToObject(o, "seconds", r->seconds);
    cJSON_AddNumberToObject(o, "tokens_per_second",
                            r->seconds > 0 ? (double)r->tokens_evaluated / r->seconds : 0);
    cJSON_AddNumberToObject(o, "peak_rss_bytes", (double)qg_peak_rss());
    return o;
}

/* No BOS: the first window is conditioned on EOS (token 0 without one). */
static int prepend_eos(int32_t **ids, int64_t *n, int32_t eos)
{
    int32_t *p2 = realloc(*ids, (size_t)(*n + 1) * sizeof *p2);
    if (!p2) return QG_ERR_NOMEM;
    memmove(p2 + 1, p2, (size_t)*n * sizeof *p2);
    p2[0] = eos >= 0 ? eos : 0;
    *ids = p2;
    (*n)++;
    return QG_OK;
}

/* Scores and prints; the exit code. */
static int score_and_print(const struct cli_args *a, const struct backend *b,
                           const struct backend_info *info, const int32_t *ids, int64_t n,
                           size_t nbytes, const struct ppl_params *p)
{
    const char *model = a->pos[0], *text = cli_str(a, "text");
    char err[QG_ERRMSG_MAX];
    struct ppl_run r;
    struct progress pg;
    progress_init(&pg, "ppl", cli_flag(a, "quiet") || cli_flag(a, "json"));
    int rc = ppl_evaluate(b, ids, n, p, on_progress, &pg, &r, err, sizeof err), code = 0;
    progress_done(&pg);
    if (!rc && !isfinite(r.result.ppl)) {
        rc = QG_ERR_DATA;
        snprintf(err, sizeof err,
                 "%s: the model produced non-finite log-probabilities (PPL %g): its numbers "
                 "overflow on this text",
                 model, r.result.ppl);
    }
    if (rc)
        code = cmd_fail(rc, err);
    else if (cli_flag(a, "json"))
        code = cmd_print_json(to_json(model, text, n, p, &r));
    else
        print_text(model, text, info, n, nbytes, p, &r);
    ppl_run_release(&r);
    return code;
}

static int cmd_ppl(const struct cli_args *a)
{
    const char *model = a->pos[0], *text = cli_str(a, "text");
    if (!text) return cmd_usage("'qgate ppl' needs --text FILE");
    int protocol =
        ppl_protocol_from_name(cli_str(a, "protocol") ? cli_str(a, "protocol") : "llamacpp");
    if (protocol < 0)
        return cmd_usage("unknown --protocol '%s' (llamacpp, rolling or stride)",
                         cli_str(a, "protocol"));
    int64_t ctx = cli_int(a, "ctx", 0), chunks = cli_int(a, "chunks", 0),
            threads = cli_int(a, "threads", 0);
    if (ctx < 0 || ctx > (1 << 20) || chunks < 0 || threads < 0 || threads > 1024)
        return cmd_usage("--ctx, --chunks and --threads must be positive");
    static char devspec[1][4400];
    const char *spec = model;
    int dc = cmd_apply_device(a, &spec, 1, devspec);
    if (dc) return dc;
    char err[QG_ERRMSG_MAX];
    char *buf;
    size_t nbytes;
    int rc = qg_read_file(text, (size_t)1 << 32, &buf, &nbytes, err, sizeof err);
    if (rc) return cmd_fail(rc, err);
    struct backend b;
    struct backend_open_params bp = {.n_ctx = (int)ctx, .n_threads = (int)threads};
    /* open once to learn the trained context, then size the KV cache */
    if ((rc = backend_open(spec, &bp, &b, err, sizeof err))) {
        free(buf);
        return cmd_fail(rc, err);
    }
    struct backend_info info;
    backend_info(&b, &info);
    int code = 0;
    if (ctx == 0) ctx = info.n_ctx_train < 512 ? info.n_ctx_train : 512;
    if (ctx > info.n_ctx_train) {
        qg_error("--ctx %lld is longer than the model's context length %d (%s)", (long long)ctx,
                 info.n_ctx_train, model);
        code = QG_EX_USAGE;
    }
    int64_t stride = cli_int(a, "stride", ctx / 2);
    if (!code && protocol == PPL_STRIDE && (stride < 1 || stride > ctx)) {
        qg_error("--stride must be in 1..ctx (%lld)", (long long)ctx);
        code = QG_EX_USAGE;
    }
    int32_t *ids = NULL;
    int64_t n = 0;
    if (!code && (rc = backend_tokenize(&b, buf, nbytes, 1, &ids, &n)))
        code = cmd_fail(rc, "tokenizing the text failed");
    if (!code && info.bos < 0 && n > 0 && prepend_eos(&ids, &n, info.eos))
        code = cmd_fail(QG_ERR_NOMEM, "out of memory");
    if (!code && ctx != bp.n_ctx) { /* reopen with the chosen context */
        backend_close(&b);
        bp.n_ctx = (int)ctx;
        if ((rc = backend_open(spec, &bp, &b, err, sizeof err))) code = cmd_fail(rc, err);
    }
    struct ppl_params p = {
        .protocol = protocol, .n_ctx = (int)ctx, .stride = (int)stride, .max_windows = chunks};
    if (!code) code = score_and_print(a, &b, &info, ids, n, nbytes, &p);
    free(ids);
    free(buf);
    backend_close(&b);
    return code;
}

const struct cli_cmd cmd_ppl_def = {
    .name = "ppl",
    .fn = cmd_ppl,
    .args_usage = "MODEL.gguf",
    .summary = "perplexity of a model on a text: token/word/byte PPL with standard errors",
    .description =
        "Protocols: llamacpp scores the second half of non-overlapping ctx-token chunks\n"
        "whose first token is replaced by BOS (numbers comparable with llama-perplexity);\n"
        "rolling scores every token once in disjoint windows (lm-eval); stride slides a\n"
        "ctx window by S tokens and scores each token once (Hugging Face).",
    .opts = opts,
    .min_pos = 1,
    .max_pos = 1,
};
