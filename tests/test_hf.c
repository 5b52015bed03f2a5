/* test_hf — Hugging Face checkpoint directories: the safetensors reader on
 * damaged files, ../shared's hf-stories260K checkpoints (f32/bf16 against the
 * GGUF, every quantized format, shards, gate), and refusals by name. */
#include "backends/dequant.h"
#include "backends/ggml_types.h"
#include "backends/gguf.h"
#include "backends/gguf_write.h"
#include "backends/hf_arch.h"
#include "backends/hf_model.h"
#include "backends/hf_tokenizer.h"
#include "backends/llama.h"
#include "backends/tokenizer.h"
#include "backends/quant.h"
#include "backends/safetensors.h"
#include "backends/simfmt.h"
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
    double ref = t_ppl(gguf, text, "100");
    static const char *const dirs[] = {"f32",           "bf16",         "fp8-dynamic",
                                       "gptq-int4-g32", "awq-int4-g32", "nvfp4"};
    double v[6];
    for (int i = 0; i < 6; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, dirs[i]);
        v[i] = t_ppl(p, text, "100");
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
    double one = t_ppl(src, text, "40"), two = t_ppl(dst, text, "40");
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
        {"LlamaForCausalLM", "DeepseekV3ForCausalLM", NULL,
         "architecture 'DeepseekV3ForCausalLM' is not supported in a checkpoint directory"},
        {"\"rope_scaling\": null", "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}",
         NULL, "RoPE scaling 'yarn' on LlamaForCausalLM is not implemented"},
        {"\"silu\"", "\"gelu\"", NULL, "hidden_act is set: not implemented"},
        {"\"mlp_bias\": false", "\"mlp_bias\": true", NULL, "mlp_bias is set"},
        {"\"hidden_size\": 64", "\"hidden_size\": 64.5", NULL, "must be whole numbers"},
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
 * (see docs/hf.md for the versions; fp8 as compressed-tensors dequantizes
 * in float32, nvfp4 through its bf16 decompression, GPTQ and AWQ through
 * GPTQModel's and AutoAWQ's kernels in fp16), converted exactly to f32. */
TEST(hf_dequantization_matches_libraries, shared)
{
    static const struct {
        const char *dir, *tensor, *sha;
    } refs[] = {
        {"fp8-dynamic", "blk.0.attn_q.weight",
         "3df213bfb86de7fc87f3e09fc3276d967f2cd35aedd06a51d5318a5f0de53c15"},
        {"fp8-dynamic", "blk.0.ffn_down.weight",
         "0946b83f554827d54c750e1e0665d6325adfde5713f49a83a4d3f26ff75d2a40"},
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
        ASSERT(t);
        int64_t n = gguf_tensor_nelements(t);
        float *f = malloc((size_t)n * sizeof *f); /* BF16/F16 when exact: as f32 */
        ASSERT_OK(dequant_row(t->type, t->data, f, n));
        ASSERT_OK(hash_sha256_mem(f, (size_t)n * 4, sha));
        free(f);
        printf("%-14s %-22s %-4s %s\n", refs[i].dir, refs[i].tensor, ggml_type_name(t->type), sha);
        ASSERT_STR_EQ(sha, refs[i].sha);
        gguf_close(g);
    }
    return 0;
}

/* Hugging Face transformers 5.25.0 (torch 2.15.0 CPU, float32 compute,
 * eager attention; the fp8-dynamic weights as compressed-tensors 0.20.1
 * dequantizes them in float32: fp8 x scale, activation quantization off) on the first 128 tokens of
 * tinystories_valid_head.txt as each directory's own tokenizer makes them
 * (BOS first): log p(id[i+1]) at positions 0..126. */
static const int32_t hf_ids[128] = {
    1,   301, 427, 309, 426, 301, 427, 309, 394, 265, 262, 415, 271, 422, 280, 295, 269, 336, 432,
    313, 448, 327, 432, 410, 462, 362, 422, 432, 364, 420, 280, 295, 410, 293, 384, 268, 325, 428,
    415, 413, 269, 280, 305, 303, 443, 436, 410, 462, 362, 422, 262, 423, 290, 266, 269, 410, 276,
    427, 421, 417, 266, 432, 313, 434, 415, 303, 433, 364, 432, 301, 427, 309, 426, 359, 282, 414,
    421, 293, 415, 312, 344, 363, 328, 426, 436, 13,  13,  447, 431, 413, 285, 337, 299, 335, 265,
    280, 295, 432, 410, 462, 362, 422, 269, 301, 427, 309, 272, 411, 421, 413, 308, 315, 356, 422,
    426, 342, 272, 277, 264, 261, 262, 423, 388, 282, 414, 264, 335, 280};
