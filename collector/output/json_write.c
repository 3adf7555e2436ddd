/*
 * json_write.c — json_write.h.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

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

void rs_json_key(FILE *f, const char *key)
{
    rs_json_string(f, key, RS_JSON_PLAIN);
    fputs(": ", f);
}

void rs_json_pct(FILE *f, double x)
{
    if (!isfinite(x)) {
        fputs("null", f);
        return;
    }
    char buf[64];
    snprintf(buf, sizeof buf, "%.2f", x);
    char *dot = strchr(buf, '.');
    if (dot) {
        char *end = buf + strlen(buf);
        while (end > dot + 1 && end[-1] == '0') *--end = '\0';
        if (end == dot + 1) *dot = '\0';
    }
    fputs(strcmp(buf, "-0") == 0 ? "0" : buf, f);
}

void rs_json_frame_fields(FILE *f, const char *function, const char *file, int32_t line)
{
    rs_json_key(f, "function");
    rs_json_string(f, function, RS_JSON_PLAIN);
    fputs(", ", f);
    rs_json_key(f, "file");
    rs_json_string(f, file, RS_JSON_PLAIN);
    fprintf(f, ", \"line\": %" PRId32, line);
}

void rs_json_held(FILE *f, const rs_site *s)
{
    if (s->held) fprintf(f, ", \"held_since_before_step\": %" PRId32, s->held_step);
}

void rs_json_site_fields(FILE *f, const rs_compare_site *s)
{
    rs_json_frame_fields(f, s->site.function, s->site.file, s->site.line);
    rs_json_held(f, &s->site);
    fputs(", \"path\": [", f);
    for (int32_t i = 0; i < s->path.n && i < RS_SITE_PATH_MAX; i++) {
        fputs(i ? ", {" : "{", f);
        const rs_site_frame *fr = &s->path.frames[i];
        rs_json_frame_fields(f, fr->function, fr->file, fr->line);
        fputc('}', f);
    }
    fputc(']', f);
}

void rs_json_rate(FILE *f, double x)
{
    if (!isfinite(x))
        fputs("null", f);
    else
        fprintf(f, "%.0f", x);
}
