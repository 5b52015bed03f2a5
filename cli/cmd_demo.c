/* cmd_demo — `qgate demo`: the built-in end-to-end example, no downloads.
 *
 * Generates a small seeded Llama model with a character-level vocabulary
 * (so that text sampled from it tokenizes back into the same tokens) stored
 * as F32 (the original) and as Q8_0 and Q4_0 (the quantized candidates),
 * samples a corpus from the original, writes a suite that pins it, and runs
 * exactly what `qgate gate` runs: all models in lockstep over the corpus
 * (paired per window, with KL divergence and top-1 agreement), two repeats
 * to measure run-to-run noise, then the verdict of each candidate. Q8_0 is
 * expected to pass and Q4_0 to fail (they do with the default seed; other
 * seeds make other models). Exit 0 when the demo ran, whatever the verdicts.
 */
#include "backends/backend.h"
#include "backends/ggml_types.h"
#include "backends/synth.h"
#include "datasets/hash.h"
#include "datasets/reader.h"
#include "cli/commands.h"
#include "harness/runner.h"
#include "harness/sampled.h"
#include "core/status.h"
#include "core/util.h"
#include "metrics/verdict.h"
#include "core/utf8.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct cli_opt opts[] = {
    {"dir", 'd', CLI_STR, "DIR",
     "where to write the models, corpus, suite and database (default ./qgate-demo)", 0},
    {"seed", 0, CLI_INT, "N", "seed of the random weights and of the corpus (default 1)", 0},
    CLI_OPT_END,
};

static const struct {
    const char *name, *file;
    uint32_t type;
} variants[] = {{"f32", "base-f32.gguf", GGML_F32},
                {"q8_0", "cand-q8_0.gguf", GGML_Q8_0},
                {"q4_0", "cand-q4_0.gguf", GGML_Q4_0}};
enum { N_VARIANTS = 3, CTX = 128 };

/* Samples paragraphs from the original until there are 24000 bytes (at most
 * 1600 paragraphs: a paragraph ends early when EOS is drawn; about 190
 * windows: enough for the verdict to bound a skewed loss). */
static int make_corpus(const char *model, const char *path, uint64_t seed, char *err, size_t errlen)
{
    struct sampled_params sp = {.seed = seed,
                                .threads = 1,
                                .n_ctx = CTX,
                                .paragraph_tokens = 120,
                                .max_bytes = 24000,
                                .max_paragraphs = 1600};
    struct sbuf text;
    sbuf_init(&text, 0);
    int rc = sampled_text(model, &sp, &text, err, errlen);
    if (!rc) rc = qg_write_file_atomic(path, sbuf_str(&text), text.len, err, errlen);
    sbuf_release(&text);
    return rc;
}

static int write_suite(const char *path, const char *corpus_sha, char *err, size_t errlen)
{
    FILE *f = fopen(path, "wb");
    if (!f) return qg_errf(err, errlen, QG_ERR_CANTCREAT, "%s: %s", path, strerror(errno));
    fprintf(
        f,
        "{\n  \"name\": \"demo\",\n"
        "  \"description\": \"Text sampled from the demo's F32 model; written by qgate demo.\",\n"
        "  \"policy\": {\"margin_ppl\": 0.00995, \"alpha\": 0.05, \"beta\": 0.2, \"bootstrap\": "
        "10000},\n"
        "  \"tasks\": [\n"
        "    {\"name\": \"sampled-text\", \"kind\": \"perplexity\", \"data\": \"corpus.txt\",\n"
        "     \"sha256\": \"%s\", \"protocol\": \"rolling\", \"ctx\": %d, \"critical\": true}\n  "
        "]\n}\n",
        corpus_sha, CTX);
    return fclose(f) == 0 ? QG_OK : qg_errf(err, errlen, QG_ERR_IO, "%s: write failed", path);
}

