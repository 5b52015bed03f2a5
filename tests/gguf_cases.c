/* gguf_cases — hand-built malformed GGUF files. */
#include "tests/gguf_cases.h"

#include <stdlib.h>

static void header(struct bb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    bb_bytes(b, "GGUF", 4);
    bb_u32(b, version);
    bb_u64(b, n_tensors);
    bb_u64(b, n_kv);
}

static void kv_str(struct bb *b, const char *key, const char *v)
{
    bb_str(b, key);
    bb_u32(b, 8);
    bb_str(b, v);
}

static void kv_u32(struct bb *b, const char *key, uint32_t v)
{
    bb_str(b, key);
    bb_u32(b, 4);
    bb_u32(b, v);
}

static void tinfo(struct bb *b, const char *name, uint32_t n_dims, const uint64_t *ne,
                  uint32_t type, uint64_t offset)
{
    bb_str(b, name);
    bb_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++)
        bb_u64(b, ne[i]);
    bb_u32(b, type);
    bb_u64(b, offset);
}

static void pad(struct bb *b, size_t a)
{
    static const unsigned char z[64];
    while (b->n % a)
        bb_bytes(b, z, 1);
}

static void data(struct bb *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        bb_bytes(b, "\x01", 1);
}

static const uint64_t ne8[1] = {8}, ne32[1] = {32};

void gguf_case_valid(struct bb *b)
{
    header(b, 3, 1, 1);
    kv_str(b, "general.architecture", "llama");
    tinfo(b, "t", 1, ne8, 0, 0);
    pad(b, 32);
    data(b, 32);
}

static void c_empty(struct bb *b)
{
    (void)b;
}
static void c_bad_magic(struct bb *b)
{
    gguf_case_valid(b);
    b->p[3] = 'X';
}
static void c_version1(struct bb *b)
{
    header(b, 1, 0, 0);
}
static void c_version4(struct bb *b)
{
    header(b, 4, 0, 0);
}
static void c_big_endian(struct bb *b)
{
    header(b, 0x03000000u, 0, 0);
}
static void c_truncated_header(struct bb *b)
{
    bb_bytes(b, "GGUF", 4);
    bb_u32(b, 3);
    bb_u32(b, 0);
}
static void c_absurd_kv(struct bb *b)
{
    header(b, 3, 0, (uint64_t)1 << 40);
    kv_str(b, "a", "b");
}
static void c_absurd_tensors(struct bb *b)
{
    header(b, 3, (uint64_t)1 << 40, 0);
    data(b, 64);
}
static void c_key_past_eof(struct bb *b)
{
    header(b, 3, 0, 1);
    bb_u64(b, 1000);
    bb_bytes(b, "general", 7);
}
static void c_key_nul(struct bb *b)
{
    header(b, 3, 0, 1);
    bb_u64(b, 3);
    bb_bytes(b, "a\0b", 3);
    bb_u32(b, 4);
    bb_u32(b, 1);
}
static void c_unknown_vtype(struct bb *b)
{
    header(b, 3, 0, 1);
    bb_str(b, "general.x");
    bb_u32(b, 13);
    bb_u32(b, 0);
}
static void c_nested_array(struct bb *b)
{
    header(b, 3, 0, 1);
    bb_str(b, "general.x");
    bb_u32(b, 9);
    bb_u32(b, 9);
    bb_u64(b, 1);
    data(b, 16);
}
static void c_array_too_long(struct bb *b)
{
    header(b, 3, 0, 1);
    bb_str(b, "general.x");
    bb_u32(b, 9);
    bb_u32(b, 4);
    bb_u64(b, (uint64_t)1 << 60);
    bb_u32(b, 1);
}
static void c_string_array_truncated(struct bb *b)
{
    header(b, 3, 0, 1);
    bb_str(b, "tokenizer.ggml.tokens");
    bb_u32(b, 9);
    bb_u32(b, 8);
    bb_u64(b, 3);
    bb_str(b, "a");
    bb_u64(b, 500);
    bb_bytes(b, "bc", 2);
    data(b, 40); /* room for the count check to pass; element 1 still overruns */
}
static void c_truncated_value(struct bb *b)
{
    header(b, 3, 0, 1);
    bb_str(b, "general.alignment");
    bb_u32(b, 4);
    bb_bytes(b, "\x20\x00", 2);
}
static void c_bad_alignment(struct bb *b)
{
    header(b, 3, 1, 1);
    kv_u32(b, "general.alignment", 3);
    tinfo(b, "t", 1, ne8, 0, 0);
    pad(b, 32);
    data(b, 32);
}
static void c_alignment_type(struct bb *b)
{
    header(b, 3, 0, 1);
    kv_str(b, "general.alignment", "32");
}
static void c_unknown_ttype(struct bb *b)
{
    header(b, 3, 1, 0);
    tinfo(b, "t", 1, ne8, 4, 0);
    pad(b, 32);
    data(b, 32);
}
/* qgate's own block type (a checkpoint directory's FP8) is never a file's */
static void c_internal_ttype(struct bb *b)
{
    header(b, 3, 1, 0);
    tinfo(b, "t", 1, ne32, 64, 0);
    pad(b, 32);
    data(b, 36);
}
static void c_huge_ttype(struct bb *b)
{
    header(b, 3, 1, 0);
    tinfo(b, "t", 1, ne8, 200, 0);
    pad(b, 32);
    data(b, 32);
}
static void c_too_many_dims(struct bb *b)
{
    static const uint64_t ne[5] = {8, 1, 1, 1, 1};
    header(b, 3, 1, 0);
    tinfo(b, "t", 5, ne, 0, 0);
    pad(b, 32);
    data(b, 32);
}
static void c_zero_dims(struct bb *b)
{
    header(b, 3, 1, 0);
    tinfo(b, "t", 0, ne8, 0, 0);
    pad(b, 32);
    data(b, 32);
}
static void c_dim_overflow(struct bb *b)
{
    static const uint64_t ne[3] = {(uint64_t)1 << 40, (uint64_t)1 << 40, 1 << 20};
    header(b, 3, 1, 0);
    tinfo(b, "t", 3, ne, 0, 0);
    pad(b, 32);
    data(b, 32);
}
static void c_size_overflow(struct bb *b)
{
    static const uint64_t ne[1] = {(uint64_t)1 << 62};
    header(b, 3, 1, 0);
    tinfo(b, "t", 1, ne, 0, 0);
    pad(b, 32);
    data(b, 32);
}
static void c_row_not_block(struct bb *b)
{
    static const uint64_t ne[2] = {31, 2};
    header(b, 3, 1, 0);
    tinfo(b, "t", 2, ne, 8, 0);
    pad(b, 32);
    data(b, 96);
}
static void c_offset_past_eof(struct bb *b)
{
    header(b, 3, 1, 0);
    tinfo(b, "t", 1, ne8, 0, 1024);
    pad(b, 32);
    data(b, 32);
}
static void c_misaligned(struct bb *b)
{
    header(b, 3, 1, 0);
    tinfo(b, "t", 1, ne8, 0, 4);
    pad(b, 32);
    data(b, 64);
}
static void c_overlap(struct bb *b)
{
    static const uint64_t ne16[1] = {16};
    header(b, 3, 2, 0);
    tinfo(b, "a", 1, ne16, 0, 0);
    tinfo(b, "b", 1, ne8, 0, 32);
    pad(b, 32);
    data(b, 96);
}
static void c_dup_key(struct bb *b)
{
    header(b, 3, 0, 2);
    kv_str(b, "general.name", "a");
    kv_str(b, "general.name", "b");
}
static void c_dup_tensor(struct bb *b)
{
    header(b, 3, 2, 0);
    tinfo(b, "t", 1, ne8, 0, 0);
    tinfo(b, "t", 1, ne8, 0, 32);
    pad(b, 32);
    data(b, 64);
}
static void c_long_name(struct bb *b)
{
    char name[65];
    memset(name, 'n', 64);
    name[64] = '\0';
    header(b, 3, 1, 0);
    tinfo(b, name, 1, ne8, 0, 0);
    pad(b, 32);
    data(b, 32);
}
static void c_no_data_section(struct bb *b)
{
    header(b, 3, 1, 0);
    tinfo(b, "t", 1, ne8, 0, 0);
}

