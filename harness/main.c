/* main — qgate's entry point: dispatches argv[1] through the command table
 * and turns the command's result into the process exit code. */
#include "harness/commands.h"
#include "core/status.h"
#include "harness/store.h"
#include "core/util.h"
#include "core/closest.h"

#include <stdio.h>
#include <string.h>

static int unknown_command(const char *name)
{
    const char *names[64];
    int n = 0;
    for (int i = 0; qg_commands[i] && n < 63; i++)
        names[n++] = qg_commands[i]->name;
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
        qg_print_usage(stdout);
        return 0;
    }
    const struct cli_cmd *c = qg_find_command(argv[2]);
    if (!c) return unknown_command(argv[2]);
    cli_print_help(stdout, c);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        qg_print_usage(stderr);
        return QG_EX_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0 || strcmp(name, "version") == 0) {
        printf("qgate %s (store schema v%d)\n", QG_VERSION, STORE_SCHEMA_VERSION);
        return 0;
    }
    if (strcmp(name, "help") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0)
        return help(argc, argv);
    if (name[0] == '-') {
        qg_error("unknown option '%s' (options go after the command; see 'qgate help')", name);
        return QG_EX_USAGE;
    }
    const struct cli_cmd *c = qg_find_command(name);
    if (!c) return unknown_command(name);
    struct cli_args a;
    int rc = cli_parse(c, argc - 1, argv + 1, &a);
    if (rc == 0 && a.help)
        cli_print_help(stdout, c);
    else if (rc == 0)
        rc = c->fn(&a);
    cli_args_release(&a);
    if (fflush(stdout) != 0 && rc == 0) rc = QG_EX_IOERR;
    return rc;
}
