/* Tests of reports/: every format from a stored comparison, hostile strings,
 * JUnit schema validation, and the HTML rendered by headless Chromium. */
#include "backends/ggml_types.h"
#include "backends/synth.h"
#include "datasets/hash.h"
#include "core/status.h"
#include "core/util.h"
#include "reports/escape.h"
#include "tests/test.h"
#include "core/utf8.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A string built to break every format: markup that closes a script or
 * opens a comment, entities, both quotes, Markdown table syntax, C0 and C1
 * control characters (a terminal escape and CSI) and invalid UTF-8. In JSON
 * source form (raw bytes >= 0x80 pass through cJSON unvalidated). */
#define HOSTILE_JSON                                                                               \
    "</script><script>alert(1)</script><!-- & \\\"q\\\" 'x' <evil a=1> \\u0001\\u001b[31m|*_`[x] " \
    "\xff\xfe\xc2\x9b end"
/* data files must be valid UTF-8 (the reader refuses others): the same
 * without the invalid bytes */
#define HOSTILE_DATA                                                                               \
    "</script><script>alert(1)</script><!-- & \\\"q\\\" 'x' <evil a=1> \\u0001\\u001b[31m|*_`[x] " \
    "\xc2\x9b end"
#define HOSTILE_MODEL "<evil>&\"m'</script>\x1b[2J\xff"

/* Writes a suite of a perplexity task over text and a multiple-choice task
 * whose names, ids, questions and choices are all hostile (when hostile). */
static int write_suite(int hostile)
{
    struct sbuf d;
    sbuf_init(&d, 0);
    static const char *const words[] = {"ball", "tree", "dog", "cat", "sun", "box"};
    for (int i = 0; i < 40; i++) {
        const char *h = hostile ? HOSTILE_DATA : "a";
        sbuf_printf(&d,
                    "{\"id\":\"%s%d\",\"q\":\"%s the girl saw the %s and\",\"c\":[\"%s %s\",\"%s "
                    "%s\",\"%s %s\"],\"g\":%d}\n",
                    hostile ? HOSTILE_DATA : "q", i, hostile ? HOSTILE_DATA : "Once upon a time",
                    words[i % 6], h, words[(i + 1) % 6], h, words[(i + 2) % 6], h,
                    words[(i + 3) % 6], i % 3);
    }
    int rc = t_write_file(t_path("mc.jsonl"), d.data, d.len);
    sbuf_release(&d);
    if (rc) return rc;
    const char *text =
        "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
        "sun. "
        "One day, she saw a big red ball in the park. She ran to the ball and kicked it. The ball "
        "went high "
        "into the sky and fell down near a tree. Lily laughed and ran after it with her dog.\n";
    sbuf_init(&d, 0);
    for (int i = 0; i < 12; i++)
        sbuf_append(&d, text, strlen(text));
    rc = t_write_file(t_path("text.txt"), d.data, d.len);
    sbuf_release(&d);
    if (rc) return rc;
    char sha_mc[65], sha_text[65], err[QG_ERRMSG_MAX], suite[4096];
    if ((rc = hash_sha256_file(t_path("mc.jsonl"), sha_mc, err, sizeof err))) return rc;
    if ((rc = hash_sha256_file(t_path("text.txt"), sha_text, err, sizeof err))) return rc;
    snprintf(suite, sizeof suite,
             "{\"name\":\"%s\",\"tasks\":[{\"name\":\"%s\",\"kind\":\"perplexity\",\"data\":\"text."
             "txt\",\"sha256\":\"%s\","
             "\"protocol\":\"rolling\",\"ctx\":64},"
             "{\"name\":\"%s\",\"kind\":\"custom\",\"data\":\"mc.jsonl\",\"sha256\":\"%s\","
             "\"fields\":{\"id\":\"id\",\"context\":\"q\",\"choices\":\"c\",\"gold\":\"g\"}}]}",
             hostile ? HOSTILE_JSON : "tiny", hostile ? "ppl " HOSTILE_JSON : "ppl", sha_text,
             hostile ? "mc " HOSTILE_JSON : "mc", sha_mc);
    return t_write_file(t_path("suite.json"), suite, strlen(suite));
}

/* 1 when every byte sequence is valid UTF-8 */
static int valid_utf8(const char *s)
{
    char *c = utf8_sanitize(s);
    int ok = c && !strcmp(c, s);
    free(c);
    return ok;
}

