/* tokenizer — text <-> token ids from a GGUF file's tokenizer.ggml.* metadata,
 * reproducing llama.cpp's tokenizers exactly.
 *
 * - "llama" (SentencePiece-style): a space is prefixed (add_space_prefix,
 *   default true), spaces become U+2581, then adjacent pieces are merged
 *   greedily by highest score (ties: leftmost) while the merged text is a
 *   token; leftovers fall back to <0xXX> byte tokens.
 * - "gpt2" (byte-level BPE): the text is split by the pre-tokenizer regex
 *   that tokenizer.ggml.pre names (run with PCRE2), bytes are mapped to
 *   GPT-2's printable code points, and merges are applied by rank.
 */
#ifndef QG_TOKENIZER_H
#define QG_TOKENIZER_H

#include "backends/gguf.h"

#include <stddef.h>
#include <stdint.h>

struct tokenizer;

/* Token types as stored in tokenizer.ggml.token_type (append-only). */
enum tok_type {
    TOK_NORMAL = 1,
    TOK_UNKNOWN = 2,
    TOK_CONTROL = 3,
    TOK_USER = 4,
    TOK_UNUSED = 5,
    TOK_BYTE = 6
};

/* Builds a tokenizer from g's metadata (copies what it needs; g may be
 * closed afterwards). QG_OK; QG_ERR_DATA with err naming the file and the
 * problem (missing or inconsistent tokenizer keys, unknown model or
 * pre-tokenizer); QG_ERR_NOMEM. */
int tok_load(const struct gguf *g, const char *name, struct tokenizer **out, char *err,
             size_t errlen);
void tok_free(struct tokenizer *t); /* accepts NULL */

int tok_n_vocab(const struct tokenizer *t);
int32_t tok_bos(const struct tokenizer *t); /* -1 when none */
int32_t tok_eos(const struct tokenizer *t);
int tok_add_bos(const struct tokenizer *t); /* the file's add_bos_token (or the model's default) */
const char *tok_model(const struct tokenizer *t); /* "llama" or "gpt2" */

/* Tokenizes n bytes of text, appending ids to *ids (realloc'd, caller
 * frees; *n_ids is updated). add_special adds BOS/EOS as the file says;
 * parse_special turns control-token text such as "<s>" into that token.
 * QG_OK or QG_ERR_NOMEM. */
int tok_encode(const struct tokenizer *t, const char *text, size_t n, int add_special,
               int parse_special, int32_t **ids, int64_t *n_ids);

/* The bytes that token id stands for when detokenising (SentencePiece's
 * U+2581 as a space, byte tokens as their byte, GPT-2 code points as bytes;
 * control tokens as "" unless special). Writes at most cap bytes to buf and
 * returns the full length, or -1 for an id out of range. */
int tok_piece(const struct tokenizer *t, int32_t id, int special, char *buf, size_t cap);

/* The token's stored text (borrowed), NULL when out of range. */
const char *tok_text(const struct tokenizer *t, int32_t id);

/* Detokenises ids into a malloc'd NUL-terminated string (the leading space
 * a SentencePiece prefix added is removed). NULL on allocation failure. */
char *tok_decode(const struct tokenizer *t, const int32_t *ids, int64_t n, int special);

#endif
