/* alloc_fail — the --wrap'ed allocators with a one-shot failure point. */
#include "tests/alloc_fail.h"

#include <cjson/cJSON.h>
#include <malloc.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
void *__wrap_aligned_alloc(size_t align, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);

/* atomic: servers under test allocate from several threads at once */
static _Atomic long count, fail_at;
static _Atomic int failed;

void t_alloc_fail_at(long n)
{
    count = 0;
    fail_at = n;
    failed = 0;
}

long t_alloc_count(void)
{
    return count;
}

int t_alloc_failed(void)
{
    return failed;
}

/* 1 when this allocation is the one to fail */
static int should_fail(void)
{
    long k = ++count;
    if (fail_at > 0 && k == fail_at) {
        failed = 1;
        return 1;
    }
    return 0;
}

void *__wrap_malloc(size_t n)
{
    return should_fail() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
    return should_fail() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
    if (n == 0 || !should_fail()) return __real_realloc(p, n);
    return NULL; /* p stays valid, as realloc promises */
}

void *__wrap_aligned_alloc(size_t align, size_t n)
{
    return should_fail() ? NULL : __real_aligned_alloc(align, n);
}

char *__wrap_strdup(const char *s)
{
    return should_fail() ? NULL : __real_strdup(s);
}

char *__wrap_strndup(const char *s, size_t n)
{
    return should_fail() ? NULL : __real_strndup(s, n);
}

static void *sq_malloc(int n)
{
    return __wrap_malloc((size_t)n);
}
static void sq_free(void *p)
{
    free(p);
}
static void *sq_realloc(void *p, int n)
{
    return __wrap_realloc(p, (size_t)n);
}
static int sq_size(void *p)
{
    return (int)malloc_usable_size(p);
}
static int sq_roundup(int n)
{
    return (n + 7) & ~7;
}
static int sq_init(void *ud)
{
    (void)ud;
    return SQLITE_OK;
}
static void sq_shutdown(void *ud)
{
    (void)ud;
}

int t_alloc_hook_libraries(void)
{
    cJSON_Hooks h = {.malloc_fn = __wrap_malloc, .free_fn = free};
    cJSON_InitHooks(&h);
    static const sqlite3_mem_methods m = {sq_malloc,  sq_free, sq_realloc,  sq_size,
                                          sq_roundup, sq_init, sq_shutdown, NULL};
    return sqlite3_config(SQLITE_CONFIG_MALLOC, &m) == SQLITE_OK ? 0 : -1;
}
