/* tokenizer — llama.cpp-compatible SentencePiece and byte-level BPE. */
#include "backends/tokenizer.h"
#include "backends/nfc.h"
#include "backends/strmap.h"
#include "core/status.h"
#include "core/utf8.h"
#include "core/util.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MODEL_SPM, MODEL_BPE };

struct tokenizer {
    int model;
    int n_vocab;
    char **text; /* token text, NUL-terminated */
    uint32_t *len;
    float *score;
    int32_t *type;
    int32_t bos, eos, unk;
    int add_bos, add_eos, add_space_prefix;
    int nfc;               /* a tokenizer.json's NFC normalizer (qgate.tokenizer.nfc) */
    int metaspace;         /* 0: the prefix always (SentencePiece); 1/2: a Metaspace pre-tokenizer's
                            * "always"/"first": not before a space, and "first" only at the start */
    int32_t byte_tok[256]; /* SPM <0xXX> tokens, -1 when absent */
    struct strmap vocab;
    struct strmap merges; /* "left right" -> rank (BPE) */
    pcre2_code *re;       /* BPE pre-tokenizer */
    int ignore_merges;
    char byte_enc[256][4]; /* GPT-2 byte -> UTF-8 of its code point */
    uint8_t byte_enc_len[256];
    int16_t cp_to_byte[512]; /* code point (< 512) -> byte, -1 none */
};

/* ---- growable id vector ---- */
struct ids {
    int32_t *p;
    int64_t n, cap;
    int fail;
};

static void push(struct ids *v, int32_t id)
{
    if (v->fail) return;
    if (v->n == v->cap) {
        int64_t cap = v->cap ? v->cap * 2 : 64;
        int32_t *p = realloc(v->p, (size_t)cap * sizeof *p);
        if (!p) {
            v->fail = 1;
            return;
        }
        v->p = p;
        v->cap = cap;
    }
    v->p[v->n++] = id;
}

/* ---- priority queue of bigrams ---- */
struct bigram {
    int32_t left, right;
    float score;  /* SPM: higher first */
    int32_t rank; /* BPE: lower first */
    uint32_t size;
};

struct heap {
    struct bigram *a;
    int64_t n, cap;
    int bpe;
};

/* 1 when x should come out before y */
static int before(const struct heap *h, const struct bigram *x, const struct bigram *y)
{
    if (h->bpe) return x->rank < y->rank || (x->rank == y->rank && x->left < y->left);
    return x->score > y->score || (x->score == y->score && x->left < y->left);
}

