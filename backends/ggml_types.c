/* ggml_types — block geometry of every ggml tensor type (ggml.c type_traits). */
#include "backends/ggml_types.h"

#include <strings.h>

static const struct ggml_type_info types[GGML_TYPE_LIMIT] = {
    [GGML_F32] = {"F32", 1, 4},
    [GGML_F16] = {"F16", 1, 2},
    [GGML_Q4_0] = {"Q4_0", 32, 18},
    [GGML_Q4_1] = {"Q4_1", 32, 20},
    [GGML_Q5_0] = {"Q5_0", 32, 22},
    [GGML_Q5_1] = {"Q5_1", 32, 24},
    [GGML_Q8_0] = {"Q8_0", 32, 34},
    [GGML_Q8_1] = {"Q8_1", 32, 36},
    [GGML_Q2_K] = {"Q2_K", 256, 84},
    [GGML_Q3_K] = {"Q3_K", 256, 110},
    [GGML_Q4_K] = {"Q4_K", 256, 144},
    [GGML_Q5_K] = {"Q5_K", 256, 176},
    [GGML_Q6_K] = {"Q6_K", 256, 210},
    [GGML_Q8_K] = {"Q8_K", 256, 292},
    [GGML_IQ2_XXS] = {"IQ2_XXS", 256, 66},
    [GGML_IQ2_XS] = {"IQ2_XS", 256, 74},
    [GGML_IQ3_XXS] = {"IQ3_XXS", 256, 98},
    [GGML_IQ1_S] = {"IQ1_S", 256, 50},
    [GGML_IQ4_NL] = {"IQ4_NL", 32, 18},
    [GGML_IQ3_S] = {"IQ3_S", 256, 110},
    [GGML_IQ2_S] = {"IQ2_S", 256, 82},
    [GGML_IQ4_XS] = {"IQ4_XS", 256, 136},
    [GGML_I8] = {"I8", 1, 1},
    [GGML_I16] = {"I16", 1, 2},
    [GGML_I32] = {"I32", 1, 4},
    [GGML_I64] = {"I64", 1, 8},
    [GGML_F64] = {"F64", 1, 8},
    [GGML_IQ1_M] = {"IQ1_M", 256, 56},
    [GGML_BF16] = {"BF16", 1, 2},
    [GGML_TQ1_0] = {"TQ1_0", 256, 54},
    [GGML_TQ2_0] = {"TQ2_0", 256, 66},
    [GGML_MXFP4] = {"MXFP4", 32, 17},
    [QG_F8_E4M3_S32] = {"F8_E4M3x32", 32, 37},
    [QG_NVFP4_S16] = {"NVFP4x16", 16, 14},
    [QG_I4_S32] = {"I4x32", 32, 22},
};

int ggml_type_internal(uint32_t type)
{
    return type >= QG_F8_E4M3_S32 && type < GGML_TYPE_LIMIT;
}

const struct ggml_type_info *ggml_type_get(uint32_t type)
{
    if (type >= GGML_TYPE_LIMIT || !types[type].name) return NULL;
    return &types[type];
}

const char *ggml_type_name(uint32_t type)
{
    const struct ggml_type_info *t = ggml_type_get(type);
    return t ? t->name : "unknown";
}

int ggml_type_from_name(const char *name)
{
    for (int i = 0; i < GGML_TYPE_LIMIT; i++)
        if (types[i].name && strcasecmp(types[i].name, name) == 0) return i;
    return -1;
}
