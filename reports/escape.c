/* escape — HTML, XML and Markdown escaping with UTF-8 repair. */
#include "reports/escape.h"
#include "core/utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char repl[] = "\xef\xbf\xbd"; /* U+FFFD */

/* shared walker: mode 0 html, 1 xml, 2 md, 3 terminal */
static void walk(struct sbuf *b, const char *str, int mode)
{
    const unsigned char *s = (const unsigned char *)(str ? str : "");
    while (*s) {
        size_t n = utf8_seq_len(s, SIZE_MAX) /* NUL is no continuation byte: stops there */;
        if (!n) {
            sbuf_append(b, repl, 3);
            s++;
            continue;
        }
        if (n > 1) {
            /* a terminal obeys C1 controls (U+0080..U+009F, e.g. CSI) */
            if (mode == 3 && n == 2 && s[0] == 0xC2 && s[1] < 0xA0) {
                sbuf_append(b, repl, 3);
                s += n;
                continue;
            }
            /* XML forbids U+FFFE and U+FFFF */
            if (mode == 1 && n == 3 && s[0] == 0xEF && s[1] == 0xBF &&
                (s[2] == 0xBE || s[2] == 0xBF))
                sbuf_append(b, repl, 3);
            else
                sbuf_append(b, (const char *)s, n);
            s += n;
            continue;
        }
        unsigned char c = *s++;
        if (mode == 3) {
            if (c == '\n' || c == '\r' || c == '\t')
                sbuf_append(b, " ", 1);
            else if (c < 0x20 || c == 0x7F)
                sbuf_append(b, repl, 3);
            else
                sbuf_append(b, (const char *)&c, 1);
            continue;
        }
        switch (c) {
        case '&':
            sbuf_append(b, "&amp;", 5);
            continue;
        case '<':
            sbuf_append(b, "&lt;", 4);
            continue;
        case '>':
            sbuf_append(b, "&gt;", 4);
            continue;
        case '"':
            sbuf_append(b, "&quot;", 6);
            continue;
        case '\'':
            sbuf_append(b, "&#39;", 5);
            continue;
        }
        if (mode == 2) {
            if (c == '\n' || c == '\r' || c == '\t') {
                sbuf_append(b, " ", 1);
                continue;
            }
            if (strchr("|\\`*_[]", c)) {
                char e[2] = {'\\', (char)c};
                sbuf_append(b, e, 2);
                continue;
            }
        }
        if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7F) {
            sbuf_append(b, repl, 3);
            continue;
        }
        sbuf_append(b, (const char *)&c, 1);
    }
}

void esc_html(struct sbuf *b, const char *s)
{
    walk(b, s, 0);
}
void esc_xml(struct sbuf *b, const char *s)
{
    walk(b, s, 1);
}
void esc_md(struct sbuf *b, const char *s)
{
    walk(b, s, 2);
}
void esc_term(struct sbuf *b, const char *s)
{
    walk(b, s, 3);
}
