/* test_families — every model family the engine runs: the fast forward
 * pass against the double-precision reference on synthetic models of each
 * family, refusals by name, and llama.cpp's numbers on ../shared's
 * arch-zoo files (PPL and greedy tokens). */
#include "backends/ggml_types.h"
#include "backends/gguf.h"
#include "backends/llama.h"
#include "backends/synth.h"
#include "core/status.h"
#include "core/util.h"
#include "tests/test.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static struct llama_model *load(const char *path, char *err, size_t errlen)
{
    struct gguf *g;
    struct llama_model *m = NULL;
    err[0] = '\0';
    if (gguf_open(path, &g, err, errlen) == QG_OK) llama_load(g, path, &m, err, errlen);
    return m;
}

/* one synthetic model per family variant */
static const struct variant {
    const char *label, *arch;
    int n_expert, rope_freqs, swa;
    float rope_linear;
    int longrope;
} variants[] = {
    {"llama", "llama", 0, 0, 0, 0, 0},           {"llama+rope_freqs", "llama", 0, 1, 0, 0, 0},
    {"llama+linear", "llama", 0, 0, 0, 4.0f, 0}, {"llama+window", "llama", 0, 0, 8, 0, 0},
    {"llama+experts", "llama", 4, 0, 0, 0, 0},   {"qwen2", "qwen2", 0, 0, 0, 0, 0},
    {"qwen2moe", "qwen2moe", 0, 0, 0, 0, 0},     {"qwen3", "qwen3", 0, 0, 0, 0, 0},
    {"gemma", "gemma", 0, 0, 0, 0, 0},           {"gemma2", "gemma2", 0, 0, 0, 0, 0},
    {"gemma3", "gemma3", 0, 0, 0, 0, 0},         {"phi3", "phi3", 0, 0, 0, 0, 0},
    {"phi3+longrope", "phi3", 0, 0, 0, 0, 1},    {"starcoder2", "starcoder2", 0, 0, 0, 0, 0},
    {"qwen3moe", "qwen3moe", 0, 0, 0, 0, 0},
};

/* the variant labelled `label` (a test's typo fails loudly) */
static const struct variant *variant_named(const char *label)
{
    for (size_t i = 0; i < sizeof variants / sizeof *variants; i++)
        if (!strcmp(variants[i].label, label)) return &variants[i];
    fprintf(stderr, "no variant '%s'\n", label);
    abort();
}

static int write_variant(const struct variant *v, const char *path, uint32_t wtype)
{
    struct synth_params p = synth_default_params();
    p.arch = v->arch;
    p.n_expert = v->n_expert;
    p.rope_freqs = v->rope_freqs;
    p.swa_window = v->swa;
    p.rope_linear = v->rope_linear;
    p.longrope = v->longrope;
    p.wtype = wtype;
    p.seed = 101;
    char err[QG_ERRMSG_MAX];
    int rc = synth_write(&p, path, err, sizeof err);
    if (rc) fprintf(stderr, "%s\n", err);
    return rc;
}

/* batched and token-by-token fast logits against the reference, n tokens
 * in a context of n (the reference's fresh context is n long too: LongRoPE
 * picks its factors by it) */
static int check_variant_n(const struct variant *v, uint32_t wtype, int n)
{
    const char *path = t_path("fam.gguf");
    ASSERT_OK(write_variant(v, path, wtype));
    char err[QG_ERRMSG_MAX];
    struct llama_model *m = load(path, err, sizeof err);
    if (!m) T_FAIL_("%s: %s", v->label, err);
    const int V = llama_hparams(m)->n_vocab;
    int32_t tok[64];
    for (int i = 0; i < n; i++)
        tok[i] = (int32_t)((i * 37 + 5) % V);
    float *fast = malloc((size_t)n * V * sizeof *fast), *ref = malloc((size_t)n * V * sizeof *ref),
          *inc = malloc((size_t)n * V * sizeof *inc);
    struct llama_ctx *c;
    ASSERT_OK(llama_ctx_new(m, n, &c));
    ASSERT_OK(llama_eval(c, tok, n, 0, fast));
    ASSERT_OK(llama_eval_ref(m, tok, n, ref));
    llama_ctx_reset(c);
    for (int i = 0; i < n; i++)
        ASSERT_OK(llama_eval(c, &tok[i], 1, 0, inc + (size_t)i * V));
    double e1 = t_nmse(fast, ref, (size_t)n * V), e2 = t_nmse(inc, ref, (size_t)n * V);
    printf("%-18s n %d: batched NMSE %.3g, incremental %.3g\n", v->label, n, e1, e2);
    ASSERT(e1 < 1e-9 && e2 < 1e-9);
    llama_ctx_free(c);
    free(fast);
    free(ref);
    free(inc);
    llama_free(m);
    return 0;
}

