/* cmd_tasks — `qgate tasks`: the named benchmarks (tasks/registry.h), with
 * what each scores and which files it reads; with --data, which are there. */
#include "cli/commands.h"
#include "core/json.h"
#include "core/util.h"
#include "tasks/registry.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct cli_opt opts[] = {
    {"data", 0, CLI_STR, "DIR", "say which tasks' files are in DIR (default: $QGATE_DATA)", 0},
    CLI_OPT_JSON,
    CLI_OPT_END,
};

static const char *kind_of(const struct registry_task *t)
{
    return !strcmp(t->kind, "perplexity") ? "perplexity"
           : !strcmp(t->kind, "gsm8k")    ? "generation"
                                          : "multiple choice";
}

/* the first candidate of role r found under dir ("" none) */
static void found(const char *dir, const struct registry_file *f, char *out, size_t n)
{
    out[0] = '\0';
    for (int k = 0; dir && k < REGISTRY_MAX_PATHS && f->paths[k] && !out[0]; k++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, f->paths[k]);
        if (access(path, R_OK) == 0) snprintf(out, n, "%s", f->paths[k]);
    }
}

/* the MMLU subjects found (names of mmlu/test/SUBJECT_test.csv), counted */
static int mmlu_subjects(const char *dir, cJSON *list)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/mmlu/test", dir ? dir : "");
    DIR *d = dir ? opendir(path) : NULL;
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t k = strlen(e->d_name);
        if (k > 9 && !strcmp(e->d_name + k - 9, "_test.csv")) {
            char name[300];
            snprintf(name, sizeof name, "mmlu_%.*s", (int)(k - 9), e->d_name);
            cJSON_AddItemToArray(list, cJSON_CreateString(name));
            n++;
        }
    }
    if (d) closedir(d);
    return n;
}

static cJSON *task_json(const struct registry_task *t, const char *dir)
{
    cJSON *o = cJSON_CreateObject(), *files = cJSON_CreateArray();
    cJSON_AddStringToObject(o, "name", t->name);
    cJSON_AddStringToObject(o, "kind", kind_of(t));
    cJSON_AddStringToObject(o, "metric", t->metric);
    cJSON_AddStringToObject(o, "description", t->what);
    if (t->differs) cJSON_AddStringToObject(o, "differs_from_lm_eval", t->differs);
    int ready = 1;
    for (int r = 0; r < REGISTRY_MAX_ROLES + 1 && t->files[r].role; r++) {
        cJSON *f = cJSON_CreateObject(), *c = cJSON_CreateArray();
        cJSON_AddStringToObject(f, "role", t->files[r].role);
        for (int k = 0; k < REGISTRY_MAX_PATHS && t->files[r].paths[k]; k++)
            cJSON_AddItemToArray(c, cJSON_CreateString(t->files[r].paths[k]));
        cJSON_AddItemToObject(f, "any_of", c);
        cJSON_AddBoolToObject(f, "optional", t->files[r].optional);
        char have[256];
        found(dir, &t->files[r], have, sizeof have);
        if (dir) cJSON_AddStringToObject(f, "found", have);
        ready &= have[0] || t->files[r].optional;
        cJSON_AddItemToArray(files, f);
    }
    cJSON_AddItemToObject(o, "files", files);
    if (dir) cJSON_AddBoolToObject(o, "ready", ready);
    if (!strcmp(t->name, "mmlu")) mmlu_subjects(dir, cJSON_AddArrayToObject(o, "subjects"));
    return o;
}

static void print_task(const cJSON *t, const char *dir)
{
    const char *status = !dir                                                         ? ""
                         : json_get(t, "ready") && cJSON_IsTrue(json_get(t, "ready")) ? "ready"
                                                                                      : "missing";
    printf("%-14s %-16s %-12s %-8s %s\n", json_str(t, "name", ""), json_str(t, "kind", ""),
           json_str(t, "metric", ""), status, json_str(t, "description", ""));
    const cJSON *f;
    cJSON_ArrayForEach(f, json_get(t, "files"))
    {
        printf("%16s%s%s: ", "", json_str(f, "role", ""),
               cJSON_IsTrue(json_get(f, "optional")) ? " (optional)" : "");
        const char *have = json_str(f, "found", "");
        if (*have) {
            printf("%s\n", have);
            continue;
        }
        const cJSON *c;
        int k = 0;
        cJSON_ArrayForEach(c, json_get(f, "any_of"))
            printf("%s%s", k++ ? " or " : "", c->valuestring);
        printf("\n");
    }
    int subjects = cJSON_GetArraySize(json_get(t, "subjects"));
    if (subjects) printf("%16s%d subjects found: mmlu_SUBJECT runs one\n", "", subjects);
    if (json_get(t, "differs_from_lm_eval"))
        printf("%16sagainst lm-eval: %s\n", "", json_str(t, "differs_from_lm_eval", ""));
}

static int cmd_tasks(const struct cli_args *a)
{
    const char *dir = cli_str(a, "data") ? cli_str(a, "data") : getenv("QGATE_DATA");
    if (dir && !*dir) dir = NULL;
    cJSON *all = cJSON_CreateArray();
    for (int i = 0; registry_at(i); i++)
        cJSON_AddItemToArray(all, task_json(registry_at(i), dir));
    if (cli_flag(a, "json")) return cmd_print_json(all);
    printf("%-14s %-16s %-12s %-8s %s\n", "task", "kind", "metric", dir ? "data" : "",
           "what it is");
    const cJSON *t;
    cJSON_ArrayForEach(t, all) print_task(t, dir);
    printf("\nRun them without a suite file: qgate gate BASE.gguf CAND.gguf --tasks "
           "hellaswag,arc_easy --data DIR\n(or QGATE_DATA=DIR). Files are read under DIR as "
           "listed (the first found), pinned in the\ndatabase on first use, and a changed file is "
           "refused later. A suite file runs anything else.\n");
    cJSON_Delete(all);
    return 0;
}

const struct cli_cmd cmd_tasks_def = {
    .name = "tasks",
    .fn = cmd_tasks,
    .summary = "list the benchmarks qgate runs by name (lm-eval's task names)",
    .description = "Each task: its kind, the metric it gates on (lm-eval's), and the files it\n"
                   "reads from a data folder. With --data DIR (or $QGATE_DATA), which are there.",
    .opts = opts,
    .min_pos = 0,
    .max_pos = 0,
};
