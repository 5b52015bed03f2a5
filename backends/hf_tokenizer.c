/* hf_tokenizer — tokenizer.json to tokenizer.ggml.* keys (see the header). */
#include "backends/hf_tokenizer.h"
#include "backends/gguf.h"
#include "backends/gguf_write.h"
#include "backends/tokenizer.h"
#include "core/status.h"
#include "core/util.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { HF_JSON_MAX = 64 << 20, HF_VOCAB_MAX = 1 << 22 };

/* The split regexes of the byte-level tokenizers qgate runs, as their
 * tokenizer.json spells them, and the tokenizer.ggml.pre that runs each. */
static const struct {
    const char *regex, *pre;
} known_splits[] = {
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     "llama-bpe"},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     "qwen2"},
};

struct vocab {
    char **tok;
    float *score;
    int32_t *type;
    int n;
    int *slot;     /* open-addressing index of tok: id + 1, 0 empty */
    size_t n_slot; /* a power of two above 2 n */
};

static void vocab_free(struct vocab *v)
{
    for (int i = 0; v->tok && i < v->n; i++)
        free(v->tok[i]);
    free(v->tok);
    free(v->score);
    free(v->type);
    free(v->slot);
}

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h;
}

/* indexes every token (the first of equal texts wins, as a dict lookup) */
static int vocab_index(struct vocab *v)
{
    v->n_slot = 16;
    while (v->n_slot < 2 * (size_t)v->n + 2)
        v->n_slot *= 2;
    if (!(v->slot = calloc(v->n_slot, sizeof *v->slot))) return QG_ERR_NOMEM;
    for (int i = 0; i < v->n; i++) {
        size_t n = strlen(v->tok[i]), k = hash_bytes(v->tok[i], n) & (v->n_slot - 1);
        while (v->slot[k] && strcmp(v->tok[v->slot[k] - 1], v->tok[i]))
            k = (k + 1) & (v->n_slot - 1);
        if (!v->slot[k]) v->slot[k] = i + 1;
    }
    return QG_OK;
}

static const char *str_of(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int is_type(const cJSON *o, const char *type)
{
    const char *t = str_of(o, "type");
    return t && !strcmp(t, type);
}

/* the vocabulary: model.vocab and added_tokens, ids 0..n-1 each once */
static int read_vocab(const cJSON *root, const char *file, struct vocab *v, char *err,
                      size_t errlen)
{
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model"),
                *voc = cJSON_GetObjectItemCaseSensitive(model, "vocab"),
                *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), *e;
    if (!cJSON_IsObject(voc))
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: model.vocab is not an object", file);
    int n = 0;
    cJSON_ArrayForEach(e, voc)
    {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= HF_VOCAB_MAX ||
            e->valuedouble != (double)(int)e->valuedouble)
            return qg_errf(err, errlen, QG_ERR_DATA, "%s: model.vocab['%.40s'] is not an id", file,
                           e->string);
        if ((int)e->valuedouble + 1 > n) n = (int)e->valuedouble + 1;
    }
    cJSON_ArrayForEach(e, added)
    {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= HF_VOCAB_MAX ||
            id->valuedouble != (double)(int)id->valuedouble || !str_of(e, "content"))
            return qg_errf(err, errlen, QG_ERR_DATA, "%s: an added_tokens entry lacks id/content",
                           file);
        if ((int)id->valuedouble + 1 > n) n = (int)id->valuedouble + 1;
    }
    v->n = n;
    v->tok = calloc((size_t)n + 1, sizeof *v->tok);
    v->score = calloc((size_t)n + 1, sizeof *v->score);
    v->type = calloc((size_t)n + 1, sizeof *v->type);
    if (!v->tok || !v->score || !v->type) return QG_ERR_NOMEM;
    cJSON_ArrayForEach(e, voc)
    {
        int id = (int)e->valuedouble;
        if (v->tok[id])
            return qg_errf(err, errlen, QG_ERR_DATA, "%s: two vocabulary entries have id %d", file,
                           id);
        if (!(v->tok[id] = qg_strdup(e->string))) return QG_ERR_NOMEM;
        v->type[id] = TOK_NORMAL;
    }
    cJSON_ArrayForEach(e, added)
    {
        int id = (int)cJSON_GetObjectItemCaseSensitive(e, "id")->valuedouble;
        if (!v->tok[id] && !(v->tok[id] = qg_strdup(str_of(e, "content")))) return QG_ERR_NOMEM;
        v->type[id] =
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special")) ? TOK_CONTROL : TOK_USER;
    }
    for (int i = 0; i < n; i++)
        if (!v->tok[i])
            return qg_errf(err, errlen, QG_ERR_DATA, "%s: no token has id %d (ids must be 0..%d)",
                           file, i, n - 1);
    return vocab_index(v);
}