static int check_variant(const struct variant *v, uint32_t wtype)
{
    return check_variant_n(v, wtype, 40);
}

TEST(families_fast_matches_reference, unit)
{
    for (size_t i = 0; i < sizeof variants / sizeof *variants; i++)
        if (check_variant(&variants[i], GGML_F32)) return 1;
    /* LongRoPE's short factors: a context within the original 32 */
    return check_variant_n(variant_named("phi3+longrope"), GGML_F32, 24);
}

/* the family's features change the logits: each variant differs from
 * plain llama on the same seed (a feature that was read and ignored would
 * not), and the reference holds them on quantized weights too */
TEST(families_features_matter, unit)
{
    const struct variant *v = variants;
    ASSERT_OK(write_variant(&v[0], t_path("base.gguf"), GGML_F32));
    char err[QG_ERRMSG_MAX];
    struct llama_model *base = load(t_path("base.gguf"), err, sizeof err);
    ASSERT(base);
    const int n = 40, V = llama_hparams(base)->n_vocab;
    int32_t tok[40];
    for (int i = 0; i < n; i++)
        tok[i] = (int32_t)((i * 37 + 5) % V);
    float *a = malloc((size_t)n * V * sizeof *a), *b = malloc((size_t)n * V * sizeof *b);
    ASSERT_OK(llama_eval_ref(base, tok, n, a));
    for (int k = 1; k < 4; k++) { /* these llama variants share every weight with it */
        ASSERT_OK(write_variant(&v[k], t_path("var.gguf"), GGML_F32));
        struct llama_model *m = load(t_path("var.gguf"), err, sizeof err);
        ASSERT(m);
        ASSERT_OK(llama_eval_ref(m, tok, n, b));
        double e = t_nmse(b, a, (size_t)n * V);
        printf("%s vs llama: NMSE %.3g\n", v[k].label, e);
        ASSERT(e > 1e-6);
        llama_free(m);
    }
    /* experts: top 2 of 4 against all 4 on the same weights (only
     * expert_used_count differs) */
    struct synth_params p = synth_default_params();
    p.arch = "llama", p.n_expert = 4, p.n_expert_used = 2, p.seed = 101;
    ASSERT_OK(synth_write(&p, t_path("e2.gguf"), err, sizeof err));
    p.n_expert_used = 4;
    ASSERT_OK(synth_write(&p, t_path("e4.gguf"), err, sizeof err));
    struct llama_model *m2 = load(t_path("e2.gguf"), err, sizeof err),
                       *m4 = load(t_path("e4.gguf"), err, sizeof err);
    ASSERT(m2 && m4);
    ASSERT_OK(llama_eval_ref(m2, tok, n, a));
    ASSERT_OK(llama_eval_ref(m4, tok, n, b));
    double e = t_nmse(b, a, (size_t)n * V);
    printf("experts top 2 vs all 4: NMSE %.3g\n", e);
    ASSERT(e > 1e-6);
    llama_free(m2);
    llama_free(m4);
    free(a);
    free(b);
    llama_free(base);
    const struct variant *q8[] = {variant_named("llama+experts"), variant_named("qwen3moe"),
                                  variant_named("qwen2moe"),      variant_named("gemma2"),
                                  variant_named("gemma3"),        variant_named("phi3"),
                                  variant_named("starcoder2")};
    for (size_t i = 0; i < sizeof q8 / sizeof *q8; i++)
        if (check_variant(q8[i], GGML_Q8_0)) return 1;
    return 0;
}

