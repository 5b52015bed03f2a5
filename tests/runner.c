/* runner — qgate's one test runner.
 *
 * usage: qgate_tests [--list] [--timeout SECONDS] [NAME...]
 * Runs every test (or the named ones) in its own process, with a timeout
 * (default 300 s, 900 s in sanitizer builds, or $QG_TEST_TIMEOUT) and a
 * fresh temporary directory passed as $QG_TEST_TMP (removed when the test
 * passes, kept for a failure). Prints
 * one line per test and ends with "N passed, N failed, N skipped". Exit
 * status: 0 when nothing failed, 77 when the only test run was skipped (for
 * ctest's SKIP_RETURN_CODE), 1 otherwise.
 */
#include "backends/kernel_set.h"
#include "core/util.h"
#include "cli/cpu_select.h"
#include "tests/test.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TEST_ENTRY(name, label) int test_##name(void);
#include "test_list.h" /* generated: build/tests/ */
#undef TEST_ENTRY

static const struct {
    const char *name;
    int (*fn)(void);
} tests[] = {
#define TEST_ENTRY(name, label) {#name, test_##name},
#include "test_list.h" /* generated: build/tests/ */
#undef TEST_ENTRY
};
#define N_TESTS ((int)(sizeof tests / sizeof *tests))

static int remove_tree(const char *dir)
{
    pid_t pid = fork();
    if (pid == 0) {
        execlp("rm", "rm", "-rf", "--", dir, (char *)NULL);
        _exit(127);
    }
    int st;
    return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* Runs test i in a child; returns 0 pass, 1 fail, TEST_SKIP skipped. */
static int run_one(int i, int timeout)
{
    char dir[4096];
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/qgate-test-%s-XXXXXX", base && *base ? base : "/tmp",
             tests[i].name);
    if (!mkdtemp(dir)) {
        printf("FAIL %s: cannot create a temporary directory: %s\n", tests[i].name,
               strerror(errno));
        return 1;
    }
    double t0 = qg_now_s();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("QG_TEST_TMP", dir, 1);
        alarm((unsigned)timeout);
        int rc = tests[i].fn();
        fflush(NULL);
        _exit(rc == 0 ? 0 : rc == TEST_SKIP ? TEST_SKIP : 1);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    double dt = qg_now_s() - t0;
    int result;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        printf("ok   %s (%.2fs)\n", tests[i].name, dt);
        result = 0;
    } else if (WIFEXITED(st) && WEXITSTATUS(st) == TEST_SKIP) {
        printf("skip %s\n", tests[i].name);
        result = TEST_SKIP;
    } else if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM) {
        printf("FAIL %s: timed out after %d s (files kept in %s)\n", tests[i].name, timeout, dir);
        result = 1;
    } else if (WIFSIGNALED(st)) {
        printf("FAIL %s: killed by signal %d (files kept in %s)\n", tests[i].name, WTERMSIG(st),
               dir);
        result = 1;
    } else {
        printf("FAIL %s (exit %d; files kept in %s)\n", tests[i].name, WEXITSTATUS(st), dir);
        result = 1;
    }
    if (result != 1) remove_tree(dir);
    return result;
}

int main(int argc, char **argv)
{
    /* QG_CPU forces a kernel set for every test (and, through the
     * environment, every qgate the tests start); may start this again */
    char err[QG_ERRMSG_MAX];
    if (cpu_select(NULL, NULL, argv, err, sizeof err))
        return fprintf(stderr, "qgate_tests: %s\n", err), 64;
    int timeout = QG_TEST_TIMEOUT_S; /* 300 s; 900 s in sanitizer builds */
    const char *env = getenv("QG_TEST_TIMEOUT");
    int64_t t;
    if (env && !qg_parse_i64(env, 1, 86400, &t)) timeout = (int)t;
    int selected[N_TESTS], n_sel = 0;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--list") == 0) {
            for (int i = 0; i < N_TESTS; i++)
                puts(tests[i].name);
            return 0;
        }
        if (strcmp(argv[a], "--timeout") == 0 && a + 1 < argc) {
            if (qg_parse_i64(argv[++a], 1, 86400, &t))
                return fprintf(stderr, "bad --timeout\n"), 64;
            timeout = (int)t;
            continue;
        }
        int found = 0;
        for (int i = 0; i < N_TESTS; i++)
            if (strcmp(tests[i].name, argv[a]) == 0) selected[n_sel++] = i, found = 1;
        if (!found) return fprintf(stderr, "no test called '%s' (see --list)\n", argv[a]), 64;
    }
    if (n_sel == 0)
        for (int i = 0; i < N_TESTS; i++)
            selected[n_sel++] = i;
    int passed = 0, failed = 0, skipped = 0;
    for (int k = 0; k < n_sel; k++) {
        int r = run_one(selected[k], timeout);
        if (r == 0)
            passed++;
        else if (r == TEST_SKIP)
            skipped++;
        else
            failed++;
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    if (failed) return 1;
    return n_sel == 1 && skipped == 1 ? TEST_SKIP : 0;
}
