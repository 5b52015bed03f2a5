/* hf_arch — the architectures of Hugging Face checkpoint directories:
 * config.json read as the family's GGUF keys, and the stored tensors given
 * llama.cpp's names and layouts, as llama.cpp's convert_hf_to_gguf.py
 * writes them (read, not copied), so that the engine runs a directory as it
 * runs the converted GGUF:
 *
 * - LlamaForCausalLM, MistralForCausalLM, MixtralForCausalLM as `llama`
 *   (q/k rows kept in HF's rotate-half order and run as NeoX pairs; Mixtral's
 *   per-expert w1/w3/w2 stacked into ffn_{gate,up,down}_exps);
 * - Qwen2ForCausalLM, Qwen2MoeForCausalLM (shared expert and its sigmoid
 *   gate), Qwen3ForCausalLM, Qwen3MoeForCausalLM;
 * - GemmaForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM (text): every
 *   RMSNorm weight w becomes the f32 1 + w that transformers multiplies by,
 *   soft caps, windows and per-layer-type RoPE from the config;
 * - Phi3ForCausalLM (fused qkv_proj and gate_up_proj kept fused, partial
 *   rotary, LongRoPE factors);
 * - Starcoder2ForCausalLM (LayerNorm with biases, c_fc/c_proj GELU MLP).
 *
 * A sliding window transformers applies (Mistral, Mixtral, Phi-3,
 * Starcoder2: every layer; Gemma 2/3: the config's layer types, which must
 * follow the family's pattern) is applied; what config.json asks that the
 * engine does not implement is refused by name.
 */
#ifndef QG_HF_ARCH_H
#define QG_HF_ARCH_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

struct gguf_tensor;
struct gguf_writer;
struct hf_owner;
struct hf_quant;
struct hf_family;

/* config.json's sizes and settings as the family reads them */
struct hf_cfg {
    const struct hf_family *fam;
    const char *arch; /* the GGUF architecture */
    int64_t dim, layers, heads, kv_heads, head_dim, ffn, ctx, vocab, rope_dims;
    double eps, theta, theta_swa, rope_linear; /* rope_linear: a linear factor (0: none) */
    int tied;
    int64_t window;      /* sliding window (0: none) */
    int64_t swa_pattern; /* gemma2/3: every layer but each n-th windowed (0: all) */
    int llama3;          /* Llama 3.1 RoPE scaling: factor, low, high, original context */
    double l3[4];
    int64_t n_expert, n_used, expert_ffn, shexp_ffn;
    double caps[2];           /* gemma2: attention and final soft caps (0: none) */
    const cJSON *longrope[2]; /* phi3: long_factor, short_factor (in the config) */
    int64_t orig_ctx;
    double attn_factor;
};

/* Reads config (c, from `file`). QG_OK or QG_ERR_DATA naming the file and
 * the field (an architecture, setting or size qgate does not implement).
 * h may point into c (LongRoPE factors): keep c until the tensors are read. */
int hf_read_cfg(const cJSON *c, const char *file, struct hf_cfg *h, char *err, size_t errlen);

/* The architecture's GGUF keys (general.architecture, general.name and
 * <arch>.*) into w. QG_OK or the writer's error. */
int hf_arch_keys(struct gguf_writer *w, const struct hf_cfg *h, const char *name);

/* Every tensor the engine reads, as a malloc'd array (*out, *n): F32, F16
 * and BF16 tensors in place, copies where the layout differs (stacked
 * experts, gemma norms, unaligned data), quantized projections
 * dequantized (hf_quant.h). QG_OK, QG_ERR_DATA naming the tensor,
 * QG_ERR_NOMEM. */
int hf_arch_tensors(struct hf_owner *o, const struct hf_cfg *h, const struct hf_quant *q,
                    int64_t n_vocab, struct gguf_tensor **out, int *n, char *err, size_t errlen);

/* Llama 3.1's RoPE factors (l3: factor, low_freq_factor, high_freq_factor,
 * original_max_position_embeddings) for head_dim / 2 pairs, as llama.cpp's
 * converter writes rope_freqs.weight. */
void hf_llama3_factors(double theta, int head_dim, const double l3[4], float *out);

#endif