static const double hf_lp_f32[127] = {
    -6.02146149,     -3.84997082,     -0.522631824,    -3.88984776,     -1.66991472,
    -0.101506211,    -0.0291424971,   -5.90641546,     -4.59045839,     -2.11657619,
    -0.837903798,    -0.997859538,    -0.00348864705,  -2.52915573,     -2.14745331,
    -2.33793831,     -4.44777155,     -0.130974919,    -0.00693841139,  -2.55908227,
    -0.510798752,    -0.290323436,    -3.73048115,     -2.52524614,     -0.182966709,
    -0.0069392398,   -2.60736442,     -1.91018581,     -3.45697331,     -0.913309276,
    -0.081389159,    -0.56042856,     -0.0242397245,   -2.30226755,     -3.63517237,
    -2.05603456,     -0.0209065545,   -0.000316808117, -1.15632338e-05, -1.24667203,
    -2.69009066,     -4.07383299,     -0.353352368,    -1.98746645,     -0.155570954,
    -2.25182557,     -1.06679678,     -0.0026022878,   -0.00209814589,  -2.64802527,
    -0.163664132,    -0.000407970161, -0.000565607275, -0.189126104,    -4.63216257,
    -0.608581781,    -0.228997961,    -0.00512073375,  -0.000793261512, -4.74441731e-05,
    -0.00376195507,  -0.00240596547,  -2.2794776,      -0.0398851633,   -0.720959485,
    -0.000440500502, -0.0285841394,   -0.294559717,    -0.55002749,     -0.0262817517,
    -0.0536487326,   -0.972221494,    -1.02601266,     -5.84638262,     -4.10549307,
    -2.74101281,     -0.10890381,     -0.0845171511,   -2.5596962,      -4.94732285,
    -0.146752849,    -0.239320397,    -0.394262969,    -0.260304362,    -0.655054688,
    -7.01996517,     -2.05813193,     -1.87285078,     -0.00157708675,  -0.000388070126,
    -2.26972342,     -0.0079723252,   -1.86260223,     -1.03783596,     -0.284623027,
    -0.0091091292,   -0.616335392,    -2.73705339,     -0.0163080022,   -0.00158518017,
    -0.000500672846, -1.0082711,      -0.647822261,    -0.00570917455,  -0.0253591258,
    -2.67907429,     -1.00867081,     -0.220331118,    -1.97885456e-05, -6.49376583,
    -0.586474836,    -0.0109324306,   -0.000541778631, -0.0885622427,   -0.144402891,
    -3.68401694,     -1.22169101,     -0.00148817373,  -0.325203896,    -2.17522812,
    -1.39854074,     -0.0420691557,   -3.06449366,     -2.04787707,     -1.17860889,
    -1.80646968,     -4.13938475};
static const double hf_lp_bf16[127] = {
    -6.03748846,     -3.84422827,    -0.541600347,    -3.90451908,     -1.66803861,
    -0.100897722,    -0.0306627601,  -5.9013195,      -4.58434868,     -2.10431242,
    -0.83996743,     -1.00187373,    -0.00352832349,  -2.53765535,     -2.16445446,
    -2.32566023,     -4.40629292,    -0.130471781,    -0.00725622429,  -2.56266594,
    -0.496793509,    -0.29067257,    -3.72354484,     -2.55289221,     -0.186256096,
    -0.00718000578,  -2.59468007,    -1.91284418,     -3.43476391,     -0.923728645,
    -0.0827123672,   -0.56402564,    -0.0236826967,   -2.29471564,     -3.62386274,
    -2.06498647,     -0.0194575433,  -0.000313709636, -1.13248179e-05, -1.24541414,
    -2.68338346,     -4.0349164,     -0.353939533,    -1.97105336,     -0.154863611,
    -2.20736122,     -1.09140372,    -0.00268919952,  -0.00225611147,  -2.63285136,
    -0.165494904,    -0.00041368985, -0.000569658121, -0.191179246,    -4.59181881,
    -0.610246539,    -0.229400545,   -0.00512891728,  -0.000772654486, -4.61329291e-05,
    -0.00385541609,  -0.00246625743, -2.2739799,      -0.040499296,    -0.717931271,
    -0.000434066023, -0.0286866613,  -0.291512728,    -0.556180894,    -0.0270086136,
    -0.0562333651,   -0.983020544,   -1.03252697,     -5.85528088,     -4.11037397,
    -2.69717097,     -0.107745953,   -0.0847435594,   -2.52854443,     -4.92650127,
    -0.144382879,    -0.234390363,   -0.400973082,    -0.257411122,    -0.670782983,
    -7.01797056,     -2.06343222,    -1.85814118,     -0.00159839133,  -0.000379013713,
    -2.27829123,     -0.00775221363, -1.84929597,     -1.0399133,      -0.295021445,
    -0.00928654242,  -0.605748773,   -2.71621251,     -0.017207142,    -0.00162838364,
    -0.000529030047, -1.00165534,    -0.6465168,      -0.00590236066,  -0.0262452904,
    -2.66145706,     -1.03085411,    -0.215149269,    -1.966934e-05,   -6.48563099,
    -0.587637901,    -0.0105609354,  -0.000570134667, -0.0890786126,   -0.144706294,
    -3.6677165,      -1.2095679,     -0.00149019726,  -0.328850389,    -2.16672516,
    -1.40110016,     -0.0419964604,  -3.09450102,     -2.04947615,     -1.14639556,
    -1.78925347,     -4.1194067};
static const double hf_lp_fp8[127] = {
    -5.94406986,     -3.81806564,     -0.489288956,    -3.89396882,     -1.71953738,
    -0.0844965577,   -0.0225926507,   -6.07191992,     -4.44864082,     -2.05301332,
    -0.888416648,    -0.997930765,    -0.0069128396,   -2.59098911,     -2.28622389,
    -2.26278567,     -4.10928822,     -0.127684072,    -0.00909270905,  -2.58796978,
    -0.471818,       -0.226666123,    -3.7177639,      -2.61086893,     -0.249460831,
    -0.00701938337,  -2.63240385,     -1.64280319,     -3.35771728,     -0.880984426,
    -0.0746522695,   -0.574025631,    -0.0285795052,   -2.38308501,     -3.64382601,
    -2.30551839,     -0.036627382,    -0.000390334229, -9.65590607e-06, -1.40008414,
    -2.67801857,     -3.69170141,     -0.374115437,    -2.02298403,     -0.18714191,
    -2.41742516,     -1.47645557,     -0.00434894068,  -0.00187316828,  -2.53694677,
    -0.133973613,    -0.000443956029, -0.000723696081, -0.192474589,    -4.56895161,
    -0.639100373,    -0.363765091,    -0.00838261191,  -0.00113720575,  -5.18546949e-05,
    -0.004083985,    -0.00259491592,  -2.46493053,     -0.0378657021,   -0.905900896,
    -0.000348149711, -0.0318348147,   -0.20313032,     -0.443614632,    -0.0236228555,
    -0.0395457,      -0.888800502,    -1.02730656,     -5.75584602,     -4.09055233,
    -2.49541378,     -0.171388268,    -0.0709509104,   -2.63135099,     -4.78001976,
    -0.122938111,    -0.24076651,     -0.401848286,    -0.302319616,    -0.690169692,
    -7.57264137,     -2.13473082,     -1.97699475,     -0.00148805475,  -0.000373770483,
    -2.1566081,      -0.00402295915,  -1.88605046,     -0.91097182,     -0.259232759,
    -0.00834903866,  -0.578851819,    -2.76672173,     -0.019175278,    -0.00244937139,
    -0.000491855782, -1.01152456,     -0.596286058,    -0.00538956467,  -0.0232865606,
    -2.69983816,     -0.999583781,    -0.195533514,    -2.72985544e-05, -6.38573837,
    -0.597495079,    -0.0137888016,   -0.00113672949,  -0.0901776627,   -0.17979753,
    -3.62048054,     -0.942425489,    -0.00111350988,  -0.311141759,    -2.28980494,
    -1.25682878,     -0.0521777533,   -3.01592302,     -2.05727935,     -1.15236878,
    -1.78064883,     -4.2211628};

