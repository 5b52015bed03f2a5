/* ggml_types — the tensor storage types of ggml/GGUF: ids, names, block
 * geometry. Ids are ggml's (enum ggml_type), which GGUF files store; removed
 * ids (4, 5, 31-33, 36-38) are not valid. Ids from 64 are qgate's own block
 * types for a checkpoint directory's weights as stored (hf_arch.h): never
 * in a GGUF file (the reader and writer refuse them).
 */
#ifndef QG_GGML_TYPES_H
#define QG_GGML_TYPES_H

#include <stddef.h>
#include <stdint.h>

enum ggml_type_id {
    GGML_F32 = 0,
    GGML_F16 = 1,
    GGML_Q4_0 = 2,
    GGML_Q4_1 = 3,
    GGML_Q5_0 = 6,
    GGML_Q5_1 = 7,
    GGML_Q8_0 = 8,
    GGML_Q8_1 = 9,
    GGML_Q2_K = 10,
    GGML_Q3_K = 11,
    GGML_Q4_K = 12,
    GGML_Q5_K = 13,
    GGML_Q6_K = 14,
    GGML_Q8_K = 15,
    GGML_IQ2_XXS = 16,
    GGML_IQ2_XS = 17,
    GGML_IQ3_XXS = 18,
    GGML_IQ1_S = 19,
    GGML_IQ4_NL = 20,
    GGML_IQ3_S = 21,
    GGML_IQ2_S = 22,
    GGML_IQ4_XS = 23,
    GGML_I8 = 24,
    GGML_I16 = 25,
    GGML_I32 = 26,
    GGML_I64 = 27,
    GGML_F64 = 28,
    GGML_IQ1_M = 29,
    GGML_BF16 = 30,
    GGML_TQ1_0 = 34,
    GGML_TQ2_0 = 35,
    GGML_MXFP4 = 39,
    /* FP8 E4M3 codes with an f32 scale per 32 (compressed-tensors and
     * ModelOpt FP8): 4 bytes of scale, a mode byte (the product rounded to
     * f32, f16 or bf16, as QG_NVFP4_S16's), then 32 codes */
    QG_F8_E4M3_S32 = 64,
    /* NVFP4 as stored: per 16, an f32 global scale g, the FP8 E4M3 block
     * scale code, a mode byte (bits 0-1: the result rounded to f32, f16
     * or bf16; bit 2: fp4 x f32(scale x g), ModelOpt, else (fp4 x scale) /
     * g, compressed-tensors), then 8 bytes of E2M1 codes, low nibble first */
    QG_NVFP4_S16 = 65,
    /* 4-bit integer groups as stored (GPTQ, AWQ, compressed-tensors int4):
     * per 32, an f32 scale, an int8 zero, the mode byte's rounding, then 16
     * bytes of codes u, low nibble first: round(f32(u - zero) x scale) */
    QG_I4_S32 = 66,
    GGML_TYPE_LIMIT = 67 /* one past the largest id known */
};

struct ggml_type_info {
    const char *name;   /* "Q4_K"; NULL for ids that are not valid */
    uint32_t block;     /* elements per block */
    uint32_t type_size; /* bytes per block */
};

/* Info for a type id, or NULL when the id is unknown or removed. The pointer
 * is to static storage. */
const struct ggml_type_info *ggml_type_get(uint32_t type);

/* 1 for qgate's own types (never stored in a GGUF file). */
int ggml_type_internal(uint32_t type);

/* Name of a type id, or "unknown" when it is not valid. */
const char *ggml_type_name(uint32_t type);

/* Type id for a name such as "q8_0" (case-insensitive); -1 when unknown. */
int ggml_type_from_name(const char *name);

#endif
