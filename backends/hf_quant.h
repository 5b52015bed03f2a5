/* hf_quant — the quantization schemes of Hugging Face checkpoints, read
 * from config.json's quantization_config and dequantized exactly as the
 * library that wrote them dequantizes (in the checkpoint's dtype):
 *
 * - compressed-tensors 0.13 "float-quantized" FP8 E4M3 weights, one scale
 *   per tensor or per output channel: w = fp8 * scale, the exact f32
 *   product (compressed-tensors' float32 route, the one that also emulates
 *   the declared FP8 activations; its bf16 decompression rounds it);
 * - compressed-tensors "nvfp4-pack-quantized": FP4 E2M1 pairs per byte (low
 *   nibble first), an FP8 scale per 16 inputs and a global scale that
 *   divides: w = fp4 * (scale / global);
 * - GPTQ (GPTQModel/AutoGPTQ, bits 4 or 8, checkpoint_format gptq with
 *   zeros stored minus one, or gptq_v2): qweight packed along inputs,
 *   qzeros along outputs, per-group fp16 scales, g_idx (desc_act) honoured:
 *   w = scale * (q - zero);
 * - AWQ GEMM (AutoAWQ, 4 bits, zero point): both packed along outputs in
 *   AWQ's order [0, 2, 4, 6, 1, 3, 5, 7]: w = (q - zero) * scale;
 * - compressed-tensors "pack-quantized" int4/int8 (group or channel,
 *   symmetric or with zero points): codes + 2^(bits-1) packed along inputs
 *   low bits first, zero points the same way along outputs, and
 *   weight_shape: w = dtype((q - zero) * scale).
 *
 * - ModelOpt (TensorRT Model Optimizer 0.3x unified HF export, quant_method
 *   "modelopt" in config.json or the older hf_quant_config.json):
 *   quant_algo NVFP4 / W4A16_NVFP4 — `weight` U8 [out, in/2] (low nibble
 *   first), `weight_scale` FP8 per 16 inputs, `weight_scale_2` f32 that
 *   multiplies: w = dtype(fp4 * f32(scale * scale_2)), as its
 *   NVFP4QTensor.dequantize; FP8 — `weight` F8_E4M3, per-tensor (or per
 *   channel) `weight_scale`: w = dtype(fp8 * dtype(scale)), as FP8QTensor.
 *   NVFP4 and FP8 declare static activations: each projection's
 *   `input_scale` is the global scale its inputs are quantized with.
 *
 * Anything else (another quant_method or format, asymmetric FP8, bits other
 * than these) is refused naming it.
 */
#ifndef QG_HF_QUANT_H
#define QG_HF_QUANT_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

enum hf_scheme {
    HF_PLAIN = 0,
    HF_CT_FP8,
    HF_CT_NVFP4,
    HF_GPTQ,
    HF_AWQ,
    HF_CT_PACK,
    HF_MO_NVFP4,
    HF_MO_FP8
};
enum hf_dtype { HF_DT_F32 = 0, HF_DT_F16, HF_DT_BF16 }; /* what the library computes in */

struct hf_quant {
    int scheme;                        /* enum hf_scheme */
    int dtype;                         /* enum hf_dtype: config.json's torch_dtype */
    int bits, group, gptq_zero_offset; /* GPTQ/AWQ/pack; GPTQ v1 stores zero - 1 */
    int asym;                          /* pack-quantized: zero points stored */
    int act_fp8_dynamic;               /* FP8: input activations declared dynamic per-token FP8 */
    const char *act_static; /* ModelOpt: inputs quantized with each projection's input_scale
                             * as this format ("nvfp4", "fp8_e4m3"), or NULL */
    char label[96];         /* e.g. "compressed-tensors float-quantized (FP8 E4M3, channel)" */
};

struct hf_owner;
struct st_tensor;
/* The tensor `name` in any of the checkpoint's files, or NULL. */
const struct st_tensor *hf_find(const struct hf_owner *o, const char *name);
/* Keeps buf (malloc'd) until the model closes; on failure frees it. */
int hf_owner_keep(struct hf_owner *o, void *buf);

/* Reads config's quantization_config (absent: HF_PLAIN) and torch_dtype.
 * QG_OK or QG_ERR_DATA naming file and field. */
int hf_quant_read(const cJSON *config, const char *file, struct hf_quant *q, char *err,
                  size_t errlen);

/* The projection `prefix` ("model.layers.0.self_attn.q_proj") of shape out x
 * in, dequantized into a malloc'd f32 [out][in] (*w). QG_OK; QG_ERR_DATA
 * naming the tensor (missing, misshapen, wrong dtype, a packed value out of
 * range); QG_ERR_NOMEM. */
int hf_quant_linear(const struct hf_owner *o, const struct hf_quant *q, const char *prefix,
                    int64_t out, int64_t in, float **w, char *err, size_t errlen);

/* qgate's block type (ggml_types.h) that holds a projection of scheme q
 * with `in` inputs as stored: QG_F8_E4M3_S32 (compressed-tensors and ModelOpt
 * FP8),
 * QG_NVFP4_S16 (NVFP4), QG_I4_S32 (4-bit GPTQ, AWQ, pack-quantized, groups
 * of a multiple of 32); 0 when none does (dequantize instead). */
uint32_t hf_quant_block_type(const struct hf_quant *q, int64_t in);

/* Projection prefix (out x in) as stored, in hf_quant_block_type's blocks
 * into dst (out x in / block x block bytes), decoding to exactly what
 * hf_quant_linear gives. QG_OK; QG_ERR_UNSUPPORTED when this tensor does
 * not fit the blocks (GPTQ's act-order groups): dequantize it; QG_ERR_DATA
 * naming the tensor. */
int hf_quant_blocks(const struct hf_owner *o, const struct hf_quant *q, const char *prefix,
                    int64_t out, int64_t in, uint8_t *dst, char *err, size_t errlen);

/* The static input scale of projection prefix (ModelOpt's
 * "<prefix>.input_scale": one positive finite f32) into *s. QG_OK or
 * QG_ERR_DATA naming the tensor. */
int hf_quant_input_scale(const struct hf_owner *o, const char *prefix, float *s, char *err,
                         size_t errlen);

/* One value of a float tensor (F32, F16, BF16, F8_E4M3) as f32. */
float hf_st_float(const struct st_tensor *t, int64_t i);

#endif
