/* fuzz_gguf — libFuzzer target for the GGUF reader: parses the input and,
 * when it is accepted, reads every metadata value, every array element and
 * every tensor byte, and summarises the model as `qgate inspect` does.
 * Build and run with tests/fuzz/run.sh. */
#include "backends/gguf.h"
#include "backends/model_info.h"
#include "core/util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact-size heap copy so that AddressSanitizer sees any overread */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    if (size) memcpy(copy, data, size);
    struct gguf *g;
    char err[QG_ERRMSG_MAX];
    if (gguf_open_memory(copy, size, "fuzz", &g, err, sizeof err) == 0) {
        volatile uint64_t sink = 0;
        for (int64_t i = 0; i < gguf_n_kv(g); i++) {
            int64_t iv;
            double dv;
            const char *s;
            size_t len;
            if (gguf_kv_int(g, i, &iv) == 0) sink += (uint64_t)iv;
            if (gguf_kv_float(g, i, &dv) == 0) sink += (uint64_t)(dv == dv);
            if (gguf_kv_str(g, i, &s, &len) == 0 && len) sink += (uint8_t)s[len - 1];
            for (uint64_t j = 0; j < gguf_kv_len(g, i) && gguf_kv_type(g, i) == GGUF_ARR; j++) {
                if (gguf_arr_int(g, i, j, &iv) == 0) sink += (uint64_t)iv;
                if (gguf_arr_float(g, i, j, &dv) == 0) sink += (uint64_t)(dv == dv);
                if (gguf_arr_str(g, i, j, &s, &len) == 0 && len)
                    sink += (uint8_t)s[0] + (uint8_t)s[len - 1];
            }
        }
        for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
            const struct gguf_tensor *t = gguf_tensor_at(g, i);
            const uint8_t *p = t->data;
            if (t->nbytes) sink += p[0] + p[t->nbytes - 1];
        }
        struct model_info m;
        model_info_read(g, &m);
        sink += (uint64_t)m.n_params;
        (void)sink;
        gguf_close(g);
    }
    free(copy);
    return 0;
}
