/* test_gguf — GGUF reader/writer, synthetic models, malformed files, the
 * shared real models, inspect, quantisers and hashing. */
#include "backends/ggml_types.h"
#include "backends/gguf.h"
#include "backends/gguf_write.h"
#include "backends/model_info.h"
#include "backends/quant.h"
#include "backends/synth.h"
#include "datasets/hash.h"
#include "core/status.h"
#include "core/util.h"
#include "tests/gguf_cases.h"
#include "tests/test.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdlib.h>

static int open_bytes(const struct bb *b, struct gguf **g, char *err)
{
    return gguf_open_memory(b->p, b->n, "case.gguf", g, err, QG_ERRMSG_MAX);
}

TEST(gguf_roundtrip_all_types, unit)
{
    struct gguf_writer *w = gguf_writer_new();
    ASSERT(w);
    uint8_t u8 = 0xAB;
    int8_t i8 = -5;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    int32_t i32 = -2000000000;
    uint64_t u64 = ((uint64_t)1 << 63) + 5, u64s = 12345;
    int64_t i64 = -((int64_t)1 << 40);
    double f64 = 3.141592653589793;
    ASSERT_OK(gguf_writer_set_scalar(w, "k.u8", GGUF_U8, &u8));
    ASSERT_OK(gguf_writer_set_scalar(w, "k.i8", GGUF_I8, &i8));
    ASSERT_OK(gguf_writer_set_scalar(w, "k.u16", GGUF_U16, &u16));
    ASSERT_OK(gguf_writer_set_scalar(w, "k.i16", GGUF_I16, &i16));
    ASSERT_OK(gguf_writer_set_u32(w, "k.u32", 4000000000u));
    ASSERT_OK(gguf_writer_set_scalar(w, "k.i32", GGUF_I32, &i32));
    ASSERT_OK(gguf_writer_set_f32(w, "k.f32", 1.5f));
    ASSERT_OK(gguf_writer_set_bool(w, "k.bool", 1));
    ASSERT_OK(gguf_writer_set_str(w, "k.str", "h\xc3\xa9llo"));
    ASSERT_OK(gguf_writer_set_scalar(w, "k.u64big", GGUF_U64, &u64));
    ASSERT_OK(gguf_writer_set_scalar(w, "k.u64", GGUF_U64, &u64s));
    ASSERT_OK(gguf_writer_set_scalar(w, "k.i64", GGUF_I64, &i64));
    ASSERT_OK(gguf_writer_set_scalar(w, "k.f64", GGUF_F64, &f64));
    int16_t ai16[3] = {-1, 2, -3};
    float af32[2] = {0.25f, -8.0f};
    uint8_t abool[2] = {0, 1};
    const char *astr[3] = {"", "b", "\xe2\x96\x81the"};
    ASSERT_OK(gguf_writer_set_arr(w, "a.i16", GGUF_I16, ai16, 3));
    ASSERT_OK(gguf_writer_set_arr(w, "a.f32", GGUF_F32, af32, 2));
    ASSERT_OK(gguf_writer_set_arr(w, "a.bool", GGUF_BOOL, abool, 2));
    ASSERT_OK(gguf_writer_set_arr(w, "a.empty", GGUF_U32, NULL, 0));
    ASSERT_OK(gguf_writer_set_arr_str(w, "a.str", astr, 3));
    ASSERT_EQ(gguf_writer_set_u32(w, "k.u32", 1), QG_ERR_USAGE); /* duplicate */

    float f[16];
    for (int i = 0; i < 16; i++)
        f[i] = (float)i - 7.5f;
    uint16_t h[32];
    for (int i = 0; i < 32; i++)
        h[i] = quant_f32_to_f16((float)i / 4);
    uint8_t q8[68], qk[144];
    float x64[64];
    for (int i = 0; i < 64; i++)
        x64[i] = sinf((float)i);
    quant_row_q8_0(x64, q8, 64);
    for (int i = 0; i < 144; i++)
        qk[i] = (uint8_t)(i * 7);
    int64_t ne_f[2] = {8, 2}, ne_h[1] = {32}, ne_q8[2] = {32, 2}, ne_3d[3] = {4, 2, 2},
            ne_k[1] = {256};
    ASSERT_OK(gguf_writer_add_tensor(w, "f32", GGML_F32, 2, ne_f, f));
    ASSERT_OK(gguf_writer_add_tensor(w, "f16", GGML_F16, 1, ne_h, h));
    ASSERT_OK(gguf_writer_add_tensor(w, "q8", GGML_Q8_0, 2, ne_q8, q8));
    ASSERT_OK(gguf_writer_add_tensor(w, "three_d", GGML_F32, 3, ne_3d, f));
    ASSERT_OK(gguf_writer_add_tensor(w, "q4k", GGML_Q4_K, 1, ne_k, qk));
    ASSERT_EQ(gguf_writer_add_tensor(w, "bad", GGML_Q8_0, 1, ne_f, f), QG_ERR_USAGE);
    const char *path = t_path("rt.gguf");
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(gguf_writer_write(w, path, err, sizeof err));
    gguf_writer_free(w);

    struct gguf *g;
    ASSERT_OK(gguf_open(path, &g, err, sizeof err));
    ASSERT_EQ(gguf_version(g), 3);
    ASSERT_EQ(gguf_n_kv(g), 18);
    int64_t iv;
    double dv;
    const char *s;
    size_t len;
    ASSERT_OK(gguf_get_int(g, "k.u8", &iv));
    ASSERT_EQ(iv, 0xAB);
    ASSERT_OK(gguf_get_int(g, "k.i8", &iv));
    ASSERT_EQ(iv, -5);
    ASSERT_OK(gguf_get_int(g, "k.u16", &iv));
    ASSERT_EQ(iv, 60000);
    ASSERT_OK(gguf_get_int(g, "k.i16", &iv));
    ASSERT_EQ(iv, -30000);
    ASSERT_OK(gguf_get_int(g, "k.u32", &iv));
    ASSERT_EQ(iv, 4000000000LL);
    ASSERT_OK(gguf_get_int(g, "k.i32", &iv));
    ASSERT_EQ(iv, -2000000000LL);
    ASSERT_OK(gguf_get_float(g, "k.f32", &dv));
    ASSERT_NEAR(dv, 1.5, 0);
    ASSERT_OK(gguf_get_int(g, "k.bool", &iv));
    ASSERT_EQ(iv, 1);
    ASSERT_OK(gguf_get_str(g, "k.str", &s, &len));
    ASSERT_EQ(len, 6);
    ASSERT(memcmp(s, "h\xc3\xa9llo", 6) == 0);
    ASSERT_EQ(gguf_get_int(g, "k.u64big", &iv), QG_ERR_DATA);
    ASSERT_OK(gguf_get_int(g, "k.u64", &iv));
    ASSERT_EQ(iv, 12345);
    ASSERT_OK(gguf_get_int(g, "k.i64", &iv));
    ASSERT_EQ(iv, -((int64_t)1 << 40));
    ASSERT_OK(gguf_get_float(g, "k.f64", &dv));
    ASSERT_NEAR(dv, 3.141592653589793, 0);
    ASSERT_EQ(gguf_get_str(g, "k.u8", &s, &len), QG_ERR_DATA);
    ASSERT_EQ(gguf_get_int(g, "missing", &iv), QG_ERR_NOTFOUND);
    int64_t k = gguf_find_key(g, "a.i16");
    ASSERT(k >= 0);
    ASSERT_EQ(gguf_kv_type(g, k), GGUF_ARR);
    ASSERT_EQ(gguf_kv_arr_type(g, k), GGUF_I16);
    ASSERT_EQ(gguf_kv_len(g, k), 3);
    ASSERT_OK(gguf_arr_int(g, k, 2, &iv));
    ASSERT_EQ(iv, -3);
    ASSERT_EQ(gguf_arr_int(g, k, 3, &iv), QG_ERR_DATA); /* out of range */
    k = gguf_find_key(g, "a.f32");
    ASSERT_OK(gguf_arr_float(g, k, 1, &dv));
    ASSERT_NEAR(dv, -8.0, 0);
    k = gguf_find_key(g, "a.bool");
    ASSERT_OK(gguf_arr_int(g, k, 1, &iv));
    ASSERT_EQ(iv, 1);
    ASSERT_EQ(gguf_kv_len(g, gguf_find_key(g, "a.empty")), 0);
    k = gguf_find_key(g, "a.str");
    ASSERT_OK(gguf_arr_str(g, k, 0, &s, &len));
    ASSERT_EQ(len, 0);
    ASSERT_OK(gguf_arr_str(g, k, 2, &s, &len));
    ASSERT_EQ(len, 6);
    ASSERT(memcmp(s, "\xe2\x96\x81the", 6) == 0);
    ASSERT_EQ(gguf_arr_int(g, k, 0, &iv), QG_ERR_DATA);

    ASSERT_EQ(gguf_n_tensors(g), 5);
    const struct gguf_tensor *t = gguf_find_tensor(g, "f32");
    ASSERT(t && t->type == GGML_F32 && t->n_dims == 2 && t->ne[0] == 8 && t->ne[1] == 2);
    ASSERT_EQ(t->nbytes, 64);
    ASSERT(memcmp(t->data, f, 64) == 0);
    t = gguf_find_tensor(g, "q8");
    ASSERT(t && t->nbytes == 68 && memcmp(t->data, q8, 68) == 0);
    t = gguf_find_tensor(g, "three_d");
    ASSERT(t && t->n_dims == 3 && t->ne[2] == 2 && gguf_tensor_nelements(t) == 16);
    t = gguf_find_tensor(g, "q4k");
    ASSERT(t && t->nbytes == 144 && memcmp(t->data, qk, 144) == 0);
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const struct gguf_tensor *ti = gguf_tensor_at(g, i);
        ASSERT_EQ(ti->offset % 32, 0);
        ASSERT_EQ(((gguf_data_offset(g) + ti->offset) % 32), 0);
    }
    ASSERT(gguf_find_tensor(g, "nope") == NULL);
    gguf_close(g);
    return 0;
}