static int heap_push(struct heap *h, struct bigram b)
{
    if (h->n == h->cap) {
        int64_t cap = h->cap ? h->cap * 2 : 256;
        struct bigram *a = realloc(h->a, (size_t)cap * sizeof *a);
        if (!a) return QG_ERR_NOMEM;
        h->a = a;
        h->cap = cap;
    }
    int64_t i = h->n++;
    h->a[i] = b;
    while (i > 0 && before(h, &h->a[i], &h->a[(i - 1) / 2])) {
        struct bigram t = h->a[i];
        h->a[i] = h->a[(i - 1) / 2];
        h->a[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
    return QG_OK;
}

static struct bigram heap_pop(struct heap *h)
{
    struct bigram top = h->a[0];
    h->a[0] = h->a[--h->n];
    for (int64_t i = 0;;) {
        int64_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && before(h, &h->a[l], &h->a[m])) m = l;
        if (r < h->n && before(h, &h->a[r], &h->a[m])) m = r;
        if (m == i) break;
        struct bigram t = h->a[i];
        h->a[i] = h->a[m];
        h->a[m] = t;
        i = m;
    }
    return top;
}

struct sym {
    const char *text;
    uint32_t n;
    int32_t prev, next;
};

/* Splits s into UTF-8 characters (llama.cpp's rule: length from the lead
 * byte, clipped at the end). */
static struct sym *split_chars(const char *s, size_t n, int64_t *count)
{
    struct sym *v = malloc((n + 1) * sizeof *v);
    if (!v) return NULL;
    int64_t k = 0;
    for (size_t off = 0; off < n;) {
        size_t len = utf8_lead_len((uint8_t)s[off]);
        if (len > n - off) len = n - off;
        v[k].text = s + off;
        v[k].n = (uint32_t)len;
        v[k].prev = (int32_t)k - 1;
        v[k].next = off + len < n ? (int32_t)k + 1 : -1;
        k++;
        off += len;
    }
    *count = k;
    return v;
}

static int spm_try_bigram(const struct tokenizer *t, struct sym *s, struct heap *h, int32_t l,
                          int32_t r)
{
    if (l < 0 || r < 0) return QG_OK;
    size_t n = (size_t)s[l].n + s[r].n;
    int32_t id = map_get(&t->vocab, s[l].text, n); /* s[r] follows s[l] in memory */
    if (id < 0) return QG_OK;
    struct bigram b = {.left = l, .right = r, .score = t->score[id], .size = (uint32_t)n};
    return heap_push(h, b);
}

static void spm_emit(const struct tokenizer *t, const struct sym *s, struct ids *out)
{
    int32_t id = map_get(&t->vocab, s->text, s->n);
    if (id >= 0) {
        push(out, id);
        return;
    }
    for (uint32_t j = 0; j < s->n; j++) {
        int32_t b = t->byte_tok[(uint8_t)s->text[j]];
        push(out, b >= 0 ? b : t->unk);
    }
}

/* llama.cpp's llm_tokenizer_spm_session::tokenize on already-escaped text */
static int spm_tokenize(const struct tokenizer *t, const char *text, size_t n, struct ids *out)
{
    if (n == 0) return QG_OK;
    int64_t ns;
    struct sym *s = split_chars(text, n, &ns);
    struct heap h = {0};
    int rc = s ? QG_OK : QG_ERR_NOMEM;
    for (int64_t i = 1; i < ns && !rc; i++)
        rc = spm_try_bigram(t, s, &h, (int32_t)i - 1, (int32_t)i);
    while (!rc && h.n > 0) {
        struct bigram b = heap_pop(&h);
        struct sym *l = &s[b.left], *r = &s[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue; /* outdated */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s[r->next].prev = b.left;
        rc = spm_try_bigram(t, s, &h, l->prev, b.left);
        if (!rc) rc = spm_try_bigram(t, s, &h, b.left, l->next);
    }
    for (int32_t i = 0; !rc && i != -1; i = s[i].next)
        spm_emit(t, &s[i], out);
    free(h.a);
    free(s);
    return rc;
}

static int bpe_try_bigram(const struct tokenizer *t, struct sym *s, struct heap *h, int32_t l,
                          int32_t r)
{
    if (l < 0 || r < 0) return QG_OK;
    char stack[256];
    size_t n = (size_t)s[l].n + 1 + s[r].n;
    char *key = n <= sizeof stack ? stack : malloc(n);
    if (!key) return QG_ERR_NOMEM;
    memcpy(key, s[l].text, s[l].n);
    key[s[l].n] = ' ';
    memcpy(key + s[l].n + 1, s[r].text, s[r].n);
    int32_t rank = map_get(&t->merges, key, n);
    if (key != stack) free(key);
    if (rank < 0) return QG_OK;
    struct bigram b = {.left = l, .right = r, .rank = rank, .size = s[l].n + s[r].n};
    return heap_push(h, b);
}

/* BPE over one pre-tokenized word, given as GPT-2 code points in UTF-8 */
static int bpe_word(const struct tokenizer *t, const char *w, size_t n, struct ids *out)
{
    if (t->ignore_merges) {
        int32_t id = map_get(&t->vocab, w, n);
        if (id >= 0) {
            push(out, id);
            return QG_OK;
        }
    }
    int64_t ns;
    struct sym *s = split_chars(w, n, &ns);
    struct heap h = {.bpe = 1};
    int rc = s ? QG_OK : QG_ERR_NOMEM;
    for (int64_t i = 1; i < ns && !rc; i++)
        rc = bpe_try_bigram(t, s, &h, (int32_t)i - 1, (int32_t)i);
    while (!rc && h.n > 0) {
        struct bigram b = heap_pop(&h);
        struct sym *l = &s[b.left], *r = &s[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size || l->next != b.right) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s[r->next].prev = b.left;
        rc = bpe_try_bigram(t, s, &h, l->prev, b.left);
        if (!rc) rc = bpe_try_bigram(t, s, &h, b.left, l->next);
    }
    for (int32_t i = 0; !rc && ns > 0 && i != -1; i = s[i].next) {
        if (s[i].n == 0) continue;
        int32_t id = map_get(&t->vocab, s[i].text, s[i].n);
        if (id >= 0) {
            push(out, id);
            continue;
        }
        for (uint32_t j = 0; j < s[i].n; j++) { /* as llama.cpp: single bytes that are tokens */
            int32_t b = map_get(&t->vocab, s[i].text + j, 1);
            if (b >= 0) push(out, b);
        }
    }
    free(h.a);
    free(s);
    return rc;
}

static int bpe_tokenize(const struct tokenizer *t, const char *text, size_t n, struct ids *out)
{
    if (n == 0) return QG_OK;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(t->re, NULL);
    struct sbuf word;
    sbuf_init(&word, 0);
    int rc = md ? QG_OK : QG_ERR_NOMEM;
    size_t off = 0;
    while (!rc && off < n) {
        int m = pcre2_match(t->re, (PCRE2_SPTR)text, n, off, 0, md, NULL);
        size_t start, end;
        if (m < 0) { /* no match (e.g. invalid UTF-8): the rest is one word */
            start = off;
            end = n;
        } else {
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            start = ov[0];
            end = ov[1];
            if (end == start) { /* empty match: advance one character */
                end = start + utf8_lead_len((uint8_t)text[start]);
                if (end > n) end = n;
            }
        }
        if (start > off) { /* text the regex skipped is a word of its own */
            word.len = 0;
            for (size_t i = off; i < start; i++)
                sbuf_append(&word, t->byte_enc[(uint8_t)text[i]],
                            t->byte_enc_len[(uint8_t)text[i]]);
            rc = word.failed ? QG_ERR_NOMEM : bpe_word(t, word.data, word.len, out);
        }
        word.len = 0;
        for (size_t i = start; i < end && !rc; i++)
            sbuf_append(&word, t->byte_enc[(uint8_t)text[i]], t->byte_enc_len[(uint8_t)text[i]]);
        if (!rc) rc = word.failed ? QG_ERR_NOMEM : bpe_word(t, word.data, word.len, out);
        off = end;
    }
    sbuf_release(&word);
    pcre2_match_data_free(md);
    return rc;
}

/* Tokenizes raw text (no special tokens inside) as one fragment. */
static int encode_fragment(const struct tokenizer *t, const char *text, size_t n, int prefix_space,
                           struct ids *out)
{
    if (t->nfc && t->model == MODEL_BPE) { /* between special tokens, as tokenizers does */
        char *norm = NULL;
        size_t nn;
        int rc = nfc_normalize(text, n, &norm, &nn);
        if (!rc) rc = bpe_tokenize(t, norm, nn, out);
        free(norm);
        return rc;
    }
    if (t->model == MODEL_BPE) return bpe_tokenize(t, text, n, out);
    /* SPM: optional leading space, then ' ' -> U+2581 */
    size_t spaces = (size_t)(prefix_space != 0);
    for (size_t i = 0; i < n; i++)
        spaces += text[i] == ' ';
    char *esc = malloc(n + 2 * spaces + 1);
    if (!esc) return QG_ERR_NOMEM;
    size_t k = 0;
    if (prefix_space) memcpy(esc + k, "\xe2\x96\x81", 3), k += 3;
    for (size_t i = 0; i < n; i++) {
        if (text[i] == ' ')
            memcpy(esc + k, "\xe2\x96\x81", 3), k += 3;
        else
            esc[k++] = text[i];
    }
    int rc = spm_tokenize(t, esc, k, out);
    free(esc);
    return rc;
}

/* Finds the earliest special token (control when parse_special, user-defined
 * always) in text[0..n); longest wins at a position. Returns its offset or n. */
static size_t find_special(const struct tokenizer *t, const char *text, size_t n, int parse_special,
                           int32_t *id)
{
    size_t best = n, best_len = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        if (!((t->type[i] == TOK_CONTROL && parse_special) || t->type[i] == TOK_USER) ||
            t->len[i] == 0)
            continue;
        const char *p = text;
        size_t left = n;
        while (left >= t->len[i]) {
            const char *hit = memchr(p, t->text[i][0], left - t->len[i] + 1);
            if (!hit || (size_t)(hit - text) > best) break;
            if (memcmp(hit, t->text[i], t->len[i]) == 0) {
                size_t at = (size_t)(hit - text);
                if (at < best || (at == best && t->len[i] > best_len)) {
                    best = at;
                    best_len = t->len[i];
                    *id = i;
                }
                break;
            }
            left -= (size_t)(hit - p) + 1;
            p = hit + 1;
        }
    }
    return best;
}

static int has_specials(const struct tokenizer *t, int parse_special)
{
    for (int32_t i = 0; i < t->n_vocab; i++)
        if ((t->type[i] == TOK_CONTROL && parse_special) || t->type[i] == TOK_USER) return 1;
    return 0;
}

int tok_encode(const struct tokenizer *t, const char *text, size_t n, int add_special,
               int parse_special, int32_t **ids, int64_t *n_ids)
{
    struct ids out = {.p = *ids, .n = *n_ids, .cap = *n_ids};
    if (add_special && t->add_bos && t->bos >= 0) push(&out, t->bos);
    int prev_special = 1, rc = QG_OK;
    int scan = has_specials(t, parse_special);
    size_t off = 0;
    while (!rc && off < n) {
        int32_t sid = -1;
        size_t at = scan ? off + find_special(t, text + off, n - off, parse_special, &sid) : n;
        if (at > off) {
            int prefix = t->add_space_prefix && prev_special;
            if (t->metaspace) /* HF's Metaspace: not before a space; "first": at the start only */
                prefix = t->add_space_prefix && text[off] != ' ' && (t->metaspace == 1 || !off);
            rc = encode_fragment(t, text + off, at - off, prefix, &out);
            prev_special = 0;
        }
        if (at < n) {
            push(&out, sid);
            prev_special = 1;
            off = at + t->len[sid];
        } else {
            off = n;
        }
    }
    if (!rc && add_special && t->add_eos && t->eos >= 0) push(&out, t->eos);
    *ids = out.p;
    *n_ids = out.n;
    return rc ? rc : out.fail ? QG_ERR_NOMEM : QG_OK;
}

/* ---- loading ---- */

static int flag(const struct gguf *g, const char *key, int def)
{
    int64_t v;
    return gguf_get_int(g, key, &v) == QG_OK ? v != 0 : def;
}

static void init_byte_encoder(struct tokenizer *t)
{
    /* GPT-2 bytes_to_unicode: printable bytes map to themselves, the rest to 256+k */
    int k = 0;
    for (int i = 0; i < 512; i++)
        t->cp_to_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        int cp = keep ? b : 256 + k++;
        t->cp_to_byte[cp] = (int16_t)b;
        if (cp < 0x80) {
            t->byte_enc[b][0] = (char)cp;
            t->byte_enc_len[b] = 1;
        } else {
            t->byte_enc[b][0] = (char)(0xC0 | (cp >> 6));
            t->byte_enc[b][1] = (char)(0x80 | (cp & 0x3F));
            t->byte_enc_len[b] = 2;
        }
    }
}

