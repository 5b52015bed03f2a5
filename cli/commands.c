/* commands — the subcommand table (git style) and shared command helpers.
 *
 * How to add a subcommand: see cli/cli.h. */
#include "cli/commands.h"
#include "backends/local.h"
#include "harness/suite.h"
#include "reports/escape.h"
#include "core/status.h"
#include "core/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const struct cli_cmd *const cli_commands[] = {
    &cmd_gate_def,   &cmd_sweep_def,   &cmd_run_def,   &cmd_compare_def,  &cmd_merge_def,
    &cmd_report_def, &cmd_serve_def,   &cmd_ppl_def,   &cmd_generate_def, &cmd_tokenize_def,
    &cmd_suite_def,  &cmd_inspect_def, &cmd_tasks_def, &cmd_runs_def,     &cmd_comparisons_def,
    &cmd_show_def,   &cmd_demo_def,    NULL,
};

const struct cli_cmd *cli_find_command(const char *name)
{
    for (int i = 0; cli_commands[i]; i++)
        if (strcmp(cli_commands[i]->name, name) == 0) return cli_commands[i];
    return NULL;
}

void cli_print_usage(FILE *f)
{
    fprintf(f,
            "usage: qgate COMMAND [OPTIONS]\n\n"
            "qgate tells, with evidence, whether a quantized model is as good as the original.\n\n"
            "commands:\n");
    for (int i = 0; cli_commands[i]; i++)
        fprintf(f, "  %-10s %s\n", cli_commands[i]->name, cli_commands[i]->summary);
    fprintf(f, "  %-10s %s\n", "help", "show help for a command ('qgate help inspect')");
    fprintf(f,
            "\n'qgate COMMAND --help' lists a command's options; 'qgate --version' the version.\n"
            "Exit codes: 0 success, 64 usage, 65 bad input data, 66 missing input,\n"
            "69 unavailable, 70 internal error, 73 cannot create output, 74 I/O error.\n");
}

const char *cmd_term_cut(const char *s, size_t width)
{
    static char bufs[8][32768]; /* a verdict line naming many tasks is long */
    static int k;
    char *out = bufs[k++ % 8];
    struct sbuf b;
    sbuf_init(&b, 1 << 20);
    esc_term(&b, s ? s : "");
    if (width > sizeof bufs[0] - 4) width = sizeof bufs[0] - 4; /* room for the ellipsis */
    int cut = b.len > width;
    size_t n = b.len < width ? b.len : width;
    while (n > 0 && n < b.len && ((unsigned char)b.data[n] & 0xC0) == 0x80)
        n--; /* not inside a character */
    if (n) memcpy(out, b.data, n);
    out[n] = '\0';
    if (cut && width == sizeof bufs[0] - 4) memcpy(out + n, "\u2026", 4); /* never silently */
    sbuf_release(&b);
    return out;
}

int cmd_col_width(const cJSON *rows, const char *key, int min, int max)
{
    int w = min;
    const cJSON *r;
    cJSON_ArrayForEach(r, rows)
    {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(r, key);
        if (!cJSON_IsString(v) || !v->valuestring) continue;
        int n = 0; /* characters, not bytes */
        for (const char *p = v->valuestring; *p; p++)
            n += ((unsigned char)*p & 0xC0) != 0x80;
        w = n > w ? n : w;
    }
    return w < max ? w : max;
}

const char *cmd_term(const char *s)
{
    return cmd_term_cut(s, (size_t)-1);
}

void cmd_term_json(cJSON *o)
{
    cJSON *it;
    cJSON_ArrayForEach(it, o)
    {
        if (cJSON_IsString(it) && it->valuestring) {
            struct sbuf b;
            sbuf_init(&b, 1 << 20);
            esc_term(&b, it->valuestring);
            if (!b.failed && b.data) cJSON_SetValuestring(it, b.data);
            sbuf_release(&b);
        } else if (cJSON_IsObject(it) || cJSON_IsArray(it)) {
            cmd_term_json(it);
        }
    }
}