TEST(gguf_v2_and_alignment, unit)
{
    struct gguf_writer *w = gguf_writer_new();
    ASSERT_OK(gguf_writer_set_u32(w, "general.alignment", 64));
    float f[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t ne[1] = {8};
    ASSERT_OK(gguf_writer_add_tensor(w, "a", GGML_F32, 1, ne, f));
    ASSERT_OK(gguf_writer_add_tensor(w, "b", GGML_F32, 1, ne, f));
    uint8_t *buf;
    size_t n;
    ASSERT_OK(gguf_writer_to_memory(w, &buf, &n));
    gguf_writer_free(w);
    buf[4] = 2; /* v2 has the same layout */
    struct gguf *g;
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(gguf_open_memory(buf, n, "v2.gguf", &g, err, sizeof err));
    ASSERT_EQ(gguf_version(g), 2);
    ASSERT_EQ(gguf_alignment(g), 64);
    ASSERT_EQ(gguf_data_offset(g) % 64, 0);
    ASSERT_EQ(gguf_find_tensor(g, "b")->offset, 64);
    ASSERT(memcmp(gguf_find_tensor(g, "b")->data, f, 32) == 0);
    gguf_close(g);
    free(buf);
    return 0;
}

TEST(gguf_vocab_only, e2e)
{
    struct gguf_writer *w = gguf_writer_new();
    const char *toks[4] = {"<unk>", "<s>", "</s>", "a"};
    ASSERT_OK(gguf_writer_set_str(w, "general.architecture", "llama"));
    ASSERT_OK(gguf_writer_set_str(w, "tokenizer.ggml.model", "llama"));
    ASSERT_OK(gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 4));
    const char *path = t_path("vocab.gguf");
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(gguf_writer_write(w, path, err, sizeof err));
    gguf_writer_free(w);
    struct gguf *g;
    ASSERT_OK(gguf_open(path, &g, err, sizeof err));
    struct model_info m;
    model_info_read(g, &m);
    ASSERT(m.vocab_only);
    ASSERT_EQ(m.n_vocab, 4);
    ASSERT_EQ(m.n_params, 0);
    ASSERT_STR_EQ(m.tok_model, "llama");
    gguf_close(g);
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "inspect", path, NULL));
    ASSERT_EQ(o.code, 0);
    ASSERT_CONTAINS(o.out, "vocabulary-only");
    t_out_free(&o);
    return 0;
}