/* the same with the FP8 checkpoint's declared dynamic per-token FP8 input
 * activations, emulated by compressed-tensors 0.20.1 (quantized_forward on
 * the 35 projections, not lm_head; transformers' default route with
 * dtype float32, whose weights are the exact fp8 x scale products) */
static const double hf_lp_fp8_act[127] = {
    -6.03310299,     -3.58924198,     -0.538250208,    -4.04671621,     -1.61518407,
    -0.0997650847,   -0.0332580581,   -5.93532705,     -4.57871962,     -2.06548619,
    -0.862888515,    -1.02562428,     -0.00627535349,  -2.64593911,     -2.42607069,
    -2.36988735,     -4.12221336,     -0.101531848,    -0.00899087545,  -2.70996523,
    -0.432874113,    -0.201330587,    -3.85676098,     -2.58581471,     -0.23152177,
    -0.0094778575,   -2.46253085,     -1.57472539,     -3.29696774,     -0.930740416,
    -0.0919586048,   -0.614026487,    -0.0217809267,   -2.36093688,     -3.60742998,
    -2.14831948,     -0.033503525,    -0.000306916831, -1.22784813e-05, -1.42198193,
    -2.8280201,      -3.5097537,      -0.360734731,    -2.14322233,     -0.212534875,
    -2.4452343,      -1.35554469,     -0.00414868724,  -0.00166575378,  -2.55142355,
    -0.127636746,    -0.000639472564, -0.000614930817, -0.185509041,    -4.61191511,
    -0.607362926,    -0.317361712,    -0.00939578563,  -0.000646382221, -5.28083219e-05,
    -0.00349090411,  -0.0024855216,   -2.43171597,     -0.0448882319,   -0.908921182,
    -0.000285942195, -0.0349562839,   -0.199349001,    -0.424091518,    -0.0247375965,
    -0.0459848829,   -0.893345594,    -0.986045003,    -5.7406292,      -4.20167971,
    -2.48906684,     -0.185331076,    -0.0669030473,   -2.78439283,     -4.78843927,
    -0.138763279,    -0.289678723,    -0.382338911,    -0.328609437,    -0.644082546,
    -7.43870115,     -2.05969334,     -1.99290037,     -0.00160017668,  -0.000325984263,
    -2.3770206,      -0.00629797997,  -1.91364634,     -0.901292026,    -0.322603136,
    -0.00850602053,  -0.561730325,    -2.72084761,     -0.0196272861,   -0.00324211898,
    -0.000545710383, -0.985257387,    -0.708568275,    -0.00520493649,  -0.0369795524,
    -2.8202734,      -0.891287565,    -0.190246731,    -4.24376049e-05, -6.34266567,
    -0.540323317,    -0.010929836,    -0.00118185743,  -0.0999543071,   -0.242027029,
    -3.66890335,     -1.01938629,     -0.00119519304,  -0.299608141,    -2.2192874,
    -1.45365119,     -0.0566821136,   -2.92307448,     -2.16389966,     -0.820415378,
    -1.75768113,     -4.1922102};

/* the first 2000 characters of the text tokenize to these ids, and the
 * engine's log-probs on each checkpoint agree with transformers' */
/* qgate's log p(hf_ids[i+1]) from logits lg (128 rows of V) against ref
 * (127 values): the worst per-token deviation (relative, floor 1) and both
 * sums */
static void lp_against(const float *lg, int V, const double *ref, double *worst, double *sum,
                       double *want)
{
    *worst = *sum = *want = 0;
    for (int i = 0; i < 127; i++) {
        const float *r = lg + (size_t)i * V;
        double lp = t_logprob(r, V, hf_ids[i + 1]),
               dev = fabs(lp - ref[i]) / fmax(1.0, fabs(ref[i]));
        *worst = dev > *worst ? dev : *worst;
        *sum += lp, *want += ref[i];
    }
}

