/* hf_tokenizer — a Hugging Face tokenizer.json (with tokenizer_config.json)
 * turned into the GGUF tokenizer.ggml.* keys tokenizer.h runs, as
 * llama.cpp's converter writes them for the two BPE flavours qgate
 * tokenizes exactly:
 *
 * - SentencePiece-style BPE (Llama 2, Mistral, TinyStories): byte_fallback,
 *   spaces as U+2581 (a Prepend+Replace normalizer or a Metaspace
 *   pre-tokenizer) -> model "llama"; each token's score is minus the rank
 *   of the first merge that makes it, so the greedy highest-score merge
 *   applies HF's merges in rank order;
 * - byte-level BPE (GPT-2, Llama 3, Qwen2): a ByteLevel pre-tokenizer ->
 *   model "gpt2" with its merges and the pre-tokenizer its split regex
 *   names (gpt-2, llama3, qwen2).
 *
 * Anything else (Unigram, WordPiece, other normalizers or regexes, BPE
 * dropout, subword prefixes) is refused naming the field. Added tokens keep
 * their ids; special ones are control tokens. BOS/EOS and add_bos_token /
 * add_eos_token come from tokenizer_config.json.
 */
#ifndef QG_HF_TOKENIZER_H
#define QG_HF_TOKENIZER_H

#include <stddef.h>

struct gguf_writer;

/* Reads dir/tokenizer.json (and dir/tokenizer_config.json when present)
 * and sets the tokenizer keys on w; a vocabulary shorter than pad_to ids
 * (an embedding padded past the tokenizer, as Qwen's are) gets unused
 * "[PAD<id>]" tokens up to it, as llama.cpp's converter writes them (0: no
 * padding). *n_vocab: the vocabulary size written. QG_OK; QG_ERR_NOINPUT (no tokenizer.json);
 * QG_ERR_DATA naming the file and field; QG_ERR_NOMEM. */
int hf_tokenizer_keys(const char *dir, struct gguf_writer *w, int pad_to, int *n_vocab, char *err,
                      size_t errlen);

#endif
