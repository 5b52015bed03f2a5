/* gguf — bounds-checked GGUF v2/v3 reader over a read-only mapping. */
#include "backends/gguf.h"
#include "backends/ggml_types.h"
#include "core/status.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAGIC "GGUF"

struct kv {
    char *key;
    uint32_t type;     /* enum gguf_vtype */
    uint32_t arr_type; /* element type when type == GGUF_ARR */
    uint64_t n;        /* 1 for scalars */
    size_t off;        /* file offset of the value (first element for arrays) */
    size_t *str_off;   /* string arrays: file offset of each element's length */
};

struct gguf {
    const uint8_t *base;
    size_t size;
    int mapped; /* 1 when base came from mmap and must be unmapped */
    char *name;
    uint32_t version;
    uint64_t alignment;
    uint64_t data_off;
    int64_t n_kv, n_tensors;
    struct kv *kvs;
    struct gguf_tensor *tensors;
    void *owned_buf;              /* gguf_attach: the metadata image, freed at close */
    void (*release)(void *owner); /* gguf_attach: what the attached tensors live in */
    void *owner;
};

struct cur {
    const uint8_t *p;
    size_t size, pos;
    const char *name;
    char *err;
    size_t errlen;
};

static const uint8_t vtype_size[GGUF_VTYPE_COUNT] = {
    [GGUF_U8] = 1,  [GGUF_I8] = 1,  [GGUF_U16] = 2,  [GGUF_I16] = 2, [GGUF_U32] = 4,
    [GGUF_I32] = 4, [GGUF_F32] = 4, [GGUF_BOOL] = 1, [GGUF_STR] = 0, [GGUF_ARR] = 0,
    [GGUF_U64] = 8, [GGUF_I64] = 8, [GGUF_F64] = 8,
};

const char *gguf_vtype_name(uint32_t t)
{
    static const char *names[GGUF_VTYPE_COUNT] = {"u8",  "i8",  "u16",  "i16",    "u32",
                                                  "i32", "f32", "bool", "string", "array",
                                                  "u64", "i64", "f64"};
    return t < GGUF_VTYPE_COUNT ? names[t] : "unknown";
}

static int need(struct cur *c, uint64_t n, const char *what)
{
    if (n > c->size - c->pos)
        return qg_errf(c->err, c->errlen, QG_ERR_DATA,
                       "%s: truncated at offset %zu: %s needs %llu bytes, %zu left", c->name,
                       c->pos, what, (unsigned long long)n, c->size - c->pos);
    return QG_OK;
}

