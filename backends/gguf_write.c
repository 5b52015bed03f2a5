/* gguf_write — in-memory GGUF v3 builder and atomic file writer. */
#include "backends/gguf_write.h"
#include "backends/ggml_types.h"
#include "backends/gguf.h"
#include "core/status.h"
#include "core/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct wtensor {
    char name[GGUF_MAX_NAME + 1];
    uint32_t type, n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    uint64_t nbytes;
    void *data;
};

struct gguf_writer {
    struct sbuf kv; /* serialised metadata pairs */
    int64_t n_kv;
    char **keys;
    uint32_t alignment;
    struct wtensor *tensors;
    int64_t n_tensors, cap_tensors;
};

static const uint8_t esize[GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

struct gguf_writer *gguf_writer_new(void)
{
    struct gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    sbuf_init(&w->kv, (size_t)1 << 34);
    w->alignment = GGUF_DEFAULT_ALIGNMENT;
    return w;
}

void gguf_writer_free(struct gguf_writer *w)
{
    if (!w) return;
    sbuf_release(&w->kv);
    for (int64_t i = 0; i < w->n_kv; i++)
        free(w->keys[i]);
    free(w->keys);
    for (int64_t i = 0; i < w->n_tensors; i++)
        free(w->tensors[i].data);
    free(w->tensors);
    free(w);
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static int app_u32(struct sbuf *b, uint32_t v)
{
    uint8_t t[4];
    put_u32(t, v);
    return sbuf_append(b, (const char *)t, 4);
}

static int app_u64(struct sbuf *b, uint64_t v)
{
    uint8_t t[8];
    put_u64(t, v);
    return sbuf_append(b, (const char *)t, 8);
}

static int app_str(struct sbuf *b, const char *s, size_t n)
{
    int rc = app_u64(b, n);
    return rc ? rc : sbuf_append(b, s, n);
}

/* Records a new key and writes its header (key, type). */
static int begin_kv(struct gguf_writer *w, const char *key, uint32_t type)
{
    if (!key || !*key) return QG_ERR_USAGE;
    for (int64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->keys[i], key) == 0) return QG_ERR_USAGE;
    char **k = realloc(w->keys, (size_t)(w->n_kv + 1) * sizeof *k);
    if (!k) return QG_ERR_NOMEM;
    w->keys = k;
    if (!(k[w->n_kv] = qg_strdup(key))) return QG_ERR_NOMEM;
    w->n_kv++;
    int rc = app_str(&w->kv, key, strlen(key));
    return rc ? rc : app_u32(&w->kv, type);
}

int gguf_writer_set_scalar(struct gguf_writer *w, const char *key, uint32_t type, const void *value)
{
    if (type >= GGUF_VTYPE_COUNT || type == GGUF_STR || type == GGUF_ARR) return QG_ERR_USAGE;
    int rc = begin_kv(w, key, type);
    if (rc) return rc;
    if (strcmp(key, "general.alignment") == 0 && type == GGUF_U32) {
        uint32_t a;
        memcpy(&a, value, 4);
        if (a == 0 || (a & (a - 1))) return QG_ERR_USAGE;
        w->alignment = a;
    }
    return sbuf_append(&w->kv, value, esize[type]);
}

int gguf_writer_set_u32(struct gguf_writer *w, const char *key, uint32_t v)
{
    uint8_t t[4];
    put_u32(t, v);
    return gguf_writer_set_scalar(w, key, GGUF_U32, t);
}

int gguf_writer_set_i32(struct gguf_writer *w, const char *key, int32_t v)
{
    uint8_t t[4];
    put_u32(t, (uint32_t)v);
    return gguf_writer_set_scalar(w, key, GGUF_I32, t);
}

int gguf_writer_set_f32(struct gguf_writer *w, const char *key, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    uint8_t t[4];
    put_u32(t, u);
    return gguf_writer_set_scalar(w, key, GGUF_F32, t);
}

int gguf_writer_set_bool(struct gguf_writer *w, const char *key, int v)
{
    uint8_t b = v ? 1 : 0;
    return gguf_writer_set_scalar(w, key, GGUF_BOOL, &b);
}

int gguf_writer_set_str(struct gguf_writer *w, const char *key, const char *s)
{
    int rc = begin_kv(w, key, GGUF_STR);
    return rc ? rc : app_str(&w->kv, s, strlen(s));
}

int gguf_writer_set_arr(struct gguf_writer *w, const char *key, uint32_t elem_type,
                        const void *data, uint64_t n)
{
    if (elem_type >= GGUF_VTYPE_COUNT || elem_type == GGUF_STR || elem_type == GGUF_ARR)
        return QG_ERR_USAGE;
    int rc = begin_kv(w, key, GGUF_ARR);
    if (!rc) rc = app_u32(&w->kv, elem_type);
    if (!rc) rc = app_u64(&w->kv, n);
    if (!rc && n > SIZE_MAX / esize[elem_type]) rc = QG_ERR_NOMEM;
    return rc ? rc : sbuf_append(&w->kv, data, (size_t)n * esize[elem_type]);
}

int gguf_writer_set_arr_str(struct gguf_writer *w, const char *key, const char *const *strs,
                            uint64_t n)
{
    int rc = begin_kv(w, key, GGUF_ARR);
    if (!rc) rc = app_u32(&w->kv, GGUF_STR);
    if (!rc) rc = app_u64(&w->kv, n);
    for (uint64_t i = 0; i < n && !rc; i++)
        rc = app_str(&w->kv, strs[i], strlen(strs[i]));
    return rc;
}

int gguf_writer_add_tensor(struct gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                           const int64_t *ne, const void *data)
{
    const struct ggml_type_info *ti = ggml_type_get(type);
    size_t nl = name ? strlen(name) : 0;
    if (!ti || ggml_type_internal(type) || nl == 0 || nl > GGUF_MAX_NAME || n_dims < 1 ||
        n_dims > GGUF_MAX_DIMS)
        return QG_ERR_USAGE;
    for (int64_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0) return QG_ERR_USAGE;
    struct wtensor t = {.type = type, .n_dims = n_dims};
    memcpy(t.name, name, nl + 1);
    for (int d = 0; d < GGUF_MAX_DIMS; d++)
        t.ne[d] = 1;
    uint64_t rows = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] < 0) return QG_ERR_USAGE;
        t.ne[d] = ne[d];
        if (d > 0) rows *= (uint64_t)ne[d];
    }
    if (t.ne[0] % ti->block) return QG_ERR_USAGE;
    t.nbytes = (uint64_t)(t.ne[0] / ti->block) * ti->type_size * rows;
    if (w->n_tensors == w->cap_tensors) {
        int64_t cap = w->cap_tensors ? 2 * w->cap_tensors : 16;
        struct wtensor *p = realloc(w->tensors, (size_t)cap * sizeof *p);
        if (!p) return QG_ERR_NOMEM;
        w->tensors = p;
        w->cap_tensors = cap;
    }
    t.data = malloc(t.nbytes ? (size_t)t.nbytes : 1);
    if (!t.data) return QG_ERR_NOMEM;
    if (t.nbytes) memcpy(t.data, data, (size_t)t.nbytes);
    w->tensors[w->n_tensors++] = t;
    return QG_OK;
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

