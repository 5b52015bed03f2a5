/* cli — command-line options declared as data.
 *
 * Each subcommand is a struct cli_cmd (one per cmd_*.c) with a table of
 * struct cli_opt; parsing, validation of typed values, `--help` text and
 * "did you mean" suggestions are all generated from those tables. Every
 * command accepts -h/--help.
 *
 * How to add a subcommand: write cli/cmd_NAME.c defining
 * `const struct cli_cmd cmd_NAME_def`, declare it in cli/commands.h and
 * list it in cli/commands.c; add the file to CMakeLists.txt.
 */
#ifndef QG_CLI_H
#define QG_CLI_H

#include <stdint.h>
#include <stdio.h>

enum cli_opt_type { CLI_FLAG, CLI_STR, CLI_INT, CLI_F64 };

struct cli_opt {
    const char *name; /* long name without "--" */
    char shortname;   /* 0 when none */
    enum cli_opt_type type;
    const char *metavar; /* "N", "FILE"; NULL for flags */
    const char *help;
    int repeatable; /* 1: may be given several times (values kept in order) */
};

struct cli_args;
typedef int (*cli_fn)(const struct cli_args *a);

struct cli_cmd {
    const char *name;
    cli_fn fn;                  /* returns the process exit code */
    const char *args_usage;     /* positional part of the usage line, e.g. "MODEL.gguf" */
    const char *summary;        /* one line */
    const char *description;    /* optional paragraph for --help */
    const struct cli_opt *opts; /* terminated by an entry with name == NULL */
    int min_pos, max_pos;       /* allowed positional argument counts */
};

struct cli_args {
    const struct cli_cmd *cmd;
    int argc; /* the command's argv (for provenance) */
    char **argv;
    int n_pos;
    char **pos; /* borrowed from argv */
    int n_opts;
    int *count;   /* per option: times given */
    char ***vals; /* per option: values in order (borrowed from argv) */
    int help;     /* -h/--help seen */
};

/* Parses argv (argv[0] is the command name) against cmd. On success returns
 * 0 and fills a (release with cli_args_release). On a usage error prints a
 * message naming the option (with a suggestion) to stderr and returns 64. */
int cli_parse(const struct cli_cmd *cmd, int argc, char **argv, struct cli_args *a);
void cli_args_release(struct cli_args *a);

/* Last value of option `name`, or NULL when not given. */
const char *cli_str(const struct cli_args *a, const char *name);
/* 1 when the flag was given. */
int cli_flag(const struct cli_args *a, const char *name);
/* Value of an integer option (validated at parse), or def when absent. */
int64_t cli_int(const struct cli_args *a, const char *name, int64_t def);
double cli_f64(const struct cli_args *a, const char *name, double def);
/* Repeatable options: how many values and the i-th one. */
int cli_count(const struct cli_args *a, const char *name);
const char *cli_nth(const struct cli_args *a, const char *name, int i);

/* Prints `qgate CMD --help` text. */
void cli_print_help(FILE *f, const struct cli_cmd *cmd);

/* The option every store-using command declares. */
#define CLI_OPT_DB                                                                                 \
    {                                                                                              \
        "db", 0, CLI_STR, "FILE", "results database (default ./qgate.db)", 0                       \
    }
#define CLI_OPT_DEVICE                                                                             \
    {                                                                                              \
        "device", 0, CLI_STR, "DEV", "run local models on DEV: cpu (default) or cuda[:N]", 0       \
    }
#define CLI_OPT_CPU                                                                                \
    {                                                                                              \
        "cpu", 0, CLI_STR, "SET",                                                                  \
            "force a kernel set: portable, avx2, avx512 or avx512vnni (as QG_CPU)", 0              \
    }
#define CLI_OPT_JSON                                                                               \
    {                                                                                              \
        "json", 0, CLI_FLAG, NULL, "print JSON instead of text", 0                                 \
    }
#define CLI_OPT_END                                                                                \
    {                                                                                              \
        NULL, 0, CLI_FLAG, NULL, NULL, 0                                                           \
    }

#endif
