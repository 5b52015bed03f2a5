/* test_suite — suite files: validation, pinning, bad input, and running every
 * built-in task on the real stories260K model. */
#include "datasets/hash.h"
#include "core/status.h"
#include "harness/suite.h"
#include "core/util.h"
#include "tests/test.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

static int write_text(const char *name, const char *text)
{
    return t_write_file(t_path(name), text, strlen(text));
}

static const char *sha_of(const char *name)
{
    static char hex[4][65];
    static int k;
    char err[QG_ERRMSG_MAX];
    char *h = hex[k++ % 4];
    if (hash_sha256_file(t_path(name), h, err, sizeof err)) return "error";
    return h;
}

TEST(suite_default_and_shared_check, shared)
{
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "suite", "check", QG_SOURCE_DIR "/suites/default/suite.json", NULL));
    if (access("/usr/share/common-licenses/GPL-3", R_OK) != 0) {
        t_out_free(&o);
        SKIP("/usr/share/common-licenses/GPL-3 is absent (not Debian/Ubuntu)");
    }
    ASSERT_EQ(o.code, 0);
    ASSERT_CONTAINS(o.out, "common-sense");
    t_out_free(&o);
    /* every suite under suites/ and one folder below (the shared one when
     * ../shared exists) */
    const char *dirs[] = {QG_SOURCE_DIR "/suites", QG_SOURCE_DIR "/suites/default"};
    int checked = 0;
    for (int di = 0; di < 2; di++) {
        DIR *d = opendir(dirs[di]);
        ASSERT(d);
        struct dirent *e;
        while ((e = readdir(d))) {
            size_t l = strlen(e->d_name);
            if (l < 5 || strcmp(e->d_name + l - 5, ".json")) continue;
            if (!strcmp(e->d_name, "shared.json") && !t_shared("data")) continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dirs[di], e->d_name);
            ASSERT_OK(t_qgate(&o, "suite", "check", path, "--json", NULL));
            if (o.code != 0) T_FAIL_("%s: exit %d: %s", path, o.code, o.err);
            cJSON *j = cJSON_Parse(o.out);
            ASSERT(j && cJSON_GetArraySize(cJSON_GetObjectItem(j, "tasks")) > 0);
            cJSON_Delete(j);
            t_out_free(&o);
            checked++;
        }
        closedir(d);
    }
    printf("%d suites under suites/ checked\n", checked);
    ASSERT(checked >= 1);
    return 0;
}

TEST(suite_dir_hash_matches_sha256sum, shared)
{
    const char *mmlu = t_shared("data/mmlu");
    if (!mmlu) SKIP("../shared/data/mmlu is absent");
    char hex[65], err[QG_ERRMSG_MAX];
    ASSERT_OK(hash_sha256_dir(mmlu, hex, err, sizeof err));
    /* SOURCES.md: find . -type f | sort | xargs sha256sum | sha256sum */
    ASSERT_STR_EQ(hex, "cbaa37680297ddaa9a83563490768f1c33010b27f9f79522b647b5491c431ff5");
    return 0;
}