static uint32_t rd_u32_at(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd_u64_at(const uint8_t *p)
{
    return (uint64_t)rd_u32_at(p) | (uint64_t)rd_u32_at(p + 4) << 32;
}

static int rd_u32(struct cur *c, uint32_t *v, const char *what)
{
    int rc = need(c, 4, what);
    if (rc) return rc;
    *v = rd_u32_at(c->p + c->pos);
    c->pos += 4;
    return QG_OK;
}

static int rd_u64(struct cur *c, uint64_t *v, const char *what)
{
    int rc = need(c, 8, what);
    if (rc) return rc;
    *v = rd_u64_at(c->p + c->pos);
    c->pos += 8;
    return QG_OK;
}

/* Reads a string header, checks its bytes exist, returns its start and length. */
static int rd_str(struct cur *c, size_t *start, uint64_t *len, const char *what)
{
    size_t at = c->pos;
    int rc = rd_u64(c, len, what);
    if (rc) return rc;
    if (*len > c->size - c->pos)
        return qg_errf(c->err, c->errlen, QG_ERR_DATA,
                       "%s: offset %zu: %s has length %llu but only %zu bytes are left", c->name,
                       at, what, (unsigned long long)*len, c->size - c->pos);
    *start = c->pos;
    c->pos += (size_t)*len;
    return QG_OK;
}

static int parse_header(struct cur *c, struct gguf *g, uint64_t *n_tensors, uint64_t *n_kv)
{
    if (c->size < 4 || memcmp(c->p, GGUF_MAGIC, 4) != 0) {
        if (c->size == 0) return qg_errf(c->err, c->errlen, QG_ERR_DATA, "%s: empty file", c->name);
        if (c->size < 4)
            return qg_errf(c->err, c->errlen, QG_ERR_DATA,
                           "%s: not a GGUF file (%zu bytes, too short for the magic)", c->name,
                           c->size);
        return qg_errf(c->err, c->errlen, QG_ERR_DATA,
                       "%s: not a GGUF file (magic %02x %02x %02x %02x, expected \"GGUF\")",
                       c->name, c->p[0], c->p[1], c->p[2], c->p[3]);
    }
    c->pos = 4;
    uint32_t v;
    int rc = rd_u32(c, &v, "version");
    if (rc) return rc;
    if (v != 2 && v != 3) {
        uint32_t swapped = __builtin_bswap32(v);
        if (swapped >= 1 && swapped <= 3)
            return qg_errf(c->err, c->errlen, QG_ERR_DATA,
                           "%s: big-endian GGUF (version %u byte-swapped) is not supported",
                           c->name, swapped);
        if (v == 1)
            return qg_errf(c->err, c->errlen, QG_ERR_DATA,
                           "%s: GGUF version 1 is not supported (only versions 2 and 3)", c->name);
        return qg_errf(c->err, c->errlen, QG_ERR_DATA,
                       "%s: unknown GGUF version %u (this qgate reads versions 2 and 3)", c->name,
                       v);
    }
    g->version = v;
    if ((rc = rd_u64(c, n_tensors, "tensor count")) || (rc = rd_u64(c, n_kv, "metadata count")))
        return rc;
    /* Each metadata pair takes at least 13 bytes (key length, type, one byte
     * of value); each tensor info at least 32. Anything more is impossible. */
    size_t left = c->size - c->pos;
    if (*n_kv > left / 13)
        return qg_errf(c->err, c->errlen, QG_ERR_DATA,
                       "%s: metadata count %llu is impossible for a file of %zu bytes", c->name,
                       (unsigned long long)*n_kv, c->size);
    if (*n_tensors > left / 32)
        return qg_errf(c->err, c->errlen, QG_ERR_DATA,
                       "%s: tensor count %llu is impossible for a file of %zu bytes", c->name,
                       (unsigned long long)*n_tensors, c->size);
    return QG_OK;
}

/* Skips one value of scalar type t (not array), checking it exists. */
static int skip_scalar(struct cur *c, uint32_t t, const char *key)
{
    if (t == GGUF_STR) {
        size_t s;
        uint64_t n;
        return rd_str(c, &s, &n, "string value");
    }
    int rc = need(c, vtype_size[t], "value");
    if (rc)
        return qg_errf(c->err, c->errlen, QG_ERR_DATA,
                       "%s: truncated at offset %zu: value of '%s' needs %u bytes", c->name, c->pos,
                       key, vtype_size[t]);
    c->pos += vtype_size[t];
    return QG_OK;
}

static int parse_kv(struct cur *c, struct kv *kv, int64_t idx)
{
    size_t kstart;
    uint64_t klen;
    size_t at = c->pos;
    int rc = rd_str(c, &kstart, &klen, "metadata key");
    if (rc) return rc;
    if (klen == 0 || memchr(c->p + kstart, '\0', (size_t)klen))
        return qg_errf(c->err, c->errlen, QG_ERR_DATA,
                       "%s: offset %zu: metadata key %lld is empty or contains a NUL byte", c->name,
                       at, (long long)idx);
    kv->key = qg_strndup((const char *)c->p + kstart, (size_t)klen);
    if (!kv->key) return qg_errf(c->err, c->errlen, QG_ERR_NOMEM, "%s: out of memory", c->name);
    if ((rc = rd_u32(c, &kv->type, "metadata type"))) return rc;
    if (kv->type >= GGUF_VTYPE_COUNT)
        return qg_errf(c->err, c->errlen, QG_ERR_DATA,
                       "%s: metadata '%s' has unknown value type %u", c->name, kv->key, kv->type);
    if (kv->type != GGUF_ARR) {
        kv->n = 1;
        kv->off = c->pos;
        return skip_scalar(c, kv->type, kv->key);
    }
    if ((rc = rd_u32(c, &kv->arr_type, "array type")) || (rc = rd_u64(c, &kv->n, "array length")))
        return rc;
    if (kv->arr_type >= GGUF_VTYPE_COUNT || kv->arr_type == GGUF_ARR)
        return qg_errf(c->err, c->errlen, QG_ERR_DATA,
                       "%s: metadata '%s' is an array of %s, which GGUF does not allow", c->name,
                       kv->key, kv->arr_type == GGUF_ARR ? "arrays" : "an unknown type");
    kv->off = c->pos;
    size_t left = c->size - c->pos;
    if (kv->arr_type != GGUF_STR) {
        uint64_t es = vtype_size[kv->arr_type];
        if (kv->n > left / es)
            return qg_errf(c->err, c->errlen, QG_ERR_DATA,
                           "%s: metadata '%s': array of %llu %s needs %llu bytes, %zu left",
                           c->name, kv->key, (unsigned long long)kv->n,
                           gguf_vtype_name(kv->arr_type), (unsigned long long)(kv->n * es), left);
        c->pos += (size_t)(kv->n * es);
        return QG_OK;
    }
    if (kv->n > left / 8)
        return qg_errf(c->err, c->errlen, QG_ERR_DATA,
                       "%s: metadata '%s': array of %llu strings cannot fit in %zu bytes", c->name,
                       kv->key, (unsigned long long)kv->n, left);
    kv->str_off = malloc((size_t)(kv->n ? kv->n : 1) * sizeof *kv->str_off);
    if (!kv->str_off) return qg_errf(c->err, c->errlen, QG_ERR_NOMEM, "%s: out of memory", c->name);
    for (uint64_t j = 0; j < kv->n; j++) {
        size_t s;
        uint64_t n;
        kv->str_off[j] = c->pos;
        if ((rc = rd_str(c, &s, &n, "array string"))) {
            char why[QG_ERRMSG_MAX];
            snprintf(why, sizeof why, "%s", c->err);
            return qg_errf(c->err, c->errlen, QG_ERR_DATA, "%s (metadata '%s', element %llu)", why,
                           kv->key, (unsigned long long)j);
        }
    }
    return QG_OK;
}

static int parse_tensor_info(struct cur *c, struct gguf_tensor *t, int64_t idx)
{
    size_t s, at = c->pos;
    uint64_t len;
    int rc = rd_str(c, &s, &len, "tensor name");
    if (rc) return rc;
    if (len == 0 || len > GGUF_MAX_NAME || memchr(c->p + s, '\0', (size_t)len))
        return qg_errf(c->err, c->errlen, QG_ERR_DATA,
                       "%s: offset %zu: tensor %lld has an invalid name (length %llu; must be "
                       "1..%d bytes without NUL)",
                       c->name, at, (long long)idx, (unsigned long long)len, GGUF_MAX_NAME);
    memcpy(t->name, c->p + s, (size_t)len);
    t->name[len] = '\0';
    if ((rc = rd_u32(c, &t->n_dims, "tensor dimension count"))) return rc;
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return qg_errf(c->err, c->errlen, QG_ERR_DATA,
                       "%s: tensor '%s' has %u dimensions (must be 1..%d)", c->name, t->name,
                       t->n_dims, GGUF_MAX_DIMS);
    int64_t nel = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++)
        t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t ne;
        if ((rc = rd_u64(c, &ne, "tensor dimension"))) return rc;
        if (ne > (uint64_t)INT64_MAX || (ne > 0 && nel > INT64_MAX / (int64_t)ne))
            return qg_errf(c->err, c->errlen, QG_ERR_DATA,
                           "%s: tensor '%s': dimension %u (%llu) overflows the element count",
                           c->name, t->name, d, (unsigned long long)ne);
        t->ne[d] = (int64_t)ne;
        nel *= (int64_t)ne;
    }
    if ((rc = rd_u32(c, &t->type, "tensor type"))) return rc;
    const struct ggml_type_info *ti = ggml_type_get(t->type);
    if (!ti || ggml_type_internal(t->type))
        return qg_errf(c->err, c->errlen, QG_ERR_DATA, "%s: tensor '%s' has unknown type %u",
                       c->name, t->name, t->type);
    if (t->ne[0] % ti->block != 0)
        return qg_errf(c->err, c->errlen, QG_ERR_DATA,
                       "%s: tensor '%s': row length %lld is not a multiple of the %s block size %u",
                       c->name, t->name, (long long)t->ne[0], ti->name, ti->block);
    /* bytes = ne0/block * type_size * ne1 * ne2 * ne3, overflow-checked */
    uint64_t blocks = (uint64_t)(t->ne[0] / ti->block);
    if (blocks > UINT64_MAX / ti->type_size)
        return qg_errf(c->err, c->errlen, QG_ERR_DATA, "%s: tensor '%s': size overflows", c->name,
                       t->name);
    uint64_t bytes = blocks * ti->type_size;
    for (int d = 1; d < GGUF_MAX_DIMS; d++) {
        uint64_t ne = (uint64_t)t->ne[d];
        if (ne && bytes > UINT64_MAX / ne)
            return qg_errf(c->err, c->errlen, QG_ERR_DATA, "%s: tensor '%s': size overflows",
                           c->name, t->name);
        bytes *= ne;
    }
    t->nbytes = bytes;
    (void)idx;
    return rd_u64(c, &t->offset, "tensor offset");
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Finds a duplicate among n strings; returns it or NULL. */
static const char *find_duplicate(const char **names, int64_t n)
{
    qsort(names, (size_t)n, sizeof *names, cmp_str_ptr);
    for (int64_t i = 1; i < n; i++)
        if (strcmp(names[i - 1], names[i]) == 0) return names[i];
    return NULL;
}

