/* test_tasks — data readers, answer extraction, benchmark loaders and
 * multiple-choice scoring. */
#include "backends/backend.h"
#include "backends/gguf.h"
#include "backends/llama.h"
#include "backends/synth.h"
#include "datasets/reader.h"
#include "core/status.h"
#include "core/util.h"
#include "tasks/bench.h"
#include "tasks/extract.h"
#include "tasks/mc.h"
#include "tests/test.h"
#include "core/utf8.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int write_text(const char *name, const char *text)
{
    return t_write_file(t_path(name), text, strlen(text));
}

TEST(reader_csv_rfc4180, unit)
{
    ASSERT_OK(write_text(
        "a.csv",
        "question,a,b\n\"x, y\",\"he said \"\"hi\"\"\",\"two\nlines\"\r\n\nplain,,last\n"));
    struct lines *l;
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(lines_open(t_path("a.csv"), &l, err, sizeof err));
    char **f;
    int n;
    ASSERT_EQ(csv_next(l, &f, &n), 1);
    ASSERT_EQ(n, 3);
    ASSERT_STR_EQ(f[0], "question");
    csv_fields_free(f, n);
    ASSERT_EQ(csv_next(l, &f, &n), 1);
    ASSERT_EQ(n, 3);
    ASSERT_STR_EQ(f[0], "x, y");
    ASSERT_STR_EQ(f[1], "he said \"hi\"");
    ASSERT_STR_EQ(f[2], "two\nlines");
    csv_fields_free(f, n);
    ASSERT_EQ(csv_next(l, &f, &n), 1);
    ASSERT_EQ(n, 3);
    ASSERT_STR_EQ(f[1], "");
    ASSERT_EQ(lines_lineno(l), 5);
    csv_fields_free(f, n);
    ASSERT_EQ(csv_next(l, &f, &n), 0);
    lines_close(l);
    /* errors name file and line */
    const char *bad[][2] = {
        {"q.csv", "ok\n\"never closed\n"}, {"r.csv", "a,b\"c\n"}, {"s.csv", "\"x\"y,z\n"}};
    const char *want[] = {"q.csv:2: quoted field never closed", "r.csv:1: field 2: quote inside",
                          "s.csv:1: field 1: text after the closing quote"};
    for (int i = 0; i < 3; i++) {
        ASSERT_OK(write_text(bad[i][0], bad[i][1]));
        ASSERT_OK(lines_open(t_path(bad[i][0]), &l, err, sizeof err));
        int rc;
        while ((rc = csv_next(l, &f, &n)) == 1)
            csv_fields_free(f, n);
        ASSERT_EQ(rc, QG_ERR_DATA);
        ASSERT_CONTAINS(lines_errmsg(l), want[i]);
        lines_close(l);
    }
    return 0;
}

