/* hf_model — a Hugging Face checkpoint directory (config.json, one or more
 * .safetensors files with their index, tokenizer.json) opened as a struct
 * gguf the engine and tokenizer read like a GGUF file: config.json becomes
 * the <arch>.* keys, tokenizer.json the tokenizer keys (hf_tokenizer.h),
 * and the tensors get llama.cpp's names. F32, F16 and BF16 tensors stay in
 * their mapped files as stored; quantized projections (compressed-tensors
 * float-quantized FP8, pack-quantized int4/int8, nvfp4-pack-quantized;
 * GPTQ; AWQ GEMM; ModelOpt NVFP4 and FP8) stay as stored in qgate's own
 * block types where one holds them, else are dequantized exactly at load
 * (f32, or BF16/F16 when every value is one), following each library's
 * packing (docs/hf.md names the versions); a
 * config.json without quantization_config may have ModelOpt's
 * hf_quant_config.json beside it. Anything else is refused by name.
 *
 * The architectures, their config.json keys and tensor names: hf_arch.h.
 */
#ifndef QG_HF_MODEL_H
#define QG_HF_MODEL_H

#include <stddef.h>
#include <stdint.h>

struct gguf;

/* 1 when path is a directory (a checkpoint to open with hf_open). */
int hf_is_dir(const char *path);

/* Opens the checkpoint in dir. QG_OK; QG_ERR_NOINPUT (a file missing or
 * unreadable); QG_ERR_DATA naming the file and the field or tensor
 * (unsupported architecture or quant_method, missing or misshapen tensor,
 * malformed JSON or safetensors); QG_ERR_NOMEM. */
int hf_open(const char *dir, struct gguf **out, char *err, size_t errlen);

/* sha256 over the checkpoint's files (config.json, tokenizer files, the
 * index and every .safetensors, in name order, each as "name\0" + its
 * sha256): the identity a run stores. QG_OK or the reader's error. */
int hf_hash(const char *dir, char sha[65], char *err, size_t errlen);

/* Bytes of dir's .safetensors files (*n_files of them). */
int64_t hf_stored_bytes(const char *dir, int *n_files);

/* Opens path as a model: hf_open for a directory, gguf_open otherwise. */
int model_open(const char *path, struct gguf **out, char *err, size_t errlen);

#endif
