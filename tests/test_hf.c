/* test_hf — Hugging Face checkpoint directories: the safetensors reader on
 * damaged files, ../shared's hf-stories260K checkpoints (f32/bf16 against the
 * GGUF, every quantized format, shards, gate), and refusals by name. */
#include "backends/ggml_types.h"
#include "backends/gguf.h"
#include "backends/hf_model.h"
#include "backends/safetensors.h"
#include "datasets/hash.h"
#include "core/status.h"
#include "core/util.h"
#include "tests/test.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* a safetensors image: 8-byte length, header, data */
static size_t st_image(uint8_t *buf, size_t cap, const char *header, const void *data, size_t dn)
{
    size_t hl = strlen(header);
    if (8 + hl + dn > cap) return 0;
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, header, hl);
    if (dn) memcpy(buf + 8 + hl, data, dn);
    return 8 + hl + dn;
}

TEST(hf_safetensors_reader, unit)
{
    static const struct {
        const char *header;
        size_t data;
        const char *expect; /* NULL: accepted */
    } cases[] = {
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},\"__metadata__\":{}}",
         16, NULL},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 12,
         "data_offsets outside the file's 12 data bytes"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,16]}}", 16,
         "16 bytes for 3 F32 values (12 expected)"},
        {"{\"a\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2,
         "has dtype 'Q4', which qgate does not read"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,1]}}", 1,
         "has 5 dimensions"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", 1, "bad shape"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,0]}}", 2, "data_offsets"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[2]}}", 2, "needs dtype, shape and data_offsets"},
        {"[1,2]", 0, "the header is not a JSON object"},
        {"{\"a\":", 0, "the header is not a JSON object"},
    };
    uint8_t buf[1024], data[64] = {0};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t n = st_image(buf, sizeof buf, cases[i].header, data, cases[i].data);
        ASSERT(n > 0);
        struct st_file *f = NULL;
        char err[QG_ERRMSG_MAX] = "";
        int rc = st_open_memory(buf, n, "t.safetensors", &f, err, sizeof err);
        if (!cases[i].expect) {
            ASSERT_OK(rc);
            ASSERT_EQ(st_n_tensors(f), 1);
            ASSERT_EQ(st_find(f, "a")->numel, 4);
        } else {
            ASSERT_EQ(rc, QG_ERR_DATA);
            ASSERT_CONTAINS(err, "t.safetensors");
            if (!strstr(err, cases[i].expect)) T_FAIL_("case %zu: %s", i, err);
        }
        st_close(f);
    }
    /* a header length past the end, and a file shorter than its length field */
    buf[0] = 0xFF, buf[7] = 0x7F;
    struct st_file *f;
    char err[QG_ERRMSG_MAX];
    ASSERT_EQ(st_open_memory(buf, 64, "x", &f, err, sizeof err), QG_ERR_DATA);
    ASSERT_CONTAINS(err, "exceeds the file");
    ASSERT_EQ(st_open_memory(buf, 5, "x", &f, err, sizeof err), QG_ERR_DATA);
    ASSERT_CONTAINS(err, "shorter than 8 bytes");
    return 0;
}

static double ppl_json(const char *model, const char *text, const char *chunks)
{
    struct t_out o;
    if (t_qgate(&o, "ppl", model, "--text", text, "--ctx", "128", "--chunks", chunks, "--threads",
                "2", "--json", NULL))
        return -1;
    double v = -2;
    cJSON *j = o.code == 0 ? cJSON_Parse(o.out) : NULL;
    if (j) v = cJSON_GetObjectItem(j, "ppl")->valuedouble;
    if (!j) fprintf(stderr, "%s: exit %d: %s\n", model, o.code, o.err);
    cJSON_Delete(j);
    t_out_free(&o);
    return v;
}

/* every checkpoint of hf-stories260K runs; f32 and bf16 are the GGUF's
 * model (bf16 rounded), each quantized one costs PPL */