TEST(gguf_synth_models, unit)
{
    static const uint32_t types[] = {GGML_F32, GGML_F16, GGML_Q8_0};
    for (int arch = 0; arch < 2; arch++)
        for (int ti = 0; ti < 3; ti++) {
            struct synth_params p = synth_default_params();
            p.arch = arch ? "qwen2" : "llama";
            p.wtype = types[ti];
            p.tied_output = arch; /* qwen2 variant without output.weight */
            char err[QG_ERRMSG_MAX];
            const char *path = t_path("m.gguf");
            ASSERT_OK(synth_write(&p, path, err, sizeof err));
            struct gguf *g;
            ASSERT_OK(gguf_open(path, &g, err, sizeof err));
            struct model_info m;
            model_info_read(g, &m);
            ASSERT_STR_EQ(m.arch, p.arch);
            ASSERT_EQ(m.dim, 64);
            ASSERT_EQ(m.n_layers, 2);
            ASSERT_EQ(m.n_heads, 4);
            ASSERT_EQ(m.n_kv_heads, 2);
            ASSERT_EQ(m.ffn, 96);
            ASSERT_EQ(m.ctx, 128);
            ASSERT_EQ(m.n_vocab, 320);
            ASSERT_EQ(m.rope_dims, 16);
            ASSERT_NEAR(m.rms_eps, 1e-5, 1e-12);
            int per_layer = 9 + (arch ? 3 : 0);
            ASSERT_EQ(m.n_tensors, 1 + 2 * per_layer + 1 + (arch ? 0 : 1));
            const struct gguf_tensor *q = gguf_find_tensor(g, "blk.1.attn_k.weight");
            ASSERT(q && q->type == types[ti] && q->ne[0] == 64 && q->ne[1] == 32);
            const struct gguf_tensor *d = gguf_find_tensor(g, "blk.0.ffn_down.weight");
            ASSERT(d && d->ne[0] == 96 && d->ne[1] == 64);
            ASSERT(gguf_find_tensor(g, "blk.0.attn_norm.weight")->type == GGML_F32);
            ASSERT_EQ(gguf_find_tensor(g, "output.weight") != NULL, !arch);
            ASSERT_EQ(gguf_find_tensor(g, "blk.0.attn_q.bias") != NULL, arch);
            int64_t bos;
            ASSERT_OK(gguf_get_int(g, "tokenizer.ggml.bos_token_id", &bos));
            ASSERT_EQ(bos, 1);
            gguf_close(g);
        }
    struct synth_params bad = synth_default_params();
    bad.dim = 48; /* not a multiple of 32: no Q8_0 */
    bad.wtype = GGML_Q8_0;
    char err[QG_ERRMSG_MAX];
    ASSERT_EQ(synth_write(&bad, t_path("bad.gguf"), err, sizeof err), QG_ERR_USAGE);
    ASSERT_CONTAINS(err, "multiples of 32");
    return 0;
}

