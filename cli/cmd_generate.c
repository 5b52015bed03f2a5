/* cmd_generate — `qgate generate MODEL --prompt STR`: text continuation. */
#include "backends/backend.h"
#include "cli/commands.h"
#include "core/status.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

static const struct cli_opt opts[] = {
    {"prompt", 'p', CLI_STR, "STR", "text to continue (default: empty, i.e. BOS only)", 0},
    {"max-tokens", 'n', CLI_INT, "N", "generate at most N tokens (default 64)", 0},
    {"temperature", 0, CLI_F64, "T", "sampling temperature (default 0 = greedy)", 0},
    {"top-p", 0, CLI_F64, "P", "nucleus sampling mass (default 1 = off)", 0},
    {"seed", 0, CLI_INT, "S", "random seed for sampling (default 0)", 0},
    {"stop", 0, CLI_STR, "STR", "stop when STR appears (not printed)", 1},
    {"threads", 't', CLI_INT, "T", "threads (default: one per CPU)", 0},
    CLI_OPT_CPU,
    CLI_OPT_END,
};

static int cmd_generate(const struct cli_args *a)
{
    const char *prompt = cli_str(a, "prompt") ? cli_str(a, "prompt") : "";
    int64_t max = cli_int(a, "max-tokens", 64);
    double temp = cli_f64(a, "temperature", 0), top_p = cli_f64(a, "top-p", 1);
    if (max < 1 || max > 1 << 20 || temp < 0 || top_p <= 0 || top_p > 1)
        return cmd_usage("--max-tokens must be >= 1, --temperature >= 0, --top-p in (0, 1]");
    struct backend b;
    struct backend_open_params bp = {.n_threads = (int)cli_int(a, "threads", 0)};
    char err[QG_ERRMSG_MAX];
    int rc = backend_open(a->pos[0], &bp, &b, err, sizeof err);
    if (rc) return cmd_fail(rc, err);
    int32_t *ids = NULL;
    int64_t n = 0;
    int code = 0;
    if ((rc = backend_tokenize(&b, prompt, strlen(prompt), 1, &ids, &n)) || n == 0)
        code = cmd_fail(rc ? rc : QG_ERR_USAGE,
                        "the prompt has no tokens (and the model adds no BOS)");
    int n_stop = cli_count(a, "stop");
    const char *stops[64];
    for (int i = 0; i < n_stop && i < 64; i++)
        stops[i] = cli_nth(a, "stop", i);
    struct backend_gen_params gp = {.max_tokens = (int)max,
                                    .temperature = (float)temp,
                                    .top_p = (float)top_p,
                                    .seed = (uint64_t)cli_int(a, "seed", 0),
                                    .stop = stops,
                                    .n_stop = n_stop < 64 ? n_stop : 64};
    char *text = NULL;
    if (!code && (rc = backend_generate(&b, ids, n, &gp, &text, NULL, NULL)))
        code = cmd_fail(rc, backend_errmsg(&b));
    if (!code) printf("%s%s\n", prompt, text);
    free(text);
    free(ids);
    backend_close(&b);
    return code;
}

const struct cli_cmd cmd_generate_def = {
    .name = "generate",
    .fn = cmd_generate,
    .args_usage = "MODEL.gguf",
    .summary = "continue a prompt with the model (greedy, or sampled with a seed)",
    .opts = opts,
    .min_pos = 1,
    .max_pos = 1,
};
