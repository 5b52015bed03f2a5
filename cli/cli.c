/* cli — table-driven option parsing and help generation. */
#include "cli/cli.h"
#include "core/status.h"
#include "core/util.h"
#include "core/closest.h"

#include <stdlib.h>
#include <string.h>

static int n_opts(const struct cli_cmd *c)
{
    int n = 0;
    while (c->opts && c->opts[n].name)
        n++;
    return n;
}

static int find_long(const struct cli_cmd *c, const char *name, size_t len)
{
    for (int i = 0; c->opts && c->opts[i].name; i++)
        if (strlen(c->opts[i].name) == len && strncmp(c->opts[i].name, name, len) == 0) return i;
    return -1;
}

static int find_short(const struct cli_cmd *c, char s)
{
    for (int i = 0; c->opts && c->opts[i].name; i++)
        if (s && c->opts[i].shortname == s) return i;
    return -1;
}

static int unknown_option(const struct cli_cmd *c, const char *arg)
{
    const char *name = arg;
    while (*name == '-')
        name++;
    char bare[128];
    snprintf(bare, sizeof bare, "%.*s", (int)strcspn(name, "="), name);
    const char *cands[64];
    int n = 0;
    for (int i = 0; c->opts && c->opts[i].name && n < 63; i++)
        cands[n++] = c->opts[i].name;
    cands[n++] = "help";
    const char *near = qg_closest(bare, cands, n);
    if (near)
        qg_error("unknown option '%s' for 'qgate %s'; did you mean '--%s'?", arg, c->name, near);
    else
        qg_error("unknown option '%s' for 'qgate %s' (see 'qgate %s --help')", arg, c->name,
                 c->name);
    return QG_EX_USAGE;
}

static int check_value(const struct cli_cmd *c, const struct cli_opt *o, const char *v)
{
    int64_t i;
    double d;
    if (o->type == CLI_INT && qg_parse_i64(v, INT64_MIN, INT64_MAX, &i) != QG_OK) {
        qg_error("option '--%s' of 'qgate %s' expects an integer, got '%s'", o->name, c->name, v);
        return QG_EX_USAGE;
    }
    if (o->type == CLI_F64 && qg_parse_f64(v, &d) != QG_OK) {
        qg_error("option '--%s' of 'qgate %s' expects a number, got '%s'", o->name, c->name, v);
        return QG_EX_USAGE;
    }
    return 0;
}

static int store_value(struct cli_args *a, int idx, char *v)
{
    char **vals = realloc(a->vals[idx], (size_t)(a->count[idx] + 1) * sizeof *vals);
    if (!vals) return qg_error("out of memory"), QG_EX_OSERR;
    vals[a->count[idx]++] = v;
    a->vals[idx] = vals;
    return 0;
}