/* 0 when every tag in markup is one the report writes itself; else prints
 * the first foreign one and returns 1. Comments and scripts are foreign. */
static int foreign_tag(const char *what, const char *s)
{
    static const char *const ok[] = {
        "html", "head", "meta",   "title", "style", "body", "h1",   "h2",      "h3",      "p",
        "div",  "span", "table",  "tr",    "td",    "th",   "code", "details", "summary", "svg",
        "rect", "line", "circle", "text",  "g",     "br",   "b",    "strong",  NULL};
    for (const char *p = strchr(s, '<'); p; p = strchr(p + 1, '<')) {
        const char *q = p + 1;
        if (*q == '/') q++;
        if (!strncasecmp(q, "!doctype html>", 14)) continue;
        size_t n = 0;
        while (isalnum((unsigned char)q[n]))
            n++;
        int known = 0;
        for (int i = 0; ok[i] && !known; i++)
            known = strlen(ok[i]) == n && !strncasecmp(q, ok[i], n);
        if (!known || n == 0) {
            printf("%s: foreign markup at byte %ld: %.40s\n", what, (long)(p - s), p);
            return 1;
        }
    }
    return 0;
}

/* 0 when s has no control characters except tab and newline */
static int has_controls(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if ((*p < 0x20 && *p != '\n' && *p != '\t') || *p == 0x7F) return 1;
    return 0;
}

static char *render(const char *db, const char *format)
{
    struct t_out o;
    if (t_qgate(&o, "report", "--db", db, "--format", format, NULL) != 0) return NULL;
    if (o.code != 0) {
        printf("report -f %s: exit %d: %s\n", format, o.code, o.err);
        t_out_free(&o);
        return NULL;
    }
    char *out = o.out;
    o.out = NULL;
    t_out_free(&o);
    return out;
}

/* xmllint on a file: 0 valid, else its exit status (schema may be NULL) */
static int xmllint(const char *file, const char *schema)
{
    char cmd[16384];
    if (schema)
        snprintf(cmd, sizeof cmd, "xmllint --noout --schema '%s' '%s'", schema, file);
    else
        snprintf(cmd, sizeof cmd, "xmllint --noout '%s'", file);
    return system(cmd);
}

static int gate_synth(const char *db, int hostile, struct t_out *o)
{
    /* hostile: a differently seeded candidate, so items flip and the flipped
     * items' hostile prompts and answers reach the reports */
    if (t_synth("a.gguf", GGML_F32, 1) || t_synth("b.gguf", GGML_Q4_0, hostile ? 2 : 1) ||
        write_suite(hostile))
        return -1;
    char ma[4400], mb[4400];
    snprintf(ma, sizeof ma, "%s=%s", hostile ? HOSTILE_MODEL : "f32", t_path("a.gguf"));
    snprintf(mb, sizeof mb, "%s=%s", hostile ? "q4 " HOSTILE_MODEL : "q4", t_path("b.gguf"));
    return t_qgate(o, "gate", "--suite", t_path("suite.json"), "--baseline", ma, "--candidate", mb,
                   "--db", db, NULL);
}