TEST(hf_transformers_reference, shared)
{
    const char *d = t_shared("models/hf-stories260K"),
               *tx = t_shared("data/tinystories_valid_head.txt");
    if (!d || !tx) SKIP("../shared/models/hf-stories260K is absent");
    char root[4096], text[2001];
    snprintf(root, sizeof root, "%s", d);
    FILE *f = fopen(tx, "rb");
    ASSERT(f);
    size_t tn = fread(text, 1, 2000, f);
    fclose(f);
    text[tn] = '\0';
    static const struct {
        const char *dir;
        const double *lp;
        int act; /* the declared activations, as the cpu backend applies them */
    } cases[] = {{"f32", hf_lp_f32, 0},
                 {"bf16", hf_lp_bf16, 0},
                 {"fp8-dynamic", hf_lp_fp8, 0},
                 {"fp8-dynamic", hf_lp_fp8_act, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char dir[4200], err[QG_ERRMSG_MAX];
        snprintf(dir, sizeof dir, "%s/%s", root, cases[c].dir);
        struct gguf *g;
        struct tokenizer *tok;
        struct llama_model *m;
        ASSERT_OK(model_open(dir, &g, err, sizeof err));
        ASSERT_OK(tok_load(g, dir, &tok, err, sizeof err));
        ASSERT_OK(llama_load(g, dir, &m, err, sizeof err));
        int32_t *ids = NULL;
        int64_t n = 0;
        ASSERT_OK(tok_encode(tok, text, tn, 1, 0, &ids, &n));
        ASSERT(n >= 128);
        for (int i = 0; i < 128; i++)
            if (ids[i] != hf_ids[i])
                T_FAIL_("%s: token %d is %d, transformers %d", dir, i, ids[i], hf_ids[i]);
        const int V = llama_hparams(m)->n_vocab;
        float *lg = malloc((size_t)128 * V * sizeof *lg);
        struct llama_ctx *ctx;
        ASSERT_OK(llama_ctx_new(m, 128, &ctx));
        if (cases[c].act) {
            struct simfmt fa;
            ASSERT(llama_declared_act(m));
            ASSERT_OK(simfmt_parse(llama_declared_act(m), &fa, err, sizeof err));
            ASSERT_OK(llama_ctx_set_act(ctx, LLAMA_ACT_FORMAT, &fa));
            llama_ctx_set_act_output(ctx, 0);
        }
        ASSERT_OK(llama_eval(ctx, hf_ids, 128, 0, lg));
        double worst, sum, want;
        lp_against(lg, V, cases[c].lp, &worst, &sum, &want);
        printf("%-12s%-12s sum %.6f, transformers %.6f (%.2g relative); worst token %.2g\n",
               cases[c].dir, cases[c].act ? " fp8 inputs" : "", sum, want, fabs(sum / want - 1),
               worst);
        ASSERT(worst < 1e-4 && fabs(sum / want - 1) < 1e-4);
        llama_ctx_free(ctx);
        free(lg);
        free(ids);
        tok_free(tok);
        llama_free(m);
    }
    return 0;
}

/* the tokenizer of the tokenizer.json (and tokenizer_config.json) in dir */
static int dir_tokenizer(const char *dir, struct tokenizer **tok)
{
    char err[QG_ERRMSG_MAX];
    int nv;
    struct gguf_writer *w = gguf_writer_new();
    ASSERT(w);
    ASSERT_OK(gguf_writer_set_str(w, "general.architecture", "llama"));
    if (hf_tokenizer_keys(dir, w, 0, &nv, err, sizeof err)) T_FAIL_("%s", err);
    uint8_t *buf;
    size_t size;
    ASSERT_OK(gguf_writer_to_memory(w, &buf, &size));
    gguf_writer_free(w);
    struct gguf *g;
    ASSERT_OK(gguf_open_memory(buf, size, dir, &g, err, sizeof err));
    ASSERT_OK(tok_load(g, dir, tok, err, sizeof err));
    gguf_close(g);
    free(buf);
    return 0;
}

/* ids of every line of expected.tsv (hex text, tab, ids) from the
 * tokenizer.json in dir; *bad counts mismatches (each printed) */
static int check_tokenizer(const char *dir, const char *tsv, int *n, int *bad)
{
    struct tokenizer *tok;
    if (dir_tokenizer(dir, &tok)) return 1;
    char *data = t_read_file(tsv, NULL);
    ASSERT(data);
    *n = *bad = 0;
    for (char *line = data, *next; *line; line = next) {
        size_t ll = strcspn(line, "\n");
        next = line + ll + (line[ll] != '\0');
        line[ll] = '\0';
        char *tab = strchr(line, '\t'), text[4096];
        ASSERT(tab && (size_t)(tab - line) / 2 < sizeof text);
        size_t tn = 0;
        for (const char *h = line; h + 1 < tab; h += 2) {
            unsigned v;
            ASSERT_EQ(sscanf(h, "%2x", &v), 1);
            text[tn++] = (char)v;
        }
        int32_t *ids = NULL;
        int64_t ni = 0;
        ASSERT_OK(tok_encode(tok, text, tn, 0, 1, &ids, &ni));
        int64_t k = 0, same = 1;
        for (char *p = tab + 1; *p; k++) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p) break;
            same &= k < ni && ids[k] == v;
            p = end;
        }
        same &= k == ni;
        if (!same) {
            (*bad)++;
            printf("  %s: line %d (%.*s) differs\n", dir, *n + 1, (int)(tab - line), line);
        }
        (*n)++;
        free(ids);
    }
    free(data);
    tok_free(tok);
    return 0;
}

/* the same ids as Hugging Face tokenizers on three real tokenizer.json
 * files: byte-level GPT-2, SentencePiece-style Mistral v0.1 and
 * TinyStories (tests/data/tokenizers/README.md) */
TEST(hf_tokenizer_json_matches_tokenizers, e2e)
{
    static const char *const packed[] = {"gpt2", "mistral-v0.1"};
    char tsv[4400], cmd[20000];
    int n, bad;
    for (int i = 0; i < 2; i++) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/%s", t_tmp(), packed[i]);
        snprintf(cmd, sizeof cmd,
                 "mkdir -p '%s' && gzip -dc '%s/tests/data/tokenizers/%s/tokenizer.json.gz' > "
                 "'%s/tokenizer.json' && cp '%s/tests/data/tokenizers/%s/tokenizer_config.json' "
                 "'%s/'",
                 dir, QG_SOURCE_DIR, packed[i], dir, QG_SOURCE_DIR, packed[i], dir);
        ASSERT_EQ(system(cmd), 0);
        snprintf(tsv, sizeof tsv, "%s/tests/data/tokenizers/%s/expected.tsv", QG_SOURCE_DIR,
                 packed[i]);
        if (check_tokenizer(dir, tsv, &n, &bad)) return 1;
        printf("%-14s %d of %d strings give tokenizers' ids\n", packed[i], n - bad, n);
        ASSERT(n == 51 && bad == 0);
    }
    const char *st = t_shared("models/hf-stories260K/f32");
    if (!st) SKIP("../shared/models/hf-stories260K is absent (GPT-2 and Mistral checked)");
    char dir[4400];
    snprintf(dir, sizeof dir, "%s", st);
    snprintf(tsv, sizeof tsv, "%s/tests/data/tokenizers/stories260K/expected.tsv", QG_SOURCE_DIR);
    if (check_tokenizer(dir, tsv, &n, &bad)) return 1;
    printf("%-14s %d of %d strings give tokenizers' ids\n", "stories260K", n - bad, n);
    ASSERT(n == 51 && bad == 0);
    return 0;
}