/* Pre-tokenizer regexes by tokenizer.ggml.pre (llama.cpp's llama-vocab.cpp). */
static const struct {
    const char *names; /* '|'-separated */
    const char *regex;
    int ignore_merges;
} pretok[] = {
    {"|gpt-2|gpt2|phi-2|starcoder|refact|jina-v2-code|",
     "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", 0},
    {"|llama3|llama-bpe|llama-v3|smaug-bpe|",
     "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
     "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     1},
    {"|qwen2|deepseek-r1-qwen|",
     "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
     "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     0},
};

static int load_bpe(struct tokenizer *t, const struct gguf *g, const char *name, char *err,
                    size_t errlen)
{
    const char *pre = "gpt-2";
    size_t plen = 5;
    char prebuf[64];
    if (gguf_get_str(g, "tokenizer.ggml.pre", &pre, &plen) != QG_OK) {
        pre = "gpt-2";
        plen = 5;
    }
    snprintf(prebuf, sizeof prebuf, "|%.*s|", (int)(plen < 60 ? plen : 60), pre);
    int which = -1;
    for (size_t i = 0; i < sizeof pretok / sizeof *pretok; i++)
        if (strstr(pretok[i].names, prebuf)) which = (int)i;
    if (which < 0)
        return qg_errf(
            err, errlen, QG_ERR_DATA,
            "%s: BPE pre-tokenizer '%.*s' is not supported (known: gpt-2, llama3, qwen2)", name,
            (int)plen, pre);
    int ec;
    PCRE2_SIZE eo;
    t->re = pcre2_compile((PCRE2_SPTR)pretok[which].regex, PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &ec, &eo, NULL);
    if (!t->re)
        return qg_errf(err, errlen, QG_ERR_INTERNAL, "pre-tokenizer regex failed to compile");
    pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE); /* best effort */
    t->ignore_merges = flag(g, "qgate.tokenizer.ignore_merges", pretok[which].ignore_merges);
    init_byte_encoder(t);
    int64_t mi = gguf_find_key(g, "tokenizer.ggml.merges");
    if (mi < 0 || gguf_kv_type(g, mi) != GGUF_ARR || gguf_kv_arr_type(g, mi) != GGUF_STR)
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: BPE tokenizer without tokenizer.ggml.merges",
                       name);
    uint64_t nm = gguf_kv_len(g, mi);
    if (nm > INT32_MAX / 2) return qg_errf(err, errlen, QG_ERR_DATA, "%s: too many merges", name);
    if (map_init(&t->merges, (int32_t)nm)) return QG_ERR_NOMEM;
    for (uint64_t i = 0; i < nm; i++) {
        const char *s;
        size_t len;
        gguf_arr_str(g, mi, i, &s, &len);
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        if (!sp)
            return qg_errf(err, errlen, QG_ERR_DATA, "%s: merge %llu ('%.*s') has no space", name,
                           (unsigned long long)i, (int)(len < 40 ? len : 40), s);
        map_put(&t->merges, s, len, (int32_t)i); /* borrowed from the file: see tok_load */
    }
    return QG_OK;
}