TEST(gguf_synth_deterministic, unit)
{
    struct synth_params p = synth_default_params();
    char err[QG_ERRMSG_MAX], h1[65], h2[65], h3[65];
    ASSERT_OK(synth_write(&p, t_path("a.gguf"), err, sizeof err));
    ASSERT_OK(synth_write(&p, t_path("b.gguf"), err, sizeof err));
    p.seed = 2;
    ASSERT_OK(synth_write(&p, t_path("c.gguf"), err, sizeof err));
    ASSERT_OK(hash_sha256_file(t_path("a.gguf"), h1, err, sizeof err));
    ASSERT_OK(hash_sha256_file(t_path("b.gguf"), h2, err, sizeof err));
    ASSERT_OK(hash_sha256_file(t_path("c.gguf"), h3, err, sizeof err));
    ASSERT_STR_EQ(h1, h2);
    ASSERT(strcmp(h1, h3) != 0);
    return 0;
}

TEST(gguf_bad_files_api, unit)
{
    struct bb b = {0};
    gguf_case_valid(&b);
    struct gguf *g;
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(open_bytes(&b, &g, err)); /* the base of the cases is valid */
    gguf_close(g);
    bb_free(&b);
    for (int i = 0; i < gguf_n_bad_cases; i++) {
        gguf_bad_cases[i].build(&b);
        err[0] = '\0';
        int rc = open_bytes(&b, &g, err);
        if (rc != QG_ERR_DATA || g != NULL || !strstr(err, gguf_bad_cases[i].expect) ||
            !strstr(err, "case.gguf"))
            T_FAIL_("case %s: rc %d, message \"%s\", expected QG_ERR_DATA and \"%s\"",
                    gguf_bad_cases[i].name, rc, err, gguf_bad_cases[i].expect);
        bb_free(&b);
    }
    printf("%d malformed cases refused with the expected message\n", gguf_n_bad_cases);
    return 0;
}