TEST(families_refused_by_name, unit)
{
    static const struct {
        const char *arch, *key, *tensor, *expect;
    } cases[] = {
        {"mamba", NULL, NULL,
         "architecture 'mamba' is not supported (qgate runs llama, qwen2, qwen2moe, qwen3, "
         "qwen3moe, gemma, gemma2, gemma3, phi3, starcoder2)"},
        {"qwen3moe", "qwen3moe.expert_weights_scale", NULL,
         "metadata key 'qwen3moe.expert_weights_scale' is not implemented for qwen3moe"},
        {"llama", "llama.rope.scaling.yarn_log_multiplier", NULL,
         "metadata key 'llama.rope.scaling.yarn_log_multiplier' is not implemented"},
        {"llama", NULL, "blk.0.attn_q_norm.weight",
         "tensor 'blk.0.attn_q_norm.weight' is not implemented by qgate's llama forward pass"},
        {"qwen2", "qwen2.expert_count", NULL,
         "metadata key 'qwen2.expert_count' is not implemented for qwen2"},
        {"qwen3", "qwen3.attention.sliding_window", NULL,
         "metadata key 'qwen3.attention.sliding_window' is not implemented for qwen3 (llama.cpp "
         "ignores it there"},
        {"llama", "llama.expert_weights_norm", NULL,
         "metadata key 'llama.expert_weights_norm' is not implemented"},
    };
    char err[QG_ERRMSG_MAX];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct synth_params p = synth_default_params();
        p.arch = cases[i].arch;
        p.extra_key = cases[i].key;
        p.extra_tensor = cases[i].tensor;
        ASSERT_OK(synth_write(&p, t_path("r.gguf"), err, sizeof err));
        struct t_out o;
        ASSERT_OK(t_qgate(&o, "ppl", t_path("r.gguf"), "--text", t_path("r.gguf"), NULL));
        if (o.code != 65 || !strstr(o.err, cases[i].expect))
            T_FAIL_("case %zu: exit %d, stderr: %s", i, o.code, o.err);
        t_out_free(&o);
    }
    /* inspect names the family and what qgate implements of it */
    struct synth_params p = synth_default_params();
    p.arch = "qwen3";
    ASSERT_OK(synth_write(&p, t_path("q3.gguf"), err, sizeof err));
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "inspect", t_path("q3.gguf"), NULL));
    ASSERT_EQ(o.code, 0);
    ASSERT_CONTAINS(o.out, "per-head Q/K RMSNorm");
    t_out_free(&o);
    return 0;
}

/* a deterministic text of the synthetic vocabulary's words */
static void word_text(char *buf, size_t cap)
{
    static const char *const w[] = {"the",  "girl", "saw", "a",   "big",   "red", "ball", "in",
                                    "park", "and",  "she", "was", "happy", "dog", "sun",  "tree"};
    uint64_t s = 7;
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < 1500 && n + 16 < cap; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", w[(s >> 33) % 16], i % 9 == 8 ? ". " : " ");
    }
}

/* llama-perplexity (llama.cpp 0c1e570, as below) on the synthetic models
 * of the families the arch-zoo files lack (qwen3, qwen3moe, phi3 with LongRoPE: at
 * ctx 128, above its original 32, the long factors and attn_factor 1.19)
 * or hold with other settings (gemma2 with a window of 8, qwen2moe's
 * shared expert; gemma3, whose plain figure 350.4958 is 2.7e-5 off because
 * llama.cpp's CPU GELU goes through an f16 table: ?a=llamacpp does too):
 * `llama-perplexity -m synth-X.gguf -f words.txt -c 128 -t 2 -b 128`,
 * the files written by synth_write with these variants and word_text */
TEST(families_synth_llamacpp_ppl, unit)
{
    static const struct {
        const char *variant;
        double ppl;
        const char *spec; /* after the path: gemma3 through llama.cpp's f16 GELU table */
    } ref[] = {{"qwen3", 369.4904, ""},
               {"gemma2", 334.6090, ""},
               {"qwen2moe", 402.2294, ""},
               {"phi3+longrope", 345.4765, ""},
               {"gemma3", 350.5053, "?a=llamacpp"},
               {"qwen3moe", 371.1300, ""}};
    static char text[20000];
    word_text(text, sizeof text);
    ASSERT_OK(t_write_file(t_path("words.txt"), text, strlen(text)));
    for (size_t i = 0; i < sizeof ref / sizeof *ref; i++) {
        const struct variant *v = variant_named(ref[i].variant);
        ASSERT_OK(write_variant(v, t_path("s.gguf"), GGML_F32));
        char spec[4200];
        snprintf(spec, sizeof spec, "%s%s", t_path("s.gguf"), ref[i].spec);
        double got = t_ppl(spec, t_path("words.txt"), "0"), rel = got / ref[i].ppl - 1;
        printf("%-14s%-12s qgate %.4f llama.cpp %.4f (%+.4f %%)\n", v->label, ref[i].spec, got,
               ref[i].ppl, 100 * rel);
        ASSERT(fabs(rel) < 2e-5);
    }
    return 0;
}

