/* model_info — what a GGUF model file holds: architecture and sizes from the
 * metadata, tokenizer, parameter count, and the tensor types actually stored
 * (which may differ from the requested llama.cpp file type: llama-quantize
 * falls back per tensor when rows do not fit the block size).
 */
#ifndef QG_MODEL_INFO_H
#define QG_MODEL_INFO_H

#include "backends/ggml_types.h"
#include "backends/gguf.h"

struct model_type_stat {
    uint32_t type;    /* enum ggml_type_id */
    int64_t count;    /* tensors of this type */
    int64_t elements; /* their elements */
    uint64_t bytes;   /* their stored bytes */
};

struct model_info {
    char arch[64], name[128], tok_model[32];
    uint32_t gguf_version;
    uint64_t file_bytes, alignment;
    int64_t n_kv, n_tensors, n_params;
    int64_t file_type; /* general.file_type, -1 when absent */
    /* hyperparameters from "<arch>.*"; -1 (or NAN) when absent */
    int64_t ctx, dim, n_layers, ffn, n_heads, n_kv_heads, rope_dims, expert_count;
    double rope_theta, rms_eps;
    int64_t n_vocab, bos, eos; /* vocab from tokenizer.ggml.tokens; -1 when absent */
    int vocab_only;            /* 1 when the file has no tensors */
    int n_types;               /* entries used in types[], by descending bytes */
    struct model_type_stat types[GGML_TYPE_LIMIT];
};

/* Fills out from an open file (no hashing). Always QG_OK: missing keys are
 * reported as -1/NAN/"" so that inspect can describe any valid GGUF. */
int model_info_read(const struct gguf *g, struct model_info *out);

/* llama.cpp's name of a general.file_type value ("Q4_K_M"), or "unknown". */
const char *model_ftype_name(int64_t ftype);

#endif
