/* cmd_gate — `qgate gate BASE CAND [CAND...]`: run and compare in one step,
 * for CI. Without a suite it measures on text sampled from the baseline
 * (harness/sampled.h). */
#include "backends/backend.h"
#include "cli/commands.h"
#include "datasets/hash.h"
#include "harness/baseline.h"
#include "harness/compare.h"
#include "harness/registry_suite.h"
#include "harness/runner.h"
#include "harness/sampled.h"
#include "harness/suite.h"
#include "core/status.h"
#include "core/util.h"
#include "metrics/verdict.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static const struct cli_opt opts[] = {
    {"suite", 's', CLI_STR, "FILE",
     "the suite (default: text sampled from the baseline, plus any --text)", 0},
    {"baseline", 'b', CLI_STR, "SPEC", "the original model (instead of the first argument)", 0},
    CLI_OPT_DEVICE,
    {"candidate", 'c', CLI_STR, "SPEC", "a quantized model (repeatable; instead of the others)", 1},
    {"text", 0, CLI_STR, "FILE", "without --suite: also measure perplexity on FILE", 1},
    {"sample-tokens", 0, CLI_INT, "N",
     "without --suite: tokens to sample from the baseline (default: sized from the margin)", 0},
    {"ctx", 0, CLI_INT, "N",
     "without --suite: window length in tokens (default min(512, the "
     "baseline's context))",
     0},
    {"baseline-run", 0, CLI_STR, "RUN|SHA256|auto",
     "reuse the baseline of a stored run and run only the candidates (auto: the newest that can "
     "stand in; SHA256: the newest whose baseline is that file). The baseline file need not be "
     "here: the stored run carries its identity and references",
     0},
    {"baseline-db", 0, CLI_STR, "FILE", "the database holding --baseline-run (default: --db)", 0},
    {"resume", 0, CLI_STR, "RUN",
     "continue an interrupted gate: the same command and --resume RUN (every repeat kept)", 0},
    {"no-reference", 0, CLI_FLAG, NULL,
     "do not keep the baseline's top-K references (later runs then cannot reuse it)", 0},
    {"tasks", 0, CLI_STR, "A,B",
     "only these tasks of the suite; without --suite, named benchmarks ('qgate tasks')", 0},
    {"data", 0, CLI_STR, "DIR",
     "the folder the named benchmarks' files are in (default: $QGATE_DATA)", 0},
    {"limit", 0, CLI_INT, "N", "at most N items (perplexity: windows) per task", 0},
    {"repeats", 'r', CLI_INT, "R",
     "baseline repeats (default 2: measures run-to-run noise; candidates repeat only when the "
     "baseline is not deterministic)",
     0},
    {"policy", 0, CLI_STR, "FILE", "policy JSON (default: the suite's)", 0},
    {"seed", 0, CLI_INT, "N", "bootstrap and sampling seed (default 20261130)", 0},
    {"noise", 0, CLI_STR, "perturb",
     "also repeat the baseline under a benign numerical perturbation to measure the noise floor",
     0},
    {"no-cache", 0, CLI_FLAG, NULL,
     "remote models: neither read nor fill the response cache in the database", 0},
    CLI_OPT_DB,
    {"threads", 't', CLI_INT, "T", "threads per model", 0},
    CLI_OPT_CPU,
    {"allow-identical", 0, CLI_FLAG, NULL,
     "let a candidate be the baseline itself (an A/A check of the noise; otherwise refused)", 0},
    {"allow-changed-data", 0, CLI_FLAG, NULL, "run even when data differs from the suite's pins",
     0},
    {"quiet", 'q', CLI_FLAG, NULL, "only one verdict line per candidate", 0},
    {"report", 0, CLI_STR, "FILE", "also write the HTML report (every candidate) to FILE", 0},
    {"junit", 0, CLI_STR, "FILE", "also write JUnit XML (a test suite per candidate) to FILE", 0},
    {"md", 0, CLI_STR, "FILE",
     "also write the Markdown report to FILE; appended when FILE is $GITHUB_STEP_SUMMARY", 0},
    {"md-append", 0, CLI_FLAG, NULL, "append the Markdown report to --md FILE", 0},
    {"json", 0, CLI_STR, "FILE", "also write the JSON report to FILE ('-': stdout)", 0},
    CLI_OPT_END,
};