/* an FP8 checkpoint whose declared activations are static is refused; its
 * dynamic ones apply unless a=none */
TEST(hf_fp8_declared_activations, shared)
{
    const char *d = t_shared("models/hf-stories260K/fp8-dynamic"),
               *tx = t_shared("data/tinystories_valid_head.txt");
    if (!d || !tx) SKIP("../shared/models/hf-stories260K is absent");
    char src[4096], text[4096], dst[4200], st[4400], out[4400], none[4300];
    snprintf(src, sizeof src, "%s", d);
    snprintf(text, sizeof text, "%s", tx);
    double on = t_ppl(src, text, "30");
    snprintf(none, sizeof none, "%s?a=none", src);
    double off = t_ppl(none, text, "30");
    printf("declared FP8 activations %.6f, a=none %.6f\n", on, off);
    ASSERT(on > 0 && off > 0 && on != off);
    snprintf(dst, sizeof dst, "%s", t_path("static"));
    ASSERT_OK(copy_dir(src, dst, "\"dynamic\": true", "\"dynamic\": false"));
    snprintf(st, sizeof st, "%s/model.safetensors", src);
    snprintf(out, sizeof out, "%s/model.safetensors", dst);
    struct st_file *f;
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(st_open(st, &f, err, sizeof err));
    ASSERT_OK(write_shard(f, 0, st_n_tensors(f), NULL, out));
    st_close(f);
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "ppl", dst, "--text", text, NULL));
    ASSERT_EQ(o.code, 65);
    ASSERT_CONTAINS(o.err, "input_activations other than dynamic per-token FP8");
    t_out_free(&o);
    return 0;
}

/* bf16 of an f32 (round to nearest even) */
static uint16_t to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* a pack-quantized int8 checkpoint of the f32 one, written here the way
 * compressed-tensors lays it out (codes + 128 packed four to an int32,
 * low bytes first, zero points packed along outputs): the reader must
 * return (q - zero) * scale rounded to bf16 for every weight */
TEST(hf_pack_quantized_layout, shared)
{
    const char *d = t_shared("models/hf-stories260K/f32"),
               *tx = t_shared("data/tinystories_valid_head.txt");
    if (!d || !tx) SKIP("../shared/models/hf-stories260K is absent");
    char src[4096], text[4096], path[4400];
    snprintf(src, sizeof src, "%s", d);
    snprintf(text, sizeof text, "%s", tx);
    static const char *const qc =
        "\"quantization_config\": {\"config_groups\": {\"group_0\": {\"format\": "
        "\"pack-quantized\", \"input_activations\": null, \"targets\": [\"Linear\"], "
        "\"weights\": {\"group_size\": 4, \"num_bits\": 8, \"strategy\": \"group\", "
        "\"symmetric\": false, \"type\": \"int\"}}}, \"format\": \"pack-quantized\", \"ignore\": "
        "[\"lm_head\"], \"kv_cache_scheme\": null, \"quant_method\": \"compressed-tensors\"}, "
        "\"rms_norm_eps\"";
    const char *dst = t_path("packed");
    ASSERT_OK(copy_dir(src, dst, "\"rms_norm_eps\"", qc));
    snprintf(path, sizeof path, "%s/model.safetensors", src);
    struct st_file *f;
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(st_open(path, &f, err, sizeof err));
    /* the new file: every projection as weight_packed/scale/zero_point/shape */
    cJSON *h = cJSON_CreateObject();
    struct sbuf data;
    sbuf_init(&data, 0);
    static const char *const dt[] = {"F32", "F16", "BF16", "F8_E4M3", "I32", "U8", "I8", "I64"};
#define PUT(name, dtype, d0, d1, bytes, nb)                                                        \
    do {                                                                                           \
        cJSON *e = cJSON_AddObjectToObject(h, name), *sh = cJSON_AddArrayToObject(e, "shape"),     \
              *of = cJSON_AddArrayToObject(e, "data_offsets");                                     \
        cJSON_AddStringToObject(e, "dtype", dtype);                                                \
        cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)(d0)));                                \
        if ((d1) > 0) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)(d1)));                  \
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)data.len));                            \
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)(data.len + (nb))));                   \
        sbuf_append(&data, (const char *)(bytes), nb);                                             \
    } while (0)
    int n_proj = 0;
    for (int64_t i = 0; i < st_n_tensors(f); i++) {
        const struct st_tensor *t = st_tensor_at(f, i);
        size_t nl = strlen(t->name);
        int proj = strstr(t->name, "_proj.weight") && nl > 7;
        if (!proj) {
            PUT(t->name, dt[t->dtype], t->shape[0], t->n_dims > 1 ? t->shape[1] : 0, t->data,
                t->nbytes);
            continue;
        }
        n_proj++;
        int64_t out = t->shape[0], in = t->shape[1], ng = in / 4;
        ASSERT(in % 4 == 0 && out % 4 == 0);
        int32_t *pk = calloc((size_t)(out * in / 4), 4), *zp = calloc((size_t)(out / 4 * ng), 4);
        uint16_t *sc = malloc((size_t)(out * ng) * 2);
        for (int64_t r = 0; r < out; r++)
            for (int64_t g = 0; g < ng; g++) {
                float mn = 0, mx = 0, x[4];
                memcpy(x, t->data + (size_t)(r * in + g * 4) * 4, sizeof x);
                for (int k = 0; k < 4; k++)
                    mn = x[k] < mn ? x[k] : mn, mx = x[k] > mx ? x[k] : mx;
                float s = from_bf16(to_bf16((mx - mn) / 255.0f));
                if (s == 0) s = 0.0078125f;
                int z = (int)nearbyintf(-128.0f - mn / s);
                z = z < -128 ? -128 : z > 127 ? 127 : z;
                sc[r * ng + g] = to_bf16(s);
                zp[(r / 4) * ng + g] |= (int32_t)((uint32_t)(z + 128) << (8 * (r % 4)));
                for (int k = 0; k < 4; k++) {
                    int q = (int)nearbyintf(x[k] / s) + z;
                    q = q < -128 ? -128 : q > 127 ? 127 : q;
                    int64_t c = g * 4 + k;
                    pk[r * (in / 4) + c / 4] |= (int32_t)((uint32_t)(q + 128) << (8 * (c % 4)));
                }
            }
        char n[256];
        int64_t shape[2] = {out, in};
        snprintf(n, sizeof n, "%.*s.weight_packed", (int)(nl - 7), t->name);
        PUT(n, "I32", out, in / 4, pk, (size_t)(out * in));
        snprintf(n, sizeof n, "%.*s.weight_scale", (int)(nl - 7), t->name);
        PUT(n, "BF16", out, ng, sc, (size_t)(out * ng) * 2);
        snprintf(n, sizeof n, "%.*s.weight_zero_point", (int)(nl - 7), t->name);
        PUT(n, "I32", out / 4, ng, zp, (size_t)(out / 4 * ng) * 4);
        snprintf(n, sizeof n, "%.*s.weight_shape", (int)(nl - 7), t->name);
        PUT(n, "I64", 2, 0, shape, sizeof shape);
        free(pk), free(zp), free(sc);
    }
