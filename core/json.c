/* json — typed look-ups in cJSON objects. */
#include "core/json.h"

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