/* llama-perplexity on the arch-zoo files (llama.cpp 0c1e570 from the
 * llama_cpp_python 0.3.36 sdist, CPU build on an AMD EPYC with AVX-512,
 * -c 128 --chunks 100 -t 2 -b 128 over tinystories_valid_head.txt;
 * flash attention on, its default). Its own spread: -fa off moves these
 * files by up to 0.023 % (phi3 Q4_K_M 223.9251 -> 223.8735). */
static const struct zoo_ref {
    const char *file;
    double ppl;
    double tol_plain, tol_llamacpp; /* relative, for qgate plain and ?a=llamacpp */
} zoo[] = {
    {"arch-zoo-llama3-F32", 219.1895, 2e-4, 2e-4},
    {"arch-zoo-llama-linrope-F32", 215.6196, 2e-4, 2e-4},
    {"arch-zoo-llama-moe-F32", 220.2430, 2e-4, 2e-4},
    {"arch-zoo-qwen2moe-F32", 220.5649, 2e-4, 2e-4},
    {"arch-zoo-phi3-F32", 222.1886, 2e-4, 2e-4},
    {"arch-zoo-gemma-F32", 234.5254, 2e-4, 2e-4},
    {"arch-zoo-gemma2-F32", 217.9083, 2e-4, 2e-4},
    {"arch-zoo-starcoder2-F32", 240.7333, 2e-4, 2e-4},
    /* quantized: plain mode keeps activations f32 (llama.cpp rounds them
     * to 8 bits), so only ?a=llamacpp is held to llama.cpp's figure */
    {"arch-zoo-llama3-Q8_0", 219.6341, 0, 1e-3},
    {"arch-zoo-llama3-Q4_K_M", 219.8164, 0, 1e-3},
    {"arch-zoo-llama-linrope-Q8_0", 216.7433, 0, 1e-3},
    {"arch-zoo-llama-linrope-Q4_K_M", 217.4074, 0, 1e-3},
    {"arch-zoo-llama-moe-Q8_0", 220.8835, 0, 1e-3},
    {"arch-zoo-llama-moe-Q4_K_M", 221.3986, 0, 1e-3},
    {"arch-zoo-qwen2moe-Q8_0", 221.2504, 0, 1e-3},
    {"arch-zoo-qwen2moe-Q4_K_M", 221.2952, 0, 1e-3},
    {"arch-zoo-phi3-Q8_0", 223.3369, 0, 1e-3},
    {"arch-zoo-phi3-Q4_K_M", 223.9251, 0, 1e-3},
    {"arch-zoo-gemma-Q8_0", 235.0186, 0, 1e-3},
    {"arch-zoo-gemma-Q4_K_M", 235.0187, 0, 1e-3},
    {"arch-zoo-gemma2-Q8_0", 217.9170, 0, 1e-3},
    {"arch-zoo-gemma2-Q4_K_M", 218.1043, 0, 1e-3},
    {"arch-zoo-starcoder2-Q8_0", 241.0071, 0, 1e-3},
    {"arch-zoo-starcoder2-Q4_K_M", 241.8438, 0, 1e-3},
};

/* zoo entries [from, to) in both modes where a tolerance is set */
static int zoo_check(size_t from, size_t to)
{
    const char *dir = t_shared("models/arch-zoo"),
               *text = t_shared("data/tinystories_valid_head.txt");
    if (!dir || !text) SKIP("../shared/models/arch-zoo or the TinyStories text is absent");
    char d[4096], tx[4096];
    snprintf(d, sizeof d, "%s", dir);
    snprintf(tx, sizeof tx, "%s", text);
    for (size_t i = from; i < to; i++) {
        for (int mode = 0; mode < 2; mode++) {
            double tol = mode ? zoo[i].tol_llamacpp : zoo[i].tol_plain;
            if (tol == 0) continue;
            char path[4400];
            snprintf(path, sizeof path, "%s/%s.gguf%s", d, zoo[i].file, mode ? "?a=llamacpp" : "");
            double v = t_ppl(path, tx, "100"), rel = v / zoo[i].ppl - 1;
            printf("%-30s%-12s qgate %.4f llama.cpp %.4f (%+.3f %%)\n", zoo[i].file,
                   mode ? " a=llamacpp" : "", v, zoo[i].ppl, 100 * rel);
            if (!(fabs(rel) < tol))
                T_FAIL_("%s: %.4f is not within %g of %.4f", path, v, tol, zoo[i].ppl);
        }
    }
    return 0;
}

