/* utf8 — UTF-8 decoding rules in one place.
 *
 * Strict validation follows RFC 3629 (no overlongs, no surrogates, nothing
 * above U+10FFFF); the tokenizers instead need llama.cpp's lenient
 * lead-byte length, which is utf8_lead_len.
 */
#ifndef QG_UTF8_H
#define QG_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The length (1-4) of the valid UTF-8 sequence at s, reading at most avail
 * bytes; 0 when the bytes there are not valid UTF-8. */
size_t utf8_seq_len(const uint8_t *s, size_t avail);

/* 1 when the n bytes at s are valid UTF-8; else 0 with *bad (when not
 * NULL) set to the offset of the first invalid sequence. */
int utf8_valid(const char *s, size_t n, size_t *bad);

/* The sequence length a lead byte announces (1 for ASCII and stray
 * continuation bytes, 2-4 otherwise), as llama.cpp's tokenizers read it. */
size_t utf8_lead_len(uint8_t c);

/* A copy of the NUL-terminated s (NULL reads as "") with invalid UTF-8
 * replaced by U+FFFD; malloc'd, NULL on allocation failure. */
char *utf8_sanitize(const char *s);

#endif
