/* matmul — tiled prefill over stored weights, fused decode kernels. */
#include "backends/matmul.h"
#include "backends/cols_copy.h"
#include "backends/iq_copy.h"
#include "backends/dequant.h"
#include "backends/matmul_impl.h"
#include "backends/ggml_types.h"
#include "backends/parallel.h"
#include "backends/qcodes.h"
#include "backends/quant.h"
#include "core/status.h"
#include "core/util.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

enum { PANEL_MAX_ROWS = 256, PANEL_MAX_FLOATS = 1 << 21 };

int matmul_panel_rows(int64_t in, int64_t out)
{
    int rows = PANEL_MAX_ROWS;
    while (rows > 16 && (out / rows < 4 || (int64_t)rows * in > PANEL_MAX_FLOATS))
        rows /= 2;
    return rows;
}

size_t matmul_scratch_floats(int64_t max_in)
{
    /* prefill: a panel; decode: a decode buffer, 256 outputs and up to
     * MATMUL_GROUP_MAX preparations of x (lanes and group sums, and a flag on avx512vnni:
     * mv_x86_prep, each rounded up to 16 floats). The widest panel of
     * any in <= max_in: 256 rows up to the 8 MiB cap, at least 16 rows of max_in */
    size_t cap = (size_t)PANEL_MAX_ROWS * (size_t)max_in;
    if (cap > PANEL_MAX_FLOATS) cap = PANEL_MAX_FLOATS;
    size_t panel = cap > (size_t)16 * (size_t)max_in ? cap : (size_t)16 * (size_t)max_in,
           decode = 2048 + 256 + MATMUL_GROUP_MAX * ((size_t)max_in / 32 + (size_t)max_in + 16);
    size_t per = panel > decode ? panel : decode;
    return (per + 15) / 16 * 16; /* each thread's part 64-byte aligned */
}

/* ------------------------------------------------------------ prefill */

struct mm_job {
    float *y;
    const float *x, *bias;
    const struct wmat *W;
    int n;
    float beta;
    float *scratch;
    size_t per_thread;
    int minima; /* in / 32 extra columns: the blocks' minima (matmul_w_minima), or 0 */
};

/* rows [r0, r1) of W (Q4_1 or Q5_1) into panel, each row its in values
 * and then its in / 32 block minima (fp16 m, after d, of each block) */
static void panel_with_minima(const struct wmat *W, int r0, int r1, float *panel)
{
    const int64_t in = W->in, nb = in / 32, K = in + nb;
    const size_t bsz = ggml_type_get(W->type)->type_size; /* d, m (fp16), the codes */
    for (int r = r0; r < r1; r++) {
        const uint8_t *row = W->data + (size_t)r * W->row_bytes;
        float *p = panel + (size_t)(r - r0) * (size_t)K;
        dequant_row(W->type, row, p, in);
        quant_f16_gather(row + 2, bsz, nb, p + in);
    }
}

static void add_bias(const struct mm_job *j, int o0, int o1)
{
    if (!j->bias) return;
    int out = (int)j->W->out;
    for (int i = 0; i < j->n; i++)
        for (int o = o0; o < o1; o++)
            j->y[(size_t)i * out + o] += j->bias[o];
}

/* panels [p0, p1) of y = x . W^T: panel p is output rows [p R, p R + R),
 * R = matmul_panel_rows(in, out). The panels depend on the matrix alone,
 * never on the thread count: OpenBLAS's rounding depends on the shape of
 * each call, so every thread count gives the same bits. */
static void tile_panels(void *arg, int64_t p0, int64_t p1, int thread)
{
    const struct mm_job *j = arg;
    const struct wmat *W = j->W;
    const int in = (int)W->in + j->minima, out = (int)W->out, rows = matmul_panel_rows(in, out);
    float *panel = j->scratch + (size_t)thread * j->per_thread;
    for (int64_t p = p0; p < p1; p++) {
        int r0 = (int)p * rows, r1 = r0 + rows < out ? r0 + rows : out;
        const float *w = panel;
        if (j->minima)
            panel_with_minima(W, r0, r1, panel);
        else if (W->type == GGML_F32) /* straight from the mapping */
            w = (const float *)(const void *)W->data + (size_t)r0 * in;
        else
            dequant_row(W->type, W->data + (size_t)r0 * W->row_bytes, panel,
                        (int64_t)(r1 - r0) * in);
        /* beta 0: the panel of y cleared here and sgemm told beta 1, the
         * same bits (0 + x.W) without OpenBLAS's strided beta pass */
        if (j->beta == 0.0f)
            for (int i = 0; i < j->n; i++)
                memset(j->y + (size_t)i * out + r0, 0, (size_t)(r1 - r0) * sizeof *j->y);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, j->n, r1 - r0, in, 1.0f, j->x, in, w,
                    in, j->beta == 0.0f ? 1.0f : j->beta, j->y + r0, out);
        add_bias(j, r0, r1);
    }
}

