/* commands — the subcommand table and helpers shared by cmd_*.c. */
#ifndef QG_COMMANDS_H
#define QG_COMMANDS_H

#include "core/util.h"
#include "cli/cli.h"
#include "store/store.h"

#include <cjson/cJSON.h>

extern const struct cli_cmd cmd_inspect_def;
extern const struct cli_cmd cmd_runs_def;
extern const struct cli_cmd cmd_tasks_def;
extern const struct cli_cmd cmd_comparisons_def;
extern const struct cli_cmd cmd_show_def;
extern const struct cli_cmd cmd_demo_def;
extern const struct cli_cmd cmd_ppl_def;
extern const struct cli_cmd cmd_tokenize_def;
extern const struct cli_cmd cmd_generate_def;
extern const struct cli_cmd cmd_suite_def;
extern const struct cli_cmd cmd_run_def;
extern const struct cli_cmd cmd_compare_def;
extern const struct cli_cmd cmd_gate_def;
extern const struct cli_cmd cmd_sweep_def;
extern const struct cli_cmd cmd_merge_def;
extern const struct cli_cmd cmd_report_def;
extern const struct cli_cmd cmd_serve_def;

/* The table, in help order; NULL-terminated. */
extern const struct cli_cmd *const cli_commands[];

/* The command called name, or NULL. */
const struct cli_cmd *cli_find_command(const char *name);

/* Prints the top-level help generated from the table. */
void cli_print_usage(FILE *f);

/* Opens the store named by --db (default ./qgate.db). On failure prints the
 * error and returns the exit code; 0 on success. */
int cmd_open_store(const struct cli_args *a, int readonly, struct store **out);
/* The same for commands that read stored runs and write a little
 * (compare, report): a missing database is an error (exit 66), never
 * created empty. */
int cmd_open_existing_store(const struct cli_args *a, struct store **out);

/* Before any work: each output option of `outputs` (NULL-terminated option
 * names) that is set can be written (exit 73 otherwise), names no input file
 * of `inputs` (n paths; exit 64: it would be destroyed) and no other output.
 * 0 when all is well, else the exit code, with the message printed. */
int cmd_check_outputs(const struct cli_args *a, const char *const *outputs,
                      const char *const *inputs, int n_inputs);

/* cmd_check_outputs against the files the suite reads (its tasks' data
 * and items files, suite_input_paths); 0 without a suite. */
int cmd_check_suite_outputs(const struct cli_args *a, const char *const *outputs,
                            const char *suite);

/* Prints the error message (if any) and returns the exit code for status. */
int cmd_fail(int status, const char *msg);

/* s made safe for a terminal (control characters, escape sequences and
 * invalid UTF-8 as U+FFFD; reports/escape.h's esc_term), in one of 8
 * rotating static buffers of 1 KiB (cut at a character boundary). */
const char *cmd_term(const char *s);
/* The same, cut to at most width bytes (at a character boundary). */
const char *cmd_term_cut(const char *s, size_t width);
/* A table column's width: the longest string under key in rows (in
 * characters), at least min and at most max. */
int cmd_col_width(const cJSON *rows, const char *key, int min, int max);

/* Replaces every string in the JSON tree by cmd_term's rendering, for text
 * output of stored values (names, paths, commands a user or file chose). */
void cmd_term_json(cJSON *o);

/* Prints "qgate: error: <msg>" and returns QG_EX_USAGE (64), so a command
 * reads `return cmd_usage("--x must be ...");`. */
int cmd_usage(const char *fmt, ...) QG_PRINTF(1, 2);

struct runner_params;
/* The command line as one string ("qgate run ..."), malloc'd. */
char *cmd_command_line(const struct cli_args *a);
/* Adds NAME=SPEC to p (names copied into buf[i]); 0 or an exit code. */
int cmd_parse_model(const char *arg, struct runner_params *p, char (*buf)[128]);

/* the table, JSON, nothing, or only the verdict in one plain line */
enum { CMP_OUT_TEXT, CMP_OUT_JSON, CMP_OUT_NONE, CMP_OUT_PLAIN };
/* Compares two models of a run, prints it (output: CMP_OUT_*), stores the
 * comparison; *verdict gets the suite verdict and *comparison_id (if not
 * NULL) the stored id. 0 or an exit code for errors. */
int cmd_compare_models(struct store *s, int64_t run_id, const char *base, const char *cand,
                       const char *policy_file, uint64_t seed, int output, const char *command,
                       int *verdict, int64_t *comparison_id);

/* The comparison's summary JSON (*summary, caller frees), computed and not
 * stored (for `report --run`). 0 or an exit code. */
int cmd_compare_summary(struct store *s, int64_t run_id, const char *base, const char *cand,
                        const char *policy_file, uint64_t seed, cJSON **summary);

/* Renders comparison id (<= 0: newest) as format to path (NULL or "-":
 * stdout, coloured on a terminal); 0 or an exit code. */
int cmd_write_report(struct store *s, int64_t comparison_id, const char *format, const char *path);
/* Without a suite (p->suite_path NULL; gate, sweep): text sampled from p's
 * baseline (options --ctx, --sample-tokens, --seed, --text, --quiet of a)
 * as a suite in a new temporary folder dir (sampled_suite_remove), its path
 * in suite and p->suite_path. With a suite: nothing. With p->baseline_sha
 * the baseline's file is not read: its text must be stored (in s or in
 * p->baseline_db), and stored_ctx (> 0) is the window without --ctx.
 * 0 or an exit code. */
int cmd_default_suite(const struct cli_args *a, struct store *s, struct runner_params *p, char *dir,
                      char *suite, size_t n, int stored_ctx);
/* Without a suite but with --tasks (gate, run): the named benchmarks
 * (harness/registry_suite.h) over the files of --data or $QGATE_DATA, as a
 * suite in a new temporary folder dir (sampled_suite_remove); their
 * perplexity window --ctx, else stored_ctx (> 0), else min(512, the
 * baseline's context). 0 or an exit code. */
int cmd_registry_suite(const struct cli_args *a, struct store *s, struct runner_params *p,
                       char *dir, char *suite, size_t n, int stored_ctx);

/* Renders the comparisons cids[0..n) as one report (n == 1: the single
 * comparison's document; more: one document covering every candidate) to
 * path ("-": stdout); append: add to the end of path instead of replacing
 * it (for $GITHUB_STEP_SUMMARY). 0 or an exit code. */
int cmd_write_reports(struct store *s, const int64_t *cids, int n, const char *format,
                      const char *path, int append);
/* Renders a report document (any schema; freed here) as format to path
 * ("-" or NULL: stdout), replaced atomically or appended. 0 or an exit code. */
int cmd_write_doc(cJSON *doc, const char *format, const char *path, int append);
/* --device DEV (CLI_OPT_DEVICE): each local spec of specs[0..n) that names
 * no device gets "?device=DEV" (or "&device=DEV"), written into buf[i] and
 * specs[i] pointed at it; remote specs stay. 0 or an exit code (64 for a
 * DEV that is neither cpu nor cuda[:N]). */
int cmd_apply_device(const struct cli_args *a, const char **specs, int n, char (*buf)[4400]);
/* Prints a cJSON value to stdout (pretty) and frees it; returns an exit code. */
int cmd_print_json(cJSON *v);

#endif