static int32_t token_id(const struct gguf *g, const char *key, int n_vocab)
{
    int64_t v;
    return gguf_get_int(g, key, &v) == QG_OK && v >= 0 && v < n_vocab ? (int32_t)v : -1;
}

/* The merges map borrows strings; copy them into one arena owned by t. */
static int own_merge_keys(struct tokenizer *t)
{
    size_t total = 0;
    for (int32_t i = 0; i < t->merges.n; i++)
        total += t->merges.lens[i];
    char *arena = malloc(total + 1);
    if (!arena) return QG_ERR_NOMEM;
    size_t off = 0;
    for (int32_t i = 0; i < t->merges.n; i++) {
        memcpy(arena + off, t->merges.keys[i], t->merges.lens[i]);
        t->merges.keys[i] = arena + off;
        off += t->merges.lens[i];
    }
    /* keys[0] points at the arena start, which tok_free releases */
    if (t->merges.n == 0) free(arena);
    return QG_OK;
}

/* special ids and flags; a tokenizer.json's Metaspace scheme (hf_tokenizer.c) */
static void read_specials(struct tokenizer *t, const struct gguf *g, int kind)
{
    t->bos = token_id(g, "tokenizer.ggml.bos_token_id", t->n_vocab);
    t->eos = token_id(g, "tokenizer.ggml.eos_token_id", t->n_vocab);
    t->unk = token_id(g, "tokenizer.ggml.unknown_token_id", t->n_vocab);
    if (t->unk < 0) t->unk = 0;
    t->add_bos = flag(g, "tokenizer.ggml.add_bos_token", kind == MODEL_SPM);
    t->add_eos = flag(g, "tokenizer.ggml.add_eos_token", 0);
    t->add_space_prefix = flag(g, "tokenizer.ggml.add_space_prefix", kind == MODEL_SPM);
    int64_t ms = 0;
    if (gguf_get_int(g, "qgate.tokenizer.metaspace", &ms) == QG_OK && ms >= 0 && ms <= 2)
        t->metaspace = (int)ms;
    t->nfc = flag(g, "qgate.tokenizer.nfc", 0);
}

