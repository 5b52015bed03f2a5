/* cmd_tokenize — `qgate tokenize MODEL (--text FILE | --prompt STR)`. */
#include "backends/gguf.h"
#include "backends/tokenizer.h"
#include "harness/commands.h"
#include "harness/status.h"
#include "harness/util.h"

#include <stdlib.h>
#include <string.h>

static const struct cli_opt opts[] = {
    {"text", 'f', CLI_STR, "FILE", "tokenize the contents of FILE", 0},
    {"prompt", 'p', CLI_STR, "STR", "tokenize STR", 0},
    {"no-bos", 0, CLI_FLAG, NULL, "do not add BOS (or EOS) even when the model asks for it", 0},
    {"special", 0, CLI_FLAG, NULL, "parse control tokens such as <s> written in the text", 0},
    {"pieces", 0, CLI_FLAG, NULL, "print each token's text next to its id", 0},
    CLI_OPT_JSON,
    CLI_OPT_END,
};

static int cmd_tokenize(const struct cli_args *a)
{
    const char *file = cli_str(a, "text"), *prompt = cli_str(a, "prompt");
    if (!!file == !!prompt) return qg_error("give exactly one of --text FILE and --prompt STR"), QG_EX_USAGE;
    char err[QG_ERRMSG_MAX];
    char *buf = NULL;
    size_t n;
    int rc = QG_OK;
    if (file) rc = qg_read_file(file, (size_t)1 << 32, &buf, &n, err, sizeof err);
    else n = strlen(prompt);
    if (rc) return cmd_fail(rc, err);
    struct gguf *g;
    struct tokenizer *t = NULL;
    if ((rc = gguf_open(a->pos[0], &g, err, sizeof err)) == QG_OK) {
        rc = tok_load(g, a->pos[0], &t, err, sizeof err);
        gguf_close(g);
    }
    if (rc) {
        free(buf);
        return cmd_fail(rc, err);
    }
    int32_t *ids = NULL;
    int64_t k = 0;
    rc = tok_encode(t, file ? buf : prompt, n, !cli_flag(a, "no-bos"), cli_flag(a, "special"), &ids, &k);
    int code = rc ? cmd_fail(rc, "tokenizing failed") : 0;
    if (!code && cli_flag(a, "json")) {
        cJSON *o = cJSON_CreateObject();
        cJSON *arr = cJSON_AddArrayToObject(o, "ids");
        for (int64_t i = 0; i < k; i++) cJSON_AddItemToArray(arr, cJSON_CreateNumber(ids[i]));
        if (cli_flag(a, "pieces")) {
            cJSON *pc = cJSON_AddArrayToObject(o, "pieces");
            for (int64_t i = 0; i < k; i++) cJSON_AddItemToArray(pc, cJSON_CreateString(tok_text(t, ids[i])));
        }
        cJSON_AddNumberToObject(o, "count", (double)k);
        code = cmd_print_json(o);
    } else if (!code && cli_flag(a, "pieces")) {
        for (int64_t i = 0; i < k; i++) printf("%6d  '%s'\n", ids[i], tok_text(t, ids[i]));
    } else if (!code) {
        for (int64_t i = 0; i < k; i++) printf("%s%d", i ? " " : "", ids[i]);
        printf("\n");
    }
    free(ids);
    free(buf);
    tok_free(t);
    return code;
}

const struct cli_cmd cmd_tokenize_def = {
    .name = "tokenize",
    .fn = cmd_tokenize,
    .args_usage = "MODEL.gguf",
    .summary = "print the token ids of a text as the model's tokenizer makes them",
    .opts = opts,
    .min_pos = 1,
    .max_pos = 1,
};