TEST(report_hostile_strings_every_format, e2e)
{
    char db[4200];
    snprintf(db, sizeof db, "%s", t_path("h.db"));
    struct t_out o;
    ASSERT_OK(gate_synth(db, 1, &o));
    if (o.code > 2) T_FAIL_("gate: exit %d: %s", o.code, o.err);
    t_out_free(&o);

    char *text = render(db, "text"), *md = render(db, "md"), *html = render(db, "html"),
         *json = render(db, "json"), *junit = render(db, "junit");
    ASSERT(text && md && html && json && junit);
    /* the hostile strings reached every report, made harmless */
    ASSERT_CONTAINS(html, "&lt;/script&gt;&lt;script&gt;alert(1)");
    ASSERT_CONTAINS(junit, "&lt;/script&gt;");
    ASSERT_CONTAINS(md, "&lt;evil a=1&gt;");
    ASSERT_CONTAINS(md, "\\|\\*\\_\\`\\[x\\]");
    ASSERT_CONTAINS(text, "<evil>&\"m'</script>"); /* plain text keeps markup */
    ASSERT_CONTAINS(html, "<td>&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;!-- &amp; "
                          "&quot;q&quot; &#39;x&#39;"); /* a flipped item */
    for (int i = 0; i < 5; i++) {
        const char *names[] = {"text", "md", "html", "json", "junit"},
                   *doc[] = {text, md, html, json, junit};
        if (!valid_utf8(doc[i])) T_FAIL_("%s: invalid UTF-8 in the output", names[i]);
        if (has_controls(doc[i]))
            T_FAIL_("%s: a control character (terminal escape) in the output", names[i]);
    }
    ASSERT(!strstr(text, "\xc2\x9b")); /* C1 CSI */
    ASSERT_EQ(foreign_tag("html", html), 0);
    ASSERT_EQ(foreign_tag("md", md), 0);
    ASSERT(!strstr(html, "<!--") && !strstr(md, "<!--"));
    /* JSON parses and carries the names with invalid UTF-8 replaced */
    cJSON *j = cJSON_Parse(json);
    ASSERT(j != NULL);
    const cJSON *c = cJSON_GetObjectItem(j, "comparison");
    ASSERT_STR_EQ(cJSON_GetObjectItem(j, "schema")->valuestring, "qgate-report/1");
    char *want = utf8_sanitize(HOSTILE_MODEL);
    ASSERT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(c, "baseline")), want);
    free(want);
    cJSON_Delete(j);
    /* XML well-formed (and valid JUnit) by xmllint when installed */
    ASSERT_OK(t_write_file(t_path("h.xml"), junit, strlen(junit)));
    if (t_have("xmllint")) {
        char xsd[4200];
        snprintf(xsd, sizeof xsd, "%s/docs/junit.xsd", QG_SOURCE_DIR);
        ASSERT_EQ(xmllint(t_path("h.xml"), NULL), 0);
        ASSERT_EQ(xmllint(t_path("h.xml"), xsd), 0);
    } else {
        printf(
            "xmllint absent (Debian libxml2-utils): XML well-formedness not checked by a parser\n");
    }
    free(text), free(md), free(html), free(json), free(junit);
    return 0;
}

