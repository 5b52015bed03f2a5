/* main — qgate's entry point: dispatches argv[1] through the command table
 * and turns the command's result into the process exit code. */
#include "cli/commands.h"
#include "backends/kernel_set.h"
#include "core/status.h"
#include "cli/cpu_select.h"
#include "store/store.h"
#include "core/util.h"
#include "core/closest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int unknown_command(const char *name)
{
    const char *names[64];
    int n = 0;
    for (int i = 0; cli_commands[i] && n < 63; i++)
        names[n++] = cli_commands[i]->name;
    names[n++] = "help";
    const char *near = qg_closest(name, names, n);
    if (near)
        qg_error("unknown command '%s'; did you mean '%s'?", name, near);
    else
        qg_error("unknown command '%s' (see 'qgate help')", name);
    return QG_EX_USAGE;
}

static int help(int argc, char **argv)
{
    if (argc < 3) {
        cli_print_usage(stdout);
        return 0;
    }
    const struct cli_cmd *c = cli_find_command(argv[2]);
    if (!c) return unknown_command(argv[2]);
    cli_print_help(stdout, c);
    return 0;
}

/* the process's threads now (/proc/self/status), or -1 */
static int threads_now(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    int n = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "Threads:", 8)) {
            n = (int)strtol(line + 8, NULL, 10);
            break;
        }
    fclose(f);
    return n;
}

static void print_version(void)
{
    char k[128];
    kernel_set_describe(k, sizeof k);
    printf("qgate %s (store schema v%d)\nkernels: %s\ncpu sets:", QG_VERSION, STORE_SCHEMA_VERSION,
           k);
    const char *best = kernel_set_best();
    for (int i = 0; i < KERNEL_SET_COUNT; i++) {
        printf(" %s", kernel_set_nth(i));
        if (!strcmp(kernel_set_nth(i), best)) break;
    }
    /* 1: OpenBLAS's idle threads are gone (kernel_set_blas_one_thread);
     * their count drops a moment after the joins return, hence the wait */
    int threads = threads_now();
    for (int i = 0; i < 100 && threads > 1; i++) {
        usleep(1000);
        threads = threads_now();
    }
    printf("\nthreads at start: %d (qgate's pool starts with the work)\n", threads);
}

/* QG_CPU, or the command's --cpu (which wins): may start the program again */
static int select_cpu(const char *value, char **argv)
{
    char err[QG_ERRMSG_MAX];
    int rc = cpu_select(value, "--cpu ", argv, err, sizeof err);
    if (rc) qg_error("%s", err);
    return rc ? qg_exit_code(rc) : 0;
}

int main(int argc, char **argv)
{
    int rc;
    kernel_set_blas_one_thread();
    if (argc < 2) {
        cli_print_usage(stderr);
        return QG_EX_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0 || strcmp(name, "version") == 0) {
        if ((rc = select_cpu(NULL, argv))) return rc;
        print_version();
        return 0;
    }
    if (strcmp(name, "help") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0)
        return help(argc, argv);
    if (name[0] == '-') {
        qg_error("unknown option '%s' (options go after the command; see 'qgate help')", name);
        return QG_EX_USAGE;
    }
    const struct cli_cmd *c = cli_find_command(name);
    if (!c) return unknown_command(name);
    struct cli_args a;
    rc = cli_parse(c, argc - 1, argv + 1, &a);
    if (rc == 0 && !a.help) rc = select_cpu(cli_str(&a, "cpu"), argv); /* NULL: QG_CPU */
    if (rc == 0 && a.help)
        cli_print_help(stdout, c);
    else if (rc == 0)
        rc = c->fn(&a);
    cli_args_release(&a);
    if (fflush(stdout) != 0 && rc == 0) rc = QG_EX_IOERR;
    return rc;
}
