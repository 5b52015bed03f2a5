/* alloc_fail — allocation-failure injection for tests (as SQLite's and
 * curl's test suites do).
 *
 * The test binary is linked with -Wl,--wrap for malloc, calloc, realloc,
 * strdup and strndup, so every allocation qgate's own code makes goes
 * through the counters here; cJSON's and SQLite's allocators are pointed at
 * them too (t_alloc_hook_libraries). Built only with QG_ALLOC_FAIL (on by
 * default); T_HAVE_ALLOC_FAIL says whether it is.
 */
#ifndef QG_TESTS_ALLOC_FAIL_H
#define QG_TESTS_ALLOC_FAIL_H

/* Fail the n-th allocation from now on (1 = the next); 0 turns failing
 * off. Resets the count. One allocation fails, the later ones succeed. */
void t_alloc_fail_at(long n);
/* Allocations since the last t_alloc_fail_at. */
long t_alloc_count(void);
/* 1 when the armed allocation has failed. */
int t_alloc_failed(void);
/* Routes cJSON's and SQLite's allocations through the counters. Call once,
 * before either library allocates. 0 on success. */
int t_alloc_hook_libraries(void);

#endif
