/* test_tokenizer — llama.cpp's own tokenizer test vectors, the stories260K
 * reference ids, and round trips. */
#include "backends/backend.h"
#include "backends/gguf.h"
#include "backends/nfc.h"
#include "backends/synth.h"
#include "backends/tokenizer.h"
#include "core/status.h"
#include "core/util.h"
#include "datasets/hash.h"
#include "tests/test.h"

#include <stdlib.h>

static struct tokenizer *load(const char *path)
{
    char err[QG_ERRMSG_MAX];
    struct gguf *g;
    struct tokenizer *t = NULL;
    if (gguf_open(path, &g, err, sizeof err) == QG_OK) {
        if (tok_load(g, path, &t, err, sizeof err) != QG_OK) fprintf(stderr, "%s\n", err);
        gguf_close(g);
    } else {
        fprintf(stderr, "%s\n", err);
    }
    return t;
}

/* Runs every string of NAME.inp and compares with NAME.out; returns failures. */
static int run_vectors(const char *name, int *n_cases)
{
    char rel[256];
    snprintf(rel, sizeof rel, "models/llamacpp-vocab/%s", name);
    char model[4096], inp[4200], outp[4200];
    snprintf(model, sizeof model, "%s", t_shared(rel));
    snprintf(inp, sizeof inp, "%s.inp", model);
    snprintf(outp, sizeof outp, "%s.out", model);
    struct tokenizer *t = load(model);
    char *in = t_read_file(inp, NULL), *out = t_read_file(outp, NULL);
    if (!t || !in || !out) return 1000;
    const char *sep = "\n__ggml_vocab_test__\n";
    int failures = 0, k = 0;
    char *p = in, *line = out;
    for (char *end; (end = strstr(p, sep)); p = end + strlen(sep), k++) {
        char *eol = strchr(line, '\n');
        if (!eol)
            return fprintf(stderr, "%s: fewer expected lines than tests\n", outp), failures + 1;
        *eol = '\0';
        int32_t *ids = NULL;
        int64_t n = 0;
        if (tok_encode(t, p, (size_t)(end - p), 0, 0, &ids, &n) != QG_OK) return 1000;
        struct sbuf got;
        sbuf_init(&got, 0);
        for (int64_t i = 0; i < n; i++)
            sbuf_printf(&got, " %d", ids[i]);
        if (strcmp(sbuf_str(&got), line) != 0) {
            fprintf(stderr, "%s case %d \"%.*s\":\n  want%s\n  got %s\n", name, k, (int)(end - p),
                    p, line, sbuf_str(&got));
            failures++;
        }
        sbuf_release(&got);
        free(ids);
        line = eol + 1;
    }
    *n_cases = k;
    free(in);
    free(out);
    tok_free(t);
    return failures;
}

TEST(tokenizer_llama_spm_vectors, shared)
{
    if (!t_shared("models/llamacpp-vocab/ggml-vocab-llama-spm.gguf"))
        SKIP("../shared/models/llamacpp-vocab is absent");
    int n = 0, f = run_vectors("ggml-vocab-llama-spm.gguf", &n);
    printf("llama-spm: %d of %d strings match llama.cpp exactly\n", n - f, n);
    ASSERT_EQ(f, 0);
    ASSERT(n >= 30);
    return 0;
}

TEST(tokenizer_gpt2_vectors, shared)
{
    if (!t_shared("models/llamacpp-vocab/ggml-vocab-gpt-2.gguf"))
        SKIP("../shared/models/llamacpp-vocab is absent");
    int n = 0, f = run_vectors("ggml-vocab-gpt-2.gguf", &n);
    printf("gpt-2: %d of %d strings match llama.cpp exactly\n", n - f, n);
    ASSERT_EQ(f, 0);
    ASSERT(n >= 30);
    return 0;
}

