/* escape — making untrusted text safe for each output format.
 *
 * Every string that reaches a report (model and task names, prompts,
 * predictions, paths) may hold anything: markup, quotes, control characters,
 * invalid UTF-8. Each function appends s to b escaped for its format;
 * invalid UTF-8 becomes U+FFFD everywhere.
 */
#ifndef QG_ESCAPE_H
#define QG_ESCAPE_H

#include "core/util.h"

/* HTML text and attribute values: & < > " ' as entities; control
 * characters other than tab and newline as U+FFFD. */
void esc_html(struct sbuf *b, const char *s);
/* XML 1.0 (JUnit): as HTML, and characters XML cannot hold become U+FFFD. */
void esc_xml(struct sbuf *b, const char *s);
/* A GitHub Markdown table cell or inline text: HTML-escaped (GFM renders
 * HTML), and | \ ` * _ [ ] backslash-escaped, newlines as spaces. */
void esc_md(struct sbuf *b, const char *s);
/* Terminal text: control characters (C0, DEL, C1, so no escape sequences)
 * as U+FFFD, tab and newlines as spaces; no markup escaping. */
void esc_term(struct sbuf *b, const char *s);

#endif