static int check_duplicates(struct gguf *g, char *err, size_t errlen)
{
    int64_t n = g->n_kv > g->n_tensors ? g->n_kv : g->n_tensors;
    const char **names = malloc((size_t)(n ? n : 1) * sizeof *names);
    if (!names) return qg_errf(err, errlen, QG_ERR_NOMEM, "%s: out of memory", g->name);
    for (int64_t i = 0; i < g->n_kv; i++)
        names[i] = g->kvs[i].key;
    const char *dup = find_duplicate(names, g->n_kv);
    int rc = QG_OK;
    if (dup) {
        rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: duplicate metadata key '%s'", g->name, dup);
    } else {
        for (int64_t i = 0; i < g->n_tensors; i++)
            names[i] = g->tensors[i].name;
        dup = find_duplicate(names, g->n_tensors);
        if (dup)
            rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: duplicate tensor name '%s'", g->name, dup);
    }
    free(names);
    return rc;
}

static int read_alignment(struct gguf *g, char *err, size_t errlen)
{
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t i = gguf_find_key(g, "general.alignment");
    if (i < 0) return QG_OK;
    int64_t a;
    if (g->kvs[i].type == GGUF_ARR || gguf_kv_int(g, i, &a) != QG_OK)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: general.alignment has type %s, not an integer", g->name,
                       gguf_vtype_name(g->kvs[i].type));
    if (a <= 0 || a > (1 << 30) || (a & (a - 1)) != 0)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: general.alignment %lld is not a power of two in 1..2^30", g->name,
                       (long long)a);
    g->alignment = (uint64_t)a;
    return QG_OK;
}

