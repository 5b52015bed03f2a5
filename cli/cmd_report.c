/* cmd_report — `qgate report`: renders a stored comparison as text,
 * Markdown, self-contained HTML, JSON or JUnit XML (reports/report.h). */
#include "cli/commands.h"
#include "core/json.h"
#include "core/status.h"
#include "core/util.h"
#include "metrics/verdict.h"
#include "reports/report.h"
#include "harness/report_doc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct cli_opt opts[] = {
    {"comparison", 0, CLI_INT, "ID", "the stored comparison (default: the newest)", 0},
    {"run", 0, CLI_INT, "ID",
     "every stored comparison of this run in one report (the multi-candidate report); with "
     "--candidate, that candidate compared now",
     0},
    {"baseline", 'b', CLI_STR, "NAME", "baseline model name in --run (default: the run's)", 0},
    {"candidate", 'c', CLI_STR, "NAME", "candidate model name in --run: compared now, not stored",
     0},
    {"policy", 0, CLI_STR, "FILE", "policy JSON for --run (default: the suite's)", 0},
    {"seed", 0, CLI_INT, "N", "bootstrap seed for --run (default 20261130)", 0},
    {"format", 'f', CLI_STR, "FMT", "text (default), md, html, json or junit", 0},
    {"output", 'o', CLI_STR, "FILE", "write to FILE (atomically) instead of stdout", 0},
    CLI_OPT_DB,
    CLI_OPT_END,
};

/* Appends data to path (for $GITHUB_STEP_SUMMARY, which other steps
 * write too): one write of the whole text. */
static int append_file(const char *path, const char *data, size_t n, char *err, size_t errlen)
{
    FILE *f = fopen(path, "ab");
    if (!f) return qg_errf(err, errlen, QG_ERR_CANTCREAT, "%s: %s", path, strerror(errno));
    int ok = fwrite(data, 1, n, f) == n;
    ok &= fclose(f) == 0;
    return ok ? QG_OK : qg_errf(err, errlen, QG_ERR_IO, "%s: append failed", path);
}

int cmd_write_report(struct store *s, int64_t comparison_id, const char *format, const char *path)
{
    return cmd_write_reports(s, &comparison_id, 1, format, path, 0);
}

int cmd_write_reports(struct store *s, const int64_t *cids, int n, const char *format,
                      const char *path, int append)
{
    char err[QG_ERRMSG_MAX];
    cJSON *doc;
    int rc = n == 1 ? report_doc_build(s, cids[0], &doc, err, sizeof err)
                    : report_doc_build_set(s, cids, n, &doc, err, sizeof err);
    if (rc) return cmd_fail(rc, err);
    return cmd_write_doc(doc, format, path, append);
}

int cmd_write_doc(cJSON *doc, const char *format, const char *path, int append)
{
    char err[QG_ERRMSG_MAX];
    int rc;
    struct sbuf out;
    sbuf_init(&out, (size_t)1 << 30); /* the cap, not a preallocation */
    int to_stdout = !path || !strcmp(path, "-");
    rc = report_render(doc, format, to_stdout && qg_use_color(1), &out);
    cJSON_Delete(doc);
    if (rc) {
        sbuf_release(&out);
        return cmd_fail(rc, rc == QG_ERR_USAGE ? "unknown report format"
                                               : "out of memory rendering the report");
    }
    int code = 0;
    if (to_stdout) {
        if (fwrite(sbuf_str(&out), 1, out.len, stdout) != out.len || fflush(stdout) != 0)
            code = cmd_fail(QG_ERR_IO, "writing the report to stdout failed");
    } else {
        rc = append ? append_file(path, sbuf_str(&out), out.len, err, sizeof err)
                    : qg_write_file_atomic(path, sbuf_str(&out), out.len, err, sizeof err);
        code = rc ? cmd_fail(rc, err) : 0;
    }
    sbuf_release(&out);
    return code;
}

/* The baseline's name in run: given, else the run's first model. */
static int run_baseline(struct store *s, int64_t run, const char *given, char *out, size_t n)
{
    if (given) {
        snprintf(out, n, "%s", given);
        return 0;
    }
    cJSON *r = NULL;
    int rc = store_run_json(s, run, &r);
    if (rc) return cmd_fail(rc, store_errmsg(s));
    snprintf(out, n, "%s", json_str(cJSON_GetArrayItem(json_get(r, "models"), 0), "name", ""));
    cJSON_Delete(r);
    return 0;
}

/* Every stored comparison of a run (the newest of each baseline and
 * candidate pair, in the order they were made) as one report. */