#undef PUT
    char *hs = cJSON_PrintUnformatted(h);
    size_t hl = strlen(hs), pad = (8 - hl % 8) % 8;
    struct sbuf img;
    sbuf_init(&img, 0);
    for (int i = 0; i < 8; i++) {
        char c = (char)(uint8_t)((uint64_t)(hl + pad) >> (8 * i));
        sbuf_append(&img, &c, 1);
    }
    sbuf_append(&img, hs, hl);
    sbuf_append(&img, "        ", pad);
    sbuf_append(&img, data.data ? data.data : "", data.len);
    snprintf(path, sizeof path, "%s/model.safetensors", dst);
    ASSERT_OK(t_write_file(path, img.data, img.len));
    free(hs);
    cJSON_Delete(h);
    sbuf_release(&img);
    sbuf_release(&data);
    ASSERT_EQ(n_proj, 35);
    /* the reader's weights: (q - zero) * scale in bf16, as compressed-tensors decompresses */
    struct gguf *g;
    ASSERT_OK(model_open(dst, &g, err, sizeof err));
    const struct gguf_tensor *q0 = gguf_find_tensor(g, "blk.0.attn_q.weight");
    const struct st_tensor *w0 = st_find(f, "model.layers.0.self_attn.q_proj.weight");
    ASSERT(q0 && w0 && q0->type == GGML_BF16); /* bf16 values: kept in 2 bytes */
    float *dq = malloc((size_t)w0->numel * sizeof *dq);
    ASSERT_OK(dequant_row(q0->type, q0->data, dq, w0->numel));
    double e = 0, s = 0;
    for (int64_t i = 0; i < w0->numel; i++) {
        float a = dq[i], b;
        memcpy(&b, w0->data + 4 * i, 4);
        e += ((double)a - b) * ((double)a - b), s += (double)b * b;
    }
    free(dq);
    printf("int8 group 4 with zero points: relative weight error %.3g\n", sqrt(e / s));
    ASSERT(sqrt(e / s) < 0.01);
    gguf_close(g);
    st_close(f);
    double pf = t_ppl(src, text, "40"), pq = t_ppl(dst, text, "40");
    printf("PPL f32 %.5f, int8 pack-quantized %.5f\n", pf, pq);
    ASSERT(pq > 0 && fabs(pq / pf - 1) < 0.01);
    return 0;
}

/* Llama 3.1 RoPE scaling in config.json becomes the rope_freqs tensor
 * llama.cpp's converter writes: the factors equal arch-zoo-llama3's (made
 * for factor 8, low 1, high 4, original context 64, base 500000, head 64),
 * and a directory that declares the scaling loads and computes with it */
TEST(hf_llama3_rope_scaling, shared)
{
    const char *z = t_shared("models/arch-zoo/arch-zoo-llama3-F32.gguf"),
               *d = t_shared("models/hf-stories260K/f32"),
               *tx = t_shared("data/tinystories_valid_head.txt");
    if (!z || !d || !tx) SKIP("../shared's arch-zoo or hf-stories260K is absent");
    char zoo[4096], src[4096], text[4096], st[4400], out[4400];
    snprintf(zoo, sizeof zoo, "%s", z);
    snprintf(src, sizeof src, "%s", d);
    snprintf(text, sizeof text, "%s", tx);
    struct gguf *g;
    char err[QG_ERRMSG_MAX];
    ASSERT_OK(gguf_open(zoo, &g, err, sizeof err));
    const struct gguf_tensor *rf = gguf_find_tensor(g, "rope_freqs.weight");
    ASSERT(rf && rf->ne[0] == 32);
    static const double l3[4] = {8, 1, 4, 64};
    float ours[32];
    hf_llama3_factors(500000.0, 64, l3, ours);
    for (int k = 0; k < 32; k++) {
        float want;
        memcpy(&want, (const uint8_t *)rf->data + 4 * k, 4);
        if (fabsf(ours[k] / want - 1) > 1e-6f)
            T_FAIL_("factor %d: %g, arch-zoo %g", k, ours[k], want);
    }
    gguf_close(g);
    const char *dst = t_path("l3");
    ASSERT_OK(copy_dir(src, dst, "\"rope_scaling\": null",
                       "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, "
                       "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                       "\"original_max_position_embeddings\": 16}"));
    snprintf(st, sizeof st, "%s/model.safetensors", src);
    snprintf(out, sizeof out, "%s/model.safetensors", dst);
    struct st_file *f;
    ASSERT_OK(st_open(st, &f, err, sizeof err));
    ASSERT_OK(write_shard(f, 0, st_n_tensors(f), NULL, out));
    st_close(f);
    double plain = t_ppl(src, text, "30"), scaled = t_ppl(dst, text, "30");
    printf("PPL without scaling %.5f, with Llama 3 scaling %.5f\n", plain, scaled);
    ASSERT(plain > 0 && scaled > 0 && scaled != plain);
    return 0;
}