TEST(families_llamacpp_reference_ppl_f32, shared)
{
    return zoo_check(0, 8);
}

TEST(families_llamacpp_reference_ppl_quantized, shared)
{
    return zoo_check(8, sizeof zoo / sizeof *zoo);
}

/* 0 when `qgate generate path` continues "Once upon a time" for 32 tokens
 * with `text` (llama-simple's; trailing newlines aside, as the shell kept
 * the references), else 1 after a failure naming both */
static int greedy_differs(const char *path, const char *text)
{
    char want[256];
    snprintf(want, sizeof want, "Once upon a time%s", text);
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "generate", path, "--prompt", "Once upon a time", "-n", "32", NULL));
    ASSERT_EQ(o.code, 0);
    size_t len = strlen(o.out), wl = strlen(want);
    while (len && o.out[len - 1] == '\n')
        o.out[--len] = '\0';
    while (wl && want[wl - 1] == '\n')
        want[--wl] = '\0';
    if (strcmp(o.out, want)) T_FAIL_("%s: got \"%s\", llama.cpp \"%s\"", path, o.out, want);
    t_out_free(&o);
    return 0;
}

/* llama-simple's greedy continuation of "Once upon a time", 32 tokens, on
 * each F32 file (same build as above) */
TEST(families_llamacpp_greedy_tokens, shared)
{
    static const struct {
        const char *arch, *text;
    } g[] = {
        {"llama3", " f he f and c.ue...e.e.eee ande ande.e.e.e.e.."},
        {"llama-linrope", "nssss wa andnssssssssy wmsre the an\ninerosy."},
        {"llama-moe", " wasstststststststat.l was and helnggg.at you.....  to cheed"},
        {"qwen2moe", "v l dt' theren wccccccccctruciucingvery waserf s theh"},
        {"phi3", " y pr..e'oa m little little littleed to hay slt\n\n\n\n\n\n\n\n\n"},
        {"gemma", " car s.n.o.o co. ando the.y.ingo the.y.y. ando c. and."},
        {"gemma2", " herced.on heru a the c the g the gnor............., the a"},
        {"starcoder2", ".....ia, the djjj..................."},
    };
    const char *dir = t_shared("models/arch-zoo");
    if (!dir) SKIP("../shared/models/arch-zoo is absent");
    char d[4096];
    snprintf(d, sizeof d, "%s", dir);
    for (size_t i = 0; i < sizeof g / sizeof *g; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/arch-zoo-%s-F32.gguf", d, g[i].arch);
        if (greedy_differs(path, g[i].text)) return 1;
    }
    return 0;
}

/* llama-simple's greedy continuation (same build, 32 tokens) on quantized
 * files, against qgate ?a=llamacpp: a prompt and single-token steps go
 * through ggml's short-batch flash attention (Q and the running sum of V in
 * f16) and llama.cpp's 8-bit activations. These 12 files give llama.cpp's
 * text under every kernel set (portable, avx2, avx512, avx512vnni, measured
 * 2026-12-03); on llama3-Q4_K_M, llama-linrope-Q8_0 and both gemma2 files
 * some set flips a near-tie, so they are not listed. Plain mode gives
 * another text on phi3-Q4_K_M. */