int gguf_writer_to_memory(const struct gguf_writer *w, uint8_t **buf, size_t *size)
{
    *buf = NULL;
    *size = 0;
    struct sbuf b;
    sbuf_init(&b, (size_t)1 << 40);
    int rc = sbuf_append(&b, "GGUF", 4);
    if (!rc) rc = app_u32(&b, 3);
    if (!rc) rc = app_u64(&b, (uint64_t)w->n_tensors);
    if (!rc) rc = app_u64(&b, (uint64_t)w->n_kv);
    if (!rc) rc = sbuf_append(&b, w->kv.data ? w->kv.data : "", w->kv.len);
    uint64_t off = 0;
    for (int64_t i = 0; i < w->n_tensors && !rc; i++) {
        const struct wtensor *t = &w->tensors[i];
        rc = app_str(&b, t->name, strlen(t->name));
        if (!rc) rc = app_u32(&b, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims && !rc; d++)
            rc = app_u64(&b, (uint64_t)t->ne[d]);
        if (!rc) rc = app_u32(&b, t->type);
        if (!rc) rc = app_u64(&b, off);
        off = align_up(off + t->nbytes, w->alignment);
    }
    /* the data section: aligned start, each tensor padded to the alignment */
    static const char zeros[64] = {0};
    for (int64_t i = -1; w->n_tensors > 0 && i < w->n_tensors && !rc; i++) {
        if (i >= 0) rc = sbuf_append(&b, w->tensors[i].data, (size_t)w->tensors[i].nbytes);
        while (!rc && b.len % w->alignment) {
            size_t pad = (size_t)(align_up(b.len, w->alignment) - b.len);
            rc = sbuf_append(&b, zeros, pad < sizeof zeros ? pad : sizeof zeros);
        }
    }
    if (rc) {
        sbuf_release(&b);
        return QG_ERR_NOMEM;
    }
    *buf = (uint8_t *)b.data;
    *size = b.len;
    return QG_OK;
}

int gguf_writer_write(const struct gguf_writer *w, const char *path, char *err, size_t errlen)
{
    uint8_t *buf;
    size_t size;
    if (gguf_writer_to_memory(w, &buf, &size))
        return qg_errf(err, errlen, QG_ERR_NOMEM, "%s: out of memory", path);
    struct sbuf tmp;
    sbuf_init(&tmp, 4096);
    sbuf_printf(&tmp, "%s.tmp.%ld", path, (long)getpid());
    int rc = QG_OK;
    FILE *f = fopen(sbuf_str(&tmp), "wb");
    if (!f) {
        rc = qg_errf(err, errlen, QG_ERR_CANTCREAT, "%s: %s", sbuf_str(&tmp), strerror(errno));
    } else {
        int bad = fwrite(buf, 1, size, f) != size;
        bad |= fflush(f) != 0;
        bad |= fsync(fileno(f)) != 0;
        bad |= fclose(f) != 0;
        if (bad || rename(sbuf_str(&tmp), path) != 0) {
            rc = qg_errf(err, errlen, QG_ERR_IO, "%s: write failed: %s", path, strerror(errno));
            unlink(sbuf_str(&tmp));
        }
    }
    sbuf_release(&tmp);
    free(buf);
    return rc;
}