TEST(gguf_bad_files_cli, e2e)
{
    for (int i = 0; i < gguf_n_bad_cases; i++) {
        struct bb b = {0};
        gguf_bad_cases[i].build(&b);
        char name[128];
        snprintf(name, sizeof name, "%s.gguf", gguf_bad_cases[i].name);
        const char *path = t_path(name);
        ASSERT_OK(t_write_file(path, b.p ? (void *)b.p : "", b.n));
        bb_free(&b);
        struct t_out o;
        ASSERT_OK(t_qgate(&o, "inspect", path, NULL));
        if (o.code != 65 || !strstr(o.err, gguf_bad_cases[i].expect) || !strstr(o.err, path))
            T_FAIL_("case %s: exit %d, stderr \"%s\"", gguf_bad_cases[i].name, o.code, o.err);
        t_out_free(&o);
    }
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "inspect", t_path("does-not-exist.gguf"), NULL));
    ASSERT_EQ(o.code, 66);
    ASSERT_CONTAINS(o.err, "No such file");
    t_out_free(&o);
    ASSERT_OK(t_qgate(&o, "inspect", t_tmp(), NULL));
    ASSERT_EQ(o.code, 66);
    ASSERT_CONTAINS(o.err, "a directory without config.json");
    t_out_free(&o);
    return 0;
}

TEST(gguf_every_truncation, unit)
{
    /* Every prefix of a valid synthetic model must be refused cleanly. */
    struct synth_params p = synth_default_params();
    p.dim = 32, p.ffn = 32, p.n_layers = 1, p.n_vocab = 260;
    char err[QG_ERRMSG_MAX];
    const char *path = t_path("small.gguf");
    ASSERT_OK(synth_write(&p, path, err, sizeof err));
    size_t n;
    char *full = t_read_file(path, &n);
    ASSERT(full);
    int refused = 0;
    for (size_t len = 0; len < n; len += (len < 8192 ? 1 : 61)) {
        unsigned char *copy = malloc(len ? len : 1); /* exact size: ASan sees overreads */
        memcpy(copy, full, len);
        struct gguf *g;
        int rc = gguf_open_memory(copy, len, "prefix", &g, err, sizeof err);
        if (rc != QG_ERR_DATA) T_FAIL_("prefix of %zu/%zu bytes: rc %d", len, n, rc);
        refused++;
        free(copy);
    }
    struct gguf *g;
    ASSERT_OK(gguf_open_memory(full, n, "full", &g, err, sizeof err));
    gguf_close(g);
    printf("%d truncations of a %zu-byte model refused\n", refused, n);
    free(full);
    return 0;
}