static int cmp_tensor_offset(const void *a, const void *b)
{
    const struct gguf_tensor *x = *(const struct gguf_tensor *const *)a;
    const struct gguf_tensor *y = *(const struct gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Places the data section and checks every tensor lies inside it, aligned and
 * without overlapping another. */
static int place_tensors(struct gguf *g, size_t infos_end, char *err, size_t errlen)
{
    uint64_t a = g->alignment;
    uint64_t off = ((uint64_t)infos_end + a - 1) / a * a;
    g->data_off = off;
    if (g->n_tensors == 0) {
        if (g->data_off > g->size) g->data_off = g->size;
        return QG_OK;
    }
    if (off > g->size)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: truncated: the data section should start at offset %llu but the file "
                       "has %zu bytes",
                       g->name, (unsigned long long)off, g->size);
    uint64_t data_size = g->size - off;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        struct gguf_tensor *t = &g->tensors[i];
        if (t->offset % a != 0)
            return qg_errf(err, errlen, QG_ERR_DATA,
                           "%s: tensor '%s': offset %llu is not a multiple of the alignment %llu",
                           g->name, t->name, (unsigned long long)t->offset, (unsigned long long)a);
        if (t->offset > data_size || t->nbytes > data_size - t->offset)
            return qg_errf(err, errlen, QG_ERR_DATA,
                           "%s: tensor '%s': bytes %llu..%llu of the data section lie past the "
                           "end of the file (data section has %llu bytes)",
                           g->name, t->name, (unsigned long long)t->offset,
                           (unsigned long long)(t->offset + t->nbytes),
                           (unsigned long long)data_size);
        t->data = g->base + off + t->offset;
    }
    const struct gguf_tensor **order = malloc((size_t)g->n_tensors * sizeof *order);
    if (!order) return qg_errf(err, errlen, QG_ERR_NOMEM, "%s: out of memory", g->name);
    for (int64_t i = 0; i < g->n_tensors; i++)
        order[i] = &g->tensors[i];
    qsort(order, (size_t)g->n_tensors, sizeof *order, cmp_tensor_offset);
    int rc = QG_OK;
    for (int64_t i = 1; i < g->n_tensors && rc == QG_OK; i++)
        if (order[i - 1]->offset + order[i - 1]->nbytes > order[i]->offset)
            rc = qg_errf(err, errlen, QG_ERR_DATA, "%s: tensors '%s' and '%s' overlap", g->name,
                         order[i - 1]->name, order[i]->name);
    free(order);
    return rc;
}