/* job j's panels over the pool: each thread's scratch and the panels as
 * matmul_panel_rows gives them for the job's K (in, plus its minima) */
static void run_panels(struct mm_job *j, int n_threads)
{
    const int64_t K = j->W->in + j->minima;
    j->per_thread = matmul_scratch_floats(K);
    int rows = matmul_panel_rows(K, j->W->out);
    parallel_for(parallel_threads_for(n_threads, 2.0 * j->n * (double)K * (double)j->W->out),
                 (j->W->out + rows - 1) / rows, tile_panels, j);
}

/* ------------------------------------------------------------- decode */

/* the portable dot product of a and b, or of a and h's fp16 values (h
 * not NULL: the same operations on the values widened; a NULL h a
 * constant where inlined) */
static inline __attribute__((always_inline)) float dot_portable_any(const float *a, const float *b,
                                                                    const uint16_t *h, int64_t n)
{
    float acc[8] = {0};
    int64_t k = 0;
    for (; k + 8 <= n; k += 8)
        for (int j = 0; j < 8; j++)
            acc[j] += a[k + j] * (h ? quant_f16_to_f32(h[k + j]) : b[k + j]);
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; k < n; k++)
        s += a[k] * (h ? quant_f16_to_f32(h[k]) : b[k]);
    return s;
}

static float dot_portable(const float *a, const float *b, int64_t n)
{
    return dot_portable_any(a, b, NULL, n);
}

/* a row through chunks of up to ROW_CHUNK decoded elements (L1/L2-resident) */
enum { ROW_CHUNK = 2048 };
static float row_generic(const struct wmat *W, int64_t r, const float *x, float *buf, mv_dot_fn dot)
{
    const struct ggml_type_info *ti = ggml_type_get(W->type);
    int64_t chunk = ti->block >= ROW_CHUNK ? ti->block : ROW_CHUNK / ti->block * ti->block;
    const uint8_t *p = W->data + (size_t)r * W->row_bytes;
    float s = 0;
    for (int64_t k = 0; k < W->in; k += chunk) {
        int64_t m = W->in - k < chunk ? W->in - k : chunk;
        dequant_row(W->type, p + (size_t)(k / ti->block) * ti->type_size, buf, m);
        s += dot(buf, x + k, m);
    }
    return s;
}

void matmul_rows_portable(float *y, const float *x, const struct wmat *W, int64_t r0, int64_t r1,
                          float *row)
{
    for (int64_t r = r0; r < r1; r++)
        y[r - r0] = row_generic(W, r, x, row, dot_portable);
}

/* the kernel set: detected once (every thread computes the same answer),
 * or as matmul_use_kernel chose; never above the ceiling matmul_cap_kernel
 * set (a forced set: as a CPU with only that set) */
static int isa_chosen = -1, isa_ceiling = MV_AVX512_VNNI;

enum mv_isa mv_isa_best(void)
{
    int k = (int)mv_isa_detect();
    return (enum mv_isa)(k < isa_ceiling ? k : isa_ceiling);
}

enum mv_isa mv_isa_current(void)
{
    int k = __atomic_load_n(&isa_chosen, __ATOMIC_RELAXED);
    if (k < 0) {
        k = (int)mv_isa_best();
        __atomic_store_n(&isa_chosen, k, __ATOMIC_RELAXED);
    }
    return (enum mv_isa)k;
}

static const char *const isa_names[] = {"portable", "avx2", "avx512", "avx512vnni"};

const char *matmul_kernel_name(void)
{
    return isa_names[mv_isa_current()];
}

static int isa_index(const char *name, enum mv_isa best)
{
    for (int k = 0; k <= (int)best; k++)
        if (name && !strcmp(name, isa_names[k])) return k;
    return -1;
}

int matmul_use_kernel(const char *name)
{
    int k = isa_index(name, mv_isa_best());
    if (k < 0) return QG_ERR_USAGE;
    __atomic_store_n(&isa_chosen, k, __ATOMIC_RELAXED);
    return QG_OK;
}