TEST(gguf_shared_models, shared)
{
    const char *dirs[] = {"models/stories260K/gguf", "models/stories260K-pad256",
                          "models/llamacpp-vocab"};
    if (!t_shared("models")) SKIP("../shared/models is absent");
    int n = 0;
    for (int d = 0; d < 3; d++) {
        const char *dir = t_shared(dirs[d]);
        if (!dir) continue;
        char dpath[4096];
        snprintf(dpath, sizeof dpath, "%s", dir);
        DIR *dh = opendir(dpath);
        ASSERT(dh);
        struct dirent *e;
        while ((e = readdir(dh))) {
            size_t l = strlen(e->d_name);
            if (l < 5 || strcmp(e->d_name + l - 5, ".gguf") != 0) continue;
            char path[8192], err[QG_ERRMSG_MAX];
            snprintf(path, sizeof path, "%s/%s", dpath, e->d_name);
            struct gguf *g;
            int rc = gguf_open(path, &g, err, sizeof err);
            if (rc) T_FAIL_("%s: %s", path, err);
            struct model_info m;
            model_info_read(g, &m);
            if (d < 2) {
                ASSERT_STR_EQ(m.arch, "llama");
                ASSERT_EQ(m.n_layers, 5);
                ASSERT_EQ(m.ctx, 128);
                ASSERT_EQ(m.n_vocab, 512);
                ASSERT_EQ(m.n_tensors, 48);
                ASSERT_EQ(m.n_params, d == 0 ? 292800 : 2231040);
                for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
                    const struct gguf_tensor *t = gguf_tensor_at(g, i);
                    ASSERT(t->data != NULL);
                }
            } else {
                ASSERT(m.vocab_only);
                ASSERT(m.n_vocab > 30000);
            }
            gguf_close(g);
            n++;
        }
        closedir(dh);
    }
    ASSERT(n >= 20);
    printf("%d shared GGUF files read\n", n);
    return 0;
}

TEST(inspect_q4_k_m_stored_types, shared)
{
    const char *path = t_shared("models/stories260K/gguf/stories260K-Q4_K_M.gguf");
    if (!path) SKIP("../shared/models/stories260K/gguf/stories260K-Q4_K_M.gguf is absent");
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "inspect", "--json", path, NULL));
    ASSERT_EQ(o.code, 0);
    cJSON *j = cJSON_Parse(o.out);
    ASSERT(j);
    ASSERT_STR_EQ(cJSON_GetObjectItem(j, "sha256")->valuestring,
                  "f9500f922559e6021d25d2dd94256af6616aa6eea93581074a1a02df2da1a871");
    ASSERT_STR_EQ(cJSON_GetObjectItem(j, "file_type")->valuestring, "Q4_K_M");
    /* SOURCES.md: Q5_0 x29 (q,k,o,gate,up x5, token_embd, attn_v x3), Q8_0 x3
     * (attn_v x2, output), F16 x5 (ffn_down), F32 x11 (norms); no K-quants. */
    const char *want[][2] = {{"Q5_0", "29"}, {"F16", "5"}, {"Q8_0", "3"}, {"F32", "11"}};
    cJSON *types = cJSON_GetObjectItem(j, "tensor_types");
    ASSERT_EQ(cJSON_GetArraySize(types), 4);
    for (int i = 0; i < 4; i++) {
        cJSON *t = cJSON_GetArrayItem(types, i);
        ASSERT_STR_EQ(cJSON_GetObjectItem(t, "type")->valuestring, want[i][0]);
        ASSERT_EQ(cJSON_GetObjectItem(t, "count")->valuedouble, strtod(want[i][1], NULL));
    }
    ASSERT_EQ(cJSON_GetObjectItem(j, "embedding_length")->valuedouble, 64);
    ASSERT_EQ(cJSON_GetObjectItem(j, "feed_forward_length")->valuedouble, 172);
    ASSERT_EQ(cJSON_GetObjectItem(j, "head_count")->valuedouble, 8);
    ASSERT_EQ(cJSON_GetObjectItem(j, "head_count_kv")->valuedouble, 4);
    ASSERT_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "tokenizer"), "vocab_size")->valuedouble,
              512);
    cJSON_Delete(j);
    t_out_free(&o);
    ASSERT_OK(t_qgate(&o, "inspect", path, NULL));
    ASSERT_EQ(o.code, 0);
    ASSERT_CONTAINS(o.out, "note: file type says Q4_K_M, but no tensor is stored as Q4_K");
    const char *table = strstr(o.out, "stored tensor types:");
    ASSERT(table);
    ASSERT(!strstr(table, "_K")); /* no K-quant block in the table */
    t_out_free(&o);
    return 0;
}

