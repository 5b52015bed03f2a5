/* test_lint — the rules .ci/run enforces on the source tree: the layer
 * check passes on the tree and catches a planted upward include. */
#include "tests/test.h"

#include <stdlib.h>
#include <sys/stat.h>

/* Runs cmd, capturing stdout+stderr into out; returns the exit status. */
static int run_cmd(const char *cmd, char *out, size_t n)
{
    char full[8192];
    int len = snprintf(full, sizeof full, "%s 2>&1", cmd);
    if (len < 0 || (size_t)len >= sizeof full) return -1;
    FILE *p = popen(full, "r");
    if (!p) return -1;
    size_t k = fread(out, 1, n - 1, p);
    out[k] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

TEST(layers_check_passes_on_the_tree, e2e)
{
    char cmd[4096], out[8192];
    snprintf(cmd, sizeof cmd, "python3 %s/.ci/check-layers %s", QG_SOURCE_DIR, QG_SOURCE_DIR);
    int rc = run_cmd(cmd, out, sizeof out);
    if (rc != 0) T_FAIL_("check-layers exit %d:\n%s", rc, out);
    return 0;
}

TEST(layers_check_catches_upward_include, e2e)
{
    /* a copy of the layer table and two folders: metrics/ may not include harness/ */
    char path[4096], cmd[8192], out[8192];
    snprintf(path, sizeof path, "%s/.ci", t_tmp());
    ASSERT_OK(mkdir(path, 0755));
    snprintf(path, sizeof path, "%s/.ci/layers", QG_SOURCE_DIR);
    size_t n;
    char *layers = t_read_file(path, &n);
    ASSERT(layers != NULL);
    ASSERT_OK(t_write_file(t_path(".ci/layers"), layers, n));
    free(layers);
    ASSERT_OK(mkdir(t_path("metrics"), 0755));
    ASSERT_OK(mkdir(t_path("harness"), 0755));
    const char *ok = "#include \"core/util.h\"\n#include \"metrics/x.h\"\n#include <stdio.h>\n";
    ASSERT_OK(t_write_file(t_path("metrics/x.c"), ok, strlen(ok)));
    ASSERT_OK(t_write_file(t_path("harness/store.h"), "", 0));
    snprintf(cmd, sizeof cmd, "python3 %s/.ci/check-layers %s", QG_SOURCE_DIR, t_tmp());
    int rc = run_cmd(cmd, out, sizeof out);
    if (rc != 0) T_FAIL_("clean copy: exit %d:\n%s", rc, out);
    const char *up = "#include \"core/util.h\"\n\n#include \"harness/store.h\"\n";
    ASSERT_OK(t_write_file(t_path("metrics/y.h"), up, strlen(up)));
    rc = run_cmd(cmd, out, sizeof out);
    ASSERT_EQ(rc, 1);
    ASSERT_CONTAINS(out, "metrics/y.h:3: metrics/ includes harness/");
    /* the backends are sealed: harness/ may include backend.h, not gguf.h */
    ASSERT_OK(t_write_file(t_path("metrics/y.h"), "", 0));
    ASSERT_OK(mkdir(t_path("backends"), 0755));
    const char *in = "#include \"backends/backend.h\"\n#include \"backends/gguf.h\"\n";
    ASSERT_OK(t_write_file(t_path("harness/z.c"), in, strlen(in)));
    rc = run_cmd(cmd, out, sizeof out);
    ASSERT_EQ(rc, 1);
    ASSERT_CONTAINS(out, "harness/z.c:2: includes backends/gguf.h; outside backends/ only "
                         "backend.h, kernel_set.h may be included");
    return 0;
}

TEST(banned_functions_fail_to_compile, e2e)
{
    /* the same flags CMakeLists.txt gives every source */
    const char *ok = "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
                     "int f(char *b, size_t n) { return snprintf(b, n, \"%d\", 1); }\n";
    const char *bad[] = {"int f(const char *s) { return atoi(s); }\n",
                         "int f(char *b) { return sprintf(b, \"%d\", 1); }\n",
                         "char *f(char *b, const char *s) { return strcpy(b, s); }\n",
                         "char *f(char *b) { return strtok(b, \",\"); }\n"};
    const char *name[] = {"atoi", "sprintf", "strcpy", "strtok"};
    char cmd[8192], out[8192];
    snprintf(cmd, sizeof cmd,
             "cc -std=c11 -D_GNU_SOURCE -fsyntax-only -include %s/core/banned.h "
             "-Werror=deprecated-declarations %s",
             QG_SOURCE_DIR, t_path("ok.c"));
    ASSERT_OK(t_write_file(t_path("ok.c"), ok, strlen(ok)));
    int rc = run_cmd(cmd, out, sizeof out);
    if (rc != 0) T_FAIL_("a clean file did not compile (exit %d):\n%s", rc, out);
    for (int i = 0; i < 4; i++) {
        char src[512];
        snprintf(src, sizeof src,
                 "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n%s", bad[i]);
        ASSERT_OK(t_write_file(t_path("bad.c"), src, strlen(src)));
        snprintf(cmd, sizeof cmd,
                 "cc -std=c11 -D_GNU_SOURCE -fsyntax-only -include %s/core/banned.h "
                 "-Werror=deprecated-declarations %s",
                 QG_SOURCE_DIR, t_path("bad.c"));
        rc = run_cmd(cmd, out, sizeof out);
        if (rc == 0) T_FAIL_("%s compiled", name[i]);
        ASSERT_CONTAINS(out, "banned in qgate");
    }
    return 0;
}
