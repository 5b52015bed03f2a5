/* suite_inputs — the files a suite reads, listed without loading it (no
 * hashing), so that no output may overwrite one. */
#include "harness/suite.h"
#include "core/status.h"
#include "core/util.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* Appends dir/rel (rel as is when absolute or dir is "") to the list. */
static int add_path(const char *dir, const char *rel, char ***v, int *n)
{
    char **g = realloc(*v, (size_t)(*n + 1) * sizeof *g);
    if (!g) return QG_ERR_NOMEM;
    *v = g;
    size_t k = strlen(dir) + strlen(rel) + 2;
    char *p = malloc(k);
    if (!p) return QG_ERR_NOMEM;
    snprintf(p, k, "%s%s%s", rel[0] == '/' || !*dir ? "" : dir, rel[0] == '/' || !*dir ? "" : "/",
             rel);
    (*v)[(*n)++] = p;
    return QG_OK;
}

/* A task's "data" (a path, or an object of paths) and "items_file". */
static int task_inputs(const char *dir, const cJSON *t, char ***v, int *n)
{
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(t, "data"), *x;
    int rc = QG_OK;
    if (cJSON_IsString(d)) rc = add_path(dir, d->valuestring, v, n);
    if (cJSON_IsObject(d))
        cJSON_ArrayForEach(x, d) if (!rc && cJSON_IsString(x)) rc =
            add_path(dir, x->valuestring, v, n);
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(t, "items_file");
    if (!rc && cJSON_IsString(it)) rc = add_path(dir, it->valuestring, v, n);
    return rc;
}

int suite_input_paths(const char *path, char ***paths, int *n, char *err, size_t errlen)
{
    *paths = NULL;
    *n = 0;
    char *text = NULL;
    size_t len = 0;
    int rc = qg_read_file(path, (size_t)64 << 20, &text, &len, err, errlen);
    if (rc) return rc;
    cJSON *root = cJSON_ParseWithLength(text, len), *t;
    free(text);
    const char *slash = strrchr(path, '/');
    char *dir = slash ? qg_strndup(path, (size_t)(slash - path)) : qg_strdup("");
    if (!dir) rc = QG_ERR_NOMEM;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(root, "tasks")) if (!rc) rc =
        task_inputs(dir, t, paths, n);
    free(dir);
    cJSON_Delete(root);
    if (rc) {
        suite_input_paths_free(*paths, *n);
        *paths = NULL, *n = 0;
        return qg_errf(err, errlen, rc, "%s: out of memory", path);
    }
    return QG_OK;
}

void suite_input_paths_free(char **paths, int n)
{
    for (int i = 0; paths && i < n; i++)
        free(paths[i]);
    free(paths);
}
