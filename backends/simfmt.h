/* simfmt — number formats a model might be deployed in, simulated: each
 * format's quantize and dequantize, bit-exact to its specification, and
 * quantize-then-dequantize ("fake quantization") of a row-major matrix.
 *
 * Element formats (round to nearest, ties to even; finite values beyond
 * the largest saturate to it; NaN stays NaN where the format has one):
 * - FP8 E4M3 (OCP "E4M3FN"): bias 7, max 448, no infinities, NaN only
 *   S.1111.111 (0x7F/0xFF).
 * - FP8 E5M2: bias 15, IEEE-like, max 57344; infinities and NaNs exist,
 *   but finite inputs saturate (never become infinities); NaN -> 0x7F.
 * - FP6 E3M2 (OCP MX): bias 3, max 28, no infinities or NaN.
 * - FP4 E2M1 (OCP MX): bias 1, the values 0, 0.5, 1, 1.5, 2, 3, 4, 6.
 *
 * Block formats:
 * - MXFP8 / MXFP6 / MXFP4 (OCP Microscaling v1.0): 32 elements share an
 *   E8M0 scale X = 2^(floor(log2(amax)) - emax_elem), emax_elem being the
 *   exponent of the element format's largest normal (8, 4, 2); elements
 *   are V / X quantized with saturation. Code 0xFF of E8M0 is NaN.
 * - NVFP4: 16 E2M1 elements, an FP8 E4M3 block scale and an FP32 tensor
 *   scale s = amax(tensor) / (448 * 6); block scale = e4m3(amax(block) / 6
 *   / s); element = e2m1(x / (e4m3(block scale) * s)).
 * - INT8 / INT4: symmetric (scale amax / qmax, codes -qmax..qmax with qmax
 *   127 / 7) or asymmetric (scale (max - min) / (2^bits - 1), zero point
 *   round(-min / scale), codes 0..2^bits - 1); per tensor, per output row
 *   ("channel") or per group of G along the input dimension.
 */
#ifndef QG_SIMFMT_H
#define QG_SIMFMT_H

#include <stddef.h>
#include <stdint.h>

/* ---- element formats ---- */
uint8_t fp8_e4m3_from_f32(float x);
float fp8_e4m3_to_f32(uint8_t c);
uint8_t fp8_e5m2_from_f32(float x);
float fp8_e5m2_to_f32(uint8_t c);
uint8_t fp6_e3m2_from_f32(float x); /* 6-bit code in the low bits */
float fp6_e3m2_to_f32(uint8_t c);
uint8_t fp4_e2m1_from_f32(float x); /* 4-bit code in the low bits */
float fp4_e2m1_to_f32(uint8_t c);

/* ---- block formats ---- */
enum simfmt_elem { SIMFMT_E4M3, SIMFMT_E3M2, SIMFMT_E2M1 };
#define MX_BLOCK 32
#define NVFP4_BLOCK 16

/* One MX block of n (<= MX_BLOCK) values: the E8M0 scale code and one
 * element code per value. */
void mx_block_encode(const float *x, int n, enum simfmt_elem e, uint8_t *scale, uint8_t *codes);
float mx_value(uint8_t scale, uint8_t code, enum simfmt_elem e);

/* NVFP4: the tensor scale of amax (amax / (448 * 6); 1 when amax is 0),
 * then per block of n (<= NVFP4_BLOCK) values its E4M3 scale code and
 * E2M1 codes. */
float nvfp4_tensor_scale(float amax);
void nvfp4_block_encode(const float *x, int n, float tensor_scale, uint8_t *scale, uint8_t *codes);
float nvfp4_value(uint8_t scale, uint8_t code, float tensor_scale);

/* ---- a format as named in a model spec ---- */
enum simfmt_kind {
    SIMFMT_NONE,
    SIMFMT_FP8_E4M3,
    SIMFMT_FP8_E5M2,
    SIMFMT_INT8,
    SIMFMT_INT4,
    SIMFMT_MXFP8,
    SIMFMT_MXFP6,
    SIMFMT_MXFP4,
    SIMFMT_NVFP4,
};
enum simfmt_gran { SIMFMT_TENSOR, SIMFMT_CHANNEL, SIMFMT_GROUP };

struct simfmt {
    enum simfmt_kind kind;
    enum simfmt_gran gran; /* integer formats */
    int group;             /* SIMFMT_GROUP: elements per group */
    int asym;              /* integer formats: 1 asymmetric (with a zero point) */
};

