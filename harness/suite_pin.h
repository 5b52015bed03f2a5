/* suite_pin — writes the sha256 pins a suite file lacks or has wrong.
 *
 * Each task's data file (or folder) is hashed as `suite check` hashes it;
 * every pin that is missing or differs is printed (task, role, path, new
 * hash and the old one), then, unless dry_run, the suite file is rewritten
 * (atomically, as formatted JSON) with the new pins. Nothing else of the
 * file changes but its layout.
 */
#ifndef QG_SUITE_PIN_H
#define QG_SUITE_PIN_H

#include <stddef.h>

/* QG_OK with *changed pins shown (and written); QG_ERR_NOINPUT /
 * QG_ERR_DATA naming the file otherwise, the suite left untouched. */
int suite_pin(const char *path, int dry_run, int *changed, char *err, size_t errlen);

#endif
