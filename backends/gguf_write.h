/* gguf_write — writes GGUF v3 files that gguf_open and llama.cpp read.
 *
 * Build the file in memory (metadata in insertion order, tensors in
 * insertion order, each tensor's data padded to general.alignment, default
 * 32), then write it atomically (temporary file + rename) or take the bytes.
 * The tests use it to generate their fixtures.
 */
#ifndef QG_GGUF_WRITE_H
#define QG_GGUF_WRITE_H

#include <stddef.h>
#include <stdint.h>

struct gguf_writer;

/* NULL on allocation failure. */
struct gguf_writer *gguf_writer_new(void);
void gguf_writer_free(struct gguf_writer *w); /* accepts NULL */

/* Scalar metadata; value points to the little-endian bytes of type (enum
 * gguf_vtype, not GGUF_STR/GGUF_ARR). Setting "general.alignment" (u32)
 * changes the alignment. All setters return QG_OK, QG_ERR_USAGE (duplicate
 * key, bad type) or QG_ERR_NOMEM. */
int gguf_writer_set_scalar(struct gguf_writer *w, const char *key, uint32_t type,
                           const void *value);
int gguf_writer_set_u32(struct gguf_writer *w, const char *key, uint32_t v);
int gguf_writer_set_i32(struct gguf_writer *w, const char *key, int32_t v);
int gguf_writer_set_f32(struct gguf_writer *w, const char *key, float v);
int gguf_writer_set_bool(struct gguf_writer *w, const char *key, int v);
int gguf_writer_set_str(struct gguf_writer *w, const char *key, const char *s);
/* Array of n fixed-size elements of elem_type (not string/array). */
int gguf_writer_set_arr(struct gguf_writer *w, const char *key, uint32_t elem_type,
                        const void *data, uint64_t n);
int gguf_writer_set_arr_str(struct gguf_writer *w, const char *key, const char *const *strs,
                            uint64_t n);

/* Adds a tensor; data (copied) holds its stored bytes, whose size follows from
 * type and ne (ne[0] a multiple of the block size). QG_ERR_USAGE on a bad
 * name, type, shape or duplicate. */
int gguf_writer_add_tensor(struct gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                           const int64_t *ne, const void *data);

/* Serialises into a malloc'd buffer the caller frees. QG_OK or QG_ERR_NOMEM. */
int gguf_writer_to_memory(const struct gguf_writer *w, uint8_t **buf, size_t *size);

/* Writes path atomically (path.tmp, fsync, rename). QG_OK, or QG_ERR_CANTCREAT
 * / QG_ERR_IO with err filled. */
int gguf_writer_write(const struct gguf_writer *w, const char *path, char *err, size_t errlen);

#endif