TEST(suite_bad_input, e2e)
{
    ASSERT_OK(write_text("mc.jsonl", "{\"q\":\"a?\",\"c\":[\"x\",\"y\"],\"g\":1}\n"));
    ASSERT_OK(write_text("mc-range.jsonl", "{\"q\":\"a?\",\"c\":[\"x\",\"y\"],\"g\":2}\n"));
    ASSERT_OK(write_text("mc-empty.jsonl", "{\"q\":\"a?\",\"c\":[],\"g\":0}\n"));
    ASSERT_OK(write_text("mc-one.jsonl", "{\"q\":\"a?\",\"c\":[\"x\"],\"g\":0}\n"));
    ASSERT_OK(write_text("mc-gstr.jsonl", "{\"q\":\"a?\",\"c\":[\"x\",\"y\"],\"g\":\"x\"}\n"));
    ASSERT_OK(write_text("mc-type.jsonl", "{\"q\":7,\"c\":[\"x\"],\"g\":0}\n"));
    ASSERT_OK(write_text("mc-missing.jsonl", "{\"c\":[\"x\"],\"g\":0}\n"));
    ASSERT_OK(write_text("empty.jsonl", "\n"));
    ASSERT_OK(write_text(
        "dup.jsonl",
        "{\"id\":\"a\",\"p\":\"1\",\"a\":\"1\"}\n{\"id\":\"a\",\"p\":\"2\",\"a\":\"2\"}\n"));
    ASSERT_OK(write_text("latin1.jsonl", "{\"p\":\"caf\xe9\",\"a\":\"x\"}\n"));
    ASSERT_OK(write_text("corpus.txt", "some text\n"));
    char mc_fields[] = "\"fields\":{\"context\":\"q\",\"choices\":\"c\",\"gold\":\"g\"}";
    struct {
        const char *suite, *want;
    } cases[] = {
        {"{\"name\":\"x\",\"tasks\":[{\"kind\":\"custom\"}]}", "task 1: missing \"name\""},
        {"{\"name\":\"x\",\"tasks\":[{\"name\":\"t\",\"kind\":\"custom\",\"data\":\"mc.jsonl\","
         "\"sha256\":\"%s\"}]}",
         "needs \"fields\""},
        {"{\"name\":\"x\",\"tasks\":[{\"name\":\"t\",\"kind\":\"perplexity\",\"data\":\"corpus."
         "txt\",\"sha256\":\"%s\",\"ctx\":\"128\"}]}",
         "\"ctx\" must be an integer"},
        {"{\"name\":\"x\",\"tasks\":[{\"name\":\"t\",\"kind\":\"custom\",\"data\":\"mc-range."
         "jsonl\",\"sha256\":\"%s\",%s}]}",
         "mc-range.jsonl:1: item 1: answer index \"g\" is out of range (0..1)"},
        {"{\"name\":\"x\",\"tasks\":[{\"name\":\"t\",\"kind\":\"custom\",\"data\":\"mc-empty."
         "jsonl\",\"sha256\":\"%s\",%s}]}",
         "mc-empty.jsonl:1: item 1: field \"c\" must be an array of 2..16 strings (a question "
         "needs a choice to make)"},
        {"{\"name\":\"x\",\"tasks\":[{\"name\":\"t\",\"kind\":\"custom\",\"data\":\"mc-one."
         "jsonl\",\"sha256\":\"%s\",%s}]}",
         "mc-one.jsonl:1: item 1: field \"c\" must be an array of 2..16 strings"},
        {"{\"name\":\"x\",\"tasks\":[{\"name\":\"t\",\"kind\":\"custom\",\"data\":\"mc-gstr."
         "jsonl\",\"sha256\":\"%s\",%s}]}",
         "mc-gstr.jsonl:1: item 1: answer index \"g\" must be a number (0..1)"},
        {"{\"name\":\"x\",\"tasks\":[{\"name\":\"t\",\"kind\":\"custom\",\"data\":\"mc-type."
         "jsonl\",\"sha256\":\"%s\",%s}]}",
         "mc-type.jsonl:1: item 1: field \"q\" is missing or not a string"},
        {"{\"name\":\"x\",\"tasks\":[{\"name\":\"t\",\"kind\":\"custom\",\"data\":\"mc-missing."
         "jsonl\",\"sha256\":\"%s\",%s}]}",
         "mc-missing.jsonl:1: item 1: field \"q\" is missing"},
        {"{\"name\":\"x\",\"tasks\":[{\"name\":\"t\",\"kind\":\"custom\",\"data\":\"empty.jsonl\","
         "\"sha256\":\"%s\",\"fields\":{\"prompt\":\"p\",\"answer\":\"a\"}}]}",
         "empty.jsonl: no items (empty dataset)"},
        {"{\"name\":\"x\",\"tasks\":[{\"name\":\"t\",\"kind\":\"custom\",\"data\":\"dup.jsonl\","
         "\"sha256\":\"%s\",\"fields\":{\"id\":\"id\",\"prompt\":\"p\",\"answer\":\"a\"}}]}",
         "dup.jsonl: duplicate item id 'a'"},
        {"{\"name\":\"x\",\"tasks\":[{\"name\":\"t\",\"kind\":\"custom\",\"data\":\"latin1.jsonl\","
         "\"sha256\":\"%s\",\"fields\":{\"prompt\":\"p\",\"answer\":\"a\"}}]}",
         "latin1.jsonl:1: not valid UTF-8"},
        {"{\"name\":\"x\",\"tasks\":[{\"name\":\"t\",\"kind\":\"custom\",\"data\":\"dup.jsonl\","
         "\"sha256\":\"%s\",\"fields\":{\"prompt\":\"p\",\"answer\":\"a\"},\"pipelines\":[{"
         "\"name\":\"p\",\"regex\":\"(a\"}]}]}",
         "pipeline 'p': invalid regex '(a': missing closing parenthesis at offset 2"},
        {"{\"name\":\"x\",\"tasks\":[{\"name\":\"t\",\"kind\":\"perplexity\",\"data\":\"corpus."
         "txt\",\"sha256\":\"00\"}]}",
         "but the suite pins 00"},
        {"{\"name\":\"x\",\"tasks\":[{\"name\":\"t\",\"kind\":\"perplexity\",\"data\":\"nope.txt\","
         "\"sha256\":\"00\"}]}",
         "nope.txt: No such file"},
        {"{\"name\":\"x\",\"tasks\":[{\"name\":\"t\",\"kind\":\"perplexity\",\"data\":\"corpus."
         "txt\",\"sha256\":\"%s\",\"chuncks\":3}]}",
         "unknown key \"chuncks\" (did you mean \"chunks\"?)"},
        {"{\"name\":\"x\",\"tasks\":[{\"name\":\"t\",\"benchmark\":\"squad\",\"data\":\"corpus."
         "txt\",\"sha256\":\"%s\"}]}",
         "unknown benchmark 'squad'"},
        {"{\"name\":\"x\",\"tasks\":[{\"name\":\"t\",\"kind\":\"perplexity\",\"data\":\"corpus."
         "txt\",\"sha256\":\"%s\"},{\"name\":\"t\",\"kind\":\"perplexity\",\"data\":\"corpus.txt\","
         "\"sha256\":\"%s\"}]}",
         "duplicate task name"},
        {"{\"name\":\"x\",\n\"tasks\":[\n{\"name\":\"t\",,}]}", "suite.json:3: invalid JSON"},
        {"{\"name\":\"x\",\"tasks\":[]}", "\"tasks\" must be a non-empty array"},
        {"{\"name\":\"x\",\"tasks\":[{\"name\":\"t\",\"kind\":\"perplexity\",\"data\":\"corpus."
         "txt\",\"sha256\":\"%s\"}],\"policy\":{\"alpha\":2}}",
         "policy \"alpha\" must be a number"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char suite[4096];
        const char *data = strstr(cases[i].suite, "mc-range")      ? "mc-range.jsonl"
                           : strstr(cases[i].suite, "mc-empty")    ? "mc-empty.jsonl"
                           : strstr(cases[i].suite, "mc-one")      ? "mc-one.jsonl"
                           : strstr(cases[i].suite, "mc-gstr")     ? "mc-gstr.jsonl"
                           : strstr(cases[i].suite, "mc-type")     ? "mc-type.jsonl"
                           : strstr(cases[i].suite, "mc-missing")  ? "mc-missing.jsonl"
                           : strstr(cases[i].suite, "empty.jsonl") ? "empty.jsonl"
                           : strstr(cases[i].suite, "dup.jsonl")   ? "dup.jsonl"
                           : strstr(cases[i].suite, "latin1")      ? "latin1.jsonl"
                           : strstr(cases[i].suite, "mc.jsonl")    ? "mc.jsonl"
                                                                   : "corpus.txt";
        const char *h = sha_of(data);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        snprintf(suite, sizeof suite, cases[i].suite, h,
                 strstr(cases[i].suite, "\",%s}") ? mc_fields : h);
#pragma GCC diagnostic pop
        ASSERT_OK(write_text("suite.json", suite));
        struct t_out o;
        ASSERT_OK(t_qgate(&o, "suite", "check", t_path("suite.json"), NULL));
        int want_code =
            strstr(cases[i].want, "No such file") ? 66 : 65; /* missing input: sysexits 66 */
        if (o.code != want_code || !strstr(o.err, cases[i].want))
            T_FAIL_("case %zu: exit %d, stderr: %s(want \"%s\")", i, o.code, o.err, cases[i].want);
        t_out_free(&o);
    }
    /* --allow-changed-data accepts a changed file, with a warning */
    ASSERT_OK(write_text("suite.json",
                         "{\"name\":\"x\",\"tasks\":[{\"name\":\"t\",\"kind\":"
                         "\"perplexity\",\"data\":\"corpus.txt\",\"sha256\":\"00\"}]}"));
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "suite", "check", t_path("suite.json"), "--allow-changed-data", NULL));
    ASSERT_EQ(o.code, 0);
    ASSERT_CONTAINS(o.err, "differs from its pinned sha256");
    t_out_free(&o);
    printf("%zu bad suites refused with exit 65\n", sizeof cases / sizeof *cases);
    return 0;
}