TEST(inspect_json_synth, e2e)
{
    struct synth_params p = synth_default_params();
    p.wtype = GGML_Q8_0;
    char err[QG_ERRMSG_MAX], sha[65];
    const char *path = t_path("q8.gguf");
    ASSERT_OK(synth_write(&p, path, err, sizeof err));
    ASSERT_OK(hash_sha256_file(path, sha, err, sizeof err));
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "inspect", "--json", "--tensors", "--metadata", path, NULL));
    ASSERT_EQ(o.code, 0);
    cJSON *j = cJSON_Parse(o.out);
    ASSERT(j);
    ASSERT_STR_EQ(cJSON_GetObjectItem(j, "sha256")->valuestring, sha);
    ASSERT_STR_EQ(cJSON_GetObjectItem(j, "file_type")->valuestring, "Q8_0");
    /* params: embd 64*320 + out 64*320 + norm 64 + 2 layers x (q 64*64, k,v 64*32, o 64*64,
     * gate/up 64*96, down 96*64, 2 norms x64) */
    long long per_layer = 64 * 64 * 2 + 64 * 32 * 2 + 64 * 96 * 3 + 128;
    ASSERT_EQ(cJSON_GetObjectItem(j, "parameters")->valuedouble, 2 * 64 * 320 + 64 + 2 * per_layer);
    ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(j, "tensors")), 21);
    ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "metadata"), "general.architecture")
                      ->valuestring,
                  "\"llama\"");
    cJSON_Delete(j);
    t_out_free(&o);
    return 0;
}

TEST(quant_f16_q8_0, unit)
{
    /* fp16: exact values, rounding to nearest even, overflow, subnormals */
    ASSERT_EQ(quant_f32_to_f16(1.0f), 0x3C00);
    ASSERT_EQ(quant_f32_to_f16(-2.0f), 0xC000);
    ASSERT_EQ(quant_f32_to_f16(65504.0f), 0x7BFF);
    ASSERT_EQ(quant_f32_to_f16(1e6f), 0x7C00);              /* +inf */
    ASSERT_EQ(quant_f32_to_f16(1.0f + 0x1.0p-11f), 0x3C00); /* tie -> even */
    ASSERT_EQ(quant_f32_to_f16(1.0f + 0x1.8p-11f), 0x3C01);
    ASSERT_EQ(quant_f32_to_f16(0x1.0p-24f), 0x0001); /* smallest subnormal */
    ASSERT_NEAR(quant_f16_to_f32(0x3555), 0.333251953125, 0);
    ASSERT_NEAR(quant_f16_to_f32(0x0001), 0x1.0p-24, 0);
    for (uint32_t h = 0; h < 0x7C00; h++) /* every finite half round-trips */
        if (quant_f32_to_f16(quant_f16_to_f32((uint16_t)h)) != h) T_FAIL_("half %#x", h);
    /* Q8_0: d = max|x|/127 stored as f16, q = round(x/d) */
    float x[32];
    for (int i = 0; i < 32; i++)
        x[i] = (float)(i - 16) / 4.0f; /* max |x| = 4 */
    uint8_t blk[34];
    quant_row_q8_0(x, blk, 32);
    uint16_t dh;
    memcpy(&dh, blk, 2);
    ASSERT_EQ(dh, quant_f32_to_f16(4.0f / 127.0f));
    ASSERT_EQ((int8_t)blk[2], -127);   /* x[0] = -4 */
    ASSERT_EQ((int8_t)blk[2 + 16], 0); /* x[16] = 0 */
    ASSERT_EQ((int8_t)blk[2 + 17], 8); /* 0.25 / (4/127) = 7.94 -> 8 */
    return 0;
}