int cmd_usage(const char *fmt, ...)
{
    char msg[QG_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    qg_error("%s", msg);
    return QG_EX_USAGE;
}

int cmd_fail(int status, const char *msg)
{
    if (status != QG_OK) qg_error("%s", msg && *msg ? msg : qg_strerror(status));
    return qg_exit_code(status);
}

int cmd_open_store(const struct cli_args *a, int readonly, struct store **out)
{
    const char *path = cli_str(a, "db");
    struct store_params p = store_default_params();
    p.readonly = readonly;
    char err[QG_ERRMSG_MAX];
    int rc = store_open(path ? path : STORE_DEFAULT_PATH, &p, out, err, sizeof err);
    return rc ? cmd_fail(rc, err) : 0;
}

int cmd_open_existing_store(const struct cli_args *a, struct store **out)
{
    const char *path = cli_str(a, "db") ? cli_str(a, "db") : STORE_DEFAULT_PATH;
    if (access(path, F_OK) != 0) {
        char msg[QG_ERRMSG_MAX];
        snprintf(msg, sizeof msg,
                 "%s: no such database (make one with 'qgate run' or 'qgate gate', or name it "
                 "with --db)",
                 path);
        return cmd_fail(QG_ERR_NOINPUT, msg);
    }
    return cmd_open_store(a, 0, out);
}

int cmd_check_outputs(const struct cli_args *a, const char *const *outputs,
                      const char *const *inputs, int n_inputs)
{
    char err[QG_ERRMSG_MAX];
    for (int i = 0; outputs[i]; i++) {
        const char *out = cli_str(a, outputs[i]);
        if (!out) continue;
        for (int k = 0; k < n_inputs; k++)
            if (qg_same_file(out, inputs[k]))
                return cmd_usage("--%s %s is the input file %s: writing it would destroy it",
                                 outputs[i], out, inputs[k]);
        for (int j = 0; j < i; j++)
            if (cli_str(a, outputs[j]) &&
                (qg_same_file(out, cli_str(a, outputs[j])) || !strcmp(out, cli_str(a, outputs[j]))))
                return cmd_usage("--%s and --%s name the same file %s", outputs[j], outputs[i],
                                 out);
        int rc = qg_output_check(out, err, sizeof err);
        if (rc) return cmd_fail(rc, err);
    }
    return 0;
}

int cmd_check_suite_outputs(const struct cli_args *a, const char *const *outputs, const char *suite)
{
    char **paths = NULL, err[QG_ERRMSG_MAX];
    int n = 0;
    if (!suite) return 0;
    int rc = suite_input_paths(suite, &paths, &n, err, sizeof err);
    if (rc) return cmd_fail(rc, err);
    int code = cmd_check_outputs(a, outputs, (const char *const *)paths, n);
    suite_input_paths_free(paths, n);
    return code;
}

int cmd_print_json(cJSON *v)
{
    char *s = v ? cJSON_Print(v) : NULL;
    cJSON_Delete(v);
    if (!s) return cmd_fail(QG_ERR_NOMEM, "out of memory printing JSON");
    puts(s);
    free(s);
    return fflush(stdout) == 0 ? 0 : QG_EX_IOERR;
}

int cmd_apply_device(const struct cli_args *a, const char **specs, int n, char (*buf)[4400])
{
    const char *dev = cli_str(a, "device");
    int index, kind = dev ? local_device(dev, &index) : 0;
    if (kind < 0) return cmd_usage("--device must be cpu, cuda or cuda:N, got '%s'", dev);
    if (kind == 0) return 0;
    for (int i = 0; i < n; i++) {
        if (!strncmp(specs[i], "http://", 7) || !strncmp(specs[i], "https://", 8) ||
            strstr(specs[i], "device=") || !strncmp(specs[i], "cuda:", 5))
            continue;
        if ((size_t)snprintf(buf[i], sizeof buf[i], "%s%cdevice=%s", specs[i],
                             strchr(specs[i], '?') ? '&' : '?', dev) >= sizeof buf[i])
            return cmd_usage("model spec too long: %.80s...", specs[i]);
        specs[i] = buf[i];
    }
    return 0;
}