/* transformers 5.25.0 (torch 2.15.0 CPU, float32, eager attention) on the
 * f32 checkpoint with config.json made MistralForCausalLM with
 * "sliding_window": 16 (no other change), the same 128 ids: log p(id[i+1]),
 * sum -204.252162 (without the window -173.708512) */
static const double hf_lp_mistral_w16[127] = {
    -6.021461421, -3.849970727,  -0.522631829, -3.889847808, -1.669914675, -0.101506220,
    -0.029142497, -5.906415343,  -4.590458630, -2.116576243, -0.837903880, -0.997859522,
    -0.003488834, -2.529155671,  -2.147453116, -2.337938455, -3.763706804, -0.113081592,
    -0.001031026, -2.091644560,  -0.642301895, -0.471163004, -3.688158205, -3.135455842,
    -0.142551546, -0.005373401,  -3.043821560, -1.789983433, -3.691797144, -0.458052410,
    -0.077851405, -0.947356694,  -0.020687950, -1.319356832, -4.188250355, -2.524362699,
    -0.013205789, -0.000551945,  -0.000009480, -1.205952769, -2.579269912, -3.739170869,
    -0.357796150, -2.530493958,  -0.446945403, -1.523298845, -6.529159663, -0.782245812,
    -0.001679619, -1.996022623,  -0.146854825, -0.000185787, -0.000763108, -0.139745264,
    -4.162419443, -1.041822138,  -0.501410797, -0.012724983, -0.001843471, -0.000083952,
    -0.010160024, -0.023612922,  -0.964129367, -0.033589754, -0.114229766, -0.000300570,
    -0.017182547, -0.850576669,  -2.940709121, -1.033753806, -0.055497111, -1.628213118,
    -1.042391672, -6.130205980,  -3.343768510, -2.047919076, -0.124850557, -0.123232100,
    -3.296859172, -4.406726598,  -0.105350236, -0.241700825, -0.350458157, -0.651754822,
    -0.956794046, -11.469227464, -2.363833526, -1.814297148, -0.001045780, -0.000257800,
    -2.235849953, -0.004910683,  -1.874492589, -0.745817721, -2.098712625, -1.924837178,
    -0.425045270, -3.293708781,  -5.405415162, -1.222137931, -0.000611892, -1.183750198,
    -4.066549264, -2.404522273,  -0.029265081, -3.190153289, -0.404135599, -0.271666161,
    -0.000037668, -6.693517494,  -0.725754424, -0.027139201, -0.000721527, -0.194527891,
    -0.479345403, -4.371881681,  -2.586152815, -0.001008002, -0.504285243, -2.138416522,
    -1.039313213, -0.070215836,  -2.906090663, -1.846671925, -0.566217429, -1.790961117,
    -4.004324213};

/* Mistral's sliding_window in a checkpoint directory: every layer's query
 * sees the 16 keys up to itself, as transformers' mask does */
TEST(hf_mistral_sliding_window, shared)
{
    const char *d = t_shared("models/hf-stories260K/f32");
    if (!d) SKIP("../shared/models/hf-stories260K is absent");
    char src[4096], path[4400], link[4400], err[QG_ERRMSG_MAX];
    snprintf(src, sizeof src, "%s", d);
    const char *dst = t_path("mistral");
    ASSERT_OK(copy_dir(src, dst, "\"LlamaForCausalLM\"",
                       "\"MistralForCausalLM\"], \"sliding_window\": 16, \"x\": [0"));
    snprintf(path, sizeof path, "%s/model.safetensors", src);
    snprintf(link, sizeof link, "%s/model.safetensors", dst);
    size_t n;
    char *st = t_read_file(path, &n);
    ASSERT(st && t_write_file(link, st, n) == 0);
    free(st);
    struct gguf *g;
    struct llama_model *m;
    ASSERT_OK(model_open(dst, &g, err, sizeof err));
    ASSERT_OK(llama_load(g, dst, &m, err, sizeof err));
    ASSERT_EQ(llama_hparams(m)->swa_window, 16);
    const int V = llama_hparams(m)->n_vocab;
    float *lg = malloc((size_t)128 * V * sizeof *lg);
    struct llama_ctx *ctx;
    ASSERT_OK(llama_ctx_new(m, 128, &ctx));
    ASSERT_OK(llama_eval(ctx, hf_ids, 128, 0, lg));
    double worst, sum, want;
    lp_against(lg, V, hf_lp_mistral_w16, &worst, &sum, &want);
    printf("window 16: sum %.6f, transformers %.6f; worst token %.2g\n", sum, want, worst);
    ASSERT(worst < 1e-4 && fabs(sum / want - 1) < 1e-4);
    llama_ctx_free(ctx);
    free(lg);
    llama_free(m);
    return 0;
}

/* a tokenizer.json whose normalizer is NFC (Qwen2's) normalizes before it
 * splits: the GPT-2 file with normalizer {"type": "NFC"} gives the ids of
 * Hugging Face tokenizers 0.23.3 on decomposed text (without it, other ids) */