/* 1 for NAME=SPEC (an '=' before any "://" or "?query") */
static int is_named(const char *spec)
{
    const char *eq = strchr(spec, '='), *url = strstr(spec, "://"), *q = strchr(spec, '?');
    return eq && eq != spec && (!url || eq < url) && (!q || eq < q);
}

/* A model's default name: its file's stem ("a/Q4_K_M.gguf" -> "Q4_K_M");
 * "baseline" / "candidateN" for what is not a file. */
static void default_name(const char *full, int i, char *out, size_t n)
{
    char spec[4096]; /* a simulated format's query names it too: "F32+w-nvfp4" */
    const char *q = strchr(full, '?');
    snprintf(spec, sizeof spec, "%.*s", q ? (int)(q - full) : (int)strlen(full), full);
    const char *b = strrchr(spec, '/');
    if (strstr(full, "://") || !*(b ? b + 1 : spec)) {
        snprintf(out, n, i == 0 ? "baseline" : "candidate%d", i);
        return;
    }
    qg_path_stem(spec, out, n);
    for (size_t k = strlen(out); q && *q && k + 2 < n; q++) {
        char c = *q == '?' || *q == '&' ? '+' : *q == '=' ? '-' : *q;
        out[k++] = c, out[k] = '\0';
    }
}

/* The stems' common prefix up to a separator ("stories-F32", "stories-Q8_0"
 * -> "F32", "Q8_0"), kept when names would clash or vanish. */
static void strip_common(char (*names)[128], int n)
{
    if (n < 2) return;
    size_t cut = 0;
    for (size_t k = 0; names[0][k]; k++) {
        int same = 1;
        for (int i = 1; i < n && same; i++)
            same = names[i][k] == names[0][k];
        if (!same) break;
        if (strchr("-_.", names[0][k])) cut = k + 1;
    }
    for (int i = 0; i < n; i++)
        if (!names[i][cut]) return;
    for (int i = 0; i < n && cut; i++)
        memmove(names[i], names[i] + cut, strlen(names[i] + cut) + 1);
}

/* The models: BASE CAND... as arguments, or --baseline/--candidate; names
 * from NAME=SPEC, else from the file stems (made unique). */
static int gate_models(const struct cli_args *a, struct runner_params *p, char (*buf)[128])
{
    const char *specs[RUNNER_MAX_MODELS];
    int n = 0;
    if (a->n_pos && (cli_str(a, "baseline") || cli_count(a, "candidate")))
        return cmd_usage("give the models as arguments (BASE CAND...) or as --baseline and "
                         "--candidate, not both");
    if (a->n_pos) {
        for (int i = 0; i < a->n_pos && n < RUNNER_MAX_MODELS; i++)
            specs[n++] = a->pos[i];
    } else if (cli_str(a, "baseline")) {
        specs[n++] = cli_str(a, "baseline");
        for (int i = 0; i < cli_count(a, "candidate") && n < RUNNER_MAX_MODELS; i++)
            specs[n++] = cli_nth(a, "candidate", i);
    }
    if (n < 2)
        return cmd_usage("'qgate gate' needs a baseline and at least one candidate: qgate gate "
                         "BASE.gguf CAND.gguf [CAND.gguf...]");
    if (a->n_pos > RUNNER_MAX_MODELS || cli_count(a, "candidate") >= RUNNER_MAX_MODELS)
        return cmd_usage("at most %d models", RUNNER_MAX_MODELS);
    char stems[RUNNER_MAX_MODELS][128];
    int n_plain = 0;
    for (int i = 0; i < n; i++)
        if (!is_named(specs[i])) default_name(specs[i], i, stems[n_plain++], 128);
    strip_common(stems, n_plain);
    for (int i = 0, k = 0; i < n; i++) {
        int named = is_named(specs[i]);
        char arg[4400], name[128];
        if (named) {
            snprintf(arg, sizeof arg, "%s", specs[i]);
        } else {
            snprintf(name, sizeof name, "%s", stems[k++]);
            for (int j = 0, dup = 2; j < p->n_models; j++) /* unique: "Q4_K", "Q4_K-2" */
                if (!strcmp(p->names[j], name)) {
                    snprintf(name, sizeof name, "%.100s-%d", stems[k - 1], dup++);
                    j = -1;
                }
            snprintf(arg, sizeof arg, "%s=%s", name, specs[i]);
        }
        int code = cmd_parse_model(arg, p, buf);
        if (code) return code;
        p->specs[p->n_models - 1] = named ? strchr(specs[i], '=') + 1 : specs[i];
    }
    return 0;
}

