/* suite_pin — `qgate suite pin SUITE`: the missing or changed sha256 pins,
 * shown, then written into the suite file. */
#include "harness/suite_pin.h"
#include "core/json.h"
#include "core/status.h"
#include "core/util.h"
#include "datasets/hash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The pin of role in a task's "sha256" (a string for "data" alone, or an
 * object by role); NULL when none. */
static const char *pin_of(const cJSON *t, const char *role, int single)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(t, "sha256");
    if (single && cJSON_IsString(p)) return p->valuestring;
    return json_str(p, role, NULL);
}

/* One file of a task: hashed, compared with its pin, the pin set in pins
 * (an object by role). *changed counts what differs. */
static int pin_file(const char *dir, const char *task, const char *role, const char *rel,
                    const char *pin, cJSON *pins, int *changed, cJSON *edits, char *err,
                    size_t errlen)
{
    char path[4200], hex[HASH_HEX_LEN + 1];
    snprintf(path, sizeof path, "%s%s%s", rel[0] == '/' || !*dir ? "" : dir,
             rel[0] == '/' || !*dir ? "" : "/", rel);
    int rc = hash_sha256_path(path, hex, err, errlen);
    if (rc) return rc;
    if (!pin || strcmp(pin, hex)) {
        printf("  %-16s %-7s %s\n  %-16s %-7s sha256 %s (%s%s)\n", task, role, path, "", "", hex,
               pin ? "was " : "no pin", pin ? pin : "");
        (*changed)++;
        cJSON *e = cJSON_CreateArray(); /* [old or null, new]: for an edit in place */
        cJSON_AddItemToArray(e, pin ? cJSON_CreateString(pin) : cJSON_CreateNull());
        cJSON_AddItemToArray(e, cJSON_CreateString(hex));
        cJSON_AddItemToArray(edits, e);
    }
    cJSON_AddStringToObject(pins, role, hex);
    return QG_OK;
}

/* A task's files and their new "sha256" value. */
static int pin_task(const char *dir, cJSON *t, int *changed, cJSON *edits, char *err, size_t errlen)
{
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(t, "data");
    const char *name = json_str(t, "name", "?");
    cJSON *pins = cJSON_CreateObject();
    int rc = QG_OK, before = *changed;
    if (cJSON_IsString(data)) {
        rc = pin_file(dir, name, "data", data->valuestring, pin_of(t, "data", 1), pins, changed,
                      edits, err, errlen);
    } else if (cJSON_IsObject(data)) {
        const cJSON *f;
        cJSON_ArrayForEach(f, data) if (cJSON_IsString(f) && !rc) rc =
            pin_file(dir, name, f->string, f->valuestring, pin_of(t, f->string, 0), pins, changed,
                     edits, err, errlen);
    }
    if (!rc && *changed > before) {
        cJSON *v = cJSON_IsString(data) ? cJSON_Duplicate(json_get(pins, "data"), 1) : pins;
        if (v != pins) cJSON_Delete(pins);
        pins = NULL;
        if (cJSON_GetObjectItemCaseSensitive(t, "sha256"))
            cJSON_ReplaceItemInObjectCaseSensitive(t, "sha256", v);
        else
            cJSON_AddItemToObject(t, "sha256", v);
    }
    cJSON_Delete(pins);
    return rc;
}

/* The file's own text with every changed pin replaced where it stands,
 * when each is an existing pin found once ("old" quoted); NULL when not
 * (a missing pin, a value repeated): the caller prints the whole suite. */
static char *edit_in_place(const char *text, const cJSON *edits)
{
    struct sbuf b;
    sbuf_init(&b, 0);
    sbuf_append(&b, text, strlen(text));
    const cJSON *e;
    cJSON_ArrayForEach(e, edits)
    {
        const cJSON *old = cJSON_GetArrayItem(e, 0), *hex = cJSON_GetArrayItem(e, 1);
        char q[300];
        if (!cJSON_IsString(old) || strlen(old->valuestring) > 280) break;
        snprintf(q, sizeof q, "\"%s\"", old->valuestring);
        const char *at = strstr(sbuf_str(&b), q);
        if (!at || strstr(at + 1, q)) break;
        size_t off = (size_t)(at - b.data), ql = strlen(q);
        struct sbuf n;
        sbuf_init(&n, 0);
        sbuf_append(&n, b.data, off);
        sbuf_printf(&n, "\"%s\"", hex->valuestring);
        sbuf_append(&n, b.data + off + ql, b.len - off - ql);
        sbuf_release(&b);
        b = n;
        if (!e->next && !b.failed) return b.data; /* every edit made */
    }
    sbuf_release(&b);
    return NULL;
}

int suite_pin(const char *path, int dry_run, int *changed, char *err, size_t errlen)
{
    *changed = 0;
    char *text = NULL;
    size_t n;
    int rc = qg_read_file(path, (size_t)16 << 20, &text, &n, err, errlen);
    if (rc) return rc;
    cJSON *root = cJSON_ParseWithLength(text, n);
    if (!cJSON_IsObject(root) || !cJSON_IsArray(json_get(root, "tasks"))) {
        cJSON_Delete(root);
        free(text);
        return qg_errf(err, errlen, QG_ERR_DATA,
                       "%s: not a suite (a JSON object with \"tasks\"); 'qgate suite check' says "
                       "more",
                       path);
    }
    const char *slash = strrchr(path, '/');
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 0, path);
    cJSON *t, *edits = cJSON_CreateArray();
    cJSON_ArrayForEach(t, json_get(root, "tasks")) if (!rc && cJSON_IsObject(t)) rc =
        pin_task(dir, t, changed, edits, err, errlen);
    char *out = NULL; /* the file as written, pins edited in place, else printed anew */
    if (!rc && *changed && !dry_run && !(out = edit_in_place(text, edits)))
        out = json_print_pretty(root, 100);
    cJSON_Delete(root);
    cJSON_Delete(edits);
    free(text);
    if (!rc && *changed && !dry_run) {
        if (!out) return qg_errf(err, errlen, QG_ERR_NOMEM, "out of memory");
        rc = qg_write_file_atomic(path, out, strlen(out), err, errlen);
    }
    free(out);
    return rc;
}
