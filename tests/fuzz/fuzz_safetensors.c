/* fuzz_safetensors — libFuzzer target for the safetensors reader: parses
 * the input and, when it is accepted, reads every byte of every tensor and
 * every float value as the checkpoint loader would. Build and run with
 * QG_FUZZ_TARGET=safetensors tests/fuzz/run.sh. */
#include "backends/hf_quant.h"
#include "backends/safetensors.h"
#include "core/util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1); /* exact size: ASan sees any overread */
    if (!copy) return 0;
    if (size) memcpy(copy, data, size);
    struct st_file *f;
    char err[QG_ERRMSG_MAX];
    if (st_open_memory(copy, size, "fuzz", &f, err, sizeof err) == 0) {
        volatile double sink = 0;
        for (int64_t i = 0; i < st_n_tensors(f); i++) {
            const struct st_tensor *t = st_tensor_at(f, i);
            for (size_t b = 0; b < t->nbytes; b++)
                sink += t->data[b];
            if (t->dtype == ST_F32 || t->dtype == ST_F16 || t->dtype == ST_BF16 ||
                t->dtype == ST_F8_E4M3)
                for (int64_t k = 0; k < t->numel; k++)
                    sink += hf_st_float(t, k) == 0;
            (void)st_find(f, t->name);
        }
        (void)sink;
        st_close(f);
    }
    free(copy);
    return 0;
}
