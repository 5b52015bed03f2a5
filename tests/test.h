/* test — assertions and helpers for qgate's one test runner.
 *
 * A test is `TEST(name, label) { ... return 0; }` at the start of a line in
 * a tests/test_*.c; the label is unit (in-process, no binary, no server, no
 * shared data, under a second each: `ctest -L unit` runs in seconds), slow
 * (in-process, but seconds to a minute: exhaustive loops), e2e (runs the qgate binary,
 * a server or a compiler) or shared (reads ../shared; skips, saying so,
 * without it). The definitions are the one list: tests/CMakeLists.txt reads
 * them into the runner's table (build/tests/test_list.h) and registers each
 * as a ctest test with its label; a line starting `TEST(` in another shape
 * stops the configure step. The runner runs each in its own process with
 * a timeout and a fresh temporary directory (t_tmp()). Asserts print both sides and return 1 from
 * the test. SKIP(reason) returns TEST_SKIP (77), which ctest reports as skipped.
 */
#ifndef QG_TEST_H
#define QG_TEST_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define TEST_SKIP 77

/* T_TSAN: built with ThreadSanitizer (GCC says so by __SANITIZE_THREAD__,
 * clang by __has_feature) */
#if defined(__SANITIZE_THREAD__)
#define T_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define T_TSAN 1
#endif
#endif
#define TEST(name, label)                                                                          \
    int test_##name(void);                                                                         \
    int test_##name(void)

#define T_FAIL_(...)                                                                               \
    do {                                                                                           \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                            \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        return 1;                                                                                  \
    } while (0)

#define ASSERT(c)                                                                                  \
    do {                                                                                           \
        if (!(c)) T_FAIL_("ASSERT(%s) failed", #c);                                                \
    } while (0)

#define ASSERT_EQ(a, b)                                                                            \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ != b_) T_FAIL_("ASSERT_EQ(%s, %s) failed: %lld != %lld", #a, #b, a_, b_);           \
    } while (0)

#define ASSERT_NE(a, b)                                                                            \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ == b_) T_FAIL_("ASSERT_NE(%s, %s) failed: both %lld", #a, #b, a_);                  \
    } while (0)

#define ASSERT_STR_EQ(a, b)                                                                        \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (!a_ || !b_ || strcmp(a_, b_) != 0)                                                     \
            T_FAIL_("ASSERT_STR_EQ(%s, %s) failed: \"%s\" != \"%s\"", #a, #b, a_ ? a_ : "(null)",  \
                    b_ ? b_ : "(null)");                                                           \
    } while (0)

#define ASSERT_CONTAINS(hay, needle)                                                               \
    do {                                                                                           \
        const char *h_ = (hay), *n_ = (needle);                                                    \
        if (!h_ || !strstr(h_, n_))                                                                \
            T_FAIL_("ASSERT_CONTAINS(%s, %s) failed: \"%s\" not found in:\n%s", #hay, #needle, n_, \
                    h_ ? h_ : "(null)");                                                           \
    } while (0)

#define ASSERT_NEAR(a, b, tol)                                                                     \
    do {                                                                                           \
        double a_ = (a), b_ = (b);                                                                 \
        if (!(fabs(a_ - b_) <= (tol)))                                                             \
            T_FAIL_("ASSERT_NEAR(%s, %s, %s) failed: %.17g vs %.17g", #a, #b, #tol, a_, b_);       \
    } while (0)

/* Runs an int-returning call and fails the test when it is not 0 (QG_OK). */
#define ASSERT_OK(expr)                                                                            \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        if (rc_ != 0) T_FAIL_("%s returned %d", #expr, rc_);                                       \
    } while (0)

#define SKIP(...)                                                                                  \
    do {                                                                                           \
        printf("skipped: ");                                                                       \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
        return TEST_SKIP;                                                                          \
    } while (0)

/* The test's own temporary directory (removed after a passing test). */
const char *t_tmp(void);
/* t_tmp()/name in a static rotating buffer (8 slots). */
const char *t_path(const char *name);
/* Path to ../shared/REL next to the source tree (or $QG_SHARED/REL), or NULL
 * when the shared folder is absent. */