/* merge k as its two parts: "a b" or ["a", "b"] */
static int merge_parts(const cJSON *m, const char **a, size_t *al, const char **b)
{
    if (cJSON_IsString(m)) {
        const char *sp = strchr(m->valuestring, ' ');
        if (!sp) return 0;
        *a = m->valuestring, *al = (size_t)(sp - m->valuestring), *b = sp + 1;
        return 1;
    }
    if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 &&
        cJSON_IsString(cJSON_GetArrayItem(m, 0)) && cJSON_IsString(cJSON_GetArrayItem(m, 1))) {
        *a = cJSON_GetArrayItem(m, 0)->valuestring, *al = strlen(*a);
        *b = cJSON_GetArrayItem(m, 1)->valuestring;
        return 1;
    }
    return 0;
}

static int find_token(const struct vocab *v, const char *s, size_t n)
{
    if (!v->slot) return -1;
    for (size_t k = hash_bytes(s, n) & (v->n_slot - 1); v->slot[k]; k = (k + 1) & (v->n_slot - 1)) {
        const char *t = v->tok[v->slot[k] - 1];
        if (strlen(t) == n && !memcmp(t, s, n)) return v->slot[k] - 1;
    }
    return -1;
}

/* SentencePiece-style: scores from merge ranks, byte tokens typed */
static int spm_scores(const cJSON *merges, const char *file, struct vocab *v, char *err,
                      size_t errlen)
{
    char *set = calloc((size_t)v->n + 1, 1), buf[1024];
    if (!set) return QG_ERR_NOMEM;
    int rank = 0, rc = QG_OK;
    const cJSON *m;
    cJSON_ArrayForEach(m, merges)
    {
        const char *a, *b;
        size_t al;
        if (!merge_parts(m, &a, &al, &b) || al + strlen(b) >= sizeof buf) {
            rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: merge %d is not two tokens", file, rank);
            break;
        }
        int n = snprintf(buf, sizeof buf, "%.*s%s", (int)al, a, b),
            id = find_token(v, buf, (size_t)n);
        if (id >= 0 && !set[id]) v->score[id] = (float)-rank, set[id] = 1;
        rank++;
    }
    for (int i = 0; i < v->n && !rc; i++) {
        const char *s = v->tok[i];
        if (v->type[i] == TOK_NORMAL && strlen(s) == 6 && !strncmp(s, "<0x", 3) && s[5] == '>' &&
            strchr("0123456789ABCDEF", s[3]) && strchr("0123456789ABCDEF", s[4]))
            v->type[i] = TOK_BYTE;
        else if (v->type[i] == TOK_NORMAL && !set[i])
            v->score[i] = -1e9f; /* a piece no merge makes: merged last */
    }
    free(set);
    return rc;
}

/* SentencePiece-style spaces: a Prepend+Replace normalizer or a Metaspace
 * pre-tokenizer; *prefix: whether a leading space is added; *metaspace: 0
 * (Prepend: always), 1 (Metaspace "always"), 2 (Metaspace "first") */
