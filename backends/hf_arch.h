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

#include "backends/hf_config.h"

#include <stddef.h>
#include <stdint.h>

struct gguf_tensor;
struct hf_owner;
struct hf_quant;

/* Every tensor the engine reads, as a malloc'd array (*out, *n): F32, F16
 * and BF16 tensors in place, copies where the layout differs (stacked
 * experts, gemma norms, unaligned data); quantized projections as stored
 * in qgate's block types where one holds them (hf_quant_block_type: FP8,
 * NVFP4, 4-bit groups), else dequantized (hf_quant.h) into f32, or
 * BF16/F16 when every value is one. QG_OK, QG_ERR_DATA naming the tensor,
 * QG_ERR_NOMEM. */
int hf_arch_tensors(struct hf_owner *o, const struct hf_cfg *h, const struct hf_quant *q,
                    int64_t n_vocab, struct gguf_tensor **out, int *n, char *err, size_t errlen);

#endif
