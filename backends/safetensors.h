/* safetensors — reads a .safetensors file: an 8-byte little-endian header
 * length, a JSON header naming each tensor's dtype, shape and byte range,
 * then the data. The file is mapped read-only; tensors point into it.
 * Every offset, length and shape is checked against the file and the
 * dtype's size: a damaged or hostile header is an error naming the file and
 * the tensor, never a read outside the mapping.
 */
#ifndef QG_SAFETENSORS_H
#define QG_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

enum st_dtype {
    ST_F32,
    ST_F16,
    ST_BF16,
    ST_F8_E4M3,
    ST_I32,
    ST_U8,
    ST_I8,
    ST_I64,
    ST_F64,
    ST_U32,
    ST_I16,
    ST_U16,
    ST_BOOL,
    ST_F8_E5M2,
    ST_DTYPE_COUNT
};

#define ST_MAX_DIMS 4

struct st_tensor {
    char *name;
    int dtype;                  /* enum st_dtype */
    int n_dims;                 /* 0 (scalar) .. ST_MAX_DIMS */
    int64_t shape[ST_MAX_DIMS]; /* outermost first, as in the header */
    int64_t numel;
    const uint8_t *data; /* into the mapping */
    size_t nbytes;
};

struct st_file;

/* Maps and parses path. QG_OK; QG_ERR_NOINPUT (cannot open or map);
 * QG_ERR_DATA with err naming the file (and tensor) for a malformed file;
 * QG_ERR_NOMEM. */
int st_open(const char *path, struct st_file **out, char *err, size_t errlen);
/* Parses a file image in memory (not copied; for tests and fuzzing). */
int st_open_memory(const void *buf, size_t size, const char *name, struct st_file **out, char *err,
                   size_t errlen);
void st_close(struct st_file *f); /* accepts NULL */

int64_t st_n_tensors(const struct st_file *f);
const struct st_tensor *st_tensor_at(const struct st_file *f, int64_t i);
const struct st_tensor *st_find(const struct st_file *f, const char *name);
const char *st_dtype_name(int dtype);
size_t st_dtype_size(int dtype);

#endif
