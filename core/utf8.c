/* utf8 — strict validation, lenient lead-byte lengths, repair. */
#include "core/utf8.h"
#include "core/util.h"

#include <string.h>

size_t utf8_seq_len(const uint8_t *s, size_t avail)
{
    if (!avail) return 0;
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!len || len > avail || (len == 2 && c < 0xC2) || (len == 4 && c > 0xF4)) return 0;
    for (size_t k = 1; k < len; k++)
        if ((s[k] & 0xC0) != 0x80) return 0;
    if (len == 3 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0))) return 0;
    if (len == 4 && ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] >= 0x90))) return 0;
    return len;
}

int utf8_valid(const char *str, size_t n, size_t *bad)
{
    const uint8_t *s = (const uint8_t *)str;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_seq_len(s + i, n - i);
        if (!len) {
            if (bad) *bad = i;
            return 0;
        }
        i += len;
    }
    return 1;
}

size_t utf8_lead_len(uint8_t c)
{
    static const uint8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[c >> 4];
}

char *utf8_sanitize(const char *str)
{
    static const char repl[] = "\xef\xbf\xbd"; /* U+FFFD */
    struct sbuf b;
    sbuf_init(&b, 0);
    sbuf_append(&b, "", 0);
    const uint8_t *s = (const uint8_t *)(str ? str : "");
    size_t left = strlen((const char *)s);
    while (left) {
        size_t n = utf8_seq_len(s, left);
        if (!n) {
            sbuf_append(&b, repl, 3);
            n = 1;
        } else {
            sbuf_append(&b, (const char *)s, n);
        }
        s += n;
        left -= n;
    }
    if (b.failed) {
        sbuf_release(&b);
        return NULL;
    }
    return b.data;
}