/* the rounding of a whole row (F16C where the CPU has it) equals the
 * scalar round trip on a sweep of every 251st f32 bit pattern: all
 * exponents, subnormals, ties, overflow to infinity, NaN */
TEST(quant_round_f16_row, unit)
{
    enum { N = 4096 };
    static float x[N], want[N];
    uint64_t u = 0;
    printf("fp16 rounding of rows: %s\n", quant_has_f16c() ? "F16C" : "portable");
    while (u <= 0xffffffffu) {
        int n = 0;
        for (; n < N - 3 && u <= 0xffffffffu; n++, u += 251) {
            uint32_t b = (uint32_t)u;
            memcpy(&x[n], &b, 4);
        }
        x[n++] = 1.0f + 0x1.0p-11f; /* ties: to even */
        x[n++] = 1.0f + 0x1.8p-11f;
        x[n++] = 65520.0f; /* rounds up to infinity */
        for (int i = 0; i < n; i++)
            want[i] = quant_f16_to_f32(quant_f32_to_f16(x[i]));
        quant_round_f16(x, n);
        for (int i = 0; i < n; i++)
            if (!(x[i] == want[i] || (isnan(x[i]) && isnan(want[i]))) ||
                signbit(x[i]) != signbit(want[i]))
                T_FAIL_("element %d: %a, want %a", i, (double)x[i], (double)want[i]);
    }
    return 0;
}

TEST(quant_f16_gather_strided, unit)
{
    /* every fp16 value at strides 2 (packed), 3, 20 and 24 (Q4_1's and
     * Q5_1's block minima), n from 1 to 40, each buffer exactly n strides
     * long (under ASan a read past it fails); the vector path against the
     * scalar conversion, bit for bit */
    static const size_t strides[] = {2, 3, 20, 24};
    uint32_t h = 0;
    for (size_t s = 0; s < sizeof strides / sizeof *strides; s++)
        for (int64_t n = 1; n <= 40; n++) {
            size_t len = (size_t)n * strides[s];
            uint8_t *buf = malloc(len);
            float y[40];
            for (size_t i = 0; i < len; i++)
                buf[i] = (uint8_t)(h++ * 2654435761u >> 13);
            quant_f16_gather(buf, strides[s], n, y);
            for (int64_t i = 0; i < n; i++) {
                const uint8_t *p = buf + (size_t)i * strides[s];
                float want = quant_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
                if (memcmp(&want, &y[i], 4))
                    T_FAIL_("stride %zu, n %lld, element %lld: %a, want %a", strides[s],
                            (long long)n, (long long)i, (double)y[i], (double)want);
            }
            free(buf);
        }
    return 0;
}

TEST(hash_sha256, shared)
{
    char hex[65], err[QG_ERRMSG_MAX];
    ASSERT_OK(hash_sha256_mem("abc", 3, hex));
    ASSERT_STR_EQ(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    ASSERT_OK(hash_sha256_mem("", 0, hex));
    ASSERT_STR_EQ(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    ASSERT_OK(t_write_file(t_path("abc"), "abc", 3));
    ASSERT_OK(hash_sha256_file(t_path("abc"), hex, err, sizeof err));
    ASSERT_STR_EQ(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    ASSERT_EQ(hash_sha256_file(t_path("nope"), hex, err, sizeof err), QG_ERR_NOINPUT);
    const char *f32 = t_shared("models/stories260K/gguf/stories260K-F32.gguf");
    if (f32) {
        ASSERT_OK(hash_sha256_file(f32, hex, err, sizeof err));
        ASSERT_STR_EQ(hex, "047bf46455a544931cff6fef14d7910154c56afbc23ab1c5e56a72e69912c04b");
    }
    return 0;
}
