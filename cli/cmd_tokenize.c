/* cmd_tokenize — `qgate tokenize MODEL (--text FILE | --prompt STR)`.
 * MODEL is a GGUF file (its tokenizer, no weights loaded) or a served
 * model's http(s):// spec (the server's tokenizer, or the spec's). */
#include "backends/backend.h"
#include "cli/commands.h"
#include "core/status.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

static const struct cli_opt opts[] = {
    {"text", 0, CLI_STR, "FILE", "tokenize the contents of FILE", 0},
    {"prompt", 'p', CLI_STR, "STR", "tokenize STR", 0},
    {"no-bos", 0, CLI_FLAG, NULL, "do not add BOS (or EOS) even when the model asks for it", 0},
    {"special", 0, CLI_FLAG, NULL, "parse control tokens such as <s> written in the text", 0},
    {"pieces", 0, CLI_FLAG, NULL, "print each token's text next to its id", 0},
    CLI_OPT_JSON,
    CLI_OPT_END,
};

static const char *piece_of(const struct backend *b, int32_t id, char *buf, size_t cap)
{
    int len = backend_piece(b, id, buf, cap - 1);
    if (len < 0) len = 0;
    if ((size_t)len > cap - 1) len = (int)cap - 1;
    buf[len] = '\0';
    return buf;
}

static const char *vocab_of(const struct backend *b, int32_t id)
{
    const char *v = backend_vocab_text(b, id);
    return v ? v : "";
}

static int cmd_tokenize(const struct cli_args *a)
{
    const char *file = cli_str(a, "text"), *prompt = cli_str(a, "prompt");
    if (!!file == !!prompt) return cmd_usage("give exactly one of --text FILE and --prompt STR");
    char err[QG_ERRMSG_MAX];
    char *buf = NULL;
    size_t n;
    int rc = QG_OK;
    if (file)
        rc = qg_read_file(file, (size_t)1 << 32, &buf, &n, err, sizeof err);
    else
        n = strlen(prompt);
    if (rc) return cmd_fail(rc, err);
    int remote = !strncmp(a->pos[0], "http://", 7) || !strncmp(a->pos[0], "https://", 8);
    if (remote && cli_flag(a, "special")) {
        free(buf);
        return cmd_usage("--special is not available through a server (its /tokenize decides)");
    }
    struct backend b;
    struct backend_open_params bp = {.tokenizer_only = 1}; /* a local file: no weights */
    if ((rc = backend_open(a->pos[0], &bp, &b, err, sizeof err))) {
        free(buf);
        return cmd_fail(rc, err);
    }
    int32_t *ids = NULL;
    int64_t k = 0;
    rc = backend_tokenize(&b, file ? buf : prompt, n,
                          (cli_flag(a, "no-bos") ? 0 : BACKEND_TOK_ADD_SPECIAL) |
                              (cli_flag(a, "special") ? BACKEND_TOK_PARSE_SPECIAL : 0),
                          &ids, &k);
    const char *why = backend_errmsg(&b);
    int code = rc ? cmd_fail(rc, why && *why ? why : "tokenizing failed") : 0;
    /* a token's text: the vocabulary's entry, or what the server says it
     * decodes to */
    char piece[512];
#define PIECE(id) (remote ? piece_of(&b, id, piece, sizeof piece) : vocab_of(&b, id))
    if (!code && cli_flag(a, "json")) {
        cJSON *o = cJSON_CreateObject();
        cJSON *arr = cJSON_AddArrayToObject(o, "ids");
        for (int64_t i = 0; i < k; i++)
            cJSON_AddItemToArray(arr, cJSON_CreateNumber(ids[i]));
        if (cli_flag(a, "pieces")) {
            cJSON *pc = cJSON_AddArrayToObject(o, "pieces");
            for (int64_t i = 0; i < k; i++)
                cJSON_AddItemToArray(pc, cJSON_CreateString(PIECE(ids[i])));
        }
        cJSON_AddNumberToObject(o, "count", (double)k);
        code = cmd_print_json(o);
    } else if (!code && cli_flag(a, "pieces")) {
        for (int64_t i = 0; i < k; i++)
            printf("%6d  '%s'\n", ids[i], PIECE(ids[i]));
    } else if (!code) {
        for (int64_t i = 0; i < k; i++)
            printf("%s%d", i ? " " : "", ids[i]);
        printf("\n");
    }
#undef PIECE
    free(ids);
    free(buf);
    backend_close(&b);
    return code;
}

const struct cli_cmd cmd_tokenize_def = {
    .name = "tokenize",
    .fn = cmd_tokenize,
    .args_usage = "MODEL.gguf|http://HOST:PORT/v1?model=ID",
    .summary = "print the token ids of a text as the model's tokenizer makes them",
    .opts = opts,
    .min_pos = 1,
    .max_pos = 1,
};