/* The baseline's training context (0 when it cannot be read). */
static int64_t model_ctx(const char *spec)
{
    char err[QG_ERRMSG_MAX];
    struct backend_identity id;
    int rc = backend_identify(spec, 0, &id, err, sizeof err);
    backend_identity_release(&id);
    return !rc && id.n_ctx_train > 0 ? id.n_ctx_train : 0;
}

int cmd_default_suite(const struct cli_args *a, struct store *s, struct runner_params *p, char *dir,
                      char *suite, size_t n, int stored_ctx)
{
    if (p->suite_path) return 0;
    struct verdict_policy pol;
    char err[QG_ERRMSG_MAX];
    suite_policy_from_json(NULL, "defaults", &pol, err, sizeof err);
    int64_t ctx = cli_int(a, "ctx", 0), train = model_ctx(p->specs[0]);
    if (!ctx && p->baseline_sha && stored_ctx > 0) ctx = stored_ctx; /* the stored run's */
    if (!ctx) ctx = train > 0 && train < 512 ? train : 512;
    if (train > 0 && ctx > train)
        return cmd_usage("--ctx %lld is longer than the baseline's context (%lld)", (long long)ctx,
                         (long long)train);
    const char *texts[64];
    int n_texts = cli_count(a, "text");
    if (n_texts > 64) return cmd_usage("at most 64 --text files");
    for (int i = 0; i < n_texts; i++)
        texts[i] = cli_nth(a, "text", i);
    struct sampled_suite_params sp = {
        .baseline = p->specs[0],
        .seed = (uint64_t)cli_int(a, "seed", 20261130),
        .tokens =
            cli_int(a, "sample-tokens", sampled_tokens_for(pol.margin_ppl, pol.alpha, pol.beta)),
        .ctx = (int)ctx,
        .threads = p->threads,
        .quiet = cli_flag(a, "quiet"),
        .texts = texts,
        .n_texts = n_texts,
        .baseline_sha = p->baseline_sha};
    struct store *also = NULL; /* the stored baseline's database keeps its sampled text */
    if (p->baseline_db && qg_same_file(p->baseline_db, store_path(s)) != 1) {
        struct store_params stp = store_default_params();
        stp.readonly = 1;
        if (store_open(p->baseline_db, &stp, &also, err, sizeof err) == QG_OK) sp.also = also;
    }
    int rc = sampled_suite_make(s, &sp, dir, n, suite, n, err, sizeof err);
    store_close(also);
    if (rc) return cmd_fail(rc, err);
    p->suite_path = suite;
    return 0;
}

int cmd_registry_suite(const struct cli_args *a, struct store *s, struct runner_params *p,
                       char *dir, char *suite, size_t n, int stored_ctx)
{
    const char *data = cli_str(a, "data") ? cli_str(a, "data") : getenv("QGATE_DATA");
    char err[QG_ERRMSG_MAX];
    if (!data || !*data)
        return cmd_usage("--tasks %s without --suite runs named benchmarks, which need their "
                         "files: --data DIR or QGATE_DATA=DIR ('qgate tasks' lists what each "
                         "reads)",
                         p->tasks);
    int64_t ctx = cli_int(a, "ctx", 0), train = p->baseline_sha ? 0 : model_ctx(p->specs[0]);
    if (!ctx && stored_ctx > 0) ctx = stored_ctx;
    if (!ctx) ctx = train > 0 && train < 512 ? train : 512;
    struct registry_suite_params rp = {.tasks = p->tasks,
                                       .data_dir = data,
                                       .allow_changed = p->allow_changed,
                                       .ctx = (int)ctx,
                                       .quiet = p->quiet && !p->progress};
    int rc = registry_suite_make(s, &rp, dir, n, suite, n, err, sizeof err);
    if (rc) return cmd_fail(rc, err);
    p->suite_path = suite;
    p->tasks = NULL; /* the suite is those tasks */
    return 0;
}

