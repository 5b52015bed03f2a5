/* fuzz_readers — libFuzzer target for the data readers: the first byte of
 * the input picks what reads the rest, written to a file as a user's data
 * would be:
 *   0 a suite file (suite_load, then the items of every task; the suite may
 *     name d.txt, d.jsonl and d.csv beside it), 1 JSONL records, 2 CSV
 *     records, 3.. a benchmark's data file: hellaswag (JSONL and the txt
 *     layout), mmlu (CSV), piqa (JSONL, with a labels file), arc, boolq,
 *     winogrande (JSONL and a JSON array), gsm8k (JSONL).
 * Every reader must return an error or items, never crash or leak.
 * Build and run with QG_FUZZ_TARGET=readers tests/fuzz/run.sh. */
#include "core/util.h"
#include "datasets/reader.h"
#include "harness/suite.h"
#include "tasks/bench.h"
#include "tasks/config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];

static void put(const char *name, const void *p, size_t n)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(p, 1, n, f) != n) abort();
    fclose(f);
}

static void init(void)
{
    snprintf(dir, sizeof dir, "/tmp/qgate-fuzz-readers-XXXXXX");
    if (!mkdtemp(dir)) abort();
    static const char txt[] = "Once upon a time there was a girl.\n";
    static const char jsonl[] = "{\"id\": \"a\", \"q\": \"Sky?\", \"c\": [\"blue\", \"green\"], "
                                "\"g\": 0, \"p\": \"2+2=\", \"a\": \"4\"}\n";
    static const char csv[] = "question,A,B,C,D,answer\nSky?,blue,green,red,black,A\n";
    put("d.txt", txt, sizeof txt - 1);
    put("d.jsonl", jsonl, sizeof jsonl - 1);
    put("d.csv", csv, sizeof csv - 1);
    put("labels.lst", "0\n1\n0\n1\n", 8);
}

/* a suite's bytes with every way out of this directory made harmless:
 * ".." becomes "._", a string starting "/" starts "_", the escapes
 * backslash-slash and backslash-u become backslash-n. suite_load hashes
 * every file and directory a task names (a directory's whole tree), so
 * "../." (a string cut short by a NUL) hashed all of /tmp and "../.."
 * would hash the whole disk: the run's time would depend on the machine,
 * not on the reader (a CI run timed out so). The JSON stays as valid or
 * as broken as it was. */
static void stay_inside(uint8_t *p, size_t n)
{
    for (size_t i = 0; i + 1 < n; i++) {
        if ((p[i] == '.' && p[i + 1] == '.') || (p[i] == '"' && p[i + 1] == '/'))
            p[i + 1] = '_';
        else if (p[i] == '\\' && (p[i + 1] == '/' || p[i + 1] == 'u'))
            p[i + 1] = 'n';
    }
}

static void read_suite(const uint8_t *in, size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    if (!p) abort();
    if (n) memcpy(p, in, n);
    stay_inside(p, n);
    char path[128], err[QG_ERRMSG_MAX];
    put("suite.json", p, n);
    free(p);
    snprintf(path, sizeof path, "%s/suite.json", dir);
    struct suite *s;
    if (suite_load(path, 1, &s, err, sizeof err)) return;
    for (int i = 0; i < s->n_tasks; i++) {
        int64_t k;
        if (s->tasks[i].kind == TASK_MULTIPLE_CHOICE) {
            struct mc_item *it;
            if (!task_mc_items(&s->tasks[i], &it, &k, err, sizeof err)) mc_items_free(it, k);
        } else if (s->tasks[i].kind == TASK_GENERATION) {
            struct gen_item *it;
            if (!task_gen_items(&s->tasks[i], &it, &k, err, sizeof err)) gen_items_free(it, k);
        }
    }
    suite_free(s);
}

static void read_records(const uint8_t *p, size_t n, int csv)
{
    char path[128], err[QG_ERRMSG_MAX];
    put(csv ? "r.csv" : "r.jsonl", p, n);
    snprintf(path, sizeof path, "%s/%s", dir, csv ? "r.csv" : "r.jsonl");
    struct lines *l;
    if (lines_open(path, &l, err, sizeof err)) return;
    for (int k = 0; k < 100000; k++) {
        int rc;
        if (csv) {
            char **f;
            int nf;
            if ((rc = csv_next(l, &f, &nf)) == 1) csv_fields_free(f, nf);
        } else {
            cJSON *o;
            if ((rc = jsonl_next(l, &o)) == 1) cJSON_Delete(o);
        }
        if (rc != 1) break;
    }
    lines_close(l);
}

static void read_bench(int which, const uint8_t *p, size_t n)
{
    static const struct {
        const char *name, *file;
    } b[] = {{"hellaswag", "h.jsonl"},  {"hellaswag", "h.txt"},   {"mmlu", "x_test.csv"},
             {"piqa", "p.jsonl"},       {"arc", "a.jsonl"},       {"boolq", "b.jsonl"},
             {"winogrande", "w.jsonl"}, {"winogrande", "w.json"}, {"gsm8k", "g.jsonl"}};
    const int nb = (int)(sizeof b / sizeof *b);
    char path[128], labels[128], err[QG_ERRMSG_MAX];
    which %= nb;
    put(b[which].file, p, n);
    snprintf(path, sizeof path, "%s/%s", dir, b[which].file);
    snprintf(labels, sizeof labels, "%s/labels.lst", dir);
    struct bench_source src = {.data = path, .labels = labels, .fewshot_seed = 1234};
    int64_t k;
    if (bench_kind(b[which].name) == BENCH_MC) {
        struct mc_item *it;
        if (!bench_load_mc(b[which].name, &src, &it, &k, err, sizeof err)) mc_items_free(it, k);
    } else {
        struct gen_item *it;
        if (!bench_load_gen(b[which].name, &src, &it, &k, err, sizeof err)) gen_items_free(it, k);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) init();
    if (size < 1) return 0;
    int which = data[0];
    if (which == 0)
        read_suite(data + 1, size - 1);
    else if (which == 1 || which == 2)
        read_records(data + 1, size - 1, which == 2);
    else
        read_bench(which - 3, data + 1, size - 1);
    return 0;
}