TEST(hf_tokenizer_nfc_normalizer, e2e)
{
    char dir[4200], cmd[20000];
    snprintf(dir, sizeof dir, "%s/nfc", t_tmp());
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s' && gzip -dc '%s/tests/data/tokenizers/gpt2/tokenizer.json.gz' > "
             "'%s/tokenizer.json' && cp '%s/tests/data/tokenizers/gpt2/tokenizer_config.json' "
             "'%s/'",
             dir, QG_SOURCE_DIR, dir, QG_SOURCE_DIR, dir);
    ASSERT_EQ(system(cmd), 0);
    static const char *const texts[] = {"caf\xc3\xa9 na\xc3\xafve", "cafe\xcc\x81 nai\xcc\x88ve",
                                        "\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8 \xe2\x84\xa6"};
    static const int32_t want[3][6] = {{66, 1878, 2634, 41492, -1},
                                       {66, 1878, 2634, 41492, -1},
                                       {166, 108, 223, 7377, 102, -1}},
                         plain[] = {66, 8635, 136, 223, 299, 1872, 136, 230, 303};
    for (int nfc = 0; nfc < 2; nfc++) {
        if (nfc) { /* the same file with an NFC normalizer */
            char path[4400];
            snprintf(path, sizeof path, "%s/tokenizer.json", dir);
            char *s = t_read_file(path, NULL);
            cJSON *j = cJSON_Parse(s);
            free(s);
            ASSERT(j);
            cJSON_DeleteItemFromObject(j, "normalizer");
            cJSON_AddItemToObject(j, "normalizer", cJSON_Parse("{\"type\": \"NFC\"}"));
            s = cJSON_PrintUnformatted(j);
            ASSERT_OK(t_write_file(path, s, strlen(s)));
            free(s);
            cJSON_Delete(j);
        }
        struct tokenizer *tok;
        if (dir_tokenizer(dir, &tok)) return 1;
        for (int i = nfc ? 0 : 1; i < (nfc ? 3 : 2); i++) {
            int32_t *ids = NULL;
            int64_t n = 0;
            ASSERT_OK(tok_encode(tok, texts[i], strlen(texts[i]), 0, 0, &ids, &n));
            const int32_t *exp = nfc ? want[i] : plain;
            int64_t ne = 0;
            while (nfc ? exp[ne] >= 0 : ne < 9)
                ne++;
            ASSERT_EQ(n, ne);
            for (int64_t k = 0; k < n; k++)
                ASSERT_EQ(ids[k], exp[k]);
            free(ids);
        }
        tok_free(tok);
    }
    return 0;
}

/* GPTQ with act-order groups (g_idx not i / group_size: the group of each
 * input arbitrary) does not fit qgate's 4-bit blocks: dequantized instead,
 * f16(scale[g_idx[i]] x (q - zero - 1)) for every weight */
TEST(hf_gptq_act_order_groups, shared)
{
    const char *d = t_shared("models/hf-stories260K/gptq-int4-g32");
    if (!d) SKIP("../shared/models/hf-stories260K is absent");
    char src[4096], path[4400], err[QG_ERRMSG_MAX];
    snprintf(src, sizeof src, "%s", d);
    const char *dst = t_path("actorder");
    ASSERT_OK(copy_dir(src, dst, NULL, NULL));
    snprintf(path, sizeof path, "%s/model.safetensors", src);
    size_t n;
    char *img = t_read_file(path, &n);
    struct st_file *f;
    ASSERT(img);
    ASSERT_OK(st_open_memory(img, n, path, &f, err, sizeof err));
    int changed = 0;
    for (int64_t i = 0; i < st_n_tensors(f); i++) { /* every g_idx: input i in group i % 8 */
        const struct st_tensor *t = st_tensor_at(f, i);
        size_t nl = strlen(t->name);
        if (nl < 6 || strcmp(t->name + nl - 6, ".g_idx")) continue;
        for (int64_t k = 0; k < t->numel; k++) {
            int32_t g = (int32_t)(k % 8);
            memcpy((uint8_t *)(uintptr_t)t->data + 4 * k, &g, 4);
        }
        changed++;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dst);
    ASSERT_OK(t_write_file(path, img, n));
    ASSERT(changed > 0);
    struct gguf *g;
    ASSERT_OK(model_open(dst, &g, err, sizeof err));
    const struct gguf_tensor *w = gguf_find_tensor(g, "blk.0.attn_q.weight");
    const struct st_tensor *qw = st_find(f, "model.layers.0.self_attn.q_proj.qweight"),
                           *qz = st_find(f, "model.layers.0.self_attn.q_proj.qzeros"),
                           *sc = st_find(f, "model.layers.0.self_attn.q_proj.scales");
    ASSERT(w && qw && qz && sc && w->type == GGML_F16 && sc->dtype == ST_F16);
    int64_t in = w->ne[0], out = w->ne[1], bad = 0;
    float *y = malloc((size_t)(in * out) * sizeof *y);
    ASSERT_OK(dequant_row(w->type, w->data, y, in * out));
    for (int64_t c = 0; c < out; c++)
        for (int64_t i = 0; i < in; i++) {
            uint32_t qv, zv;
            uint16_t s;
            memcpy(&qv, qw->data + 4 * ((i / 8) * out + c), 4);
            memcpy(&zv, qz->data + 4 * ((i % 8) * (out / 8) + c / 8), 4);
            memcpy(&s, sc->data + 2 * ((i % 8) * out + c), 2);
            int q = (int)((qv >> (4 * (i % 8))) & 15), z = (int)((zv >> (4 * (c % 8))) & 15);
            float v = quant_f16_to_f32(quant_f32_to_f16(quant_f16_to_f32(s) * (float)(q - z - 1)));
            bad += y[c * in + i] != v;
        }
    printf("act-order g_idx: %s, %lld of %lld weights differ from f16(scale x (q - zero - 1))\n",
           ggml_type_name(w->type), (long long)bad, (long long)(in * out));
    ASSERT_EQ(bad, 0);
    free(y);
    gguf_close(g);
    st_close(f);
    free(img);
    return 0;
}