static int check_options(const struct cli_args *a, struct runner_params *p)
{
    if (p->repeats < 1 || p->repeats > 1000) return cmd_usage("--repeats must be 1..1000");
    if (cli_str(a, "limit") && p->limit < 1) return cmd_usage("--limit must be a positive count");
    if (p->tasks && !p->tasks[strspn(p->tasks, ", ")])
        return cmd_usage("--tasks names no task: give one or more task names, comma-separated");
    if (cli_str(a, "sample-tokens") &&
        (cli_int(a, "sample-tokens", 0) < 16 || cli_int(a, "sample-tokens", 0) > 10000000))
        return cmd_usage("--sample-tokens must be 16..10000000");
    if (cli_str(a, "ctx") && (cli_int(a, "ctx", 0) < 8 || cli_int(a, "ctx", 0) > 1 << 20))
        return cmd_usage("--ctx must be 8..1048576");
    if (p->suite_path && (cli_count(a, "text") || cli_str(a, "sample-tokens") || cli_str(a, "ctx")))
        return cmd_usage("--text, --sample-tokens and --ctx shape the default measurement; with "
                         "--suite, add a perplexity task to the suite instead");
    if (p->suite_path && cli_str(a, "data"))
        return cmd_usage("--data is where named benchmarks (--tasks without --suite) find their "
                         "files; a suite names its own");
    if (!p->suite_path && p->tasks && (cli_count(a, "text") || cli_str(a, "sample-tokens")))
        return cmd_usage("--text and --sample-tokens shape the sampled-text measurement; with "
                         "named --tasks, add 'wikitext' or 'tinystories', or write a suite");
    if (cli_flag(a, "md-append") && !cli_str(a, "md"))
        return cmd_usage("--md-append needs --md FILE");
    const char *br = cli_str(a, "baseline-run");
    if (br && (!strcmp(br, "auto") || baseline_sel_is_sha(br)))
        p->baseline_run = -1;
    else if (br && (qg_parse_i64(br, 1, INT64_MAX / 2, &p->baseline_run)))
        return cmd_usage("--baseline-run takes a run id, a sha256 or 'auto', got '%s'", br);
    if (cli_str(a, "baseline-db") && !br) return cmd_usage("--baseline-db needs --baseline-run");
    const char *rs = cli_str(a, "resume");
    if (rs && qg_parse_i64(rs, 1, INT64_MAX / 2, &p->resume))
        return cmd_usage("--resume takes a run id (a positive integer, see 'qgate runs'), got '%s'",
                         rs);
    if (rs && br) return cmd_usage("--resume continues a run; --baseline-run starts one");
    p->baseline_db = cli_str(a, "baseline-db");
    p->keep_refs = !cli_flag(a, "no-reference");
    if (cli_str(a, "noise")) {
        if (strcmp(cli_str(a, "noise"), "perturb") != 0)
            return cmd_usage("--noise takes 'perturb', got '%s'", cli_str(a, "noise"));
        p->noise_perturb = 1;
    }
    return 0;
}

/* --md appends to $GITHUB_STEP_SUMMARY (or with --md-append) */
static int md_appends(const struct cli_args *a)
{
    const char *md = cli_str(a, "md"), *gh = getenv("GITHUB_STEP_SUMMARY");
    return cli_flag(a, "md-append") || (md && gh && *gh && qg_same_file(md, gh) == 1);
}

/* Every candidate against the baseline: the table or one line each; the
 * suite-level exit code (FAIL over INCONCLUSIVE over PASS) in *worst. */
static int compare_all(const struct cli_args *a, struct store *s, const struct runner_params *p,
                       int64_t run_id, const char *cmd, int64_t *cids, int *worst)
{
    int code = 0, quiet = cli_flag(a, "quiet");
    *worst = VERDICT_PASS;
    for (int i = 1; i < p->n_models && !code; i++) {
        int v = VERDICT_INCONCLUSIVE;
        code = cmd_compare_models(s, run_id, p->names[0], p->names[i], cli_str(a, "policy"),
                                  (uint64_t)cli_int(a, "seed", 20261130),
                                  quiet ? CMP_OUT_PLAIN : CMP_OUT_TEXT, cmd, &v, &cids[i - 1]);
        if (!code && (v == VERDICT_FAIL || (v == VERDICT_INCONCLUSIVE && *worst == VERDICT_PASS)))
            *worst = v;
        if (!quiet) printf("\n");
    }
    return code;
}