static int parse(struct gguf *g, char *err, size_t errlen)
{
    struct cur c = {g->base, g->size, 0, g->name, err, errlen};
    uint64_t n_tensors, n_kv;
    int rc = parse_header(&c, g, &n_tensors, &n_kv);
    if (rc) return rc;
    g->kvs = calloc((size_t)(n_kv ? n_kv : 1), sizeof *g->kvs);
    g->tensors = calloc((size_t)(n_tensors ? n_tensors : 1), sizeof *g->tensors);
    if (!g->kvs || !g->tensors)
        return qg_errf(err, errlen, QG_ERR_NOMEM, "%s: out of memory", g->name);
    for (uint64_t i = 0; i < n_kv; i++) {
        g->n_kv = (int64_t)i + 1; /* so gguf_close frees what was allocated */
        if ((rc = parse_kv(&c, &g->kvs[i], (int64_t)i))) return rc;
    }
    g->n_tensors = (int64_t)n_tensors;
    for (uint64_t i = 0; i < n_tensors; i++)
        if ((rc = parse_tensor_info(&c, &g->tensors[i], (int64_t)i))) return rc;
    if ((rc = check_duplicates(g, err, errlen)) || (rc = read_alignment(g, err, errlen))) return rc;
    return place_tensors(g, c.pos, err, errlen);
}

static int open_common(struct gguf *g, struct gguf **out, char *err, size_t errlen)
{
    int rc = parse(g, err, errlen);
    if (rc) {
        gguf_close(g);
        return rc;
    }
    *out = g;
    return QG_OK;
}

int gguf_open_memory(const void *buf, size_t size, const char *name, struct gguf **out, char *err,
                     size_t errlen)
{
    *out = NULL;
    struct gguf *g = calloc(1, sizeof *g);
    if (!g || !(g->name = qg_strdup(name ? name : "<memory>"))) {
        free(g);
        return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    }
    g->base = buf;
    g->size = buf ? size : 0;
    return open_common(g, out, err, errlen);
}

int gguf_open(const char *path, struct gguf **out, char *err, size_t errlen)
{
    *out = NULL;
    /* O_NONBLOCK: a FIFO is refused below instead of waiting for a writer */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return qg_errf(err, errlen, QG_ERR_NOINPUT, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return qg_errf(err, errlen, QG_ERR_NOINPUT, "%s: not a regular file", path);
    }
    struct gguf *g = calloc(1, sizeof *g);
    if (!g || !(g->name = qg_strdup(path))) {
        free(g);
        close(fd);
        return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    }
    g->size = (size_t)st.st_size;
    if (g->size > 0) {
        void *p = mmap(NULL, g->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            gguf_close(g);
            return qg_errf(err, errlen, QG_ERR_NOINPUT, "%s: cannot map: %s", path, strerror(e));
        }
        g->base = p;
        g->mapped = 1;
    }
    close(fd);
    return open_common(g, out, err, errlen);
}

