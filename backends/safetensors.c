/* safetensors — a bounds-checked reader of the safetensors format. */
#include "backends/safetensors.h"
#include "core/status.h"
#include "core/util.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { ST_HEADER_MAX = 100 << 20 }; /* the library's own limit is 100 MB */

struct st_file {
    const uint8_t *base;
    size_t size;
    int mapped;
    char *name;
    int64_t n;
    struct st_tensor *t;
};

static const struct {
    const char *name;
    size_t size;
} dtypes[ST_DTYPE_COUNT] = {
    [ST_F32] = {"F32", 4},         [ST_F16] = {"F16", 2},         [ST_BF16] = {"BF16", 2},
    [ST_F8_E4M3] = {"F8_E4M3", 1}, [ST_I32] = {"I32", 4},         [ST_U8] = {"U8", 1},
    [ST_I8] = {"I8", 1},           [ST_I64] = {"I64", 8},         [ST_F64] = {"F64", 8},
    [ST_U32] = {"U32", 4},         [ST_I16] = {"I16", 2},         [ST_U16] = {"U16", 2},
    [ST_BOOL] = {"BOOL", 1},       [ST_F8_E5M2] = {"F8_E5M2", 1},
};

const char *st_dtype_name(int dtype)
{
    return dtype >= 0 && dtype < ST_DTYPE_COUNT ? dtypes[dtype].name : "?";
}

size_t st_dtype_size(int dtype)
{
    return dtype >= 0 && dtype < ST_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

int64_t st_n_tensors(const struct st_file *f)
{
    return f->n;
}

const struct st_tensor *st_tensor_at(const struct st_file *f, int64_t i)
{
    return i >= 0 && i < f->n ? &f->t[i] : NULL;
}

const struct st_tensor *st_find(const struct st_file *f, const char *name)
{
    for (int64_t i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}

/* a JSON number that is a whole value in [0, max] */
static int whole(const cJSON *v, double max, int64_t *out)
{
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= max) ||
        v->valuedouble != (double)(int64_t)v->valuedouble)
        return 0;
    *out = (int64_t)v->valuedouble;
    return 1;
}

/* one header entry: dtype, shape, data_offsets within the data region */
static int parse_entry(struct st_file *f, const cJSON *e, const uint8_t *data, size_t data_size,
                       struct st_tensor *t, char *err, size_t errlen)
{
    const char *nm = e->string;
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype"),
                *sh = cJSON_GetObjectItemCaseSensitive(e, "shape"),
                *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsObject(e) || !cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off) ||
        cJSON_GetArraySize(off) != 2)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: tensor '%s': header entry needs dtype, shape and data_offsets [b, e]",
                       f->name, nm);
    t->dtype = -1;
    for (int k = 0; k < ST_DTYPE_COUNT; k++)
        if (!strcmp(dt->valuestring, dtypes[k].name)) t->dtype = k;
    if (t->dtype < 0)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: tensor '%s' has dtype '%.16s', which qgate "
                       "does not read",
                       f->name, nm, dt->valuestring);
    t->n_dims = cJSON_GetArraySize(sh);
    if (t->n_dims > ST_MAX_DIMS)
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: tensor '%s' has %d dimensions (at most %d)",
                       f->name, nm, t->n_dims, ST_MAX_DIMS);
    t->numel = 1;
    for (int d = 0; d < t->n_dims; d++) {
        if (!whole(cJSON_GetArrayItem(sh, d), (double)(1LL << 40), &t->shape[d]))
            return qg_errf(err, errlen, QG_ERR_DATA, "%s: tensor '%s': bad shape", f->name, nm);
        if (t->shape[d] && t->numel > (int64_t)(1LL << 50) / t->shape[d])
            return qg_errf(err, errlen, QG_ERR_DATA, "%s: tensor '%s' is too large", f->name, nm);
        t->numel *= t->shape[d];
    }
    int64_t b, en;
    if (!whole(cJSON_GetArrayItem(off, 0), (double)data_size, &b) ||
        !whole(cJSON_GetArrayItem(off, 1), (double)data_size, &en) || en < b)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: tensor '%s': data_offsets outside the file's %zu data bytes", f->name,
                       nm, data_size);
    t->nbytes = (size_t)(en - b);
    if ((uint64_t)t->numel * st_dtype_size(t->dtype) != t->nbytes)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: tensor '%s': %zu bytes for %lld %s values (%llu expected)", f->name, nm,
                       t->nbytes, (long long)t->numel, dtypes[t->dtype].name,
                       (unsigned long long)((uint64_t)t->numel * st_dtype_size(t->dtype)));
    t->data = data + b;
    return (t->name = qg_strdup(nm)) ? QG_OK : QG_ERR_NOMEM;
}

