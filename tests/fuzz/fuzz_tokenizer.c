/* fuzz_tokenizer — libFuzzer target for the tokenizers: encodes arbitrary
 * bytes with a SentencePiece vocabulary (a generated one, or the GGUF named by
 * $QG_FUZZ_VOCAB, e.g. a BPE vocabulary) with and without special-token
 * parsing, and checks that detokenising gives the bytes back (which holds for
 * the byte-fallback SentencePiece vocabulary without special parsing, on
 * valid UTF-8: with an invalid lead byte, llama.cpp's splitting into
 * characters swallows the next bytes, and so does ours, by design; and
 * without a literal U+2581, which SentencePiece decodes as a space); and
 * NFC (nfc.h, the Qwen2 normalizer of tokenizer.json files) on the same
 * bytes: it stays within 4 bytes per input byte and is idempotent. */
#include "backends/gguf.h"
#include "backends/nfc.h"
#include "backends/synth.h"
#include "backends/tokenizer.h"
#include "core/util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct tokenizer *tok;
static int roundtrip;

static void init(void)
{
    char err[QG_ERRMSG_MAX], path[64];
    const char *vocab = getenv("QG_FUZZ_VOCAB");
    if (!vocab) {
        snprintf(path, sizeof path, "/tmp/qgate-fuzz-vocab-%d.gguf", (int)getpid());
        struct synth_params p = synth_default_params();
        p.dim = 32, p.ffn = 32, p.n_layers = 1;
        if (synth_write(&p, path, err, sizeof err)) abort();
        vocab = path;
        roundtrip = 1;
    }
    struct gguf *g;
    if (gguf_open(vocab, &g, err, sizeof err) || tok_load(g, vocab, &tok, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        abort();
    }
    gguf_close(g);
    if (vocab == path) unlink(path);
}

/* 1 when s is well-formed UTF-8 (RFC 3629) */
static int valid_utf8(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!len || i + len > n || (len == 2 && c < 0xC2) || (len == 4 && c > 0xF4)) return 0;
        for (size_t k = 1; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) return 0;
        if (len == 3 && ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] >= 0xA0)))
            return 0;
        if (len == 4 && ((c == 0xF0 && s[i + 1] < 0x90) || (c == 0xF4 && s[i + 1] >= 0x90)))
            return 0;
        i += len;
    }
    return 1;
}

/* NFC(NFC(x)) == NFC(x), within 4 bytes per byte */
static void nfc_check(const uint8_t *data, size_t size)
{
    char *a, *b;
    size_t na, nb;
    if (nfc_normalize((const char *)data, size, &a, &na)) abort();
    if (na > 4 * size || nfc_normalize(a, na, &b, &nb)) abort();
    if (nb != na || memcmp(a, b, na)) abort();
    free(a);
    free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!tok) init();
    nfc_check(data, size);
    for (int special = 0; special < 2; special++) {
        int32_t *ids = NULL;
        int64_t n = 0;
        if (tok_encode(tok, (const char *)data, size, 0, special, &ids, &n)) abort();
        for (int64_t i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= tok_n_vocab(tok)) abort();
        char *back = tok_decode(tok, ids, n, 0);
        if (!back) abort();
        if (roundtrip && !special && !memchr(data, 0, size) && valid_utf8(data, size) &&
            !memmem(data, size, "\xe2\x96\x81", 3) &&
            (strlen(back) != size || memcmp(back, data, size) != 0))
            abort(); /* (NUL bytes would end the decoded C string) */
        free(back);
        free(ids);
    }
    return 0;
}