const char *t_shared(const char *rel);

int t_write_file(const char *path, const void *data, size_t n);
/* Whole file, NUL-terminated, malloc'd; NULL on failure. */
char *t_read_file(const char *path, size_t *n);

/* Result of running the qgate binary. */
struct t_out {
    int code;  /* exit status, or 128+signal */
    char *out; /* stdout, malloc'd */
    char *err; /* stderr, malloc'd */
};
/* Runs `qgate ARGS...` (NULL-terminated) and captures its output. */
int t_qgate(struct t_out *o, const char *arg, ...);
/* The same with the arguments as a NULL-terminated array. */
int t_qgate_argv(struct t_out *o, const char *const *args);

/* `qgate ppl model --text text --ctx 128 --chunks chunks --threads 2 --json`:
 * the PPL, or a negative value (the failure printed on stderr). */
double t_ppl(const char *model, const char *text, const char *chunks);

/* sum (a-b)^2 / sum b^2 over n values, in double */
double t_nmse(const float *a, const float *b, size_t n);

/* The product of row r of W (Q4_0, IQ4_NL, MXFP4, Q4_K, Q2_K) with the
 * codes a in llama.cpp's repacked order, one fused multiply-add each
 * `per` values: per row, I the integer sum of weight codes times input
 * codes over those values (the K-quants: each sub-block's sum times its
 * integer scale) and M (the K-quants) the minima times the input's sums,
 * acc = fmaf(I, d_w d_x, acc), accm = fmaf(M, dmin_w d_x, accm), and
 * acc - accm. Its gemv adds each block (per 32 or 256), its GEMM each 32
 * (the 32-blocks), 64 (Q4_K) or 128 (Q2_K) values (ggml-cpu/repack.cpp,
 * llama.cpp 0c1e570) */
struct wmat;
struct matmul_q8;
float t_repacked_dot(const struct wmat *W, int64_t r, const struct matmul_q8 *a, int per);

/* The fp16 bits of the block scale d of a quantized block b of type
 * (where the type keeps it: IQ1_M in the top nibbles of its four scale
 * words; TQ1_0, TQ2_0, Q2_K, Q3_K and Q6_K after their codes and scales;
 * the others first), and the same set to h. */
uint16_t t_block_d(uint32_t type, const uint8_t *b);
void t_set_block_d(uint32_t type, uint8_t *b, uint16_t h);

/* log softmax(row)[tok] of a row of V logits, in double. */
double t_logprob(const float *row, int V, int tok);
/* Runs argv[0] (looked up on PATH) with argv (NULL-terminated) and
 * captures its output. */
int t_run_argv(struct t_out *o, const char *const *argv);
void t_out_free(struct t_out *o);

/* 1 when prog is on PATH (for tests that drive outside tools). */
int t_have(const char *prog);
/* One number from an SQL query on the database at path (-1 on error). */
long long t_sql_int(const char *path, const char *sql);
/* Writes t_path(name): the default synthetic model stored as ggml type
 * `type`, with weights seeded by seed. QG_OK or a status. */
int t_synth(const char *name, uint32_t type, uint64_t seed);

struct simfmt;
/* The logits of n tokens (ids 3 + 37 i mod 200) of the model at path on
 * `threads` threads, activations as llama_ctx_set_act(act, f) says (act
 * LLAMA_ACT_NONE: plain mode), into lg[n][vocab]: 0, or a failed test. */
int t_logits(const char *path, int act, const struct simfmt *f, int threads, int n, float *lg);

/* Byte builder for hand-made (often malformed) files. */
struct bb {
    unsigned char *p;
    size_t n, cap;
};
void bb_bytes(struct bb *b, const void *data, size_t n);
void bb_u32(struct bb *b, uint32_t v);
void bb_u64(struct bb *b, uint64_t v);
void bb_str(struct bb *b, const char *s);
void bb_free(struct bb *b);

#endif