TEST(tokenizer_stories_reference, shared)
{
    const char *model = t_shared("models/stories260K/gguf/stories260K-F32.gguf");
    const char *text = t_shared("data/tinystories_valid_head.txt");
    if (!model || !text) SKIP("../shared stories260K model or data is absent");
    struct tokenizer *t = load(model);
    ASSERT(t);
    size_t n;
    char *s = t_read_file(text, &n);
    ASSERT(s && n > 200);
    int32_t *ids = NULL;
    int64_t k = 0;
    ASSERT_OK(tok_encode(t, s, 200, 1, 0, &ids, &k));
    ASSERT_EQ(k, 108); /* llama.cpp: first 200 characters with BOS -> 108 ids */
    const int32_t want[10] = {1, 301, 427, 309, 426, 301, 427, 309, 394, 265};
    for (int i = 0; i < 10; i++)
        ASSERT_EQ(ids[i], want[i]);
    /* detokenising gives the text back */
    char *back = tok_decode(t, ids + 1, k - 1, 0);
    ASSERT(back && strncmp(back, s, 200) == 0);
    free(back);
    free(ids);
    /* the whole file: 393,019 tokens with BOS */
    ids = NULL;
    k = 0;
    ASSERT_OK(tok_encode(t, s, n, 1, 0, &ids, &k));
    ASSERT_EQ(k, 393019);
    free(ids);
    free(s);
    tok_free(t);
    return 0;
}

TEST(tokenizer_synth_roundtrip, unit)
{
    struct synth_params p = synth_default_params();
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(synth_write(&p, t_path("m.gguf"), err, sizeof err));
    struct tokenizer *t = load(t_path("m.gguf"));
    ASSERT(t);
    ASSERT_EQ(tok_n_vocab(t), 320);
    ASSERT_EQ(tok_bos(t), 1);
    const char *texts[] = {"Once upon a time the girl saw the big red ball.",
                           "bytes \xc3\xa9\xe2\x82\xac and \t tabs\nnew lines", "  leading spaces",
                           ""};
    for (int i = 0; i < 4; i++) {
        int32_t *ids = NULL;
        int64_t k = 0;
        ASSERT_OK(tok_encode(t, texts[i], strlen(texts[i]), 1, 0, &ids, &k));
        ASSERT(k >= 1 && ids[0] == 1);
        char *back = tok_decode(t, ids + 1, k - 1, 0);
        ASSERT_STR_EQ(back, texts[i]);
        free(back);
        free(ids);
    }
    /* "▁" + "a" merge into the piece "▁a"; a character outside the
     * vocabulary falls back to its byte tokens (<0xXX> = 3 + byte) */
    int32_t *ids = NULL;
    int64_t k = 0;
    ASSERT_OK(tok_encode(t, "a\xc3\xa9", 3, 0, 0, &ids, &k));
    ASSERT_EQ(k, 3);
    ASSERT_STR_EQ(tok_text(t, ids[0]), "\xe2\x96\x81"
                                       "a");
    ASSERT_EQ(ids[1], 3 + 0xc3);
    ASSERT_EQ(ids[2], 3 + 0xa9);
    free(ids);
    /* parse_special turns "<s>" into BOS, otherwise it is text */
    ids = NULL;
    k = 0;
    ASSERT_OK(tok_encode(t, "<s>a", 4, 0, 1, &ids, &k));
    ASSERT(k >= 2 && ids[0] == 1);
    free(ids);
    ids = NULL;
    k = 0;
    ASSERT_OK(tok_encode(t, "<s>a", 4, 0, 0, &ids, &k));
    ASSERT(k >= 3 && ids[0] != 1);
    free(ids);
    tok_free(t);
    return 0;
}

/* A local model opened for its tokenizer alone (tokenizer_only): the same
 * ids as the tokenizer itself, the flags of add_special (BOS, control
 * tokens written in the text), the vocabulary's entries; scoring and
 * generation are refused, not attempted without weights. */