/* With an output on stdout ('-'), stdout carries that data alone: fd 1
 * points at stderr for the run, so the verdict lines, tables and progress
 * go there, and data_fd (the real stdout) takes the data. */
static int data_fd = -1;

static void human_to_stderr(const struct cli_args *a)
{
    static const char *const kinds[] = {"report", "junit", "md", "json"};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds && data_fd < 0; k++)
        if (cli_str(a, kinds[k]) && !strcmp(cli_str(a, kinds[k]), "-")) {
            fflush(stdout);
            if ((data_fd = dup(1)) >= 0) dup2(2, 1);
        }
}

/* fd 1 back to the real stdout (for good: 1, or while data is written: 0) */
static void stdout_to_data(int for_good)
{
    if (data_fd < 0) return;
    fflush(stdout);
    dup2(data_fd, 1);
    if (for_good) close(data_fd), data_fd = -1;
}

static void stdout_to_stderr(void)
{
    if (data_fd < 0) return;
    fflush(stdout);
    dup2(2, 1);
}

static int write_outputs(const struct cli_args *a, struct store *s, const int64_t *cids, int n)
{
    static const char *const kinds[][2] = {
        {"report", "html"}, {"junit", "junit"}, {"md", "md"}, {"json", "json"}};
    int code = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds && !code; k++) {
        const char *path = cli_str(a, kinds[k][0]);
        if (!path) continue;
        int append = !strcmp(kinds[k][0], "md") && md_appends(a);
        if (!strcmp(path, "-")) stdout_to_data(0);
        code = cmd_write_reports(s, cids, n, kinds[k][1], path, append);
        if (!strcmp(path, "-")) stdout_to_stderr();
        if (!code && !cli_flag(a, "quiet") && strcmp(path, "-"))
            printf("%s %s\n", append ? "appended to" : "wrote", path);
    }
    return code;
}

/* Whether candidate i is the baseline itself: the same spec, or local
 * files of one size whose sha256 agree (hashed only then), run the same
 * way (compare_same_setup: not a simulated format or another device). 1,
 * 0, or an exit code. */
static int same_as_baseline(const struct runner_params *p, int i, int64_t bytes0, int64_t bytes)
{
    if (!strcmp(p->specs[0], p->specs[i])) return 1;
    if (bytes0 <= 0 || bytes != bytes0 || !compare_same_setup(p->specs[0], p->specs[i])) return 0;
    struct backend_identity a, b;
    char err[QG_ERRMSG_MAX];
    int rc = backend_identify(p->specs[0], 1, &a, err, sizeof err);
    if (!rc) {
        rc = backend_identify(p->specs[i], 1, &b, err, sizeof err);
        if (!rc) rc = *a.sha256 && !strcmp(a.sha256, b.sha256);
        backend_identity_release(&b);
    }
    backend_identity_release(&a);
    return rc < 0 ? cmd_fail(rc, err) : rc;
}

/* Every model readable (a local file: a GGUF whose header and metadata
 * parse) before any work: a bad candidate costs nothing, not the
 * baseline's sampling first; a candidate that is the baseline itself is
 * refused unless allow_identical. 0 or an exit code. */
static int check_models(const struct runner_params *p, char (*names)[128], int allow_identical,
                        int base_absent)
{
    int64_t bytes0 = -1;
    for (int i = base_absent; i < p->n_models; i++) {
        char err[QG_ERRMSG_MAX];
        struct backend_identity id;
        int rc = backend_identify(p->specs[i], 0, &id, err, sizeof err);
        int64_t bytes = id.file_bytes;
        backend_identity_release(&id);
        if (rc) return cmd_fail(rc, err);
        if (i == 0) bytes0 = bytes;
        int same = i > 0 && !allow_identical ? same_as_baseline(p, i, bytes0, bytes) : 0;
        if (same > 1) return same;
        if (same)
            return cmd_usage("candidate '%s' is the baseline '%s' itself (same file content): a "
                             "model compared with itself proves nothing; --allow-identical runs "
                             "it as an A/A check of the noise",
                             names[i], names[0]);
    }
    return 0;
}

/* 1 when --baseline-run is given and the baseline is a local file that is
 * not here: the stored run stands in by identity */
