/* mc — multiple-choice scoring by log-likelihood, as lm-evaluation-harness.
 *
 * For each choice the continuation target_delimiter + choice is scored
 * given the context: the pair is tokenized as lm-eval's _encode_pair does
 * (trailing spaces of the context move to the continuation; the
 * continuation's tokens are those of tokenize(context + continuation) past
 * the tokens of tokenize(context)), with the model's BOS first. Items whose
 * choices have different contexts and one shared continuation (WinoGrande's
 * partial scoring) set `contexts` instead.
 *
 * Metrics per item: acc (argmax of the summed log-likelihood), acc_norm
 * (argmax of log-likelihood / length of the choice in characters, as lm-eval),
 * and acc_tok (argmax of the mean log-likelihood per token: llama-perplexity's
 * --hellaswag rule). Ties go to the lowest index.
 */
#ifndef QG_MC_H
#define QG_MC_H

#include "backends/backend.h"

#include <stdint.h>

struct mc_item {
    char *id;
    int64_t cluster; /* shared passage or subject; -1 none */
    char *context;   /* NULL when contexts is set */
    char **contexts; /* optional: one context per choice */
    char **choices;  /* continuations (without the delimiter) */
    int n_choices;
    int gold;
};

struct mc_result {
    double ll[16];  /* per choice, nats */
    int tokens[16]; /* continuation tokens per choice */
    int pred, pred_norm, pred_tok;
    int64_t evaluated; /* positions the model evaluated for every choice (context included) */
};

#define MC_MAX_CHOICES 16

void mc_item_free(struct mc_item *it); /* frees the fields, not it */
void mc_items_free(struct mc_item *items, int64_t n);

/* Scores one item. delim is lm-eval's target_delimiter (usually " "); it is
 * not added in front of the shared continuation of a `contexts` item.
 * QG_OK, or the backend's error with err filled ("item ID: ..."). */
int mc_score(const struct backend *b, int n_ctx, const struct mc_item *it, const char *delim,
             struct mc_result *r, char *err, size_t errlen);
/* Scores n_items items at once (all their choices go to the backend in one
 * backend_score_many, so a remote backend keeps them in flight together);
 * res[k] is items[k]'s result, identical to mc_score's. */
int mc_score_many(const struct backend *b, int n_ctx, const struct mc_item *items, int n_items,
                  const char *delim, struct mc_result *res, char *err, size_t errlen);

#endif