void gguf_close(struct gguf *g)
{
    if (!g) return;
    for (int64_t i = 0; i < g->n_kv; i++) {
        free(g->kvs[i].key);
        free(g->kvs[i].str_off);
    }
    free(g->kvs);
    free(g->tensors);
    if (g->mapped) munmap((void *)g->base, g->size);
    free(g->owned_buf);
    if (g->release) g->release(g->owner);
    free(g->name);
    free(g);
}

int gguf_attach(struct gguf *g, void *buf, const struct gguf_tensor *t, int64_t n,
                void (*release)(void *owner), void *owner)
{
    if (g->n_tensors || g->owned_buf || g->release || n < 0) return QG_ERR_USAGE;
    struct gguf_tensor *copy = calloc((size_t)n + 1, sizeof *copy);
    if (!copy) return QG_ERR_NOMEM;
    if (n) memcpy(copy, t, (size_t)n * sizeof *copy);
    free(g->tensors);
    g->tensors = copy;
    g->n_tensors = n;
    g->owned_buf = buf;
    g->release = release;
    g->owner = owner;
    return QG_OK;
}

uint32_t gguf_version(const struct gguf *g)
{
    return g->version;
}
uint64_t gguf_file_size(const struct gguf *g)
{
    return g->size;
}
uint64_t gguf_alignment(const struct gguf *g)
{
    return g->alignment;
}
uint64_t gguf_data_offset(const struct gguf *g)
{
    return g->data_off;
}
const void *gguf_bytes(const struct gguf *g)
{
    return g->base;
}
int64_t gguf_n_kv(const struct gguf *g)
{
    return g->n_kv;
}
const char *gguf_kv_key(const struct gguf *g, int64_t i)
{
    return g->kvs[i].key;
}
uint32_t gguf_kv_type(const struct gguf *g, int64_t i)
{
    return g->kvs[i].type;
}
uint32_t gguf_kv_arr_type(const struct gguf *g, int64_t i)
{
    return g->kvs[i].arr_type;
}
uint64_t gguf_kv_len(const struct gguf *g, int64_t i)
{
    return g->kvs[i].n;
}
int64_t gguf_n_tensors(const struct gguf *g)
{
    return g->n_tensors;
}
const struct gguf_tensor *gguf_tensor_at(const struct gguf *g, int64_t i)
{
    return &g->tensors[i];
}

int64_t gguf_find_key(const struct gguf *g, const char *key)
{
    for (int64_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->kvs[i].key, key) == 0) return i;
    return -1;
}

const struct gguf_tensor *gguf_find_tensor(const struct gguf *g, const char *name)
{
    for (int64_t i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0) return &g->tensors[i];
    return NULL;
}