static int cmd_demo(const struct cli_args *a)
{
    const char *dir = cli_str(a, "dir") ? cli_str(a, "dir") : "qgate-demo";
    int64_t seed = cli_int(a, "seed", 1);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return qg_error("cannot create '%s': %s", dir, strerror(errno)), QG_EX_CANTCREAT;
    char paths[N_VARIANTS][4096], corpus[4096], suite[4096], db[4096], err[QG_ERRMSG_MAX];
    for (int i = 0; i < N_VARIANTS; i++) {
        struct synth_params p = synth_default_params();
        p.seed = (uint64_t)seed;
        p.wtype = variants[i].type;
        p.name = "qgate-demo";
        p.n_vocab = 30; /* <unk> <s> </s>, "▁" and a-z: character level, no bytes */
        p.byte_fallback = 0;
        p.logit_scale = 12.0f; /* peaked, language-like next-token distributions */
        snprintf(paths[i], sizeof paths[i], "%s/%s", dir, variants[i].file);
        int rc = synth_write(&p, paths[i], err, sizeof err);
        if (rc) return cmd_fail(rc, err);
    }
    snprintf(corpus, sizeof corpus, "%s/corpus.txt", dir);
    snprintf(suite, sizeof suite, "%s/suite.json", dir);
    snprintf(db, sizeof db, "%s/demo.db", dir);
    char sha[HASH_HEX_LEN + 1];
    int rc = make_corpus(paths[0], corpus, (uint64_t)seed, err, sizeof err);
    if (!rc) rc = hash_sha256_file(corpus, sha, err, sizeof err);
    if (!rc) rc = write_suite(suite, sha, err, sizeof err);
    if (rc) return cmd_fail(rc, err);
    printf("qgate demo: a seeded Llama model (dim 64, 2 layers, character vocabulary) stored as\n"
           "F32 (the original), Q8_0 and Q4_0; %s holds text sampled from the original.\n"
           "Running what this command runs:\n"
           "  qgate gate --suite %s --baseline f32=%s --candidate q8_0=%s --candidate q4_0=%s --db "
           "%s\n\n",
           corpus, suite, paths[0], paths[1], paths[2], db);
    unlink(db); /* a fresh database each time */
    char wal[4200];
    snprintf(wal, sizeof wal, "%s-wal", db);
    unlink(wal);
    snprintf(wal, sizeof wal, "%s-shm", db);
    unlink(wal);
    char spare[4200];
    struct store *s;
    struct store_params sp = store_default_params();
    if ((rc = store_open(db, &sp, &s, err, sizeof err))) return cmd_fail(rc, err);
    struct runner_params p = {
        .suite_path = suite, .repeats = 2, .threads = 1, .quiet = 1, .command = "qgate demo"};
    for (int i = 0; i < N_VARIANTS; i++) {
        p.names[i] = variants[i].name;
        p.specs[i] = paths[i];
    }
    p.n_models = N_VARIANTS;
    int64_t run_id;
    int code = 0;
    if ((rc = runner_run(s, &p, &run_id, err, sizeof err))) code = cmd_fail(rc, err);
    int verdicts[N_VARIANTS] = {0};
    for (int i = 1; i < N_VARIANTS && !code; i++) {
        code = cmd_compare_models(s, run_id, variants[0].name, variants[i].name, NULL, 20261130, 0,
                                  "qgate demo", &verdicts[i], NULL);
        printf("\n");
    }
    store_close(s);
    (void)spare;
    if (code) return code;
    int as_expected = verdicts[1] == VERDICT_PASS && verdicts[2] == VERDICT_FAIL;
    printf("q8_0: %s, q4_0: %s%s\n", verdict_name(verdicts[1]), verdict_name(verdicts[2]),
           as_expected ? " — as expected: 8-bit storage is within the margin, 4-bit is a real drop"
                       : " (not the expected PASS/FAIL)");
    printf("Next:\n"
           "  qgate show 1 --db %s\n"
           "      lists the trials;\n"
           "  qgate compare --db %s --baseline f32 --candidate q4_0 --format json\n"
           "      gives the numbers;\n"
           "  qgate tasks\n"
           "      lists the named benchmarks (--tasks hellaswag,arc_easy --data DIR).\n",
           db, db);
    return 0;
}

const struct cli_cmd cmd_demo_def = {
    .name = "demo",
    .fn = cmd_demo,
    .summary =
        "built-in end-to-end example, no downloads: a generated model, quantized twice, gated",
    .opts = opts,
    .min_pos = 0,
    .max_pos = 0,
};
