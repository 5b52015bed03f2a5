/* banned — the C library functions STYLE.md forbids, made compile errors.
 *
 * CMakeLists.txt force-includes this header into every qgate source
 * (-include), and builds with -Werror=deprecated-declarations, so a call of
 * one of these fails the build with the reason. They are redeclared with a
 * deprecation attribute, which merges with the library's own declaration
 * whatever the include order. Use instead:
 *   atoi/atol/atof -> qg_parse_i64 / qg_parse_f64 (whole input, range-checked)
 *   sprintf/vsprintf/strcpy/strcat/strncpy -> snprintf, struct sbuf, qg_strdup
 *   strtok -> strcspn/strspn (reentrant, no hidden state)
 *   gets -> fgets
 */
#ifndef QG_BANNED_H
#define QG_BANNED_H

#include <stdarg.h>
#include <stddef.h>

#define QG_BANNED(why) __attribute__((deprecated(why)))

int atoi(const char *) QG_BANNED("banned in qgate: use qg_parse_i64");
long atol(const char *) QG_BANNED("banned in qgate: use qg_parse_i64");
double atof(const char *) QG_BANNED("banned in qgate: use qg_parse_f64");
int sprintf(char *, const char *, ...) QG_BANNED("banned in qgate: use snprintf or struct sbuf");
int vsprintf(char *, const char *, va_list) QG_BANNED("banned in qgate: use vsnprintf");
char *strcpy(char *, const char *) QG_BANNED("banned in qgate: use snprintf or qg_strdup");
char *strcat(char *, const char *) QG_BANNED("banned in qgate: use struct sbuf");
char *strncpy(char *, const char *, size_t) QG_BANNED("banned in qgate: use snprintf");
char *strtok(char *, const char *) QG_BANNED("banned in qgate: use strcspn/strspn");
char *gets(char *) QG_BANNED("banned in qgate: use fgets");

#endif