TEST(families_llamacpp_greedy_tokens_quantized, shared)
{
    static const struct {
        const char *file, *text;
    } g[] = {
        {"llama3-Q8_0", " f he f and c.ue...e.e.eee ande.e.e.e.e.e.e"},
        {"llama-linrope-Q4_K_M", "nsss wa g\niner ae the aee the aeeeeeeeeeem a hc"},
        {"llama-moe-Q8_0", ",,,,,rehe theigr lo and the thehe thehe the c was was was was was "
                           "was was was was was was was was"},
        {"llama-moe-Q4_K_M", ",,,,,rehe theig\nedhe, le and theheheot. andtrer s g anddher"},
        {"qwen2moe-Q8_0", "veenlain the f to thereintrkedt cccleed \"t c thes stle ge"},
        {"qwen2moe-Q4_K_M", "vce lhe toyes to g tot'hre ahesucl wask the,sor the m t"},
        {"phi3-Q8_0", " y pr st.e'oar little\noi,it\ncar med to,tell ll"},
        {"phi3-Q4_K_M", " eypamamlllce therebarp .\noareedyampk slce poare"},
        {"gemma-Q8_0", " car s.n.o.o co. ando the.y.y. and. andJ.y.y.y. a"},
        {"gemma-Q4_K_M", "h theo co coe.o co co the.oe.o the.o co coe.oe."},
        {"starcoder2-Q8_0", ".......re\"W.....i.iig............."},
        {"starcoder2-Q4_K_M", "................................"},
    };
    const char *dir = t_shared("models/arch-zoo");
    if (!dir) SKIP("../shared/models/arch-zoo is absent");
    char d[4096];
    snprintf(d, sizeof d, "%s", dir);
    for (size_t i = 0; i < sizeof g / sizeof *g; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/arch-zoo-%s.gguf?a=llamacpp", d, g[i].file);
        if (greedy_differs(path, g[i].text)) return 1;
    }
    return 0;
}

/* qgate sweep's class scan knows each family's tensor classes: fused
 * attn_qkv (phi3), the experts as one class and the shared expert
 * (qwen2moe), and lists only the classes the model has; each class
 * candidate simulates something (KLD > 0) */
TEST(families_sweep_classes, e2e)
{
    static const struct {
        const char *variant, *classes;
    } cases[] = {
        {"phi3", "attn_qkv,attn_output,ffn_up,ffn_down,token_embd/output"},
        {"qwen2moe", "attn_q,attn_k,attn_v,attn_output,experts,shared_expert,token_embd/output"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ASSERT_OK(write_variant(variant_named(cases[i].variant), t_path("sw.gguf"), GGML_F32));
        struct t_out o;
        ASSERT_OK(t_qgate(&o, "sweep", t_path("sw.gguf"), "--formats", "int8", "--db",
                          t_path("sw.db"), "--json", t_path("sw.json"), "-q", NULL));
        if (o.code != 0) T_FAIL_("exit %d: %s", o.code, o.err);
        t_out_free(&o);
        char *doc = t_read_file(t_path("sw.json"), NULL);
        cJSON *j = cJSON_Parse(doc), *c;
        ASSERT(j);
        char got[256] = "";
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "classes"))
        {
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", got[0] ? "," : "",
                     c->valuestring);
        }
        printf("%s: %s\n", cases[i].variant, got);
        ASSERT_STR_EQ(got, cases[i].classes);
        int scanned = 0;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "candidates"))
        {
            if (!cJSON_GetObjectItem(c, "class")) continue;
            scanned++;
            const cJSON *kld = cJSON_GetObjectItem(c, "kld");
            ASSERT(cJSON_IsNumber(kld) && kld->valuedouble > 0);
        }
        int n_classes = 1; /* one candidate per class */
        for (const char *p = cases[i].classes; *p; p++)
            n_classes += *p == ',';
        ASSERT_EQ(scanned, n_classes);
        cJSON_Delete(j);
        free(doc);
    }
    return 0;
}

/* Hugging Face transformers 5.25.0 (torch 2.15.0, CPU, eager attention)
 * with these synthetic models' weights copied in (Qwen3ForCausalLM;
 * Gemma2ForCausalLM with norm weights minus 1, window 8, caps 20/15),
 * float64 throughout: log p(tok[i+1]) at positions 0..38 of the 40 ids
 * (i*37+5) % 320, no BOS. An independent numpy float64 forward from the
 * GGUF tensors agreed with it to 2e-15; transformers' float32 run is
 * within 6.1e-7 of these per token. */
