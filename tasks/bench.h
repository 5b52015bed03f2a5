/* bench — built-in benchmark definitions reading their public layouts.
 *
 * Multiple choice (lm-evaluation-harness prompts, target_delimiter " "):
 * - hellaswag: llama.cpp's --hellaswag text (6 lines per task: context,
 *   gold index, 4 endings) or the HF JSONL (ctx_a, ctx_b, activity_label,
 *   endings, label) with lm-eval's preprocessing. Cluster: activity label.
 * - mmlu: a directory of SUBJECT_test.csv files or one CSV; the HF export
 *   (header, numeric answer) or the original (no header, letter A-D). One
 *   task over all subjects; cluster = subject. Few-shot: the first k rows of
 *   SUBJECT_dev.csv in the "train" directory, as lm-eval.
 * - piqa: valid.jsonl (goal, sol1, sol2) plus the labels file.
 * - arc: ARC's JSONL (question.stem, question.choices[].label/text, answerKey).
 * - boolq: BoolQ's JSONL (question, passage, answer); cluster = passage.
 * - winogrande: WinoGrande's JSONL (sentence with "_", option1, option2,
 *   answer "1"/"2"), partial scoring: the continuation after the blank is
 *   scored given each option-filled prefix.
 * - arc, boolq, winogrande also read LLM-Adapters' JSON arrays (instruction
 *   text with the choices embedded, answer "answerK" / "true" / "optionK"),
 *   the only copies in ../shared; BoolQ there has no passages, so its prompt
 *   is "Question: Q?\nAnswer:".
 * - hellaswag also reads a .bz2 file (through bunzip2).
 * Generation:
 * - gsm8k: JSONL (question, answer ending "#### N"); prompt "Question: Q\nAnswer:"
 *   after k worked examples from the train file when given.
 *
 * Few-shot for arc, boolq and hellaswag: k examples per item drawn without
 * replacement from the train file with a generator seeded by fewshot_seed,
 * each "context + delimiter + gold choice", joined and followed by a blank
 * line (lm-eval's format); deterministic for a given seed.
 *
 * Errors name the file and line (or item id) and are QG_ERR_DATA.
 */
#ifndef QG_BENCH_H
#define QG_BENCH_H

#include "tasks/mc.h"

#include <stddef.h>
#include <stdint.h>

enum bench_kind { BENCH_MC = 0, BENCH_GEN = 1 };

struct gen_item {
    char *id;
    int64_t cluster;
    char *prompt;
    char **targets;
    int n_targets;
};

void gen_items_free(struct gen_item *items, int64_t n);

struct bench_source {
    const char *data;      /* file or directory */
    const char *labels;    /* piqa's labels file */
    const char *train;     /* few-shot source (gsm8k train.jsonl, mmlu dev dir) */
    int fewshot;           /* examples from train (default 0) */
    uint64_t fewshot_seed; /* sampler seed for the multiple-choice few-shot (lm-eval: 1234) */
    int64_t limit;         /* first N items (0 = all) */
};

/* BENCH_MC or BENCH_GEN for a known name; -1 otherwise. */
int bench_kind(const char *name);
/* Comma-separated list of the known names. */
const char *bench_names(void);

int bench_load_mc(const char *name, const struct bench_source *src, struct mc_item **items,
                  int64_t *n, char *err, size_t errlen);
int bench_load_gen(const char *name, const struct bench_source *src, struct gen_item **items,
                   int64_t *n, char *err, size_t errlen);

#endif