int matmul_cap_kernel(const char *name)
{
    int k = isa_index(name, mv_isa_best());
    if (k < 0) return QG_ERR_USAGE;
    isa_ceiling = k;
    __atomic_store_n(&isa_chosen, k, __ATOMIC_RELAXED);
    return QG_OK;
}

float matmul_dot(const float *a, const float *b, int64_t n)
{
    mv_dot_fn dot = mv_x86_dot(mv_isa_current());
    return dot ? dot(a, b, n) : dot_portable(a, b, n);
}

void matmul_dots(float *out, const float *a, const float *b, int64_t T, int64_t stride, int64_t n,
                 float scale)
{
    mv_dots_fn dots = mv_x86_dots(mv_isa_current());
    if (dots) {
        dots(out, a, b, T, stride, n, scale);
        return;
    }
    for (int64_t t = 0; t < T; t++)
        out[t] = dot_portable(a, b + t * stride, n) * scale;
}

void matmul_dots_f16(float *out, const float *a, const uint16_t *b, int64_t T, int64_t stride,
                     int64_t n, float scale)
{
    mv_dots_f16_fn dots = mv_x86_dots_f16(mv_isa_current());
    if (dots) {
        dots(out, a, b, T, stride, n, scale);
        return;
    }
    for (int64_t t = 0; t < T; t++) /* portable: dot_portable's order, each value widened */
        out[t] = dot_portable_any(a, NULL, b + t * stride, n) * scale;
}

/* rows [r0, r1) of W . x: the kernel set's kernel for W's type, or decoded
 * rows and a dot product; prep: x's preparation, or NULL */
static void rows_fused(enum mv_isa isa, float *y, const float *x, const struct wmat *W, int64_t r0,
                       int64_t r1, float *row, const float *prep)
{
    if (mv_x86_rows(isa, y, x, prep, W, r0, r1)) return;
    mv_dot_fn dot = mv_x86_dot(isa);
    if (!dot) dot = dot_portable;
    if (W->type == GGML_F32) {
        for (int64_t r = r0; r < r1; r++)
            y[r - r0] =
                dot((const float *)(const void *)(W->data + (size_t)r * W->row_bytes), x, W->in);
        return;
    }
    for (int64_t r = r0; r < r1; r++)
        y[r - r0] = row_generic(W, r, x, row, dot);
}

void matmul_rows_fused(float *y, const float *x, const struct wmat *W, int64_t r0, int64_t r1,
                       float *row)
{
    enum mv_isa isa = mv_isa_current();
    size_t n = mv_x86_prep_floats(isa, W->type, W->in);
    float *prep = n ? qg_alloc_aligned(n * sizeof *prep) : NULL;
    if (prep) mv_x86_prep(isa, W->type, x, W->in, prep);
    rows_fused(isa, y, x, W, r0, r1, row, prep);
    free(prep);
}

int matmul_has_q8(uint32_t type, uint32_t kind)
{
    struct matmul_q8 a = {.kind = kind};
    struct wmat W = {"probe", type, NULL, 256, 0, 0, 0, NULL, 0};
    return mv_x86_q8_rows(mv_isa_current(), NULL, &a, &W, 0, 0);
}

int matmul_has_fused(uint32_t type, int64_t in)
{
    enum mv_isa isa = mv_isa_current();
    if (type == GGML_F32) return isa != MV_PORTABLE;
    /* a call over no rows answers whether the set has the kernel; the
     * kernels that read a preparation see a zeroed one (its flag: floats) */
    size_t n = mv_x86_prep_floats(isa, type, in);
    float *prep = n ? calloc(n, sizeof *prep) : NULL;
    struct wmat W = {"probe", type, NULL, in, 0, 0, 0, NULL, 0};
    int has = (!n || prep) && mv_x86_rows(isa, NULL, NULL, prep, &W, 0, 0);
    free(prep);
    return has;
}

/* one product of a decode group: its rows are units [first, first +
 * ceil(out / 16)) of the group's fork-join */
struct mv_part {
    struct matmul_part p;
    const float *prep;
    int64_t first;
};

struct mv_job {
    const float *x;
    const struct matmul_q8 *a; /* or NULL */
    struct mv_part parts[MATMUL_GROUP_MAX];
    int k;
    float *scratch;
    size_t per_thread;
    enum mv_isa isa;
};

