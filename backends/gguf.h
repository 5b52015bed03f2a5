/* gguf — reader for GGUF v2/v3 model files (llama.cpp's format).
 *
 * The file is mapped read-only; every count, length, dimension and offset is
 * checked against the bytes that exist before it is used, so a truncated,
 * corrupted or hostile file yields QG_ERR_DATA and a message naming the file,
 * the offset and what is wrong — never a read out of bounds.
 *
 * Layout (little-endian): magic "GGUF", u32 version, u64 n_tensors, u64 n_kv,
 * n_kv × (string key, u32 type, value), n_tensors × (string name, u32 n_dims,
 * n_dims × u64 ne, u32 ggml type, u64 offset), padding to general.alignment
 * (default 32), then the data section; tensor offsets are relative to it.
 * Strings are u64 length + bytes (not NUL-terminated).
 */
#ifndef QG_GGUF_H
#define QG_GGUF_H

#include <stddef.h>
#include <stdint.h>

/* Metadata value types (append-only, as in the GGUF spec). */
enum gguf_vtype {
    GGUF_U8 = 0,
    GGUF_I8 = 1,
    GGUF_U16 = 2,
    GGUF_I16 = 3,
    GGUF_U32 = 4,
    GGUF_I32 = 5,
    GGUF_F32 = 6,
    GGUF_BOOL = 7,
    GGUF_STR = 8,
    GGUF_ARR = 9,
    GGUF_U64 = 10,
    GGUF_I64 = 11,
    GGUF_F64 = 12,
    GGUF_VTYPE_COUNT = 13
};

#define GGUF_MAX_DIMS 4
#define GGUF_MAX_NAME 63 /* ggml's GGML_MAX_NAME (64) minus the NUL */
#define GGUF_DEFAULT_ALIGNMENT 32

struct gguf;

struct gguf_tensor {
    char name[GGUF_MAX_NAME + 1];
    uint32_t type;             /* enum ggml_type_id, validated */
    uint32_t n_dims;           /* 1..GGUF_MAX_DIMS */
    int64_t ne[GGUF_MAX_DIMS]; /* elements per dimension; unused dims are 1 */
    uint64_t offset;           /* from the start of the data section */
    uint64_t nbytes;           /* stored size */
    const void *data;          /* into the mapping; valid until gguf_close */
};

/* Maps and parses path. On success *out owns the mapping and returns QG_OK.
 * On failure *out is NULL, err holds "PATH: what is wrong" and the status is
 * QG_ERR_NOINPUT (cannot open or read), QG_ERR_DATA (not a valid GGUF) or
 * QG_ERR_NOMEM. */
int gguf_open(const char *path, struct gguf **out, char *err, size_t errlen);

/* Parses size bytes at buf (borrowed: it must outlive the returned object);
 * name is used in messages. Same statuses as gguf_open. */
int gguf_open_memory(const void *buf, size_t size, const char *name, struct gguf **out, char *err,
                     size_t errlen);

/* Unmaps and frees; accepts NULL. Invalidates every pointer obtained from g. */
void gguf_close(struct gguf *g);

/* Gives g (opened from a metadata-only image with gguf_open_memory) the n
 * tensors t describes, whose data lie elsewhere (a safetensors mapping);
 * g then owns buf (the image: freed at close) and calls release(owner) at
 * close. QG_OK, QG_ERR_USAGE when g already has tensors, QG_ERR_NOMEM (g
 * unchanged: the caller still owns buf and owner). */
int gguf_attach(struct gguf *g, void *buf, const struct gguf_tensor *t, int64_t n,
                void (*release)(void *owner), void *owner);

uint32_t gguf_version(const struct gguf *g);
uint64_t gguf_file_size(const struct gguf *g);
uint64_t gguf_alignment(const struct gguf *g);
/* Offset of the data section in the file (equal to the file size when a
 * vocab-only file has no data section). */
uint64_t gguf_data_offset(const struct gguf *g);
/* The whole file's bytes (borrowed, valid until gguf_close). */
const void *gguf_bytes(const struct gguf *g);

/* ---- metadata by index: 0 <= i < gguf_n_kv(g) ---- */
int64_t gguf_n_kv(const struct gguf *g);
/* Key, NUL-terminated (keys with embedded NULs are rejected at open). */
const char *gguf_kv_key(const struct gguf *g, int64_t i);
uint32_t gguf_kv_type(const struct gguf *g, int64_t i);
/* Element type of an array (meaningful only when the type is GGUF_ARR). */
uint32_t gguf_kv_arr_type(const struct gguf *g, int64_t i);
/* Number of elements (1 for scalars). */
uint64_t gguf_kv_len(const struct gguf *g, int64_t i);
/* Index of key, or -1 when absent. */
int64_t gguf_find_key(const struct gguf *g, const char *key);

/* Scalar accessors: QG_OK, or QG_ERR_DATA when the value has another type.
 * gguf_kv_int accepts every integer type and bool (u64 above INT64_MAX is
 * QG_ERR_DATA); gguf_kv_float accepts f32, f64 and integers. Strings are
 * borrowed and NOT NUL-terminated. */
int gguf_kv_int(const struct gguf *g, int64_t i, int64_t *out);
int gguf_kv_float(const struct gguf *g, int64_t i, double *out);
int gguf_kv_str(const struct gguf *g, int64_t i, const char **s, size_t *len);

/* Array element accessors, j < gguf_kv_len: same conversions as above. */
int gguf_arr_int(const struct gguf *g, int64_t i, uint64_t j, int64_t *out);
int gguf_arr_float(const struct gguf *g, int64_t i, uint64_t j, double *out);
int gguf_arr_str(const struct gguf *g, int64_t i, uint64_t j, const char **s, size_t *len);

/* By key: QG_ERR_NOTFOUND when absent, else as the accessors above. */
int gguf_get_int(const struct gguf *g, const char *key, int64_t *out);
int gguf_get_float(const struct gguf *g, const char *key, double *out);
int gguf_get_str(const struct gguf *g, const char *key, const char **s, size_t *len);

/* ---- tensors ---- */
int64_t gguf_n_tensors(const struct gguf *g);
const struct gguf_tensor *gguf_tensor_at(const struct gguf *g, int64_t i);
/* NULL when absent. */
const struct gguf_tensor *gguf_find_tensor(const struct gguf *g, const char *name);
/* Elements in a tensor (product of ne). */
int64_t gguf_tensor_nelements(const struct gguf_tensor *t);

/* Tells the kernel the tensor's mapped pages are no longer needed, so that
 * a loader that copies (dequantises) every tensor does not keep the file
 * resident as well. No effect for gguf_open_memory objects. The data stays
 * readable (pages are re-read from the file on access). */
void gguf_drop_pages(const struct gguf *g, const struct gguf_tensor *t);
/* The same for the whole pages of bytes [p, p + n) of g's data (a part
 * of a tensor); nothing where g is not mapped or the range is not in it. */
void gguf_drop_range(const struct gguf *g, const void *p, size_t n);
/* Marks the whole pages of [p, p + n) for random access (MADV_RANDOM), so
 * that a read beside them maps none of them in (the kernel's fault-around
 * maps up to 64 KiB around a faulting page) and none is read ahead. Each
 * call may split the mapping's area (the kernel's map count is limited):
 * for a few large ranges. Nothing where g is not mapped. */
void gguf_random_range(const struct gguf *g, const void *p, size_t n);

/* "u32", "string", "array", ...; "unknown" for invalid values. */
const char *gguf_vtype_name(uint32_t t);

#endif