const struct gguf_case gguf_bad_cases[] = {
    {"empty", c_empty, "empty file"},
    {"bad_magic", c_bad_magic, "not a GGUF file"},
    {"version1", c_version1, "version 1 is not supported"},
    {"version4", c_version4, "unknown GGUF version 4"},
    {"big_endian", c_big_endian, "big-endian"},
    {"truncated_header", c_truncated_header, "truncated"},
    {"absurd_kv_count", c_absurd_kv, "metadata count 1099511627776 is impossible"},
    {"absurd_tensor_count", c_absurd_tensors, "tensor count 1099511627776 is impossible"},
    {"key_past_eof", c_key_past_eof, "has length 1000"},
    {"key_with_nul", c_key_nul, "empty or contains a NUL"},
    {"unknown_value_type", c_unknown_vtype, "unknown value type 13"},
    {"nested_array", c_nested_array, "array of arrays"},
    {"array_too_long", c_array_too_long, "array of 1152921504606846976 u32"},
    {"string_array_truncated", c_string_array_truncated, "element 1"},
    {"truncated_value", c_truncated_value, "value of 'general.alignment'"},
    {"bad_alignment", c_bad_alignment, "not a power of two"},
    {"alignment_not_integer", c_alignment_type, "not an integer"},
    {"unknown_tensor_type", c_unknown_ttype, "unknown type 4"},
    {"huge_tensor_type", c_huge_ttype, "unknown type 200"},
    {"internal_tensor_type", c_internal_ttype, "unknown type 64"},
    {"too_many_dims", c_too_many_dims, "has 5 dimensions"},
    {"zero_dims", c_zero_dims, "has 0 dimensions"},
    {"dim_overflow", c_dim_overflow, "overflows the element count"},
    {"size_overflow", c_size_overflow, "size overflows"},
    {"row_not_block_multiple", c_row_not_block, "not a multiple of the Q8_0 block size 32"},
    {"offset_past_eof", c_offset_past_eof, "past the end of the file"},
    {"misaligned_offset", c_misaligned, "not a multiple of the alignment"},
    {"overlapping_tensors", c_overlap, "overlap"},
    {"duplicate_key", c_dup_key, "duplicate metadata key 'general.name'"},
    {"duplicate_tensor", c_dup_tensor, "duplicate tensor name 't'"},
    {"name_too_long", c_long_name, "invalid name"},
    {"no_data_section", c_no_data_section, "data section"},
};
const int gguf_n_bad_cases = (int)(sizeof gguf_bad_cases / sizeof *gguf_bad_cases);
