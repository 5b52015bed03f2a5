/* json — typed look-ups in cJSON objects with a default for absent or
 * mistyped members, so readers of stored or received JSON need no casts.
 *
 * Every function takes a borrowed object (NULL allowed) and a key, and
 * returns a borrowed pointer (valid while the object lives) or a copy.
 */
#ifndef QG_JSON_H
#define QG_JSON_H

#include <cjson/cJSON.h>

/* The member k of o (case-sensitive), or NULL. */
const cJSON *json_get(const cJSON *o, const char *k);
/* The string member k, or def when absent or not a string. */
const char *json_str(const cJSON *o, const char *k, const char *def);
/* The number member k, or def when absent or not a number. */
double json_num(const cJSON *o, const char *k, double def);
/* The number member k as an integer (truncated), or def. */
long long json_int(const cJSON *o, const char *k, long long def);

/* The first member of object o whose key is not in keys (a NULL-terminated
 * list), or NULL when all are known; *near (when not NULL) is set to the
 * closest known key when it is a likely typo, else NULL. */
const char *json_unknown_key(const cJSON *o, const char *const *keys, const char **near);

/* v as JSON text for people: two-space indents, and any object or array
 * that fits within `width` columns (with its indent) on one line, with ": "
 * and ", " inside. A new string (free it), NULL when out of memory. */
char *json_print_pretty(const cJSON *v, int width);

#endif