static int baseline_absent(const struct cli_args *a, const struct runner_params *p)
{
    char file[4096];
    if (!cli_str(a, "baseline-run") || strstr(p->specs[0], "://")) return 0;
    const char *spec = p->specs[0]; /* as backend_identify reads it: cpu: / cuda: stripped */
    spec += !strncmp(spec, "cpu:", 4) ? 4 : !strncmp(spec, "cuda:", 5) ? 5 : 0;
    qg_spec_file(spec, file, sizeof file);
    return access(file, F_OK) != 0;
}

/* The stored baseline by identity (its file absent, or --baseline-run
 * SHA256): p->baseline_sha set from the store (sha: its buffer); a
 * candidate that is that very file is refused as with the file present.
 * *ctx: the stored sampled-text window. 0 or an exit code. */
static int stored_identity(const struct cli_args *a, struct store *s, struct runner_params *p,
                           char (*names)[128], int absent, char sha[65], int *ctx)
{
    const char *sel = cli_str(a, "baseline-run");
    char err[QG_ERRMSG_MAX];
    struct baseline_identity id;
    *ctx = 0;
    if (!absent && !baseline_sel_is_sha(sel)) return 0;
    if (!absent) { /* the file is here: it must be the one named */
        char file[4096];
        qg_spec_file(p->specs[0], file, sizeof file);
        int rc = backend_model_sha256(file, sha, err, sizeof err);
        if (rc) return cmd_fail(rc, err);
        if (strcasecmp(sha, sel)) {
            qg_errf(err, sizeof err, QG_ERR_DATA,
                    "--baseline-run %s names another file than the baseline '%s' (sha256 %s)", sel,
                    p->specs[0], sha);
            return cmd_fail(QG_ERR_DATA, err);
        }
        p->baseline_sha = sha;
        return 0;
    }
    int rc = baseline_identify(s, p->baseline_db, sel, p->specs[0], &id, err, sizeof err);
    if (rc == QG_ERR_NOTFOUND) {
        char why[QG_ERRMSG_MAX];
        snprintf(why, sizeof why, "%s", err);
        qg_errf(err, sizeof err, QG_ERR_NOINPUT, "the baseline '%s' is not here, and %s",
                p->specs[0], why);
        return cmd_fail(QG_ERR_NOINPUT, err);
    }
    if (rc) return cmd_fail(rc, err);
    snprintf(sha, 65, "%s", id.sha256);
    p->baseline_sha = sha;
    *ctx = id.ctx;
    if (!p->quiet || p->progress)
        fprintf(stderr,
                "qgate: baseline '%s' is not here; run %lld stands in for it by identity "
                "(sha256 %.16s..., given as %s)\n",
                p->specs[0], (long long)id.run, sha, id.spec);
    for (int i = 1; i < p->n_models && !cli_flag(a, "allow-identical"); i++) {
        struct backend_identity ci;
        int same = backend_identify(p->specs[i], 0, &ci, err, sizeof err) == 0 &&
                   ci.file_bytes == id.file_bytes;
        backend_identity_release(&ci);
        if (same && backend_identify(p->specs[i], 1, &ci, err, sizeof err) == 0) {
            same = !strcasecmp(ci.sha256, sha);
            backend_identity_release(&ci);
        } else {
            same = 0;
        }
        if (same)
            return cmd_usage("candidate '%s' is the stored baseline itself (same sha256): a model "
                             "compared with itself proves nothing; --allow-identical runs it as "
                             "an A/A check of the noise",
                             names[i]);
    }
    return 0;
}