int cli_parse(const struct cli_cmd *c, int argc, char **argv, struct cli_args *a)
{
    memset(a, 0, sizeof *a);
    a->cmd = c;
    a->argc = argc;
    a->argv = argv;
    a->n_opts = n_opts(c);
    a->count = calloc((size_t)a->n_opts + 1, sizeof *a->count);
    a->vals = calloc((size_t)a->n_opts + 1, sizeof *a->vals);
    a->pos = calloc((size_t)argc + 1, sizeof *a->pos);
    if (!a->count || !a->vals || !a->pos) return qg_error("out of memory"), QG_EX_OSERR;
    int only_pos = 0;
    for (int i = 1; i < argc; i++) {
        char *arg = argv[i];
        if (only_pos || arg[0] != '-' || arg[1] == '\0') {
            a->pos[a->n_pos++] = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            only_pos = 1;
            continue;
        }
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            a->help = 1;
            continue;
        }
        int idx;
        char *val = NULL;
        if (arg[1] == '-') {
            char *eq = strchr(arg + 2, '=');
            size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
            idx = find_long(c, arg + 2, len);
            if (eq) val = eq + 1;
        } else {
            idx = arg[2] == '\0' ? find_short(c, arg[1]) : -1;
        }
        if (idx < 0) return unknown_option(c, arg);
        const struct cli_opt *o = &c->opts[idx];
        if (o->type == CLI_FLAG) {
            if (val) {
                qg_error("option '--%s' of 'qgate %s' takes no value", o->name, c->name);
                return QG_EX_USAGE;
            }
            a->count[idx]++;
            continue;
        }
        if (!val) {
            if (i + 1 >= argc) {
                qg_error("option '--%s' of 'qgate %s' needs a value (%s)", o->name, c->name,
                         o->metavar ? o->metavar : "VALUE");
                return QG_EX_USAGE;
            }
            val = argv[++i];
        }
        if (a->count[idx] > 0 && !o->repeatable) {
            qg_error("option '--%s' of 'qgate %s' given more than once", o->name, c->name);
            return QG_EX_USAGE;
        }
        int rc = check_value(c, o, val);
        if (!rc) rc = store_value(a, idx, val);
        if (rc) return rc;
    }
    if (a->help) return 0;
    if (a->n_pos < c->min_pos || a->n_pos > c->max_pos) {
        if (a->n_pos > c->max_pos)
            qg_error("'qgate %s' got an unexpected argument '%s'", c->name, a->pos[c->max_pos]);
        else
            qg_error("'qgate %s' needs %s", c->name, c->args_usage ? c->args_usage : "arguments");
        fprintf(stderr, "usage: qgate %s%s%s [OPTIONS]\n", c->name, c->args_usage ? " " : "",
                c->args_usage ? c->args_usage : "");
        return QG_EX_USAGE;
    }
    return 0;
}

void cli_args_release(struct cli_args *a)
{
    if (!a) return;
    for (int i = 0; a->vals && i < a->n_opts; i++)
        free(a->vals[i]);
    free(a->vals);
    free(a->count);
    free(a->pos);
    memset(a, 0, sizeof *a);
}

static int idx_of(const struct cli_args *a, const char *name)
{
    int i = find_long(a->cmd, name, strlen(name));
    return i >= 0 && a->count[i] > 0 ? i : -1;
}

const char *cli_str(const struct cli_args *a, const char *name)
{
    int i = idx_of(a, name);
    return i < 0 || !a->vals[i] ? NULL : a->vals[i][a->count[i] - 1];
}

int cli_flag(const struct cli_args *a, const char *name)
{
    return idx_of(a, name) >= 0;
}

int64_t cli_int(const struct cli_args *a, const char *name, int64_t def)
{
    const char *s = cli_str(a, name);
    int64_t v;
    return s && qg_parse_i64(s, INT64_MIN, INT64_MAX, &v) == QG_OK ? v : def;
}

double cli_f64(const struct cli_args *a, const char *name, double def)
{
    const char *s = cli_str(a, name);
    double v;
    return s && qg_parse_f64(s, &v) == QG_OK ? v : def;
}

int cli_count(const struct cli_args *a, const char *name)
{
    int i = idx_of(a, name);
    return i < 0 ? 0 : a->count[i];
}

const char *cli_nth(const struct cli_args *a, const char *name, int n)
{
    int i = idx_of(a, name);
    return i < 0 || n < 0 || n >= a->count[i] ? NULL : a->vals[i][n];
}

void cli_print_help(FILE *f, const struct cli_cmd *c)
{
    fprintf(f, "usage: qgate %s%s%s [OPTIONS]\n\n%s\n", c->name, c->args_usage ? " " : "",
            c->args_usage ? c->args_usage : "", c->summary);
    if (c->description) fprintf(f, "\n%s\n", c->description);
    fprintf(f, "\noptions:\n");
    for (int i = 0; c->opts && c->opts[i].name; i++) {
        const struct cli_opt *o = &c->opts[i];
        char left[96];
        if (o->shortname)
            snprintf(left, sizeof left, "-%c, --%s%s%s", o->shortname, o->name,
                     o->metavar ? " " : "", o->metavar ? o->metavar : "");
        else
            snprintf(left, sizeof left, "    --%s%s%s", o->name, o->metavar ? " " : "",
                     o->metavar ? o->metavar : "");
        fprintf(f, "  %-28s %s%s\n", left, o->help, o->repeatable ? " (repeatable)" : "");
    }
    fprintf(f, "  %-28s %s\n", "-h, --help", "show this help");
}