static int spm_spaces(const cJSON *root, const char *file, int *prefix, int *metaspace, char *err,
                      size_t errlen)
{
    *metaspace = 0;
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer"),
                *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    *prefix = 0;
    if (cJSON_IsObject(pre)) {
        const char *scheme = str_of(pre, "prepend_scheme"), *rep = str_of(pre, "replacement");
        if (!scheme && cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(pre, "add_prefix_space")))
            scheme = "never"; /* the older spelling */
        if (rep && strcmp(rep, "\xe2\x96\x81"))
            return qg_errf(err, errlen, QG_ERR_DATA,
                           "%s: a Metaspace replacement other than "
                           "U+2581 is not supported",
                           file);
        if (!is_type(pre, "Metaspace") ||
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pre, "split")))
            return qg_errf(err, errlen, QG_ERR_DATA,
                           "%s: pre_tokenizer '%s' is not supported with byte_fallback BPE (a "
                           "Metaspace without split is)",
                           file, str_of(pre, "type") ? str_of(pre, "type") : "?");
        *prefix = !scheme || strcmp(scheme, "never") != 0;
        *metaspace = scheme && !strcmp(scheme, "first") ? 2 : 1;
        return cJSON_IsObject(norm)
                   ? qg_errf(err, errlen, QG_ERR_DATA,
                             "%s: a normalizer beside Metaspace is not supported", file)
                   : QG_OK;
    }
    const cJSON *list = is_type(norm, "Sequence")
                            ? cJSON_GetObjectItemCaseSensitive(norm, "normalizers")
                            : NULL,
                *n;
    int replace = 0;
    cJSON_ArrayForEach(n, list)
    {
        const char *pp = str_of(n, "prepend"), *c = str_of(n, "content");
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(n, "pattern");
        if (is_type(n, "Prepend") && pp && !strcmp(pp, "\xe2\x96\x81"))
            *prefix = 1;
        else if (is_type(n, "Replace") && c && !strcmp(c, "\xe2\x96\x81") &&
                 str_of(pat, "String") && !strcmp(str_of(pat, "String"), " "))
            replace = 1;
        else
            return qg_errf(err, errlen, QG_ERR_DATA, "%s: normalizer '%s' is not supported", file,
                           str_of(n, "type") ? str_of(n, "type") : "?");
    }
    if (!replace)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: byte_fallback BPE without spaces as U+2581 (Replace or Metaspace) is "
                       "not supported",
                       file);
    return QG_OK;
}

/* byte-level: the pre-tokenizer's split regex names tokenizer.ggml.pre */
static int byte_level_pre(const cJSON *root, const char *file, const char **pre, char *err,
                          size_t errlen)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"),
                *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    if (cJSON_IsObject(norm) && !is_type(norm, "NFC"))
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: normalizer '%s' is not supported", file,
                       str_of(norm, "type") ? str_of(norm, "type") : "?");
    if (is_type(p, "ByteLevel")) { /* GPT-2: its own regex, no prefix space */
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "add_prefix_space")) ||
            cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(p, "use_regex")))
            return qg_errf(err, errlen, QG_ERR_DATA,
                           "%s: ByteLevel with add_prefix_space or without use_regex is not "
                           "supported",
                           file);
        *pre = "gpt-2";
        return QG_OK;
    }
    const cJSON *list =
        is_type(p, "Sequence") ? cJSON_GetObjectItemCaseSensitive(p, "pretokenizers") : NULL;
    const cJSON *split = cJSON_GetArrayItem(list, 0), *bl = cJSON_GetArrayItem(list, 1);
    const char *re = str_of(cJSON_GetObjectItemCaseSensitive(split, "pattern"), "Regex");
    const char *beh = str_of(split, "behavior");
    if (cJSON_GetArraySize(list) != 2 || !is_type(split, "Split") || !is_type(bl, "ByteLevel") ||
        !re || (beh && strcmp(beh, "Isolated")) ||
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(split, "invert")) ||
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(bl, "add_prefix_space")) ||
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(bl, "use_regex")))
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: pre_tokenizer is not ByteLevel or Split(regex) + ByteLevel", file);
    for (size_t i = 0; i < sizeof known_splits / sizeof *known_splits; i++)
        if (!strcmp(re, known_splits[i].regex)) {
            *pre = known_splits[i].pre;
            return QG_OK;
        }
    return qg_errf(err, errlen, QG_ERR_DATA,
                   "%s: the split regex '%.60s...' is not one qgate runs (GPT-2, Llama 3, Qwen2)",
                   file, re);
}

static int write_merges(struct gguf_writer *w, const cJSON *merges)
{
    int n = cJSON_GetArraySize(merges), rc = QG_OK, i = 0;
    char **s = calloc((size_t)n + 1, sizeof *s);
    if (!s) return QG_ERR_NOMEM;
    const cJSON *m;
    cJSON_ArrayForEach(m, merges)
    {
        const char *a, *b;
        size_t al;
        if (!merge_parts(m, &a, &al, &b)) {
            rc = QG_ERR_DATA;
            break;
        }
        size_t len = al + strlen(b) + 2;
        if (!(s[i] = malloc(len))) {
            rc = QG_ERR_NOMEM;
            break;
        }
        snprintf(s[i++], len, "%.*s %s", (int)al, a, b);
    }
    if (!rc)
        rc = gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)s,
                                     (uint64_t)n);
    for (int k = 0; k < n; k++)
        free(s[k]);
    free(s);
    return rc;
}

