/* json — typed look-ups in cJSON objects. */
#include "core/json.h"
#include "core/closest.h"

#include <string.h>

const cJSON *json_get(const cJSON *o, const char *k)
{
    return o ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}

const char *json_str(const cJSON *o, const char *k, const char *def)
{
    const cJSON *v = json_get(o, k);
    return cJSON_IsString(v) && v->valuestring ? v->valuestring : def;
}

double json_num(const cJSON *o, const char *k, double def)
{
    const cJSON *v = json_get(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : def;
}

long long json_int(const cJSON *o, const char *k, long long def)
{
    const cJSON *v = json_get(o, k);
    return cJSON_IsNumber(v) ? (long long)v->valuedouble : def;
}

const char *json_unknown_key(const cJSON *o, const char *const *keys, const char **near)
{
    const cJSON *k;
    if (near) *near = NULL;
    cJSON_ArrayForEach(k, o)
    {
        int ok = 0, n = 0;
        for (; keys[n]; n++)
            ok |= k->string && strcmp(keys[n], k->string) == 0;
        if (ok || !k->string) continue;
        if (near) *near = qg_closest(k->string, keys, n);
        return k->string;
    }
    return NULL;
}