/* rows [r0, r1) of one part, 256 at a time through the thread's buffer */
static void mv_part_rows(const struct mv_job *j, const struct mv_part *q, int64_t r0, int64_t r1,
                         int thread)
{
    float *buf = j->scratch + (size_t)thread * j->per_thread, *tmp = buf + ROW_CHUNK;
    const struct matmul_part *p = &q->p;
    for (int64_t a = r0; a < r1; a += 256) {
        int64_t b = a + 256 < r1 ? a + 256 : r1;
        if (!j->a || !mv_x86_q8_rows(j->isa, tmp, j->a, p->W, a, b))
            rows_fused(j->isa, tmp, j->x, p->W, a, b, buf, q->prep);
        /* y is read only where beta asks: a first read of a fresh page (the
         * KV cache's next row) maps the zero page, and the write after it
         * then pays a copy-on-write fault and a TLB shootdown */
        if (p->beta != 0.0f)
            for (int64_t r = a; r < b; r++) {
                float by = p->beta * p->y[r]; /* no fused multiply-add, as before */
                tmp[r - a] = tmp[r - a] + by;
            }
        for (int64_t r = a; r < b; r++)
            p->y[r] = tmp[r - a] + (p->bias ? p->bias[r] : 0.0f);
    }
}

/* units [c0, c1) of the group: 16 rows of one part each */
static void mv_rows(void *arg, int64_t c0, int64_t c1, int thread)
{
    const struct mv_job *j = arg;
    for (int i = 0; i < j->k; i++) {
        const struct mv_part *q = &j->parts[i];
        int64_t out = q->p.W->out, last = q->first + (out + 15) / 16;
        int64_t u0 = c0 > q->first ? c0 : q->first, u1 = c1 < last ? c1 : last;
        if (u0 >= u1) continue;
        int64_t r1 = (u1 - q->first) * 16;
        mv_part_rows(j, q, (u0 - q->first) * 16, r1 < out ? r1 : out, thread);
    }
}

/* The decode fork-join over every row of the group's parts. Scratch of
 * thread 0 ends with x's preparations (mv_x86_prep), one per distinct type
 * (parts of one type share it); each thread: a decode buffer and 256
 * outputs. */
static void mv_group(const struct matmul_part *parts, int k, const float *x,
                     const struct matmul_q8 *a, int n_threads, float *scratch)
{
    int64_t in = parts[0].W->in;
    size_t per = matmul_scratch_floats(in), taken = 0; /* floats of preparations */
    struct mv_job j = {.x = x, .a = a, .k = k, .scratch = scratch, .per_thread = per};
    j.isa = mv_isa_current(); /* once: the preparation is the kernel's */
    int64_t units = 0;
    double work = 0;
    for (int i = 0; i < k; i++) {
        struct mv_part *q = &j.parts[i];
        q->p = parts[i];
        q->first = units;
        units += (q->p.W->out + 15) / 16;
        work += 2.0 * (double)in * (double)q->p.W->out;
        for (int e = 0; e < i && !q->prep; e++)
            if (j.parts[e].p.W->type == q->p.W->type) q->prep = j.parts[e].prep;
        size_t prep = (mv_x86_prep_floats(j.isa, q->p.W->type, in) + 15) / 16 * 16;
        if (a && mv_x86_q8_rows(j.isa, NULL, a, q->p.W, 0, 0)) prep = 0; /* integer: none */
        if (q->prep || prep == 0 || ROW_CHUNK + 256 + taken + prep > per) continue;
        taken += prep;
        float *xg = scratch + per - taken; /* 64-byte aligned as scratch is */
        mv_x86_prep(j.isa, q->p.W->type, x, in, xg);
        q->prep = xg;
    }
    parallel_for(parallel_threads_for(n_threads, work), units, mv_rows, &j);
}

void matmul_w_group(const struct matmul_part *parts, int k, const float *x, int n, int n_threads,
                    float *scratch)
{
    if (k <= 0) return;
    if (n == 1 && k <= MATMUL_GROUP_MAX) {
        mv_group(parts, k, x, NULL, n_threads, scratch);
        return;
    }
    for (int i = 0; i < k; i++)
        matmul_w(parts[i].y, x, parts[i].W, parts[i].bias, n, parts[i].beta, n_threads, scratch);
}