TEST(report_stories_every_format, shared)
{
    if (!t_shared("models/stories260K/gguf/stories260K-F32.gguf") ||
        !t_shared("data/tinystories_valid_head.txt") || !t_shared("data/piqa/valid.jsonl"))
        SKIP("../shared stories260K model or data is absent");
    char suite[16384], sha[3][65], err[QG_ERRMSG_MAX], text[4096], piqa[4096], labels[4096];
    snprintf(text, sizeof text, "%s", t_shared("data/tinystories_valid_head.txt"));
    snprintf(piqa, sizeof piqa, "%s", t_shared("data/piqa/valid.jsonl"));
    snprintf(labels, sizeof labels, "%s", t_shared("data/piqa/valid-labels.lst"));
    ASSERT_OK(hash_sha256_file(text, sha[0], err, sizeof err));
    ASSERT_OK(hash_sha256_file(piqa, sha[1], err, sizeof err));
    ASSERT_OK(hash_sha256_file(labels, sha[2], err, sizeof err));
    snprintf(
        suite, sizeof suite,
        "{\"name\":\"stories-report\",\"tasks\":["
        "{\"name\":\"tinystories\",\"kind\":\"perplexity\",\"data\":\"%s\",\"sha256\":\"%s\","
        "\"ctx\":128,\"chunks\":60,"
        "\"critical\":true},"
        "{\"name\":\"piqa\",\"benchmark\":\"piqa\",\"data\":{\"data\":\"%s\",\"labels\":\"%s\"},"
        "\"sha256\":{\"data\":\"%s\",\"labels\":\"%s\"},\"limit\":150}]}",
        text, sha[0], piqa, labels, sha[1], sha[2]);
    ASSERT_OK(t_write_file(t_path("suite.json"), suite, strlen(suite)));
    char ma[4400], mb[4400], db[4200], f[4][4200];
    snprintf(ma, sizeof ma, "f32=%s", t_shared("models/stories260K/gguf/stories260K-F32.gguf"));
    snprintf(mb, sizeof mb, "q2k=%s", t_shared("models/stories260K/gguf/stories260K-Q2_K.gguf"));
    snprintf(db, sizeof db, "%s", t_path("s.db"));
    const char *ext[] = {"html", "xml", "md", "json"};
    for (int i = 0; i < 4; i++)
        snprintf(f[i], sizeof f[i], "%s", t_path(ext[i]));
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "gate", "--suite", t_path("suite.json"), "--baseline", ma, "--candidate",
                      mb, "--db", db, "--report", f[0], "--junit", f[1], "--md", f[2], "--json",
                      f[3], NULL));
    printf("%s", o.out);
    ASSERT_EQ(o.code, 1); /* Q2_K loses ~7% perplexity on stories260K: FAIL */
    t_out_free(&o);
    size_t n[4];
    char *doc[4];
    for (int i = 0; i < 4; i++) {
        doc[i] = t_read_file(f[i], &n[i]);
        ASSERT(doc[i] != NULL);
        printf("%-5s %zu bytes\n", ext[i], n[i]);
    }
    /* html: self-contained (no external resource), with its charts */
    ASSERT_CONTAINS(doc[0], "FAIL");
    ASSERT_CONTAINS(doc[0], "<svg class=\"chart forest\"");
    ASSERT_CONTAINS(doc[0], "<svg class=\"chart kld\"");
    ASSERT_CONTAINS(doc[0], "<svg class=\"chart flips\"");
    ASSERT_CONTAINS(doc[0], "stories260K-Q2_K.gguf");
    ASSERT(!strstr(doc[0], "<script") && !strstr(doc[0], "src=") && !strstr(doc[0], "href=") &&
           !strstr(doc[0], "url("));
    ASSERT_EQ(foreign_tag("html", doc[0]), 0);
    /* junit: one failure (tinystories), valid against the schema */
    ASSERT_CONTAINS(doc[1], "<failure message=\"FAIL: lower bound");
    if (t_have("xmllint")) {
        char xsd[4200];
        snprintf(xsd, sizeof xsd, "%s/docs/junit.xsd", QG_SOURCE_DIR);
        ASSERT_EQ(xmllint(f[1], xsd), 0);
    }
    /* md: badge line, table, details */
    ASSERT_CONTAINS(doc[2], "## qgate: **❌ FAIL**");
    ASSERT_CONTAINS(doc[2], "<details><summary>tinystories: FAIL</summary>");
    /* json: the documented schema, with what the HTML shows */
    cJSON *j = cJSON_Parse(doc[3]);
    ASSERT(j != NULL);
    ASSERT_STR_EQ(cJSON_GetObjectItem(j, "schema")->valuestring, "qgate-report/1");
    ASSERT_STR_EQ(cJSON_GetObjectItem(j, "verdict")->valuestring, "FAIL");
    const cJSON *tasks = cJSON_GetObjectItem(j, "tasks");
    ASSERT_EQ(cJSON_GetArraySize(tasks), 2);
    const cJSON *t0 = cJSON_GetArrayItem(tasks, 0), *t1 = cJSON_GetArrayItem(tasks, 1);
    ASSERT(cJSON_GetObjectItem(t0, "kld") && cJSON_GetObjectItem(t0, "repeats"));
    ASSERT(cJSON_IsArray(cJSON_GetObjectItem(t1, "flipped_items")));
    const cJSON *prov = cJSON_GetObjectItem(j, "provenance");
    ASSERT(prov && cJSON_GetObjectItem(prov, "models") && cJSON_GetObjectItem(prov, "command"));
    cJSON_Delete(j);
    /* text to a pipe: no colour */
    ASSERT_OK(t_qgate(&o, "report", "--db", db, NULL));
    ASSERT_EQ(o.code, 0);
    ASSERT_CONTAINS(o.out, "suite verdict: FAIL");
    ASSERT(!strchr(o.out, '\033'));
    t_out_free(&o);
    for (int i = 0; i < 4; i++)
        free(doc[i]);
    return 0;
}