TEST(hf_checkpoints_run, shared)
{
    const char *d = t_shared("models/hf-stories260K"),
               *tx = t_shared("data/tinystories_valid_head.txt");
    if (!d || !tx) SKIP("../shared/models/hf-stories260K or the TinyStories text is absent");
    char dir[4096], text[4096], gguf[4200];
    snprintf(dir, sizeof dir, "%s", d);
    snprintf(text, sizeof text, "%s", tx);
    snprintf(gguf, sizeof gguf, "%s", t_shared("models/stories260K/gguf/stories260K-F32.gguf"));
    double ref = ppl_json(gguf, text, "100");
    static const char *const dirs[] = {"f32",           "bf16",         "fp8-dynamic",
                                       "gptq-int4-g32", "awq-int4-g32", "nvfp4"};
    double v[6];
    for (int i = 0; i < 6; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, dirs[i]);
        v[i] = ppl_json(p, text, "100");
        printf("%-14s PPL %.8f (GGUF F32 %.8f, %+.4f %%)\n", dirs[i], v[i], ref,
               100 * (v[i] / ref - 1));
        ASSERT(v[i] > 0);
    }
    ASSERT(fabs(v[0] / ref - 1) < 1e-6); /* the same weights: only the RoPE pairing differs */
    ASSERT(fabs(v[1] / ref - 1) < 1e-3 && v[1] != v[0]); /* bf16-rounded weights */
    for (int i = 2; i < 6; i++)
        ASSERT(v[i] > v[1]); /* RTN-quantized weights cost something */
    return 0;
}

/* writes tensors [from, to) of f (skipping `drop`) as a safetensors file */
static int write_shard(const struct st_file *f, int64_t from, int64_t to, const char *drop,
                       const char *path)
{
    cJSON *h = cJSON_CreateObject();
    size_t off = 0;
    static const char *const dt[] = {"F32", "F16", "BF16", "F8_E4M3", "I32", "U8",   "I8",
                                     "I64", "F64", "U32",  "I16",     "U16", "BOOL", "F8_E5M2"};
    for (int64_t i = from; i < to; i++) {
        const struct st_tensor *t = st_tensor_at(f, i);
        if (drop && !strcmp(t->name, drop)) continue;
        cJSON *e = cJSON_AddObjectToObject(h, t->name), *sh = cJSON_AddArrayToObject(e, "shape"),
              *of = cJSON_AddArrayToObject(e, "data_offsets");
        cJSON_AddStringToObject(e, "dtype", dt[t->dtype]);
        for (int d = 0; d < t->n_dims; d++)
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->shape[d]));
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)(off + t->nbytes)));
        off += t->nbytes;
    }
    char *hs = cJSON_PrintUnformatted(h);
    size_t hl = strlen(hs), pad = (8 - hl % 8) % 8, total = 8 + hl + pad + off;
    uint8_t *img = malloc(total);
    for (int i = 0; i < 8; i++)
        img[i] = (uint8_t)((uint64_t)(hl + pad) >> (8 * i));
    memcpy(img + 8, hs, hl);
    memset(img + 8 + hl, ' ', pad);
    size_t o = 8 + hl + pad;
    for (int64_t i = from; i < to; i++) {
        const struct st_tensor *t = st_tensor_at(f, i);
        if (drop && !strcmp(t->name, drop)) continue;
        memcpy(img + o, t->data, t->nbytes);
        o += t->nbytes;
    }
    int rc = t_write_file(path, (const char *)img, total);
    free(img);
    free(hs);
    cJSON_Delete(h);
    return rc;
}

/* a copy of src's JSON files in dst (config.json edited by edit_config) */
static int copy_dir(const char *src, const char *dst, const char *config_from,
                    const char *config_to)
{
    static const char *const files[] = {"config.json", "tokenizer.json", "tokenizer_config.json"};
    mkdir(dst, 0755);
    for (int i = 0; i < 3; i++) {
        char a[4400], b[4400];
        snprintf(a, sizeof a, "%s/%s", src, files[i]);
        snprintf(b, sizeof b, "%s/%s", dst, files[i]);
        size_t n;
        char *s = t_read_file(a, &n);
        if (!s) return -1;
        if (i == 0 && config_from) { /* one textual replacement */
            char *at = strstr(s, config_from);
            if (!at) return -1;
            size_t pre = (size_t)(at - s), fl = strlen(config_from), tl = strlen(config_to);
            char *e = malloc(n - fl + tl + 1);
            memcpy(e, s, pre);
            memcpy(e + pre, config_to, tl);
            memcpy(e + pre + tl, at + fl, n - pre - fl + 1);
            free(s);
            s = e, n = n - fl + tl;
        }
        if (t_write_file(b, s, n)) return -1;
        free(s);
    }
    return 0;
}