void matmul_w_group_q8(const struct matmul_part *parts, int k, const float *x,
                       const struct matmul_q8 *a, int n_threads, float *scratch)
{
    for (int i = 0; i < k; i += MATMUL_GROUP_MAX)
        mv_group(parts + i, k - i < MATMUL_GROUP_MAX ? k - i : MATMUL_GROUP_MAX, x, a, n_threads,
                 scratch);
}

void matmul_w(float *y, const float *x, const struct wmat *W, const float *bias, int n, float beta,
              int n_threads, float *scratch)
{
    if (n == 1) {
        struct matmul_part p = {y, W, bias, beta};
        mv_group(&p, 1, x, NULL, n_threads, scratch);
        return;
    }
    struct mm_job j = {y, x, bias, W, n, beta, scratch, 0, 0};
    run_panels(&j, n_threads);
}

int matmul_w_minima_ok(const struct wmat *W)
{
    return (W->type == GGML_Q4_1 || W->type == GGML_Q5_1) && W->in % 32 == 0;
}

int matmul_w_minima(float *y, const float *x, const struct wmat *W, const float *bias, int n,
                    float beta, int n_threads, float *scratch)
{
    if (!matmul_w_minima_ok(W) || n < 2) return QG_ERR_USAGE;
    struct mm_job j = {y, x, bias, W, n, beta, scratch, 0, (int)(W->in / 32)};
    run_panels(&j, n_threads);
    return QG_OK;
}

/* the kinds of decode's copy (the kernel set in use has kernels for them:
 * avx512vnni) */
enum { COPY_NONE, COPY_INTERLEAVED, COPY_COLUMNS };

int matmul_q8_blockwise(const struct wmat *W)
{
    const int per = cols_block_values(W->type);
    return per && !cols_lanes8(W->type) && !(W->flags & WMAT_NO_REPACK) && W->out % 8 == 0 &&
           W->in % per == 0;
}

static int copy_kind(const struct wmat *W)
{
    if (mv_isa_current() != MV_AVX512_VNNI) return COPY_NONE;
    if (matmul_q8_blockwise(W)) return COPY_COLUMNS;
    if (cols_lanes8(W->type)) /* fewer than 16 rows: none (the file's rows as fast) */
        return W->out >= 16 && W->in % cols_block_values(W->type) == 0 ? COPY_COLUMNS : COPY_NONE;
    if (W->type == GGML_Q4_0 || W->type == GGML_IQ4_NL || W->type == GGML_MXFP4)
        return COPY_INTERLEAVED;
    return COPY_NONE;
}

int64_t matmul_copy_rows(const struct wmat *W)
{
    const int kind = copy_kind(W);
    return kind == COPY_INTERLEAVED ? W->out / 4 * 4 : kind == COPY_COLUMNS ? W->out / 16 * 16 : 0;
}

/* the bytes a row takes in W's copy (of a group of 4 or 16, its share) */
static size_t copy_row_bytes(const struct wmat *W)
{
    const int kind = copy_kind(W);
    if (kind == COPY_COLUMNS)
        return (size_t)(W->in / cols_block_values(W->type)) * cols_block_bytes(W->type) / 16;
    return W->row_bytes;
}

size_t matmul_copy_bytes(const struct wmat *W)
{
    return (size_t)matmul_copy_rows(W) * copy_row_bytes(W);
}

/* nb blocks of bs bytes, src's a block every ss bytes, into dst every ds
 * bytes (bs a constant where inlined: the copies inlined) */
static inline __attribute__((always_inline)) void
blocks(uint8_t *dst, size_t ds, const uint8_t *src, size_t ss, int64_t nb, size_t bs)
{
    for (int64_t i = 0; i < nb; i++)
        memcpy(dst + (size_t)i * ds, src + (size_t)i * ss, bs);
}

/* blocks with the copy's block sizes as constants (a memcpy call per
 * 18-byte block cost open a pass of 4 million calls on the 1.1B model) */
static void copy_blocks(uint8_t *dst, size_t ds, const uint8_t *src, size_t ss, int64_t nb,
                        size_t bs)
{
    if (bs == 18) /* Q4_0, IQ4_NL */
        blocks(dst, ds, src, ss, nb, 18);
    else if (bs == 17) /* MXFP4 */
        blocks(dst, ds, src, ss, nb, 17);
    else
        blocks(dst, ds, src, ss, nb, bs);
}

