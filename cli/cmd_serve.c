/* cmd_serve — `qgate serve MODEL.gguf`: an OpenAI-compatible server over a
 * local backend (serve/serve.h), on loopback by default. */
#include "backends/backend.h"
#include "cli/commands.h"
#include "serve/serve.h"
#include "core/status.h"
#include "core/util.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct cli_opt opts[] = {
    {"host", 0, CLI_STR, "ADDR", "IPv4 address to listen on (default 127.0.0.1: this machine only)",
     0},
    {"port", 0, CLI_INT, "PORT", "port (default 8080; 0 picks a free one)", 0},
    CLI_OPT_DEVICE,
    {"model-id", 0, CLI_STR, "ID", "the model id to serve (default: the file name)", 0},
    {"api-key-env", 0, CLI_STR, "VAR", "require the API key held in environment variable VAR", 0},
    {"threads", 't', CLI_INT, "T", "model threads per instance", 0},
    CLI_OPT_CPU,
    {"parallel", 'P', CLI_INT, "N",
     "model instances, so N requests compute at once (default 1; each holds its own weights)", 0},
    {"ctx", 0, CLI_INT, "N", "context length (default: the model's)", 0},
    {"port-file", 0, CLI_STR, "FILE", "write the bound port to FILE once listening", 0},
    {"inject-faults", 0, CLI_STR, "SPEC",
     "TESTING ONLY: KIND:RATE,... (500, 429, reset, stall, truncate, malformed), "
     "llama-server (answer as llama.cpp's server does), slot-ctx:N (a slot's context, as "
     "llama-server -c N), stale-props (/props says the trained context)",
     0},
    {"fault-seed", 0, CLI_INT, "N", "seed of the fault draws (default 1)", 0},
    {"idle-timeout", 0, CLI_INT, "S",
     "close a connection silent for S seconds (default 30); a request body must also arrive at "
     "1 KiB/s or more on average after its first 10 s",
     0},
    {"stall-ms", 0, CLI_INT, "MS", "how long a 'stall' fault waits (default 5000)", 0},
    CLI_OPT_END,
};

static int cmd_serve(const struct cli_args *a)
{
    const char *model = a->pos[0];
    static char devspec[1][4400];
    int dc = cmd_apply_device(a, &model, 1, devspec);
    if (dc) return dc;
    int64_t port = cli_int(a, "port", 8080);
    if (port < 0 || port > 65535) return cmd_usage("--port must be 0..65535");
    struct serve_params sp = {.host = cli_str(a, "host"),
                              .port = (int)port,
                              .testing = {.faults = cli_str(a, "inject-faults"),
                                          .fault_seed = (uint64_t)cli_int(a, "fault-seed", 1),
                                          .stall_ms = (int)cli_int(a, "stall-ms", 5000)},
                              .idle_timeout_s = (int)cli_int(a, "idle-timeout", 30)};
    if (sp.idle_timeout_s < 1 || sp.idle_timeout_s > 86400)
        return cmd_usage("--idle-timeout must be 1..86400 seconds");
    if (cli_str(a, "api-key-env")) {
        sp.api_key = getenv(cli_str(a, "api-key-env"));
        if (!sp.api_key || !*sp.api_key)
            return cmd_usage("--api-key-env %s: that environment variable is unset or empty",
                             cli_str(a, "api-key-env"));
    }
    char id[256];
    const char *base = strrchr(model, '/');
    snprintf(id, sizeof id, "%s",
             cli_str(a, "model-id") ? cli_str(a, "model-id")
             : base                 ? base + 1
                                    : model);
    sp.model_id = id;
    /* block the stop signals before any thread starts, then wait for one */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    char err[QG_ERRMSG_MAX];
    int64_t np = cli_int(a, "parallel", 1);
    if (np < 1 || np > 64) return cmd_usage("--parallel must be 1..64");
    struct backend b[64];
    struct backend_open_params bp = {.n_ctx = (int)cli_int(a, "ctx", 0),
                                     .n_threads = (int)cli_int(a, "threads", 0)};
    int rc = QG_OK, opened = 0;
    for (; opened < np && !rc; opened++)
        if ((rc = backend_open(model, &bp, &b[opened], err, sizeof err))) break;
    struct server *s = NULL;
    int bound;
    if (!rc) rc = serve_start(b, (int)np, &sp, &s, &bound, err, sizeof err);
    if (rc) {
        for (int i = 0; i < opened; i++)
            backend_close(&b[i]);
        return cmd_fail(rc, err);
    }
    int code = 0;
    if (cli_str(a, "port-file")) {
        char txt[32];
        snprintf(txt, sizeof txt, "%d\n", bound);
        if ((rc = qg_write_file_atomic(cli_str(a, "port-file"), txt, strlen(txt), err, sizeof err)))
            code = cmd_fail(rc, err);
    }
    if (!code) {
        fprintf(stderr,
                "qgate serve: %s as '%s' (%lld instance%s) on http://%s:%d/v1%s%s (Ctrl-C stops)\n",
                model, id, (long long)np, np > 1 ? "s" : "", sp.host ? sp.host : "127.0.0.1", bound,
                sp.api_key ? ", API key required" : "",
                sp.testing.faults ? ", INJECTING FAULTS" : "");
        int sig;
        sigwait(&stop, &sig);
        int64_t nreq, nfault;
        serve_counts(s, &nreq, &nfault);
        fprintf(stderr,
                "qgate serve: stopping on signal %d after %lld requests (%lld faults injected)\n",
                sig, (long long)nreq, (long long)nfault);
    }
    serve_stop(s);
    for (int i = 0; i < opened; i++)
        backend_close(&b[i]);
    return code;
}

const struct cli_cmd cmd_serve_def = {
    .name = "serve",
    .fn = cmd_serve,
    .summary =
        "serve a model over an OpenAI-compatible HTTP API (completions with logprobs, tokenize)",
    .description =
        "Endpoints:\n"
        "  GET  /health, /v1/health         open (no API key)\n"
        "  GET  /v1/models, /v1/models/ID   open (no API key)\n"
        "  POST /v1/completions             prompt as text, token ids or a list of either; echo,\n"
        "                                   logprobs (top-K), prompt_logprobs, logit_bias, stop,\n"
        "                                   seed, stream (SSE, stream_options.include_usage)\n"
        "  POST /v1/chat/completions        messages (system, developer, user, assistant; text\n"
        "                                   parts), max_completion_tokens, logprobs with\n"
        "                                   top_logprobs, stream\n"
        "  POST /tokenize, /detokenize      llama.cpp's and vLLM's forms\n"
        "  POST /apply-template             the prompt the chat template makes of messages\n"
        "Errors are OpenAI's {\"error\": {\"message\", \"type\", \"param\", \"code\"}}.\n"
        "Listens on 127.0.0.1 unless --host says otherwise. SIGINT/SIGTERM stop it cleanly.",
    .opts = opts,
    .min_pos = 1,
    .max_pos = 1,
    .args_usage = "MODEL.gguf",
};
