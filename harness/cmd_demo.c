/* cmd_demo — `qgate demo`: the built-in end-to-end example, no downloads.
 *
 * Today it generates a small seeded Llama model as F32 (the "original") and
 * as F16 and Q8_0 (the "quantized" candidates) with the GGUF writer, reads
 * each back with the GGUF reader and prints what each file holds. Scoring and
 * the verdict join the demo when the CPU backend and the runner exist.
 */
#include "backends/ggml_types.h"
#include "backends/gguf.h"
#include "backends/model_info.h"
#include "backends/synth.h"
#include "datasets/hash.h"
#include "harness/commands.h"
#include "harness/status.h"
#include "harness/util.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

static const struct cli_opt opts[] = {
    {"dir", 'd', CLI_STR, "DIR", "where to write the demo models (default ./qgate-demo)", 0},
    {"seed", 0, CLI_INT, "N", "seed of the random weights (default 1)", 0},
    CLI_OPT_END,
};

static int describe(const char *path)
{
    char err[QG_ERRMSG_MAX], sha[HASH_HEX_LEN + 1];
    struct gguf *g;
    int rc = gguf_open(path, &g, err, sizeof err);
    if (rc) return cmd_fail(rc, err);
    struct model_info m;
    model_info_read(g, &m);
    hash_sha256_mem(gguf_bytes(g), (size_t)gguf_file_size(g), sha);
    char types[128] = "";
    size_t k = 0;
    for (int i = 0; i < m.n_types && k < sizeof types; i++)
        k += (size_t)snprintf(types + k, sizeof types - k, "%s%s x%lld", i ? ", " : "",
                              ggml_type_name(m.types[i].type), (long long)m.types[i].count);
    printf("  %-28s %8llu bytes  %.12s  %lld params  %s\n", path, (unsigned long long)m.file_bytes,
           sha, (long long)m.n_params, types);
    gguf_close(g);
    return 0;
}

static int cmd_demo(const struct cli_args *a)
{
    const char *dir = cli_str(a, "dir") ? cli_str(a, "dir") : "qgate-demo";
    int64_t seed = cli_int(a, "seed", 1);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return qg_error("cannot create '%s': %s", dir, strerror(errno)), QG_EX_CANTCREAT;
    static const struct { const char *file; uint32_t type; } variants[] = {
        {"base-f32.gguf", GGML_F32}, {"cand-f16.gguf", GGML_F16}, {"cand-q8_0.gguf", GGML_Q8_0}};
    printf("qgate demo: a seeded %s model stored three ways\n", "Llama");
    for (size_t i = 0; i < sizeof variants / sizeof *variants; i++) {
        struct synth_params p = synth_default_params();
        p.seed = (uint64_t)seed;
        p.wtype = variants[i].type;
        p.name = "qgate-demo";
        char path[4096], err[QG_ERRMSG_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, variants[i].file);
        int rc = synth_write(&p, path, err, sizeof err);
        if (rc) return cmd_fail(rc, err);
        if ((rc = describe(path))) return rc;
    }
    printf("\nnext: 'qgate inspect %s/cand-q8_0.gguf' shows one file in full.\n"
           "Scoring these models against each other needs the CPU backend and runner, which this\n"
           "build does not have yet.\n", dir);
    return 0;
}

const struct cli_cmd cmd_demo_def = {
    .name = "demo",
    .fn = cmd_demo,
    .summary = "built-in example, no downloads: generate a model in three formats and inspect them",
    .opts = opts,
    .min_pos = 0,
    .max_pos = 0,
};