TEST(reader_jsonl_and_utf8, unit)
{
    ASSERT_OK(write_text("a.jsonl", "{\"a\": 1}\n\n  \n{\"b\": \"\xc3\xa9\"}\n[1,2]\n"));
    struct lines *l;
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(lines_open(t_path("a.jsonl"), &l, err, sizeof err));
    cJSON *o;
    ASSERT_EQ(jsonl_next(l, &o), 1);
    cJSON_Delete(o);
    ASSERT_EQ(jsonl_next(l, &o), 1);
    ASSERT_EQ(lines_lineno(l), 4);
    cJSON_Delete(o);
    ASSERT_EQ(jsonl_next(l, &o), QG_ERR_DATA);
    ASSERT_CONTAINS(lines_errmsg(l), "a.jsonl:5: not a JSON object");
    lines_close(l);
    ASSERT_OK(write_text("b.jsonl", "{\"a\": 1}\n{\"a\": tru}\n"));
    ASSERT_OK(lines_open(t_path("b.jsonl"), &l, err, sizeof err));
    ASSERT_EQ(jsonl_next(l, &o), 1);
    cJSON_Delete(o);
    ASSERT_EQ(jsonl_next(l, &o), QG_ERR_DATA);
    ASSERT_CONTAINS(lines_errmsg(l), "b.jsonl:2: invalid JSON");
    lines_close(l);
    /* a \u0000 would cut a prompt short: refused, naming line and byte;
     * an escaped backslash before u0000 is text, not a NUL */
    ASSERT_OK(write_text("n.jsonl", "{\"q\": \"a\\\\u0000b\"}\n{\"q\": \"ok\\u0000 cut\"}\n"));
    ASSERT_OK(lines_open(t_path("n.jsonl"), &l, err, sizeof err));
    ASSERT_EQ(jsonl_next(l, &o), 1);
    ASSERT_STR_EQ(cJSON_GetObjectItem(o, "q")->valuestring, "a\\u0000b");
    cJSON_Delete(o);
    ASSERT_EQ(jsonl_next(l, &o), QG_ERR_DATA);
    ASSERT_CONTAINS(lines_errmsg(l), "n.jsonl:2: a \\u0000 (NUL) inside a string at byte 10");
    lines_close(l);
    ASSERT_OK(write_text("c.txt", "fine\nbad \xff byte\n"));
    ASSERT_OK(lines_open(t_path("c.txt"), &l, err, sizeof err));
    const char *s;
    size_t n;
    ASSERT_EQ(lines_next(l, &s, &n), 1);
    ASSERT_EQ(lines_next(l, &s, &n), QG_ERR_DATA);
    ASSERT_CONTAINS(lines_errmsg(l), "c.txt:2: not valid UTF-8 (byte 5 of the line)");
    lines_close(l);
    ASSERT_EQ(lines_open(t_path("missing"), &l, err, sizeof err), QG_ERR_NOINPUT);
    size_t bad;
    ASSERT(!utf8_valid("\xed\xa0\x80", 3, &bad)); /* surrogate */
    ASSERT(!utf8_valid("\xc0\xaf", 2, &bad));     /* overlong */
    ASSERT(utf8_valid("\xf0\x9f\x98\x80", 4, &bad));
    return 0;
}