static const double ref_qwen3_lp64[39] = {
    -5.63929721831, -6.50486758459, -6.85188012713, -4.70409496429, -5.28262531613, -5.83791441309,
    -4.85470344083, -6.19196879017, -7.07340168731, -5.63434921667, -6.03418837383, -6.44700480937,
    -5.89225480248, -5.74672726344, -6.32573938271, -6.33604839907, -7.13624432247, -5.9981618473,
    -5.664662519,   -5.00996887469, -6.4621869321,  -6.09120490652, -5.63649057458, -5.50691908734,
    -5.13057057073, -5.43648581537, -5.34456233203, -5.62473711948, -6.44871005312, -5.78269779421,
    -5.71308492356, -5.43355260526, -5.29914316444, -6.06708677603, -5.88593958479, -6.51300695979,
    -4.90838578147, -5.82744750309, -5.4940818739};
static const double ref_gemma2_lp64[39] = {
    -6.08545347162, -6.36475320965, -5.87590104931, -6.80440862294, -4.88176957132, -5.79249272585,
    -6.05041581693, -6.08606873998, -6.06322801586, -7.1612569355,  -6.70665164012, -5.42957116632,
    -5.48305227695, -6.26004734606, -5.68841858892, -5.4092043987,  -6.02475978637, -5.51264526176,
    -6.53837301727, -4.60428084779, -5.07557819837, -5.87499899137, -6.64019882653, -5.69005317345,
    -5.57578175244, -6.33265898541, -6.32172836938, -6.64305912892, -6.31837467231, -5.09277685112,
    -6.69550642482, -5.63340036566, -6.2689333454,  -6.77385598236, -6.96353419925, -5.57192919822,
    -6.41898792734, -6.62530378116, -5.49780728023};

/* Gemma3ForCausalLM (transformers 5.25.0, as above; rope_parameters per
 * layer type: linear x8 on the full layer, base 1000 on the windowed one;
 * all 13 norms minus 1), the synthetic gemma3 model */
static const double ref_gemma3_lp64[39] = {
    -5.91642536752, -6.89759590627, -5.88065939361, -6.84499668155, -6.11983386858, -6.61714257304,
    -5.42430255178, -6.55612803974, -6.53247176849, -5.26065295376, -5.2646746906,  -5.27826280214,
    -5.95716243314, -6.22682308685, -5.86516820554, -5.96881752226, -6.18115779626, -5.18495236996,
    -6.53090776536, -5.53323009393, -6.19607719362, -5.8720814906,  -6.37253269374, -5.04361833175,
    -5.47260379212, -7.1012173705,  -5.29806319337, -6.65693666137, -5.99135194476, -5.71724388723,
    -6.10429477309, -5.50147029021, -7.04328163476, -6.1341747784,  -6.54163607783, -7.04087547565,
    -5.96363465936, -5.83754755226, -5.78044847523};

TEST(families_transformers_reference, unit)
{
    static const struct {
        const char *variant;
        const double *lp;
    } cases[] = {
        {"qwen3", ref_qwen3_lp64}, {"gemma2", ref_gemma2_lp64}, {"gemma3", ref_gemma3_lp64}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        ASSERT_OK(write_variant(variant_named(cases[c].variant), t_path("hf.gguf"), GGML_F32));
        char err[QG_ERRMSG_MAX];
        struct llama_model *m = load(t_path("hf.gguf"), err, sizeof err);
        ASSERT(m);
        const int n = 40, V = llama_hparams(m)->n_vocab;
        ASSERT_EQ(V, 320);
        int32_t tok[40];
        for (int i = 0; i < n; i++)
            tok[i] = (int32_t)((i * 37 + 5) % V);
        float *lg = malloc((size_t)n * V * sizeof *lg);
        struct llama_ctx *ctx;
        ASSERT_OK(llama_ctx_new(m, 64, &ctx));
        ASSERT_OK(llama_eval(ctx, tok, n, 0, lg));
        double worst = 0, sum = 0, want = 0;
        for (int i = 0; i + 1 < n; i++) {
            const float *r = lg + (size_t)i * V;
            double lp = t_logprob(r, V, tok[i + 1]), rel = fabs(lp / cases[c].lp[i] - 1);
            worst = rel > worst ? rel : worst;
            sum += lp, want += cases[c].lp[i];
        }
        printf("%s: sum of log-probs %.6f, transformers %.6f; worst token relative %.2g\n",
               cases[c].variant, sum, want, worst);
        ASSERT(worst < 1e-5); /* the issue asks 1e-4; float32 rounding is ~1e-7 */
        ASSERT(fabs(sum - want) < 1e-4);
        llama_ctx_free(ctx);
        free(lg);
        llama_free(m);
    }
    return 0;
}
