/*
 * json_write.c — json_write.h.
 */
#include "json_write.h"
#include "text.h"

static void script_byte(FILE *f, unsigned char c)
{
    switch (c) {
    case '<': fputs("\\u003c", f); break;
    case '>': fputs("\\u003e", f); break;
    case '&': fputs("\\u0026", f); break;
    case '/': fputs("\\/", f); break;
    default: fputc(c, f); break;
    }
}

void rs_json_script_bytes(FILE *f, const char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) script_byte(f, (unsigned char)buf[i]);
}

void rs_json_string(FILE *f, const char *s, int flags)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    fputc('"', f);
    while (*p) {
        unsigned c = *p;
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc((int)c, f);
            p++;
        } else if (c < 0x20) {
            switch (c) {
            case '\n': fputs("\\n", f); break;
            case '\r': fputs("\\r", f); break;
            case '\t': fputs("\\t", f); break;
            case '\b': fputs("\\b", f); break;
            case '\f': fputs("\\f", f); break;
            default: fprintf(f, "\\u%04x", c); break;
            }
            p++;
        } else if (c < 0x80) {
            if (flags & RS_JSON_SCRIPT)
                script_byte(f, (unsigned char)c);
            else
                fputc((int)c, f);
            p++;
        } else {
            /* rs_utf8_len stops at the terminating NUL: it is not a continuation byte. */
            int n = rs_utf8_len(p);
            if (n) {
                fwrite(p, 1, (size_t)n, f);
                p += n;
            } else {
                fputs("\\ufffd", f);
                p++;
            }
        }
    }
    fputc('"', f);
}
