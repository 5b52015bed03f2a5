/* gguf_fixtures DIR — writes the generated GGUF fixtures into DIR: synthetic
 * Llama/Qwen2 models (F32, F16, Q8_0), a vocab-only file, the small valid
 * file and every malformed case. The fuzzer uses them as its seed corpus. */
#include "backends/ggml_types.h"
#include "backends/synth.h"
#include "core/util.h"
#include "tests/gguf_cases.h"

#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 2) return fprintf(stderr, "usage: gguf_fixtures DIR\n"), 64;
    char path[4096], err[QG_ERRMSG_MAX];
    static const uint32_t types[] = {GGML_F32, GGML_F16, GGML_Q8_0};
    for (int arch = 0; arch < 2; arch++)
        for (int t = 0; t < 3; t++) {
            struct synth_params p = synth_default_params();
            p.arch = arch ? "qwen2" : "llama";
            p.wtype = types[t];
            p.dim = 32, p.ffn = 64, p.n_layers = 1, p.n_vocab = 260; /* small: fast to fuzz */
            snprintf(path, sizeof path, "%s/synth-%s-%s.gguf", argv[1], p.arch,
                     ggml_type_name(types[t]));
            if (synth_write(&p, path, err, sizeof err)) return fprintf(stderr, "%s\n", err), 1;
        }
    for (int i = -1; i < gguf_n_bad_cases; i++) {
        struct bb b = {0};
        if (i < 0)
            gguf_case_valid(&b);
        else
            gguf_bad_cases[i].build(&b);
        snprintf(path, sizeof path, "%s/case-%s.gguf", argv[1],
                 i < 0 ? "valid" : gguf_bad_cases[i].name);
        if (t_write_file(path, b.p ? (const void *)b.p : "", b.n))
            return fprintf(stderr, "cannot write %s\n", path), 1;
        bb_free(&b);
    }
    return 0;
}