TEST(report_html_renders_in_chromium, e2e)
{
    if (!t_have("chromium")) SKIP("chromium is absent (Debian package chromium)");
    if (!t_have("python3")) SKIP("python3 is absent (decodes the screenshot)");
    char db[4200], html[4200], png[4200], cmd[16384];
    snprintf(db, sizeof db, "%s", t_path("c.db"));
    snprintf(html, sizeof html, "%s", t_path("report.html"));
    snprintf(png, sizeof png, "%s", t_path("shot.png"));
    struct t_out o;
    ASSERT_OK(gate_synth(db, 0, &o));
    if (o.code > 2) T_FAIL_("gate: exit %d: %s", o.code, o.err);
    t_out_free(&o);
    ASSERT_OK(t_qgate(&o, "report", "--db", db, "--format", "html", "-o", html, NULL));
    ASSERT_EQ(o.code, 0);
    t_out_free(&o);
    snprintf(cmd, sizeof cmd,
             "timeout 120 chromium --headless --no-sandbox --disable-gpu "
             "--disable-background-networking --disable-dev-shm-usage --no-first-run "
             "--hide-scrollbars --user-data-dir='%s' --window-size=1000,1600 --screenshot='%s' "
             "'file://%s' >/dev/null 2>&1",
             t_path("chromium-profile"), png, html);
    int rc = system(cmd);
    if (rc != 0) T_FAIL_("chromium exited with %d taking the screenshot", rc);
    snprintf(cmd, sizeof cmd, "python3 '%s/tests/png_colors.py' '%s' dff3df fbe3e3 6a1b9a 9e9e9e",
             QG_SOURCE_DIR, png);
    FILE *p = popen(cmd, "r");
    ASSERT(p != NULL);
    /* forest plot: the green within-margin band and the red beyond-margin
     * band; KLD bars (purple); the flips bar (grey for unchanged items) */
    const char *what[] = {"forest plot margin band (green)", "forest plot beyond-margin band (red)",
                          "KLD bars (purple)", "flips bar (grey)"};
    long count[4] = {-1, -1, -1, -1};
    char line[128];
    for (int i = 0; i < 4 && fgets(line, sizeof line, p); i++)
        count[i] = strtol(line + 7, NULL, 10);
    ASSERT_EQ(pclose(p), 0);
    for (int i = 0; i < 4; i++) {
        printf("%-40s %ld pixels\n", what[i], count[i]);
        if (count[i] < 300) T_FAIL_("the screenshot shows no %s: the SVG did not render", what[i]);
    }
    return 0;
}

TEST(report_bad_input, e2e)
{
    char db[4200], out[4200];
    snprintf(db, sizeof db, "%s", t_path("b.db"));
    struct t_out o;
    /* no database: 66, and none created */
    ASSERT_OK(t_qgate(&o, "report", "--db", db, NULL));
    ASSERT_EQ(o.code, 66);
    ASSERT_CONTAINS(o.err, "no such database");
    t_out_free(&o);
    ASSERT(t_read_file(db, NULL) == NULL);
    ASSERT_OK(gate_synth(db, 0, &o));
    ASSERT(o.code <= 2);
    t_out_free(&o);
    struct {
        const char *args[6];
        int code;
        const char *msg;
    } cases[] = {
        {{"--format", "pdf"}, 64, "--format must be text, md, html, json or junit, got 'pdf'"},
        {{"--comparison", "99"}, 66, "no comparison 99"},
        {{"--comparison", "0"}, 64, "--comparison must be a positive id"},
        {{"--run", "1", "--baseline", "f32"}, 64, "--baseline needs --candidate NAME"},
        {{"--run", "1", "--baseline", "f32", "--candidate", "nope"},
         66,
         "run 1 has no model 'nope'"},
        {{"--comparison", "1", "--run", "1"}, 64, "not both"},
        {{"-o", "/nonexistent-dir/x.html"}, 73, "the folder /nonexistent-dir does not exist"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char **a = cases[i].args;
        ASSERT_OK(t_qgate(&o, "report", "--db", db, a[0], a[1], a[2], a[3], a[4], a[5], NULL));
        if (o.code != cases[i].code)
            T_FAIL_("case %zu: exit %d, want %d: %s", i, o.code, cases[i].code, o.err);
        ASSERT_CONTAINS(o.err, cases[i].msg);
        t_out_free(&o);
    }
    /* --run compares afresh and renders it; -o replaces a file whole */
    snprintf(out, sizeof out, "%s", t_path("r.xml"));
    ASSERT_OK(t_write_file(out, "old content that must go", 24));
    ASSERT_OK(t_qgate(&o, "report", "--db", db, "--run", "1", "--baseline", "f32", "--candidate",
                      "q4", "-f", "junit", "-o", out, NULL));
    ASSERT_EQ(o.code, 0);
    t_out_free(&o);
    char *x = t_read_file(out, NULL);
    ASSERT(x && !strncmp(x, "<?xml", 5) && !strstr(x, "old content"));
    free(x);
    return 0;
}