int64_t gguf_tensor_nelements(const struct gguf_tensor *t)
{
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

/* Converts the value of type t at p (bounds already checked at open). */
static int value_int(uint32_t t, const uint8_t *p, int64_t *out)
{
    switch (t) {
    case GGUF_U8:
        *out = p[0];
        return QG_OK;
    case GGUF_BOOL:
        *out = p[0] != 0;
        return QG_OK;
    case GGUF_I8:
        *out = (int8_t)p[0];
        return QG_OK;
    case GGUF_U16:
        *out = (uint16_t)(p[0] | p[1] << 8);
        return QG_OK;
    case GGUF_I16:
        *out = (int16_t)(uint16_t)(p[0] | p[1] << 8);
        return QG_OK;
    case GGUF_U32:
        *out = rd_u32_at(p);
        return QG_OK;
    case GGUF_I32:
        *out = (int32_t)rd_u32_at(p);
        return QG_OK;
    case GGUF_I64:
        *out = (int64_t)rd_u64_at(p);
        return QG_OK;
    case GGUF_U64: {
        uint64_t v = rd_u64_at(p);
        if (v > (uint64_t)INT64_MAX) return QG_ERR_DATA;
        *out = (int64_t)v;
        return QG_OK;
    }
    }
    return QG_ERR_DATA;
}

static int value_float(uint32_t t, const uint8_t *p, double *out)
{
    if (t == GGUF_F32) {
        uint32_t u = rd_u32_at(p);
        float f;
        memcpy(&f, &u, 4);
        *out = f;
        return QG_OK;
    }
    if (t == GGUF_F64) {
        uint64_t u = rd_u64_at(p);
        memcpy(out, &u, 8);
        return QG_OK;
    }
    int64_t i;
    int rc = value_int(t, p, &i);
    if (rc == QG_OK) *out = (double)i;
    return rc;
}

static int value_str(const struct gguf *g, size_t off, const char **s, size_t *len)
{
    *len = (size_t)rd_u64_at(g->base + off); /* checked at open */
    *s = (const char *)g->base + off + 8;
    return QG_OK;
}

int gguf_kv_int(const struct gguf *g, int64_t i, int64_t *out)
{
    const struct kv *kv = &g->kvs[i];
    return kv->type == GGUF_ARR ? QG_ERR_DATA : value_int(kv->type, g->base + kv->off, out);
}

int gguf_kv_float(const struct gguf *g, int64_t i, double *out)
{
    const struct kv *kv = &g->kvs[i];
    return kv->type == GGUF_ARR ? QG_ERR_DATA : value_float(kv->type, g->base + kv->off, out);
}

int gguf_kv_str(const struct gguf *g, int64_t i, const char **s, size_t *len)
{
    const struct kv *kv = &g->kvs[i];
    return kv->type == GGUF_STR ? value_str(g, kv->off, s, len) : QG_ERR_DATA;
}

int gguf_arr_int(const struct gguf *g, int64_t i, uint64_t j, int64_t *out)
{
    const struct kv *kv = &g->kvs[i];
    if (kv->type != GGUF_ARR || j >= kv->n || kv->arr_type == GGUF_STR) return QG_ERR_DATA;
    return value_int(kv->arr_type, g->base + kv->off + j * vtype_size[kv->arr_type], out);
}

int gguf_arr_float(const struct gguf *g, int64_t i, uint64_t j, double *out)
{
    const struct kv *kv = &g->kvs[i];
    if (kv->type != GGUF_ARR || j >= kv->n || kv->arr_type == GGUF_STR) return QG_ERR_DATA;
    return value_float(kv->arr_type, g->base + kv->off + j * vtype_size[kv->arr_type], out);
}

int gguf_arr_str(const struct gguf *g, int64_t i, uint64_t j, const char **s, size_t *len)
{
    const struct kv *kv = &g->kvs[i];
    if (kv->type != GGUF_ARR || j >= kv->n || kv->arr_type != GGUF_STR) return QG_ERR_DATA;
    return value_str(g, kv->str_off[j], s, len);
}

int gguf_get_int(const struct gguf *g, const char *key, int64_t *out)
{
    int64_t i = gguf_find_key(g, key);
    return i < 0 ? QG_ERR_NOTFOUND : gguf_kv_int(g, i, out);
}

int gguf_get_float(const struct gguf *g, const char *key, double *out)
{
    int64_t i = gguf_find_key(g, key);
    return i < 0 ? QG_ERR_NOTFOUND : gguf_kv_float(g, i, out);
}

int gguf_get_str(const struct gguf *g, const char *key, const char **s, size_t *len)
{
    int64_t i = gguf_find_key(g, key);
    return i < 0 ? QG_ERR_NOTFOUND : gguf_kv_str(g, i, s, len);
}

void gguf_drop_pages(const struct gguf *g, const struct gguf_tensor *t)
{
    gguf_drop_range(g, t->data, t->nbytes);
}

/* the whole pages of bytes [p, p + n) of g's mapping, or 0 */
static size_t whole_pages(const struct gguf *g, const void *p, size_t n, uintptr_t *a)
{
    uintptr_t lo = (uintptr_t)p, base = (uintptr_t)g->base;
    if (!g->mapped || n == 0 || lo < base || lo - base > g->size || n > g->size - (lo - base))
        return 0;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), hi = lo + (uintptr_t)n;
    *a = (lo + page - 1) / page * page;
    const uintptr_t b = hi / page * page;
    return b > *a ? (size_t)(b - *a) : 0;
}

void gguf_drop_range(const struct gguf *g, const void *p, size_t n)
{
    uintptr_t a;
    size_t len = whole_pages(g, p, n, &a);
    if (len) madvise((void *)a, len, MADV_DONTNEED);
}

void gguf_random_range(const struct gguf *g, const void *p, size_t n)
{
    uintptr_t a;
    size_t len = whole_pages(g, p, n, &a);
    if (len) madvise((void *)a, len, MADV_RANDOM);
}