/* two shards with their index load as the single file does */
TEST(hf_sharded_checkpoint, shared)
{
    const char *d = t_shared("models/hf-stories260K/f32"),
               *tx = t_shared("data/tinystories_valid_head.txt");
    if (!d || !tx) SKIP("../shared/models/hf-stories260K is absent");
    char src[4096], text[4096], path[4400];
    snprintf(src, sizeof src, "%s", d);
    snprintf(text, sizeof text, "%s", tx);
    const char *dst = t_path("sharded");
    ASSERT_OK(copy_dir(src, dst, NULL, NULL));
    snprintf(path, sizeof path, "%s/model.safetensors", src);
    struct st_file *f;
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(st_open(path, &f, err, sizeof err));
    int64_t n = st_n_tensors(f), half = n / 2;
    char a[4400], b[4400];
    snprintf(a, sizeof a, "%s/model-00001-of-00002.safetensors", dst);
    snprintf(b, sizeof b, "%s/model-00002-of-00002.safetensors", dst);
    ASSERT_OK(write_shard(f, 0, half, NULL, a));
    ASSERT_OK(write_shard(f, half, n, NULL, b));
    cJSON *idx = cJSON_CreateObject(), *map = cJSON_AddObjectToObject(idx, "weight_map");
    for (int64_t i = 0; i < n; i++)
        cJSON_AddStringToObject(map, st_tensor_at(f, i)->name,
                                i < half ? "model-00001-of-00002.safetensors"
                                         : "model-00002-of-00002.safetensors");
    char *js = cJSON_Print(idx);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dst);
    ASSERT_OK(t_write_file(path, js, strlen(js)));
    free(js);
    cJSON_Delete(idx);
    st_close(f);
    double one = ppl_json(src, text, "40"), two = ppl_json(dst, text, "40");
    printf("one file %.10f, two shards %.10f\n", one, two);
    ASSERT(one > 0 && one == two);
    return 0;
}

/* what qgate does not implement is refused by name, exit 65 */
TEST(hf_refusals, shared)
{
    const char *d = t_shared("models/hf-stories260K/f32");
    if (!d) SKIP("../shared/models/hf-stories260K is absent");
    char src[4096], st[4400];
    snprintf(src, sizeof src, "%s", d);
    snprintf(st, sizeof st, "%s/model.safetensors", src);
    static const struct {
        const char *from, *to, *drop, *expect;
    } cases[] = {
        {"\"rms_norm_eps\"",
         "\"quantization_config\": {\"quant_method\": \"bitsandbytes\"}, "
         "\"rms_norm_eps\"",
         NULL, "quant_method 'bitsandbytes' is not supported"},
        {"LlamaForCausalLM", "Gemma2ForCausalLM", NULL,
         "architecture 'Gemma2ForCausalLM' is not supported in a checkpoint directory"},
        {"\"rope_scaling\": null", "\"rope_scaling\": {\"rope_type\": \"llama3\"}", NULL,
         "rope_scaling is set"},
        {NULL, NULL, "model.layers.2.mlp.up_proj.weight",
         "tensor 'model.layers.2.mlp.up_proj.weight' is missing"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char dst[4200], out[4400];
        snprintf(dst, sizeof dst, "%s", t_path("bad"));
        char cmd[4400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dst);
        ASSERT_EQ(system(cmd), 0);
        ASSERT_OK(copy_dir(src, dst, cases[i].from, cases[i].to));
        struct st_file *f;
        char err[QG_ERRMSG_MAX];
        ASSERT_OK(st_open(st, &f, err, sizeof err));
        snprintf(out, sizeof out, "%s/model.safetensors", dst);
        ASSERT_OK(write_shard(f, 0, st_n_tensors(f), cases[i].drop, out));
        st_close(f);
        struct t_out o;
        ASSERT_OK(t_qgate(&o, "ppl", dst, "--text", out, NULL));
        if (o.code != 65 || !strstr(o.err, cases[i].expect) || !strstr(o.err, "bad"))
            T_FAIL_("case %zu: exit %d: %s", i, o.code, o.err);
        t_out_free(&o);
    }
    return 0;
}

/* gate judges a quantized checkpoint against the f32 one */
TEST(hf_gate_judges_quantized, shared)
{
    const char *d = t_shared("models/hf-stories260K");
    if (!d || !t_shared("data/tinystories_valid_head.txt")) SKIP("../shared is absent");
    char base[4200], cand[4200], data[4200];
    snprintf(base, sizeof base, "%s/f32", d);
    snprintf(cand, sizeof cand, "%s/fp8-dynamic", d);
    snprintf(data, sizeof data, "%s", t_shared("data"));
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "gate", base, cand, "--tasks", "tinystories", "--data", data, "--ctx",
                      "128", "--limit", "60", "--db", t_path("g.db"), "--json", t_path("g.json"),
                      NULL));
    printf("%s", o.out);
    if (o.code > 2) T_FAIL_("exit %d: %s", o.code, o.err);
    ASSERT_CONTAINS(o.out, "fp8-dynamic");
    t_out_free(&o);
    char *j = t_read_file(t_path("g.json"), NULL);
    ASSERT(j && strstr(j, "\"kld\""));
    free(j);
    /* the stored identity hashes the directory's files */
    ASSERT_EQ(t_sql_int(t_path("g.db"), "SELECT count(*) FROM models WHERE length(sha256) = 64"),
              2);
    return 0;
}