static int parse(struct st_file *f, char *err, size_t errlen)
{
    if (f->size < 8) return qg_errf(err, errlen, QG_ERR_DATA, "%s: shorter than 8 bytes", f->name);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | f->base[i];
    if (hl > ST_HEADER_MAX || hl > f->size - 8)
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: header length %llu exceeds the file (%zu bytes) or 100 MB", f->name,
                       (unsigned long long)hl, f->size);
    cJSON *h = cJSON_ParseWithLength((const char *)f->base + 8, (size_t)hl);
    if (!cJSON_IsObject(h)) {
        cJSON_Delete(h);
        return qg_errf(err, errlen, QG_ERR_DATA, "%s: the header is not a JSON object", f->name);
    }
    int rc = QG_OK, n = cJSON_GetArraySize(h);
    f->t = calloc((size_t)n + 1, sizeof *f->t);
    if (!f->t) rc = QG_ERR_NOMEM;
    const uint8_t *data = f->base + 8 + hl;
    size_t data_size = f->size - 8 - (size_t)hl;
    const cJSON *e;
    cJSON_ArrayForEach(e, h)
    {
        if (rc) break;
        if (!strcmp(e->string, "__metadata__")) continue;
        rc = parse_entry(f, e, data, data_size, &f->t[f->n], err, errlen);
        if (!rc) f->n++;
    }
    cJSON_Delete(h);
    if (rc == QG_ERR_NOMEM) qg_errf(err, errlen, rc, "%s: out of memory", f->name);
    return rc;
}

int st_open_memory(const void *buf, size_t size, const char *name, struct st_file **out, char *err,
                   size_t errlen)
{
    *out = NULL;
    struct st_file *f = calloc(1, sizeof *f);
    if (!f || !(f->name = qg_strdup(name ? name : "<memory>"))) {
        free(f);
        return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    }
    f->base = buf;
    f->size = buf ? size : 0;
    int rc = parse(f, err, errlen);
    if (rc) {
        st_close(f);
        return rc;
    }
    *out = f;
    return QG_OK;
}

int st_open(const char *path, struct st_file **out, char *err, size_t errlen)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return qg_errf(err, errlen, QG_ERR_NOINPUT, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 8) {
        close(fd);
        return qg_errf(err, errlen, QG_ERR_NOINPUT, "%s: not a regular file of 8 bytes or more",
                       path);
    }
    struct st_file *f = calloc(1, sizeof *f);
    if (!f || !(f->name = qg_strdup(path))) {
        free(f);
        close(fd);
        return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
    }
    f->size = (size_t)st.st_size;
    void *p = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
        st_close(f);
        return qg_errf(err, errlen, QG_ERR_NOINPUT, "%s: cannot map: %s", path, strerror(e));
    }
    f->base = p;
    f->mapped = 1;
    int rc = parse(f, err, errlen);
    if (rc) {
        st_close(f);
        return rc;
    }
    *out = f;
    return QG_OK;
}

void st_close(struct st_file *f)
{
    if (!f) return;
    for (int64_t i = 0; i < f->n; i++)
        free(f->t[i].name);
    free(f->t);
    if (f->mapped) munmap((void *)f->base, f->size);
    free(f->name);
    free(f);
}