static int cmd_gate(const struct cli_args *a)
{
    int quiet = cli_flag(a, "quiet");
    struct runner_params p = {.suite_path = cli_str(a, "suite"),
                              .allow_changed = cli_flag(a, "allow-changed-data"),
                              .repeats = (int)cli_int(a, "repeats", 2),
                              .seed = (uint64_t)cli_int(a, "seed", 20261130),
                              .threads = (int)cli_int(a, "threads", 0),
                              .quiet = 1,
                              .progress = !quiet,
                              .tasks = cli_str(a, "tasks"),
                              .limit = cli_int(a, "limit", 0),
                              .no_cache = cli_flag(a, "no-cache")};
    char names[RUNNER_MAX_MODELS][128];
    int code = check_options(a, &p);
    if (!code) code = gate_models(a, &p, names);
    static char devspec[RUNNER_MAX_MODELS][4400];
    if (!code) code = cmd_apply_device(a, p.specs, p.n_models, devspec);
    int absent = !code && baseline_absent(a, &p);
    if (!code) code = check_models(&p, names, cli_flag(a, "allow-identical"), absent);
    for (int i = 0; i < cli_count(a, "text") && !code; i++) { /* before any sampling */
        char err[QG_ERRMSG_MAX];
        int st = 0;
        FILE *f = qg_fopen_regular(cli_nth(a, "text", i), &st, err, sizeof err);
        if (f)
            fclose(f);
        else
            code = cmd_fail(st, err);
    }
    if (code) return code;
    /* outputs checked before the run: a bad path costs nothing, and no
     * output may overwrite the suite, the database, a model or a text */
    static const char *const outputs[] = {"report", "junit", "md", "json", NULL};
    const char *inputs[RUNNER_MAX_MODELS + 3 + 64] = {
        p.suite_path ? p.suite_path : "", cli_str(a, "db") ? cli_str(a, "db") : STORE_DEFAULT_PATH};
    int n_in = 2;
    for (int i = 0; i < p.n_models; i++)
        inputs[n_in++] = p.specs[i];
    for (int i = 0; i < cli_count(a, "text") && i < 64; i++)
        inputs[n_in++] = cli_nth(a, "text", i);
    if (cli_str(a, "policy")) inputs[n_in++] = cli_str(a, "policy");
    if ((code = cmd_check_suite_outputs(a, outputs, p.suite_path))) return code;
    if ((code = cmd_check_outputs(a, outputs, inputs, n_in))) return code;
    human_to_stderr(a);
    struct store *s;
    if ((code = cmd_open_store(a, 0, &s))) {
        stdout_to_data(1);
        return code;
    }
    char dir[4096] = "", suite[4200], sha[65] = "";
    int stored_ctx = 0;
    code = stored_identity(a, s, &p, names, absent, sha, &stored_ctx);
    if (!code && !p.suite_path && p.tasks)
        code = cmd_registry_suite(a, s, &p, dir, suite, sizeof suite, stored_ctx);
    else if (!code)
        code = cmd_default_suite(a, s, &p, dir, suite, sizeof suite, stored_ctx);
    char *cmd = cmd_command_line(a);
    p.command = cmd;
    char err[QG_ERRMSG_MAX];
    int64_t run_id = 0, cids[RUNNER_MAX_MODELS] = {0};
    if (!code && !quiet)
        printf("qgate gate: %s%s on %d models (baseline %s)...\n",
               cli_str(a, "suite")   ? cli_str(a, "suite")
               : cli_str(a, "tasks") ? "named benchmarks "
                                     : "text sampled from the baseline",
               !cli_str(a, "suite") && cli_str(a, "tasks") ? cli_str(a, "tasks") : "", p.n_models,
               cmd_term(p.names[0]));
    if (!code) runner_catch_signals();
    int rc = code ? QG_OK : runner_run(s, &p, &run_id, err, sizeof err);
    if (rc) code = cmd_fail(rc, err);
    int worst = VERDICT_PASS;
    if (!code) code = compare_all(a, s, &p, run_id, cmd, cids, &worst);
    if (!code) code = write_outputs(a, s, cids, p.n_models - 1);
    free(cmd);
    store_close(s);
    sampled_suite_remove(dir);
    stdout_to_data(1);
    return code ? code : worst;
}

const struct cli_cmd cmd_gate_def = {
    .name = "gate",
    .fn = cmd_gate,
    .args_usage = "BASE.gguf CAND.gguf [CAND.gguf...]",
    .summary = "run and decide in one step: exit 0 PASS, 1 FAIL, 2 INCONCLUSIVE",
    .description =
        "Runs the baseline and every candidate over the suite (default: text sampled from the\n"
        "baseline, sized so that the margin can be resolved, and stored with the run) and\n"
        "prints each candidate's verdict. Models are named after their files (or NAME=SPEC).\n"
        "Only the baseline repeats; candidates repeat when the baseline is not deterministic.",
    .opts = opts,
    .min_pos = 0,
    .max_pos = RUNNER_MAX_MODELS,
};