/* inspect names the checkpoint, its quantization and its stored size */
TEST(hf_inspect_directory, shared)
{
    const char *d = t_shared("models/hf-stories260K/gptq-int4-g32");
    if (!d) SKIP("../shared/models/hf-stories260K is absent");
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", d);
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "inspect", dir, NULL));
    ASSERT_EQ(o.code, 0);
    ASSERT_CONTAINS(o.out, "checkpoint     Hugging Face directory, 1 safetensors file");
    ASSERT_CONTAINS(o.out, "quantization   GPTQ int4, group 32 (projections, dequantized");
    ASSERT_CONTAINS(o.out, "architecture   llama");
    ASSERT_CONTAINS(o.out, "tokenizer      llama, 512 tokens (bos 1, eos 2)");
    t_out_free(&o);
    return 0;
}

/* sweep simulates formats on a directory baseline */
TEST(hf_sweep_directory_baseline, shared)
{
    const char *d = t_shared("models/hf-stories260K/bf16");
    if (!d) SKIP("../shared/models/hf-stories260K is absent");
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", d);
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "sweep", dir, "--formats", "int8", "--no-scan", "--sample-tokens", "3000",
                      "--db", t_path("s.db"), "-q", NULL));
    printf("%s", o.out);
    if (o.code != 0) T_FAIL_("exit %d: %s", o.code, o.err);
    ASSERT_CONTAINS(o.out, "int8:channel W+A+KV");
    t_out_free(&o);
    return 0;
}

/* Each dequantization is bit-exact to the library's: sha256 of the f32
 * bytes of layer 0's q_proj and down_proj as the libraries dequantize them
 * (see docs/hf.md for the versions; fp8 and nvfp4 through compressed-tensors'
 * own decompression, GPTQ and AWQ by their packing code), converted
 * exactly from the checkpoint's dtype to f32. */
TEST(hf_dequantization_matches_libraries, shared)
{
    static const struct {
        const char *dir, *tensor, *sha;
    } refs[] = {
        {"fp8-dynamic", "blk.0.attn_q.weight",
         "2fb5c890f79260f3940a0c74f2f6a177ed5c352c7164cef34863c5325ec6bda6"},
        {"fp8-dynamic", "blk.0.ffn_down.weight",
         "1549d86648c21dc79da820b3a79b8635d6def386427633289c54a0ed1343b09d"},
        {"gptq-int4-g32", "blk.0.attn_q.weight",
         "9a3475675d65ac3f3b8127ddb18c7b0fed98766cbdc6b813ce57489540225f16"},
        {"gptq-int4-g32", "blk.0.ffn_down.weight",
         "a7656ac6bdb518f9f068876a7cba3b39914fc447444eb666c6a9d7ba1376ad29"},
        {"awq-int4-g32", "blk.0.attn_q.weight",
         "63b5bea981cb2c16aaec313717a36d49a6a47d78471a0db9eec1fad779bc6428"},
        {"awq-int4-g32", "blk.0.ffn_down.weight",
         "cc0b6e244b66e45f6b89f0415452bd3f79368691b96db1be95486a4364bc07ce"},
        {"nvfp4", "blk.0.attn_q.weight",
         "8c79d1a420391ba6b9cc5d32fb9b4eb357c38a077c9f14fed1aaab5a469a0557"},
        {"nvfp4", "blk.0.ffn_down.weight",
         "c87eecc8d9c7847a16d662039e3f7b7d562ffb7c836229b36a0b2f0b50319dc9"},
    };
    const char *d = t_shared("models/hf-stories260K");
    if (!d) SKIP("../shared/models/hf-stories260K is absent");
    char root[4096];
    snprintf(root, sizeof root, "%s", d);
    for (size_t i = 0; i < sizeof refs / sizeof *refs; i++) {
        char dir[4200], err[QG_ERRMSG_MAX], sha[65];
        snprintf(dir, sizeof dir, "%s/%s", root, refs[i].dir);
        struct gguf *g;
        ASSERT_OK(model_open(dir, &g, err, sizeof err));
        const struct gguf_tensor *t = gguf_find_tensor(g, refs[i].tensor);
        ASSERT(t && t->type == GGML_F32);
        ASSERT_OK(hash_sha256_mem(t->data, (size_t)t->nbytes, sha));
        printf("%-14s %-22s %s\n", refs[i].dir, refs[i].tensor, sha);
        ASSERT_STR_EQ(sha, refs[i].sha);
        gguf_close(g);
    }
    return 0;
}
