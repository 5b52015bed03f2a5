/* registry — the named benchmarks (see registry.h). */
#include "tasks/registry.h"

#include <stdio.h>
#include <string.h>

#define MC_NOTE "BOS first (lm-eval's hf backend adds none unless add_bos_token=True)"

static const struct registry_task tasks[] = {
    {"hellaswag",
     "hellaswag",
     "acc_norm",
     "HellaSwag validation: sentence completion, 4 endings, log-likelihood",
     MC_NOTE,
     {{"data",
       {"hellaswag/hellaswag_val.jsonl", "hellaswag/hellaswag_val_full.txt.bz2",
        "hellaswag/hellaswag_val_full.txt", "hellaswag_val.jsonl", NULL},
       0}}},
    {"arc_easy",
     "arc",
     "acc",
     "ARC-Easy test: grade-school science questions, 3-5 choices",
     MC_NOTE,
     {{"data",
       {"arc/ARC-Easy-Test.jsonl", "ARC-Easy/ARC-Easy-Test.jsonl", "ARC-Easy/test.jsonl",
        "llm-adapters/ARC-Easy/test.json", NULL},
       0}}},
    {"arc_challenge",
     "arc",
     "acc_norm",
     "ARC-Challenge test: the harder science questions, 3-5 choices",
     MC_NOTE,
     {{"data",
       {"arc/ARC-Challenge-Test.jsonl", "ARC-Challenge/ARC-Challenge-Test.jsonl",
        "ARC-Challenge/test.jsonl", "llm-adapters/ARC-Challenge/test.json", NULL},
       0}}},
    {"piqa",
     "piqa",
     "acc",
     "PIQA validation: physical commonsense, 2 solutions",
     MC_NOTE,
     {{"data", {"piqa/valid.jsonl", NULL}, 0}, {"labels", {"piqa/valid-labels.lst", NULL}, 0}}},
    {"winogrande",
     "winogrande",
     "acc",
     "WinoGrande (xl) validation: pronoun resolution by partial scoring, 2 options",
     MC_NOTE,
     {{"data",
       {"winogrande/dev.jsonl", "winogrande_1.1/dev.jsonl", "llm-adapters/winogrande/test.json",
        NULL},
       0}}},
    {"boolq",
     "boolq",
     "acc",
     "BoolQ validation: yes/no questions about a passage",
     MC_NOTE "; LLM-Adapters' copy has no passages",
     {{"data", {"boolq/dev.jsonl", "boolq/val.jsonl", "llm-adapters/boolq/test.json", NULL}, 0}}},
    {"mmlu",
     "mmlu",
     "acc",
     "MMLU test, all 57 subjects, zero-shot (mmlu_SUBJECT: one subject)",
     MC_NOTE,
     {{"data", {"mmlu/test", "mmlu/data/test", NULL}, 0}}},
    {"gsm8k",
     "gsm8k",
     "exact_match",
     "GSM8K test: grade-school math, greedy generation, strict and flexible extraction",
     "zero-shot unless gsm8k/train.jsonl is there (then 5 shots, as lm-eval's gsm8k)",
     {{"data", {"gsm8k/test.jsonl", NULL}, 0}, {"train", {"gsm8k/train.jsonl", NULL}, 1}}},
    {"wikitext",
     "perplexity",
     "perplexity",
     "WikiText-2 raw test: rolling perplexity over the whole text",
     "token perplexity over windows of the model's context (lm-eval reports word and byte "
     "perplexity per document)",
     {{"data",
       {"wikitext-2/wiki.test.raw", "wikitext-2-raw/wiki.test.raw",
        "wikitext-2/wiki.test.raw.hf-crlf", NULL},
       0}}},
    {"tinystories",
     "perplexity",
     "perplexity",
     "TinyStories validation text: perplexity and KLD as llama-perplexity (not in lm-eval)",
     NULL,
     {{"data", {"tinystories/valid.txt", "tinystories_valid_head.txt", NULL}, 0}}},
};

#define N_TASKS ((int)(sizeof tasks / sizeof *tasks))

const struct registry_task *registry_at(int i)
{
    return i >= 0 && i < N_TASKS ? &tasks[i] : NULL;
}

const char *registry_mmlu_subject(const char *name)
{
    if (strncmp(name, "mmlu_", 5) || !name[5]) return NULL;
    for (const char *p = name + 5; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || *p == '_')) return NULL;
    return name + 5;
}

const struct registry_task *registry_find(const char *name)
{
    char n[64];
    size_t k = 0;
    for (; name[k] && k + 1 < sizeof n; k++)
        n[k] = name[k] == '-' ? '_' : name[k];
    n[k] = '\0';
    if (name[k]) return NULL;
    for (int i = 0; i < N_TASKS; i++)
        if (!strcmp(tasks[i].name, n)) return &tasks[i];
    return NULL;
}

void registry_names(char *out, size_t n)
{
    size_t used = 0;
    if (n) out[0] = '\0';
    for (int i = 0; i < N_TASKS && used < n; i++) {
        int k = snprintf(out + used, n - used, "%s%s", i ? ", " : "", tasks[i].name);
        if (k < 0) break;
        used += (size_t)k;
    }
}