static int report_run(struct store *s, int64_t run, const char *format, const char *path)
{
    cJSON *all = NULL, *r = NULL;
    int rc = store_run_json(s, run, &r);
    cJSON_Delete(r);
    if (!rc) rc = store_comparisons_json(s, run, 0, &all);
    if (rc) return cmd_fail(rc, store_errmsg(s));
    int n = 0, total = cJSON_GetArraySize(all);
    int64_t *cids = calloc((size_t)total + 1, sizeof *cids);
    for (int i = total - 1; i >= 0 && cids; i--) { /* oldest first */
        const cJSON *c = cJSON_GetArrayItem(all, i);
        int newer = 0;
        for (int j = i - 1; j >= 0 && !newer; j--) {
            const cJSON *d = cJSON_GetArrayItem(all, j);
            newer = !strcmp(json_str(c, "baseline", ""), json_str(d, "baseline", "")) &&
                    !strcmp(json_str(c, "candidate", ""), json_str(d, "candidate", ""));
        }
        if (!newer) cids[n++] = json_int(c, "id", 0);
    }
    cJSON_Delete(all);
    char msg[400];
    snprintf(msg, sizeof msg,
             "%s: run %lld has no stored comparison: 'qgate compare --run %lld --baseline B "
             "--candidate C' stores one; 'qgate report --run %lld --candidate C' computes one now",
             store_path(s), (long long)run, (long long)run, (long long)run);
    int code = !cids    ? cmd_fail(QG_ERR_NOMEM, "out of memory")
               : n == 0 ? cmd_fail(QG_ERR_NOTFOUND, msg)
                        : cmd_write_reports(s, cids, n, format, path, 0);
    free(cids);
    return code;
}

static int cmd_report(const struct cli_args *a)
{
    const char *format = cli_str(a, "format") ? cli_str(a, "format") : "text";
    if (!report_format_known(format))
        return cmd_usage("--format must be text, md, html, json or junit, got '%s'", format);
    int by_run = cli_str(a, "run") != NULL;
    if (by_run && cli_str(a, "comparison"))
        return cmd_usage("give --comparison ID or --run ID, not both");
    if (!by_run && (cli_str(a, "baseline") || cli_str(a, "candidate")))
        return cmd_usage("--baseline and --candidate name models of a run: give --run ID");
    if (by_run && cli_str(a, "baseline") && !cli_str(a, "candidate"))
        return cmd_usage("--baseline needs --candidate NAME (without both, --run reports every "
                         "stored comparison of the run)");
    int64_t cid = cli_int(a, "comparison", 0);
    if (cli_str(a, "comparison") && cid <= 0)
        return cmd_usage("--comparison must be a positive id");
    static const char *const outputs[] = {"output", NULL};
    const char *inputs[1] = {cli_str(a, "db") ? cli_str(a, "db") : STORE_DEFAULT_PATH};
    int code = cmd_check_outputs(a, outputs, inputs, 1);
    if (code) return code;
    struct store *s;
    code = cmd_open_store(a, 1, &s); /* reading only: a report never stores anything */
    if (code) return code;
    if (by_run && !cli_str(a, "candidate")) {
        code = report_run(s, cli_int(a, "run", 0), format, cli_str(a, "output"));
    } else if (by_run) { /* computed now, not stored */
        cJSON *sum = NULL, *doc = NULL;
        char err[QG_ERRMSG_MAX], base[128];
        int64_t run = cli_int(a, "run", 0);
        code = run_baseline(s, run, cli_str(a, "baseline"), base, sizeof base);
        if (!code)
            code = cmd_compare_summary(s, run, base, cli_str(a, "candidate"), cli_str(a, "policy"),
                                       (uint64_t)cli_int(a, "seed", 20261130), &sum);
        int rc =
            code ? QG_OK : report_doc_from_summary(s, 0, run, sum, NULL, &doc, err, sizeof err);
        if (rc) code = cmd_fail(rc, err);
        cJSON_Delete(sum);
        if (!code) code = cmd_write_doc(doc, format, cli_str(a, "output"), 0);
    } else {
        code = cmd_write_report(s, cid, format, cli_str(a, "output"));
    }
    store_close(s);
    return code;
}

const struct cli_cmd cmd_report_def = {
    .name = "report",
    .fn = cmd_report,
    .summary = "render a stored comparison as a terminal table, Markdown, HTML, JSON or JUnit XML",
    .description =
        "The HTML is one self-contained file (inline SVG charts, no external resources)\n"
        "for release sign-off; md suits $GITHUB_STEP_SUMMARY; junit suits CI test reports.\n"
        "The JSON schema is documented in docs/report-schema.md.",
    .opts = opts,
    .min_pos = 0,
    .max_pos = 0,
};