int tok_load(const struct gguf *g, const char *name, struct tokenizer **out, char *err,
             size_t errlen)
{
    *out = NULL;
    const char *model;
    size_t mlen;
    if (gguf_get_str(g, "tokenizer.ggml.model", &model, &mlen) != QG_OK)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: no tokenizer (tokenizer.ggml.model is missing)", name);
    int kind;
    if (mlen == 5 && memcmp(model, "llama", 5) == 0)
        kind = MODEL_SPM;
    else if (mlen == 4 && memcmp(model, "gpt2", 4) == 0)
        kind = MODEL_BPE;
    else
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: tokenizer model '%.*s' is not supported (known: llama, gpt2)", name,
                       (int)(mlen < 40 ? mlen : 40), model);
    int64_t ti = gguf_find_key(g, "tokenizer.ggml.tokens");
    if (ti < 0 || gguf_kv_type(g, ti) != GGUF_ARR || gguf_kv_arr_type(g, ti) != GGUF_STR ||
        gguf_kv_len(g, ti) == 0 || gguf_kv_len(g, ti) > (1u << 24))
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: tokenizer.ggml.tokens is missing or not 1..2^24 strings", name);
    struct tokenizer *t = calloc(1, sizeof *t);
    if (!t) return QG_ERR_NOMEM;
    t->model = kind;
    t->n_vocab = (int)gguf_kv_len(g, ti);
    t->text = calloc((size_t)t->n_vocab, sizeof *t->text);
    t->len = calloc((size_t)t->n_vocab, sizeof *t->len);
    t->score = calloc((size_t)t->n_vocab, sizeof *t->score);
    t->type = calloc((size_t)t->n_vocab, sizeof *t->type);
    int rc =
        t->text && t->len && t->score && t->type ? map_init(&t->vocab, t->n_vocab) : QG_ERR_NOMEM;
    int64_t si = gguf_find_key(g, "tokenizer.ggml.scores");
    int64_t yi = gguf_find_key(g, "tokenizer.ggml.token_type");
    if (!rc && si >= 0 && gguf_kv_len(g, si) != (uint64_t)t->n_vocab)
        rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: %llu token scores for %d tokens", name,
                     (unsigned long long)gguf_kv_len(g, si), t->n_vocab);
    if (!rc && yi >= 0 && gguf_kv_len(g, yi) != (uint64_t)t->n_vocab)
        rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: %llu token types for %d tokens", name,
                     (unsigned long long)gguf_kv_len(g, yi), t->n_vocab);
    for (int32_t i = 0; i < t->n_vocab && !rc; i++) {
        const char *s;
        size_t len;
        gguf_arr_str(g, ti, (uint64_t)i, &s, &len);
        if (!(t->text[i] = qg_strndup(s, len))) rc = QG_ERR_NOMEM;
        t->len[i] = (uint32_t)len;
        double sc = 0;
        int64_t ty = TOK_NORMAL;
        if (si >= 0) gguf_arr_float(g, si, (uint64_t)i, &sc);
        if (yi >= 0) gguf_arr_int(g, yi, (uint64_t)i, &ty);
        t->score[i] = (float)sc;
        t->type[i] = (int32_t)ty;
        if (!rc) map_put(&t->vocab, t->text[i], len, i);
    }
    for (int b = 0; b < 256 && !rc; b++) {
        char buf[8];
        snprintf(buf, sizeof buf, "<0x%02X>", b);
        t->byte_tok[b] = map_get(&t->vocab, buf, 6);
    }
    read_specials(t, g, kind);
    if (!rc && kind == MODEL_BPE) {
        rc = load_bpe(t, g, name, err, errlen);
        if (!rc) rc = own_merge_keys(t);
    }
    if (rc) {
        if (rc == QG_ERR_NOMEM)
            qg_errf(err, errlen, rc, "%s: out of memory loading the tokenizer", name);
        tok_free(t);
        return rc;
    }
    *out = t;
    return QG_OK;
}

