/* synth — generates small Llama-family GGUF models with seeded random
 * weights and a SentencePiece-style ("llama") vocabulary, for tests, the
 * demo and benchmarks. The same params and seed give byte-identical files.
 */
#ifndef QG_SYNTH_H
#define QG_SYNTH_H

#include <stddef.h>
#include <stdint.h>

struct synth_params {
    const char *arch;  /* any family llama.h lists, with that family's tensors and keys
                        * (qwen2moe: 4 experts, 2 used, and a shared one; gemma: tied;
                        * gemma2: caps 20/15, window swa_window or 8; gemma3: window 8 on
                        * layer 0 with RoPE base rope_theta/10, linear x8 elsewhere;
                        * phi3: fused) */
    const char *name;  /* general.name */
    int n_vocab;       /* <unk>,<s>,</s>, 256 byte tokens (unless byte_fallback is 0),
                        * then "▁", a-z and word pieces; >= 259 with byte fallback */
    int byte_fallback; /* 1 (default): <0xXX> tokens; 0: none (unknown text is <unk>) */
    int dim, n_layers, n_heads, n_kv_heads, ffn, ctx;
    int rope_dims; /* 0 = head size */
    float rms_eps, rope_theta;
    uint32_t wtype;    /* stored type of 2-D weights: any type dequant.h decodes; F32, F16,
                        * Q8_0, Q4_0 and Q4_K are quantized from random values, the others
                        * are random blocks with sane scales (benchmark models) */
    int tied_output;   /* 1 = no output.weight (the embedding is reused) */
    float logit_scale; /* output.weight entries are uniform in +/- logit_scale/sqrt(dim);
                        * larger = more peaked next-token distributions (default 1) */
    uint64_t seed;
    int n_expert, n_expert_used; /* llama: Mixtral experts when n_expert > 0 */
    float rope_linear;           /* llama: linear RoPE scaling factor (0 = none) */
    int rope_freqs;              /* llama: a Llama 3 rope_freqs tensor (factors 1..8) */
    int swa_window;              /* llama, gemma2: attention.sliding_window (0 = none/8) */
    int longrope;                /* phi3: LongRoPE factors, original context 32, attn_factor
                                  * 1.19 */
    /* For tests of malformed models: leave out the named tensor, store it
     * with its two dimensions swapped, or store it as raw bytes of another
     * ggml type. NULL = off. */
    const char *omit_tensor;
    const char *swap_tensor;
    const char *raw_tensor;
    uint32_t raw_type;
    const char *extra_key;    /* a u32 metadata key set to 1 (NULL = none) */
    const char *extra_tensor; /* an F32 vector of dim values added (NULL = none) */
};

/* Any other architecture name is written as given with llama's tensors,
 * so tests can make files qgate must refuse.
 * dim 64, 2 layers, 4 heads, 2 kv heads, ffn 96, ctx 128, vocab 320, F32,
 * arch llama, seed 1. */
struct synth_params synth_default_params(void);

/* Writes the model to path (atomically). QG_OK, QG_ERR_USAGE for params that
 * cannot form a model (with err saying which), or the writer's error. */
int synth_write(const struct synth_params *p, const char *path, char *err, size_t errlen);

/* 1 when synth quantizes random values to `type`; 0 when it writes random
 * blocks instead. */
int synth_quantizable(uint32_t type);

/* Random blocks of any decodable format (a benchmark model: the values are
 * random anyway): n elements (a multiple of the block size) as random
 * bytes at q, then every fp16 scale set to scale / 16 so that values are
 * finite and of about that size; rng is advanced. */
void synth_random_blocks(uint32_t type, uint8_t *q, int64_t n, float scale, uint64_t *rng);

#endif