/* Parses "fp8_e4m3", "fp8" (= fp8_e4m3), "fp8_e5m2", "int8", "int4" with
 * optional ":tensor" | ":channel" | ":group:G" and ":sym" | ":asym" (default
 * per-channel, symmetric), "mxfp8", "mxfp6", "mxfp4", "nvfp4". 0, or -1
 * with err naming what is wrong and the known formats. */
int simfmt_parse(const char *s, struct simfmt *f, char *err, size_t errlen);

/* The format's name as simfmt_parse reads it (static buffer per call site
 * is not kept: written into out). */
void simfmt_name(const struct simfmt *f, char *out, size_t n);

/* Storage cost in bits per element, scales included (block formats: per
 * their blocks; integer groups: a 16-bit scale, and zero point when
 * asymmetric, per group; per-tensor and per-channel scales counted as 0). */
double simfmt_bits(const struct simfmt *f);

/* Quantizes then dequantizes w (rows x cols, row-major, cols the input
 * dimension) in place. Blocks and groups run along a row; a row's tail
 * shorter than a block is a short block. 0, or -1 for SIMFMT_NONE. */
int simfmt_apply(const struct simfmt *f, float *w, int64_t rows, int64_t cols);

/* Activations, as a matrix product's input (n rows of `in`): per row
 * (token) for fp8 and integers — a dynamic scale per token — and along the
 * row in the block formats; in place. 0, or -1 for SIMFMT_NONE. */
int simfmt_apply_act(const struct simfmt *f, float *x, int64_t n, int64_t in);

/* Activations quantized with a static (calibrated) global scale, as a
 * ModelOpt checkpoint declares them: NVFP4 blocks of 16 whose FP8 block
 * scales are relative to `scale` (the checkpoint's input_scale); FP8 E4M3
 * x / scale, saturating at 448. Other formats as simfmt_apply_act. */
int simfmt_apply_act_static(const struct simfmt *f, float *x, int64_t n, int64_t in, float scale);

/* K or V rows as a cache stores them: n tokens of `dim` values, heads of
 * head_dim; fp8 and integers with a scale per head and token (or the
 * format's own group), block formats along the row. 0, or -1. */
int simfmt_apply_kv(const struct simfmt *f, float *x, int64_t n, int64_t dim, int64_t head_dim);

/* llama.cpp's CPU arithmetic for a product with weights of ggml type
 * wtype: the input rounded as ggml quantizes it to the weight type's
 * vec_dot_type — Q8_0 (fp16 scale max|x|/127, codes round(x * 127/max|x|),
 * ties to even: Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4), Q8_1 (the same, for Q4_1
 * and Q5_1), Q8_K (256 values, scale max/-127 of the signed largest value,
 * codes nearest(x * -127/max) capped at 127: the k-quants, IQ and TQ
 * types), fp16 (F16 weights), bf16 (BF16 weights); F32 weights see f32. n
 * rows of `in` values, in place; `in` must be a multiple of the block. */
void simfmt_llamacpp_act(uint32_t wtype, float *x, int64_t n, int64_t in);

/* The rounding simfmt_llamacpp_act applies for weights of type wtype, as
 * a type: GGML_F32 (none), GGML_F16, GGML_BF16, GGML_Q8_0 (Q8_0 and Q8_1
 * round alike) or GGML_Q8_K; two types with one class round alike. */
uint32_t simfmt_llamacpp_act_class(uint32_t wtype);

/* Where simfmt_llamacpp_codes writes the codes of one row of `in` values:
 * in codes, a scale per block (32 or 256 values), the sums of each 16
 * codes, and for Q8_0 the Q8_1 block sums (fp16(d' sum q), d' the scale
 * before its fp16 rounding; in / 32 of them). */
struct simfmt_codes {
    int8_t *q;
    float *d;
    int32_t *sum16;
    float *s;
};

/* One row x[0..in) rounded in place as simfmt_llamacpp_act rounds it, and
 * for the 8-bit classes (Q8_0, Q8_K) its codes into c, so that x[j] =
 * c->d[block] * c->q[j] exactly. Returns 0, or -1 when x is rounded but
 * there are no codes: the class is not 8-bit (F32, F16, BF16), a block
 * holds an Inf (Q8_0: or a NaN), or its largest magnitude is so small
 * (below 127 / FLT_MAX) that the scale's inverse overflows. Q8_K's
 * rounding, as llama.cpp's, gives a NaN the code 127: codes, not -1. */
int simfmt_llamacpp_codes(uint32_t wtype, float *x, int64_t in, const struct simfmt_codes *c);

#endif