TEST(tokenizer_through_backend_only, unit)
{
    struct synth_params p = synth_default_params();
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(synth_write(&p, t_path("m.gguf"), err, sizeof err));
    struct tokenizer *t = load(t_path("m.gguf"));
    ASSERT(t);
    struct backend b;
    struct backend_open_params bp = {.tokenizer_only = 1};
    ASSERT_OK(backend_open(t_path("m.gguf"), &bp, &b, err, sizeof err));
    struct backend_info info;
    ASSERT_OK(backend_info(&b, &info));
    ASSERT_EQ(info.n_vocab, tok_n_vocab(t));
    ASSERT_EQ(info.caps, BACKEND_CAP_TOKENIZE);
    const char *text = "<s>Once upon a time";
    for (int flags = 0; flags < 4; flags++) {
        int32_t *x = NULL, *y = NULL;
        int64_t nx = 0, ny = 0;
        ASSERT_OK(backend_tokenize(&b, text, strlen(text), flags, &x, &nx));
        ASSERT_OK(tok_encode(t, text, strlen(text), flags & 1, (flags & 2) != 0, &y, &ny));
        ASSERT_EQ(nx, ny);
        for (int64_t i = 0; i < nx; i++)
            ASSERT_EQ(x[i], y[i]);
        if (flags & BACKEND_TOK_ADD_SPECIAL) ASSERT_EQ(x[0], tok_bos(t));
        free(x);
        free(y);
    }
    ASSERT_STR_EQ(backend_vocab_text(&b, 5), tok_text(t, 5));
    int32_t ids[3] = {1, 5, 6};
    double lp[2];
    struct backend_score r = {.tokens = ids, .n_tokens = 3, .from = 1, .logprob = lp};
    ASSERT_EQ(backend_score(&b, &r), QG_ERR_UNSUPPORTED);
    ASSERT_CONTAINS(backend_errmsg(&b), "opened for its tokenizer only");
    backend_close(&b);
    tok_free(t);
    return 0;
}

/* NFC by hand: composition, Hangul, canonical reordering, exclusions,
 * singletons, blocked and leading marks, 4-byte code points, and bytes
 * that are not UTF-8 (expected values: Python 3.11's unicodedata) */
TEST(nfc_cases_by_hand, unit)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"caf\x65\xcc\x81", "caf\xc3\xa9"},                       /* e + acute */
        {"\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", "\xea\xb0\x81"}, /* L V T: U+AC01 */
        {"a\xcc\xa3\xcc\x82", "\xe1\xba\xad"},                    /* a, dot below, circumflex */
        {"a\xcc\x82\xcc\xa3", "\xe1\xba\xad"},                    /* reordered first */
        {"\xe0\xa5\x98", "\xe0\xa4\x95\xe0\xa4\xbc"},             /* U+0958: an exclusion */
        {"\xe2\x84\xa6", "\xce\xa9"},                             /* ohm sign: a singleton */
        {"\xcc\x81"
         "e",
         "\xcc\x81"
         "e"},                                            /* a leading mark */
        {"A\xcc\x8a\xcc\x81", "\xc7\xba"},                /* A ring acute: U+01FA */
        {"\xe1\xb8\x8b\xcc\xa3", "\xe1\xb8\x8d\xcc\x87"}, /* U+1E0B + dot below */
        {"q\xcc\x87\xcc\xa3", "q\xcc\xa3\xcc\x87"},       /* no composite: reordered */
        {"\xe3\x81\x8b\xe3\x82\x99", "\xe3\x81\x8c"},     /* ka + voicing: ga */
        {"\xf0\x9d\x85\x9e\xf0\x9d\x85\xa5",
         "\xf0\x9d\x85\x97\xf0\x9d\x85\xa5\xf0\x9d\x85\xa5"}, /* musical symbols */
        {"e\xcc\x81\xcc\x81", "\xc3\xa9\xcc\x81"},            /* the second acute stays */
        {"e\xff\xcc\x81", "e\xff\xcc\x81"},                   /* not UTF-8 in between */
        {"\xed\xa0\x80"
         "a",
         "\xed\xa0\x80"
         "a"}, /* a surrogate's bytes */
        {"plain ASCII", "plain ASCII"},
        {"", ""},
    };
    /* a long run of alternating marks (classes 230, 220): the 220s first,
     * the first 230 composes with the a, the other 999 stay */
    char *in = malloc(1 + 4000), *want = malloc(2 + 2000 + 1998), *o;
    size_t n;
    in[0] = 'a';
    for (int i = 0; i < 1000; i++)
        memcpy(in + 1 + 4 * i, "\xcc\x81\xcc\x96", 4);
    memcpy(want, "\xc3\xa1", 2);
    for (int i = 0; i < 1999; i++)
        memcpy(want + 2 + 2 * i, i < 1000 ? "\xcc\x96" : "\xcc\x81", 2);
    ASSERT_OK(nfc_normalize(in, 4001, &o, &n));
    ASSERT(n == 4000 && !memcmp(o, want, n));
    free(in), free(want), free(o);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ASSERT_OK(nfc_normalize(cases[i].in, strlen(cases[i].in), &o, &n));
        if (n != strlen(cases[i].out) || memcmp(o, cases[i].out, n))
            T_FAIL_("case %zu: %zu bytes out, %zu expected", i, n, strlen(cases[i].out));
        free(o);
    }
    return 0;
}