TEST(extract_gsm8k_lm_eval, unit)
{
    /* lm-eval's gsm8k filters and exact_match settings */
    char err[QG_ERRMSG_MAX];
    cJSON *strict_j = cJSON_Parse("{\"name\":\"strict-match\",\"regex\":\"#### "
                                  "(\\\\-?[0-9\\\\.\\\\,]+)\",\"select\":\"first\"}");
    cJSON *flex_j = cJSON_Parse("{\"name\":\"flexible-extract\",\"regex\":\"(-?[$0-9.,]{2,})|(-?[0-"
                                "9]+)\",\"select\":\"last\"}");
    cJSON *norm_j = cJSON_Parse(
        "{\"ignore_case\":true,\"ignore\":[\",\",\"\\\\$\",\"(?s).*#### \",\"\\\\.$\"]}");
    ASSERT(strict_j && flex_j && norm_j);
    struct pipeline *strict, *flex;
    struct normalizer *norm;
    ASSERT_OK(extract_pipeline_new(strict_j, "gsm8k", &strict, err, sizeof err));
    ASSERT_OK(extract_pipeline_new(flex_j, "gsm8k", &flex, err, sizeof err));
    ASSERT_OK(extract_normalizer_new(norm_j, "gsm8k", &norm, err, sizeof err));
    struct {
        const char *output, *strict, *flex, *target;
        int strict_ok, flex_ok;
    } cases[] = {
        {"Natalia sold 48/2 = 24 clips in May.\nShe sold 48+24 = 72 clips.\n#### 72", "72", "72",
         "#### 72", 1, 1},
        {"The answer is $1,000.", "[invalid]", "$1,000.", "Some work.\n#### 1000", 0, 1},
        {"She has 5 apples and gets 3 more, so 8.", "[invalid]", "8.", "#### 8", 0, 1},
        {"#### -3.5\nQuestion: next", "-3.5", "-3.5", "#### -3.5", 1, 1},
        {"It costs 12 dollars. #### 1,234", "1,234", "1,234", "#### 1234", 1, 1},
        {"", "[invalid]", "[invalid]", "#### 4", 0, 0},
        {"The temperature fell to -12 degrees", "[invalid]", "-12", "#### -12", 0, 1},
        {"I think 7 + 5 = 12, wait, 13. #### 12", "12", "12", "#### 13", 0, 0},
        /* invalid UTF-8 in an output is matched around, not a silent miss */
        {"The answer is 42 \xff ok", "[invalid]", "42", "#### 42", 0, 1},
        {"#### 9\xfe\xfe\n", "9", "9", "#### 9", 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *s = extract_pipeline_extract(strict, cases[i].output),
             *f = extract_pipeline_extract(flex, cases[i].output);
        if (strcmp(s, cases[i].strict) || strcmp(f, cases[i].flex))
            T_FAIL_("case %zu: strict '%s' (want '%s'), flexible '%s' (want '%s')", i, s,
                    cases[i].strict, f, cases[i].flex);
        ASSERT_EQ(extract_normalized_equal(norm, s, cases[i].target), cases[i].strict_ok);
        ASSERT_EQ(extract_normalized_equal(norm, f, cases[i].target), cases[i].flex_ok);
        free(s);
        free(f);
    }
    /* numeric comparison: 1,000 == 1000.0 when asked for */
    cJSON *num_j = cJSON_Parse("{\"numbers\":true}");
    struct normalizer *num;
    ASSERT_OK(extract_normalizer_new(num_j, "t", &num, err, sizeof err));
    ASSERT(extract_normalized_equal(num, "1,000", "1000.0"));
    ASSERT(!extract_normalized_equal(num, "1,000", "100"));
    ASSERT(extract_normalized_equal(num, "  Paris  ", "Paris"));
    /* a bad regex is reported with PCRE2's message and offset */
    cJSON *bad = cJSON_Parse("{\"name\":\"x\",\"regex\":\"(unclosed\"}");
    struct pipeline *p;
    ASSERT_EQ(extract_pipeline_new(bad, "suite.json: task gsm8k", &p, err, sizeof err),
              QG_ERR_DATA);
    ASSERT_CONTAINS(err, "suite.json: task gsm8k: pipeline 'x': invalid regex '(unclosed': missing "
                         "closing parenthesis at offset 9");
    cJSON_Delete(bad);
    cJSON_Delete(num_j);
    extract_normalizer_free(num);
    cJSON_Delete(strict_j);
    cJSON_Delete(flex_j);
    cJSON_Delete(norm_j);
    extract_pipeline_free(strict);
    extract_pipeline_free(flex);
    extract_normalizer_free(norm);
    return 0;
}

TEST(bench_loaders_fixtures, unit)
{
    char err[QG_ERRMSG_MAX];
    struct mc_item *it;
    int64_t n;
    ASSERT_OK(write_text(
        "arc.jsonl",
        "{\"id\":\"Mercury_1\",\"question\":{\"stem\":\"Which is a planet?\",\"choices\":"
        "[{\"text\":\"Moon\",\"label\":\"A\"},{\"text\":\"Mars\",\"label\":\"B\"}]},\"answerKey\":"
        "\"B\"}\n"));
    struct bench_source src = {.data = t_path("arc.jsonl")};
    ASSERT_OK(bench_load_mc("arc", &src, &it, &n, err, sizeof err));
    ASSERT_EQ(n, 1);
    ASSERT_STR_EQ(it[0].context, "Question: Which is a planet?\nAnswer:");
    ASSERT_EQ(it[0].gold, 1);
    mc_items_free(it, n);
    ASSERT_OK(write_text(
        "boolq.jsonl",
        "{\"question\":\"is water wet\",\"passage\":\"Water is a liquid.\",\"answer\":true}\n"));
    src.data = t_path("boolq.jsonl");
    ASSERT_OK(bench_load_mc("boolq", &src, &it, &n, err, sizeof err));
    ASSERT_STR_EQ(it[0].context, "Water is a liquid.\nQuestion: is water wet?\nAnswer:");
    ASSERT_EQ(it[0].gold, 1);
    ASSERT_STR_EQ(it[0].choices[1], "yes");
    mc_items_free(it, n);
    ASSERT_OK(write_text(
        "wg.jsonl", "{\"qID\":\"q1\",\"sentence\":\"The trophy did not fit in the suitcase because "
                    "_ was too big.\","
                    "\"option1\":\"the trophy\",\"option2\":\"the suitcase\",\"answer\":\"1\"}\n"));
    src.data = t_path("wg.jsonl");
    ASSERT_OK(bench_load_mc("winogrande", &src, &it, &n, err, sizeof err));
    ASSERT_STR_EQ(it[0].contexts[0], "The trophy did not fit in the suitcase because the trophy");
    ASSERT_STR_EQ(it[0].contexts[1], "The trophy did not fit in the suitcase because the suitcase");
    ASSERT_STR_EQ(it[0].choices[0], " was too big.");
    ASSERT_EQ(it[0].gold, 0);
    mc_items_free(it, n);
    /* seeded few-shot from a train split: deterministic, k examples, not the item itself */
    ASSERT_OK(write_text(
        "arc-train.jsonl",
        "{\"id\":\"t1\",\"question\":{\"stem\":\"Sky?\",\"choices\":[{\"text\":\"blue\",\"label\":"
        "\"A\"},{\"text\":\"red\",\"label\":\"B\"}]},\"answerKey\":\"A\"}\n"
        "{\"id\":\"t2\",\"question\":{\"stem\":\"Grass?\",\"choices\":[{\"text\":\"green\","
        "\"label\":\"A\"},{\"text\":\"pink\",\"label\":\"B\"}]},\"answerKey\":\"A\"}\n"
        "{\"id\":\"t3\",\"question\":{\"stem\":\"Snow?\",\"choices\":[{\"text\":\"black\","
        "\"label\":\"A\"},{\"text\":\"white\",\"label\":\"B\"}]},\"answerKey\":\"B\"}\n"));
    char train[4096];
    snprintf(train, sizeof train, "%s", t_path("arc-train.jsonl"));
    src = (struct bench_source){.data = t_path("arc.jsonl"), .train = train, .fewshot = 2};
    ASSERT_OK(bench_load_mc("arc", &src, &it, &n, err, sizeof err));
    char *first = qg_strdup(it[0].context);
    mc_items_free(it, n);
    ASSERT_OK(bench_load_mc("arc", &src, &it, &n, err, sizeof err));
    ASSERT_STR_EQ(it[0].context, first); /* same seed, same shots */
    int shots = 0;
    for (const char *p = it[0].context; (p = strstr(p, "\n\n")); p++)
        shots++;
    ASSERT_EQ(shots, 2);
    ASSERT(strstr(it[0].context, "Question: Sky?\nAnswer: blue") ||
           strstr(it[0].context, "Question: Grass?\nAnswer: green") ||
           strstr(it[0].context, "Question: Snow?\nAnswer: white"));
    ASSERT(strstr(it[0].context, "Question: Which is a planet?\nAnswer:") != NULL);
    free(first);
    mc_items_free(it, n);
    src.fewshot_seed = 99;
    src.fewshot = 4;
    ASSERT_EQ(bench_load_mc("arc", &src, &it, &n, err, sizeof err), QG_ERR_DATA);
    ASSERT_CONTAINS(err, "fewer than fewshot 4");
    src = (struct bench_source){0};
    /* HF HellaSwag JSONL with lm-eval's preprocessing */
    ASSERT_OK(write_text(
        "hs.jsonl",
        "{\"ind\":4,\"activity_label\":\"Baking cookies\",\"ctx_a\":\"A woman mixes dough.\","
        "\"ctx_b\":\"she\",\"endings\":[\"puts it [title] in the oven.\",\"eats  "
        "it.\"],\"label\":\"1\"}\n"));
    src.data = t_path("hs.jsonl");
    ASSERT_OK(bench_load_mc("hellaswag", &src, &it, &n, err, sizeof err));
    ASSERT_STR_EQ(it[0].id, "4");
    ASSERT_STR_EQ(it[0].context, "Baking cookies: A woman mixes dough. She");
    ASSERT_STR_EQ(it[0].choices[0], "puts it. in the oven.");
    ASSERT_STR_EQ(it[0].choices[1], "eats it.");
    ASSERT_EQ(it[0].gold, 1);
    mc_items_free(it, n);
    /* original MMLU layout: no header, letter answers */
    ASSERT_OK(write_text("anatomy_test.csv", "\"What is 2+2?\",3,4,5,6,B\n"));
    src.data = t_path("anatomy_test.csv");
    ASSERT_OK(bench_load_mc("mmlu", &src, &it, &n, err, sizeof err));
    ASSERT_STR_EQ(it[0].context,
                  "The following are multiple choice questions (with answers) about anatomy.\n\n"
                  "What is 2+2?\nA. 3\nB. 4\nC. 5\nD. 6\nAnswer:");
    ASSERT_EQ(it[0].gold, 1);
    ASSERT_STR_EQ(it[0].id, "anatomy/0");
    mc_items_free(it, n);
    /* bad inputs: each names the file and line or item */
    struct {
        const char *bench, *file, *text, *want;
    } bad[] = {
        {"arc", "b1.jsonl",
         "{\"id\":\"x\",\"question\":{\"stem\":\"s\",\"choices\":[{\"text\":\"a\",\"label\":\"A\"},"
         "{\"text\":\"b\",\"label\":\"B\"}]},\"answerKey\":\"E\"}\n",
         "b1.jsonl:1: item x: answerKey 'E' is not one of the choice labels"},
        {"boolq", "b2.jsonl", "{\"question\":\"q\",\"passage\":\"p\"}\n",
         "b2.jsonl:1: field \"answer\" must be true or false"},
        {"boolq", "b3.jsonl", "{\"question\":5,\"passage\":\"p\",\"answer\":true}\n",
         "b3.jsonl:1: field \"question\" is not a string"},
        {"winogrande", "b4.jsonl",
         "{\"sentence\":\"no blank\",\"option1\":\"a\",\"option2\":\"b\",\"answer\":\"1\"}\n",
         "b4.jsonl:1: the sentence has no \"_\" blank"},
        {"mmlu", "b5_test.csv", "q,a,b,c,d,E\n", "b5_test.csv:1: answer 'E' is not A-D or 0-3"},
        {"mmlu", "b6_test.csv", "q,a,b\n", "b6_test.csv:1: expected 6 fields"},
        {"arc", "b7.jsonl", "", "b7.jsonl: no items (empty dataset)"},
        {"arc", "b8.jsonl",
         "{\"id\":\"x\",\"question\":{\"stem\":\"s\",\"choices\":[{\"text\":\"\",\"label\":\"A\"},{"
         "\"text\":\"b\",\"label\":\"B\"}]},\"answerKey\":\"A\"}\n",
         "item x: choice 0 is empty"},
        {"arc", "b9.jsonl",
         "{\"id\":\"x\",\"question\":{\"stem\":\"s\",\"choices\":[{\"text\":\"a\",\"label\":\"A\"},"
         "{\"text\":\"b\",\"label\":\"B\"}]},\"answerKey\":\"A\"}\n{\"id\":\"x\",\"question\":{"
         "\"stem\":\"s\",\"choices\":[{\"text\":\"a\",\"label\":\"A\"},{\"text\":\"b\",\"label\":"
         "\"B\"}]},\"answerKey\":\"A\"}\n",
         "duplicate item id 'x'"},
        {"arc", "b10.jsonl",
         "{\"id\":\"x\",\"question\":{\"stem\":\"s\",\"choices\":[]},\"answerKey\":\"A\"}\n",
         "b10.jsonl:1: item x: \"question.choices\" must be an array of 2..16"},
        {"hellaswag", "b11.txt", "act: ctx\n7\na\nb\nc\nd\n",
         "b11.txt:2: gold index '7' is not 0..3"},
        {"hellaswag", "b12.txt", "act: ctx\n1\na\nb\n",
         "b12.txt:4: task starting at line 1 is cut short"},
        {"hellaswag", "b13.txt.bz2", "this is not bzip2 data\n", "b13.txt.bz2: bunzip2 failed"},
        {"arc", "b14.json",
         "[{\"instruction\":\"Please choose: no question here\",\"answer\":\"answer1\"}]",
         "b14.json: item 0: no \"question:\" before \"Answer1:\""},
        {"winogrande", "b15.json",
         "[{\"instruction\":\"fill: sentence: A _ B\\n\\nOption1: x Option2: y Answer format: "
         "option1/option2\",\"answer\":\"option3\"}]",
         "b15.json: item 0: answer 'option3' is not option1 or option2"},
        {"boolq", "b16.json",
         "[{\"instruction\":\"question: is it\\n\\nAnswer format: "
         "true/false\",\"answer\":\"maybe\"}]",
         "b16.json: item 0: answer 'maybe' is not true or false"},
        {"winogrande", "b17.json",
         "[{\"instruction\":\"fill: sentence: A _ B\\n\\nOption1: x Option2: y Answer format: "
         "option1/option2\",\"answer\":\"option1x\"}]",
         "b17.json: item 0: answer 'option1x' is not option1 or option2"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ASSERT_OK(write_text(bad[i].file, bad[i].text));
        src.data = t_path(bad[i].file);
        err[0] = '\0';
        int rc = bench_load_mc(bad[i].bench, &src, &it, &n, err, sizeof err);
        if (rc != QG_ERR_DATA || !strstr(err, bad[i].want))
            T_FAIL_("case %zu: rc %d, \"%s\"", i, rc, err);
    }
    /* an MMLU few-shot row whose answer is not A..D: an error, never a
     * silently wrong example answer */
    ASSERT_OK(write_text("mm_test.csv", "q,a,b,c,d,A\n"));
    ASSERT_EQ(mkdir(t_path("devdir"), 0755), 0);
    ASSERT_OK(write_text("devdir/mm_dev.csv", "q,a,b,c,d,Z\n"));
    char devdir[4200];
    snprintf(devdir, sizeof devdir, "%s", t_path("devdir"));
    src = (struct bench_source){.data = t_path("mm_test.csv"), .train = devdir, .fewshot = 1};
    err[0] = '\0';
    int rc = bench_load_mc("mmlu", &src, &it, &n, err, sizeof err);
    if (rc != QG_ERR_DATA || !strstr(err, "mm_dev.csv:1: answer 'Z' is not A..D or 0..3"))
        T_FAIL_("few-shot: rc %d, \"%s\"", rc, err);
    return 0;
}

static int bunzip_head(const char *bz2, int lines, const char *out)
{
    char cmd[8400];
    snprintf(cmd, sizeof cmd, "bunzip2 -c '%s' | head -n %d > '%s'", bz2, lines, out);
    return system(cmd);
}

TEST(bench_loaders_shared, shared)
{
    if (!t_shared("data")) SKIP("../shared/data is absent");
    char err[QG_ERRMSG_MAX];
    struct mc_item *it;
    int64_t n;
    struct bench_source src = {.data = t_shared("data/mmlu/test")};
    ASSERT_OK(bench_load_mc("mmlu", &src, &it, &n, err, sizeof err));
    printf("mmlu test: %lld items\n", (long long)n);
    ASSERT_EQ(n, 14042); /* all 57 subjects */
    int64_t clusters = 0;
    for (int64_t i = 1; i < n; i++)
        clusters += it[i].cluster != it[i - 1].cluster;
    ASSERT_EQ(clusters + 1, 57);
    ASSERT(strstr(it[0].context, "about abstract algebra.") != NULL);
    mc_items_free(it, n);
    char dev[4096];
    snprintf(dev, sizeof dev, "%s", t_shared("data/mmlu/dev"));
    src = (struct bench_source){
        .data = t_shared("data/mmlu/test"), .train = dev, .fewshot = 5, .limit = 3};
    ASSERT_OK(bench_load_mc("mmlu", &src, &it, &n, err, sizeof err));
    ASSERT_EQ(n, 3);
    int shots = 0;
    for (const char *p = it[0].context; (p = strstr(p, "\nAnswer: ")); p++)
        shots++;
    ASSERT_EQ(shots, 5); /* five worked examples, then the question */
    ASSERT(strstr(it[0].context, "Answer:") != NULL);
    mc_items_free(it, n);
    src = (struct bench_source){.data = t_shared("data/piqa/valid.jsonl"),
                                .labels = t_shared("data/piqa/valid-labels.lst")};
    ASSERT_OK(bench_load_mc("piqa", &src, &it, &n, err, sizeof err));
    ASSERT_EQ(n, 1838);
    mc_items_free(it, n);
    if (bunzip_head(t_shared("data/hellaswag/hellaswag_val_full.txt.bz2"), 60, t_path("hs.txt")) !=
        0)
        SKIP("bunzip2 failed");
    src = (struct bench_source){.data = t_path("hs.txt")};
    ASSERT_OK(bench_load_mc("hellaswag", &src, &it, &n, err, sizeof err));
    ASSERT_EQ(n, 10);
    ASSERT_EQ(it[0].n_choices, 4);
    mc_items_free(it, n);
    struct gen_item *g;
    struct bench_source gs = {.data = t_shared("data/gsm8k/test.jsonl"),
                              .train = t_shared("data/gsm8k/test.jsonl"),
                              .fewshot = 2,
                              .limit = 5};
    ASSERT_OK(bench_load_gen("gsm8k", &gs, &g, &n, err, sizeof err));
    ASSERT_EQ(n, 5);
    ASSERT(strncmp(g[0].prompt, "Question: ", 10) == 0);
    ASSERT(strstr(g[0].prompt, "#### ") != NULL); /* the worked examples */
    ASSERT(strstr(g[0].targets[0], "#### ") != NULL);
    gen_items_free(g, n);
    return 0;
}

TEST(mc_hellaswag_matches_reference, shared)
{
    /* On the first HellaSwag tasks, qgate's scores of each ending (and the
     * llama-perplexity rule: highest mean log-prob per token) equal an
     * independent computation with the double-precision reference forward. */
    const char *model = t_shared("models/stories260K/gguf/stories260K-F32.gguf");
    const char *bz2 = t_shared("data/hellaswag/hellaswag_val_full.txt.bz2");
    if (!model || !bz2) SKIP("../shared model or hellaswag data is absent");
    if (bunzip_head(bz2, 6 * 8, t_path("hs.txt")) != 0) SKIP("bunzip2 failed");
    char err[QG_ERRMSG_MAX];
    struct mc_item *it;
    int64_t n;
    struct bench_source src = {.data = t_path("hs.txt")};
    ASSERT_OK(bench_load_mc("hellaswag", &src, &it, &n, err, sizeof err));
    struct backend b;
    struct backend_open_params bp = {.n_ctx = 128};
    ASSERT_OK(backend_open(model, &bp, &b, err, sizeof err));
    struct gguf *gg;
    struct llama_model *m;
    ASSERT_OK(gguf_open(model, &gg, err, sizeof err));
    ASSERT_OK(llama_load(gg, model, &m, err, sizeof err));
    int V = llama_hparams(m)->n_vocab, agree = 0;
    for (int64_t i = 0; i < n; i++) {
        struct mc_result r;
        ASSERT_OK(mc_score(&b, 128, &it[i], " ", &r, err, sizeof err));
        int best = 0;
        double best_mean = -1e300;
        for (int c = 0; c < it[i].n_choices; c++) {
            /* independent: tokenize ctx and ctx + " " + ending, reference forward */
            char whole[8192];
            snprintf(whole, sizeof whole, "%s %s", it[i].context, it[i].choices[c]);
            int32_t *ci = NULL, *wi = NULL;
            int64_t nc = 0, nw = 0;
            ASSERT_OK(backend_tokenize(&b, it[i].context, strlen(it[i].context), 1, &ci, &nc));
            ASSERT_OK(backend_tokenize(&b, whole, strlen(whole), 1, &wi, &nw));
            int64_t start = nw - 1 > 128 ? nw - 1 - 128 : 0; /* left truncation to the context */
            float *lg = malloc((size_t)nw * V * sizeof *lg);
            ASSERT_OK(llama_eval_ref(m, wi + start, (int)(nw - start), lg));
            double ll = 0;
            for (int64_t k = nc; k < nw; k++) {
                const float *row = lg + (size_t)(k - 1 - start) * V;
                double mx = row[0], s = 0;
                for (int v = 1; v < V; v++)
                    mx = row[v] > mx ? row[v] : mx;
                for (int v = 0; v < V; v++)
                    s += exp(row[v] - mx);
                ll += row[wi[k]] - mx - log(s);
            }
            ASSERT_EQ(r.tokens[c], nw - nc);
            ASSERT_NEAR(r.ll[c], ll, 1e-3);
            double mean = ll / (double)(nw - nc);
            if (mean > best_mean) best_mean = mean, best = c;
            free(lg);
            free(ci);
            free(wi);
        }
        ASSERT_EQ(r.pred_tok, best);
        agree += r.pred_tok == it[i].gold;
    }
    printf("%lld HellaSwag tasks: choices match the reference forward; %d correct by the llama.cpp "
           "rule\n",
           (long long)n, agree);
    llama_free(m);
    backend_close(&b);
    mc_items_free(it, n);
    return 0;
}