void tok_free(struct tokenizer *t)
{
    if (!t) return;
    for (int i = 0; t->text && i < t->n_vocab; i++)
        free(t->text[i]);
    free(t->text);
    free(t->len);
    free(t->score);
    free(t->type);
    map_release(&t->vocab);
    if (t->merges.n > 0 && t->merges.keys) free((void *)t->merges.keys[0]);
    map_release(&t->merges);
    pcre2_code_free(t->re);
    free(t);
}

int tok_n_vocab(const struct tokenizer *t)
{
    return t->n_vocab;
}
int32_t tok_bos(const struct tokenizer *t)
{
    return t->bos;
}
int32_t tok_eos(const struct tokenizer *t)
{
    return t->eos;
}
int tok_add_bos(const struct tokenizer *t)
{
    return t->add_bos;
}
const char *tok_model(const struct tokenizer *t)
{
    return t->model == MODEL_SPM ? "llama" : "gpt2";
}

const char *tok_text(const struct tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab ? t->text[id] : NULL;
}

/* Appends the piece of id to b. */
static void piece(const struct tokenizer *t, int32_t id, int special, struct sbuf *b)
{
    const char *s = t->text[id];
    size_t n = t->len[id];
    int type = t->type[id];
    if (type == TOK_CONTROL || type == TOK_UNKNOWN || type == TOK_UNUSED) {
        if (special) sbuf_append(b, s, n);
        return;
    }
    if (t->model == MODEL_SPM) {
        if (type == TOK_BYTE && n == 6) {
            char c = (char)strtol(s + 3, NULL, 16);
            sbuf_append(b, &c, 1);
            return;
        }
        for (size_t i = 0; i < n;) {
            if (i + 3 <= n && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
                sbuf_append(b, " ", 1);
                i += 3;
            } else {
                sbuf_append(b, s + i, 1);
                i++;
            }
        }
        return;
    }
    if (type == TOK_USER) {
        sbuf_append(b, s, n);
        return;
    }
    for (size_t i = 0; i < n;) { /* GPT-2 code points back to bytes */
        unsigned c = (uint8_t)s[i];
        unsigned cp = c;
        size_t l = 1;
        if ((c & 0xE0) == 0xC0 && i + 1 < n)
            cp = (c & 0x1F) << 6 | ((uint8_t)s[i + 1] & 0x3F), l = 2;
        int by = cp < 512 ? t->cp_to_byte[cp] : -1;
        if (by >= 0) {
            char ch = (char)by;
            sbuf_append(b, &ch, 1);
        } else {
            sbuf_append(b, s + i, l);
        }
        i += l;
    }
}