/* a special token named in tokenizer_config.json (a string or
 * {"content": ...}): its id, or -1 */
static int config_token(const cJSON *cfg, const char *key, const struct vocab *v)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(cfg, key);
    const char *s = cJSON_IsString(t) ? t->valuestring : str_of(t, "content");
    return s ? find_token(v, s, strlen(s)) : -1;
}

/* add_bos/add_eos: tokenizer_config.json's flags, else what the
 * post-processor's TemplateProcessing puts around a single sequence */
static void special_flags(const cJSON *root, const cJSON *cfg, const struct vocab *v, int *bos,
                          int *eos, int *add_bos, int *add_eos)
{
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(root, "post_processor"), *tp = NULL, *x;
    if (is_type(pp, "TemplateProcessing")) tp = pp;
    cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(pp, "processors"))
    {
        if (is_type(x, "TemplateProcessing")) tp = x;
    }
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(tp, "single");
    int n = cJSON_GetArraySize(single);
    const char *first = str_of(
                   cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(single, 0), "SpecialToken"),
                   "id"),
               *last = n > 1 ? str_of(cJSON_GetObjectItemCaseSensitive(
                                          cJSON_GetArrayItem(single, n - 1), "SpecialToken"),
                                      "id")
                             : NULL;
    *add_bos = first != NULL, *add_eos = last != NULL;
    if (first && *bos < 0) *bos = find_token(v, first, strlen(first));
    if (last && *eos < 0) *eos = find_token(v, last, strlen(last));
    const cJSON *ab = cJSON_GetObjectItemCaseSensitive(cfg, "add_bos_token"),
                *ae = cJSON_GetObjectItemCaseSensitive(cfg, "add_eos_token");
    if (cJSON_IsBool(ab)) *add_bos = cJSON_IsTrue(ab);
    if (cJSON_IsBool(ae)) *add_eos = cJSON_IsTrue(ae);
}

/* the BPE model's options qgate does not implement */
static int check_model(const cJSON *model, const char *file, char *err, size_t errlen)
{
    const char *type = str_of(model, "type");
    if (!type || strcmp(type, "BPE"))
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: tokenizer model '%s' is not supported (qgate reads BPE)", file,
                       type ? type : "?");
    static const char *const unset[] = {"dropout", "continuing_subword_prefix",
                                        "end_of_word_suffix"};
    for (size_t i = 0; i < sizeof unset / sizeof *unset; i++) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(model, unset[i]);
        if (o && !cJSON_IsNull(o) && !(cJSON_IsString(o) && !o->valuestring[0]))
            return qg_errf(err, errlen, QG_ERR_DATA, "%s: model.%s is set (not supported)", file,
                           unset[i]);
    }
    return QG_OK;
}

static cJSON *read_json(const char *dir, const char *base, int required, char *path, size_t pn,
                        int *rc, char *err, size_t errlen)
{
    snprintf(path, pn, "%s/%s", dir, base);
    char *text = NULL;
    size_t n = 0;
    *rc = QG_OK;
    if (!required && access(path, F_OK) != 0) return NULL;
    if ((*rc = qg_read_file(path, HF_JSON_MAX, &text, &n, err, errlen))) return NULL;
    cJSON *j = cJSON_ParseWithLength(text, n);
    free(text);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        j = NULL;
        *rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: not a JSON object", path);
    }
    return j;
}