const uint8_t *matmul_row(const struct wmat *W, int64_t r, uint8_t *buf)
{
    const int kind = W->copy ? copy_kind(W) : COPY_NONE;
    /* IQ2's, IQ3's and TQ1_0's copies give codes and decode; the stored row is the file's */
    if (kind == COPY_NONE || (kind == COPY_COLUMNS && !cols_rebuilds(W->type)) ||
        r >= matmul_copy_rows(W))
        return W->data + (size_t)r * W->row_bytes;
    if (kind == COPY_COLUMNS) {
        cols_stored_row(W->type, W->copy + (size_t)(r / 16) * 16 * copy_row_bytes(W), W->in,
                        (int)(r % 16), buf);
        return buf;
    }
    const size_t bs = ggml_type_get(W->type)->type_size;
    const uint8_t *src = W->copy + (size_t)(r / 4) * 4 * W->row_bytes + (size_t)(r % 4) * bs;
    copy_blocks(buf, bs, src, 4 * bs, W->in / ggml_type_get(W->type)->block, bs);
    return buf;
}

void matmul_row_codes(const struct wmat *W, int64_t r, uint8_t *buf, int8_t *code, float *s,
                      float *m)
{
    const int kind = W->copy ? copy_kind(W) : COPY_NONE;
    if (kind == COPY_COLUMNS && iq_copy_block_bytes(W->type) &&
        r < matmul_copy_rows(W)) { /* the grid formats: the columns' codes, block by block */
        const uint8_t *group = W->copy + (size_t)(r / 16) * 16 * copy_row_bytes(W);
        const int per = 256 / qcodes_chunk(W->type); /* scales a block */
        for (int64_t i = 0; i < W->in / 256; i++) {
            uint8_t dec[IQ3_COPY_BYTES];
            cols_iq_decoded(W->type, group, (int)(r % 16), i, dec);
            iq_copy_codes(W->type, dec, 1, code + 256 * i, s + per * i);
        }
        memset(m, 0, (size_t)(W->in / qcodes_chunk(W->type)) * sizeof *m);
    } else if (kind == COPY_COLUMNS && (W->type == GGML_TQ1_0 || W->type == GGML_TQ2_0) &&
               r < matmul_copy_rows(W)) { /* TQ2_0 blocks from the columns (TQ1_0's values) */
        const uint8_t *group = W->copy + (size_t)(r / 16) * 16 * copy_row_bytes(W);
        for (int64_t i = 0; i < W->in / 256; i++) {
            uint8_t blk[66];
            cols_tq2_block(W->type, group, (int)(r % 16), i, blk);
            qcodes_row(GGML_TQ2_0, blk, 256, code + 256 * i, s + 8 * i, m + 8 * i);
        }
    } else {
        qcodes_row(W->type, matmul_row(W, r, buf), W->in, code, s, m);
    }
}

struct copy_job {
    const struct wmat *W;
    uint8_t *dst;
    int kind;
};

/* units [u0, u1) of W's copy: rows, or groups of four rows (interleaved)
 * or of 16 (columns) */
static void copy_units(void *arg, int64_t u0, int64_t u1, int thread)
{
    (void)thread;
    const struct copy_job *j = arg;
    const struct wmat *W = j->W;
    const size_t crb = copy_row_bytes(W);
    for (int64_t g = u0; j->kind == COPY_COLUMNS && g < u1; g++)
        cols_copy_group(W->type, W->data + (size_t)g * 16 * W->row_bytes, W->row_bytes, W->in,
                        j->dst + (size_t)g * 16 * crb);
    if (j->kind != COPY_INTERLEAVED) return;
    const size_t bs = ggml_type_get(W->type)->type_size;
    const int64_t nb = W->in / ggml_type_get(W->type)->block;
    for (int64_t r = 4 * u0; r < 4 * u1; r++) /* row r's block i at group r/4, slot r%4 */
        copy_blocks(j->dst + (size_t)(r / 4) * 4 * W->row_bytes + (size_t)(r % 4) * bs, 4 * bs,
                    W->data + (size_t)r * W->row_bytes, bs, nb, bs);
}

void matmul_copy(const struct wmat *W, uint8_t *dst, int n_threads)
{
    struct copy_job j = {W, dst, copy_kind(W)};
    const int64_t units = j.kind == COPY_INTERLEAVED ? W->out / 4
                          : j.kind == COPY_COLUMNS   ? W->out / 16
                                                     : matmul_copy_rows(W);
    parallel_for(parallel_threads_for(n_threads, (double)units * (double)W->row_bytes * 64), units,
                 copy_units, &j);
}