int tok_piece(const struct tokenizer *t, int32_t id, int special, char *buf, size_t cap)
{
    if (id < 0 || id >= t->n_vocab) return -1;
    struct sbuf b;
    sbuf_init(&b, 1 << 20);
    piece(t, id, special, &b);
    size_t n = b.len;
    if (cap > 0) {
        size_t k = n < cap ? n : cap;
        memcpy(buf, sbuf_str(&b), k);
        if (k < cap) buf[k] = '\0';
    }
    sbuf_release(&b);
    return (int)n;
}

char *tok_decode(const struct tokenizer *t, const int32_t *ids, int64_t n, int special)
{
    struct sbuf b;
    sbuf_init(&b, 0);
    sbuf_append(&b, "", 0);
    int first = 1;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab) continue;
        size_t before = b.len;
        piece(t, ids[i], special, &b);
        /* drop the space SentencePiece prefixed to the text */
        if (first && b.len > before && t->model == MODEL_SPM && t->add_space_prefix &&
            b.data[before] == ' ') {
            memmove(b.data + before, b.data + before + 1, b.len - before);
            b.len--;
        }
        first = 0; /* llama.cpp strips the first token's space only */
    }
    if (b.failed) {
        sbuf_release(&b);
        return NULL;
    }
    return b.data;
}
