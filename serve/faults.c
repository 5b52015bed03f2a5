/* faults — testing only: injected faults (500, 429, reset, stall,
 * truncate, malformed) and answers as other servers give them
 * (llama-server), for the HTTP backend's tests (serve_params, serve.h). */
#include "serve/serve.h"
#include "serve/serve_impl.h"
#include "serve/serve_fmt.h"
#include "datasets/reader.h"
#include "core/json.h"
#include "core/status.h"
#include "core/util.h"
#include "reports/escape.h"
#include "core/rng.h"
#include "core/utf8.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const fault_names[F_COUNT] = {"",      "500",      "429",      "reset",
                                                 "stall", "truncate", "malformed"};

enum fault sv_draw_fault(struct server *s)
{
    double u = (double)(rng_next(&s->rng) >> 11) / 9007199254740992.0, acc = 0;
    for (int f = 1; f < F_COUNT; f++) {
        acc += s->rate[f];
        if (u < acc) return (enum fault)f;
    }
    return F_NONE;
}

/* An injected fault that answers for the request (MHD_YES/MHD_NO), or -1
 * to go on (a stall has then been served). */
int sv_inject_fault(struct server *s, struct MHD_Connection *c, enum fault f)
{
    switch (f) {
    case F_500:
        return sv_send_error(c, 500, "server_error", "injected fault: internal error");
    case F_429: {
        const char *b = "{\"error\":{\"message\":\"injected fault: rate "
                        "limited\",\"type\":\"rate_limit_error\",\"code\":429}}";
        return sv_send_text(c, 429, b, strlen(b), "application/json", "0");
    }
    case F_RESET:
        return MHD_NO; /* closes the connection without a response */
    case F_STALL:
        usleep((useconds_t)s->stall_ms * 1000);
        return -1;
    default:
        return -1;
    }
}

int sv_parse_faults(struct server *s, const char *spec, char *err, size_t errlen)
{
    char *copy = qg_strdup(spec), *save = NULL;
    if (!copy) return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    double total = 0;
    int rc = QG_OK;
    for (char *tok = strtok_r(copy, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        double r;
        int f = 0;
        if (!strcmp(tok, "llama-server")) {
            s->llama_server = 1;
            continue;
        }
        int64_t v;
        if (!strncmp(tok, "slot-ctx:", 9) && !qg_parse_i64(tok + 9, 8, 1 << 20, &v)) {
            s->slot_ctx = (int)v; /* llama-server -c N: a slot's context, prompts cut to it */
            continue;
        }
        if (!strcmp(tok, "stale-props")) { /* /props says the trained context, not the slot's */
            s->stale_props = 1;
            continue;
        }
        if (!strcmp(tok, "sglang") || !strcmp(tok, "tgi") || !strcmp(tok, "tgi-no-prefill")) {
            s->native = tok[0] == 's' ? SV_NATIVE_SGLANG : SV_NATIVE_TGI;
            s->no_prefill = !strcmp(tok, "tgi-no-prefill");
            s->plain_tokenize |= s->native == SV_NATIVE_SGLANG; /* ids only */
            continue;
        }
        if (colon) {
            *colon = '\0';
            for (int i = 1; i < F_COUNT && !f; i++)
                if (!strcmp(tok, fault_names[i])) f = i;
        }
        if (!colon || !f || qg_parse_f64(colon + 1, &r) || !(r >= 0 && r <= 1))
            rc = qg_errf(err, errlen, QG_ERR_USAGE,
                         "bad fault '%s': want KIND:RATE with KIND 500, 429, reset, stall, "
                         "truncate or malformed and RATE in [0, 1], or llama-server, "
                         "slot-ctx:N, stale-props, sglang, tgi, tgi-no-prefill",
                         tok);
        else
            s->rate[f] += r, total += r;
    }
    if (!rc && total > 1)
        rc = qg_errf(err, errlen, QG_ERR_USAGE, "fault rates add up to %g, more than 1", total);
    free(copy);
    return rc;
}