/* the keys of one parsed tokenizer */
static int write_keys(struct gguf_writer *w, const cJSON *root, const cJSON *cfg, const char *file,
                      struct vocab *v, char *err, size_t errlen)
{
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model"),
                *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    int spm = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback")), prefix = 0,
        metaspace = 0;
    const char *pre = NULL;
    int rc = spm ? spm_spaces(root, file, &prefix, &metaspace, err, errlen)
                 : byte_level_pre(root, file, &pre, err, errlen);
    if (!rc && spm) rc = spm_scores(merges, file, v, err, errlen);
    int bos = config_token(cfg, "bos_token", v), eos = config_token(cfg, "eos_token", v), unk = -1,
        add_bos, add_eos;
    special_flags(root, cfg, v, &bos, &eos, &add_bos, &add_eos);
    const char *u = str_of(model, "unk_token");
    if (u) unk = find_token(v, u, strlen(u));
    if (unk >= 0 && v->type[unk] != TOK_CONTROL) /* an added special <unk> splits out as HF's */
        v->type[unk] = TOK_UNKNOWN;
    if (!rc) rc = gguf_writer_set_str(w, "tokenizer.ggml.model", spm ? "llama" : "gpt2");
    if (!rc && pre) rc = gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
    if (!rc)
        rc = gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->tok,
                                     (uint64_t)v->n);
    if (!rc && spm)
        rc = gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_F32, v->score, (uint64_t)v->n);
    if (!rc)
        rc = gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_I32, v->type, (uint64_t)v->n);
    if (!rc && !spm) rc = write_merges(w, merges);
    if (!rc && bos >= 0) rc = gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
    if (!rc && eos >= 0) rc = gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos);
    if (!rc && unk >= 0)
        rc = gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)unk);
    if (!rc) rc = gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", add_bos);
    if (!rc) rc = gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", add_eos);
    if (!rc && spm) rc = gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", prefix);
    if (!rc && metaspace)
        rc = gguf_writer_set_u32(w, "qgate.tokenizer.metaspace", (uint32_t)metaspace);
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    if (!rc && !spm && is_type(norm, "NFC")) /* Qwen2: applied before the split */
        rc = gguf_writer_set_bool(w, "qgate.tokenizer.nfc", 1);
    const cJSON *im = cJSON_GetObjectItemCaseSensitive(model, "ignore_merges");
    if (!rc && !spm && cJSON_IsBool(im))
        rc = gguf_writer_set_bool(w, "qgate.tokenizer.ignore_merges", cJSON_IsTrue(im));
    if (rc == QG_ERR_DATA && !err[0])
        qg_errf(err, errlen, rc, "%s: model.merges holds an entry that is not two tokens", file);
    return rc;
}

/* unused [PAD<id>] tokens from v->n up to n */
static int pad_vocab(struct vocab *v, int n)
{
    if (n <= v->n || n > HF_VOCAB_MAX) return QG_OK;
    char **t = realloc(v->tok, (size_t)n * sizeof *t);
    if (t) v->tok = t;
    float *s = realloc(v->score, (size_t)n * sizeof *s);
    if (s) v->score = s;
    int32_t *y = realloc(v->type, (size_t)n * sizeof *y);
    if (y) v->type = y;
    if (!t || !s || !y) return QG_ERR_NOMEM;
    for (int i = v->n; i < n; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, "[PAD%d]", i);
        v->score[i] = 0, v->type[i] = TOK_UNUSED;
        if (!(v->tok[i] = qg_strdup(buf))) {
            v->n = i;
            return QG_ERR_NOMEM;
        }
    }
    v->n = n;
    return QG_OK;
}

int hf_tokenizer_keys(const char *dir, struct gguf_writer *w, int pad_to, int *n_vocab, char *err,
                      size_t errlen)
{
    char file[4200], cfile[4200];
    int rc;
    err[0] = '\0';
    cJSON *root = read_json(dir, "tokenizer.json", 1, file, sizeof file, &rc, err, errlen);
    if (!root) return rc;
    cJSON *cfg = read_json(dir, "tokenizer_config.json", 0, cfile, sizeof cfile, &rc, err, errlen);
    struct vocab v = {0};
    if (!rc) rc = check_model(cJSON_GetObjectItemCaseSensitive(root, "model"), file, err, errlen);
    if (!rc) rc = read_vocab(root, file, &v, err, errlen);
    if (!rc) rc = pad_vocab(&v, pad_to);
    if (!rc) rc = write_keys(w, root, cfg, file, &v, err, errlen);
    if (rc == QG_ERR_NOMEM && !err[0]) qg_errf(err, errlen, rc, "%s: out of memory", file);
    *n_vocab = v.n;
    vocab_free(&v);
    cJSON_Delete(root);
    cJSON_Delete(cfg);
    return rc;
}