/* 20000 code points drawn from the ranges where NFC does something
 * (Latin, combining marks, Greek, Hangul jamo and syllables, Devanagari,
 * Hebrew points, CJK compatibility, letterlike symbols, musical symbols,
 * kana and voicing marks), normalized as one text: the same bytes as
 * Python 3.11.7's unicodedata.normalize("NFC", s) (Unicode 14.0), by
 * sha256; the draw is x = x * 6364136223846793005 + 1442695040888963407
 * mod 2^64 from 12345, range (x >> 33) % 16, offset (x >> 13) % size */
TEST(nfc_matches_python_unicodedata, unit)
{
    static const uint32_t r[16][2] = {
        {0x41, 0x7A},     {0xC0, 0xFF},       {0x300, 0x36F},   {0x1E00, 0x1EFF},
        {0x1F00, 0x1FFF}, {0x1100, 0x1112},   {0x1161, 0x1175}, {0x11A8, 0x11C2},
        {0xAC00, 0xD7A3}, {0x900, 0x97F},     {0x591, 0x5C7},   {0xF900, 0xFAFF},
        {0x2100, 0x21FF}, {0x1D15E, 0x1D172}, {0x3099, 0x309A}, {0x304B, 0x3052}};
    char *s = malloc(20000 * 4 + 1);
    size_t k = 0;
    uint64_t x = 12345;
    for (int i = 0; i < 20000; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        const uint32_t *g = r[(x >> 33) % 16];
        uint32_t c = g[0] + (uint32_t)((x >> 13) % (g[1] - g[0] + 1));
        if (c < 0x80)
            s[k++] = (char)c;
        else if (c < 0x800)
            s[k++] = (char)(0xC0 | c >> 6), s[k++] = (char)(0x80 | (c & 63));
        else if (c < 0x10000)
            s[k++] = (char)(0xE0 | c >> 12), s[k++] = (char)(0x80 | (c >> 6 & 63)),
            s[k++] = (char)(0x80 | (c & 63));
        else
            s[k++] = (char)(0xF0 | c >> 18), s[k++] = (char)(0x80 | (c >> 12 & 63)),
            s[k++] = (char)(0x80 | (c >> 6 & 63)), s[k++] = (char)(0x80 | (c & 63));
    }
    ASSERT_EQ(k, 54874);
    char *o, sha[65];
    size_t n;
    ASSERT_OK(nfc_normalize(s, k, &o, &n));
    ASSERT_OK(hash_sha256_mem(o, n, sha));
    printf("%zu bytes in, %zu out, sha256 %s\n", k, n, sha);
    ASSERT_EQ(n, 57442);
    ASSERT_STR_EQ(sha, "b33c3c2f229dda4858c2d4e1e1df27405e7abc4d0a25f5e7c845a9d60be3e052");
    free(o);
    free(s);
    return 0;
}