TEST(suite_builtins_run_on_stories, shared)
{
    if (!t_shared("models/stories260K/gguf/stories260K-F32.gguf") || !t_shared("data"))
        SKIP("../shared model or data is absent");
    char model[4096];
    snprintf(model, sizeof model, "%s", t_shared("models/stories260K/gguf/stories260K-F32.gguf"));
    char cmd[8400];
    snprintf(cmd, sizeof cmd, "bunzip2 -c '%s' | head -n 120 > '%s'",
             t_shared("data/hellaswag/hellaswag_val_full.txt.bz2"), t_path("hs.txt"));
    if (system(cmd) != 0) SKIP("bunzip2 failed");
    char err[QG_ERRMSG_MAX], hs[65], mmlu[65], gsm[65], pq[65], pl[65], tiny[65];
    ASSERT_OK(hash_sha256_file(t_path("hs.txt"), hs, err, sizeof err));
    ASSERT_OK(hash_sha256_path(t_shared("data/mmlu/test"), mmlu, err, sizeof err));
    ASSERT_OK(hash_sha256_file(t_shared("data/gsm8k/test.jsonl"), gsm, err, sizeof err));
    ASSERT_OK(hash_sha256_file(t_shared("data/piqa/valid.jsonl"), pq, err, sizeof err));
    ASSERT_OK(hash_sha256_file(t_shared("data/piqa/valid-labels.lst"), pl, err, sizeof err));
    ASSERT_OK(hash_sha256_file(t_shared("data/tinystories_valid_head.txt"), tiny, err, sizeof err));
    char p_tiny[4096], p_mmlu[4096], p_pq[4096], p_pl[4096], p_gsm[4096], p_bz2[4096], p_arc[4096],
        p_bq[4096], p_wg[4096];
    char bz2[65], arc[65], bq[65], wg[65];
    snprintf(p_bz2, sizeof p_bz2, "%s", t_shared("data/hellaswag/hellaswag_val_full.txt.bz2"));
    snprintf(p_arc, sizeof p_arc, "%s", t_shared("data/llm-adapters/ARC-Challenge/test.json"));
    snprintf(p_bq, sizeof p_bq, "%s", t_shared("data/llm-adapters/boolq/test.json"));
    snprintf(p_wg, sizeof p_wg, "%s", t_shared("data/llm-adapters/winogrande/test.json"));
    ASSERT_OK(hash_sha256_file(p_bz2, bz2, err, sizeof err));
    ASSERT_OK(hash_sha256_file(p_arc, arc, err, sizeof err));
    ASSERT_OK(hash_sha256_file(p_bq, bq, err, sizeof err));
    ASSERT_OK(hash_sha256_file(p_wg, wg, err, sizeof err));
    snprintf(p_tiny, sizeof p_tiny, "%s", t_shared("data/tinystories_valid_head.txt"));
    snprintf(p_mmlu, sizeof p_mmlu, "%s", t_shared("data/mmlu/test"));
    snprintf(p_pq, sizeof p_pq, "%s", t_shared("data/piqa/valid.jsonl"));
    snprintf(p_pl, sizeof p_pl, "%s", t_shared("data/piqa/valid-labels.lst"));
    snprintf(p_gsm, sizeof p_gsm, "%s", t_shared("data/gsm8k/test.jsonl"));
    char suite[65536];
    snprintf(
        suite, sizeof suite,
        "{\"name\":\"stories-builtins\",\"tasks\":["
        "{\"name\":\"tiny\",\"kind\":\"perplexity\",\"data\":\"%s\",\"sha256\":\"%s\",\"ctx\":128,"
        "\"chunks\":20},"
        "{\"name\":\"hellaswag\",\"benchmark\":\"hellaswag\",\"data\":\"hs.txt\",\"sha256\":\"%s\"}"
        ","
        "{\"name\":\"mmlu\",\"benchmark\":\"mmlu\",\"data\":\"%s\",\"sha256\":\"%s\",\"limit\":20},"
        "{\"name\":\"piqa\",\"benchmark\":\"piqa\",\"data\":{\"data\":\"%s\",\"labels\":\"%s\"},"
        "\"sha256\":{\"data\":\"%s\",\"labels\":\"%s\"},\"limit\":20},"
        "{\"name\":\"gsm8k\",\"benchmark\":\"gsm8k\",\"data\":\"%s\",\"sha256\":\"%s\",\"limit\":5,"
        "\"max_tokens\":32},"
        "{\"name\":\"hellaswag-bz2\",\"benchmark\":\"hellaswag\",\"data\":\"%s\",\"sha256\":\"%s\","
        "\"limit\":20},"
        "{\"name\":\"arc\",\"benchmark\":\"arc\",\"data\":\"%s\",\"sha256\":\"%s\",\"limit\":20},"
        "{\"name\":\"boolq\",\"benchmark\":\"boolq\",\"data\":\"%s\",\"sha256\":\"%s\",\"limit\":"
        "20},"
        "{\"name\":\"winogrande\",\"benchmark\":\"winogrande\",\"data\":\"%s\",\"sha256\":\"%s\","
        "\"limit\":20}]}",
        p_tiny, tiny, hs, p_mmlu, mmlu, p_pq, p_pl, pq, pl, p_gsm, gsm, p_bz2, bz2, p_arc, arc,
        p_bq, bq, p_wg, wg);
    ASSERT_OK(write_text("suite.json", suite));
    char mspec[4200];
    snprintf(mspec, sizeof mspec, "base=%s", model);
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "run", "--suite", t_path("suite.json"), "--model", mspec, "--db",
                      t_path("r.db"), "--threads", "1", NULL));
    if (o.code != 0) T_FAIL_("exit %d: %s%s", o.code, o.out, o.err);
    printf("%s", o.out);
    t_out_free(&o);
    ASSERT_OK(t_qgate(&o, "show", "1", "--json", "--db", t_path("r.db"), NULL));
    ASSERT_EQ(o.code, 0);
    cJSON *j = cJSON_Parse(o.out);
    cJSON *trials = cJSON_GetObjectItem(j, "trials"), *tr;
    ASSERT_EQ(cJSON_GetArraySize(trials), 9);
    const char *want_task[] = {"tiny",          "hellaswag", "mmlu",  "piqa",      "gsm8k",
                               "hellaswag-bz2", "arc",       "boolq", "winogrande"};
    int want_items[] = {20, 20, 20, 20, 5, 20, 20, 20, 20}, k = 0;
    cJSON_ArrayForEach(tr, trials)
    {
        ASSERT_STR_EQ(cJSON_GetObjectItem(tr, "task")->valuestring, want_task[k]);
        ASSERT_STR_EQ(cJSON_GetObjectItem(tr, "status")->valuestring, "done");
        ASSERT_EQ(cJSON_GetObjectItem(tr, "items_stored")->valuedouble, want_items[k]);
        k++;
    }
    cJSON_Delete(j);
    t_out_free(&o);
    return 0;
}
