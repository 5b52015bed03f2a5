/* hf_config — a Hugging Face checkpoint's config.json read as the GGUF
 * keys of the family it names (the architectures: hf_arch.h), as llama.cpp's
 * convert_hf_to_gguf.py writes them; what the engine does not implement is
 * refused naming the file and the setting.
 */
#ifndef QG_HF_CONFIG_H
#define QG_HF_CONFIG_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

struct gguf_writer;

/* what a family's checkpoint holds (struct hf_family.flags) */
enum {
    HA_ROTATE_HALF = 1 << 0, /* llama: q/k rows in rotate-half order, run as NeoX */
    HA_QKV_BIAS = 1 << 1,    /* q/k/v biases */
    HA_QK_NORM = 1 << 2,     /* per-head q/k RMSNorm */
    HA_NORM1 = 1 << 3,       /* gemma: RMSNorm multiplies by 1 + w */
    HA_POST_NORMS = 1 << 4,  /* gemma2/3: four norms per layer */
    HA_FUSED = 1 << 5,       /* phi3: qkv_proj, gate_up_proj */
    HA_STARCODER = 1 << 6,   /* LayerNorm with biases, c_fc/c_proj, biases everywhere */
    HA_MIXTRAL = 1 << 7,     /* block_sparse_moe.{gate, experts.E.w1/w2/w3} */
    HA_QWEN_MOE = 1 << 8,    /* mlp.{gate, experts.E.*_proj} */
    HA_SHARED = 1 << 9,      /* qwen2moe's shared expert */
    HA_WINDOW = 1 << 10,     /* sliding_window on every layer */
    HA_PATTERN = 1 << 11,    /* gemma2/3: sliding_window on the family's layers */
    HA_GELU = 1 << 12,       /* gelu_pytorch_tanh */
    HA_TIED = 1 << 13,       /* tie_word_embeddings defaults to true */
    HA_QGATE_WIN = 1 << 14,  /* the window as qgate.hf.sliding_window (llama.cpp ignores it) */
};

struct hf_family {
    const char *hf, *arch;
    unsigned flags;
    int swa_pattern, big_scale_layers; /* gemma2/3: as llama_arch.c's table */
};

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

/* Llama 3.1's RoPE factors (l3: factor, low_freq_factor, high_freq_factor,
 * original_max_position_embeddings) for head_dim / 2 pairs, as llama.cpp's
 * converter writes rope_freqs.weight. */
void hf_llama3_factors(double theta, int head_dim, const double l3[4], float *out);

#endif
