/* local — what the cpu and cuda backends share (see local.h). */
#include "backends/local.h"
#include "backends/gguf.h"
#include "backends/hf_model.h"
#include "core/status.h"
#include "core/util.h"

#include <stdio.h>
#include <string.h>

int local_load(const char *path, struct tokenizer **tok, struct llama_model **model, char *err,
               size_t errlen)
{
    *tok = NULL, *model = NULL;
    struct gguf *g;
    int rc = model_open(path, &g, err, errlen);
    if (rc) return rc;
    rc = tok_load(g, path, tok, err, errlen);
    if (rc) {
        gguf_close(g);
        return rc;
    }
    rc = llama_load(g, path, model, err, errlen); /* keeps g: weights stay mapped */
    if (rc) return rc;
    const struct llama_hparams *h = llama_hparams(*model);
    if (tok_n_vocab(*tok) != h->n_vocab)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: tokenizer has %d tokens but the embedding has %d rows", path,
                       tok_n_vocab(*tok), h->n_vocab);
    return QG_OK;
}

void local_info(const struct tokenizer *tok, const struct llama_model *m, struct backend_info *o)
{
    const struct llama_hparams *h = llama_hparams(m);
    o->n_vocab = h->n_vocab;
    o->n_ctx_train = h->ctx_train;
    o->bos = tok_bos(tok);
    o->eos = tok_eos(tok);
    o->add_bos = tok_add_bos(tok);
    o->arch = h->arch;
    o->weight_bytes = llama_weight_bytes(m);
}

int local_query_next(const char **q, char *key, size_t kn, char *val, size_t vn)
{
    const char *p = *q;
    if (!*p) return 0;
    size_t n = strcspn(p, "&");
    const char *eq = memchr(p, '=', n);
    size_t k = eq ? (size_t)(eq - p) : n;
    snprintf(key, kn, "%.*s", (int)k, p);
    snprintf(val, vn, "%.*s", eq ? (int)(n - k - 1) : 0, eq ? eq + 1 : "");
    *q = p + n + (p[n] == '&');
    return 1;
}

int local_device(const char *name, int *index)
{
    int64_t i = 0;
    *index = 0;
    if (!strcmp(name, "cpu")) return 0;
    if (strncmp(name, "cuda", 4) ||
        (name[4] && (name[4] != ':' || qg_parse_i64(name + 5, 0, 255, &i))))
        return -1;
    *index = (int)i;
    return 1;
}
