/*
 * notes.c — owns a report's list of notes (notes.h): sentences formatted as printf does, each
 * malloc'ed and appended.
 */
#include <stdio.h>
#include <stdlib.h>

#include "errors.h"
#include "notes.h"

ranksnap_status rs_notes_vadd(char ***list, size_t *n, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int len = vsnprintf(NULL, 0, fmt, ap);
    if (len < 0) {
        va_end(again);
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "a note with a bad format");
    }
    char *text = malloc((size_t)len + 1);
    char **grown = text ? realloc(*list, (*n + 1) * sizeof *grown) : NULL;
    if (!grown) {
        va_end(again);
        free(text);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for a report note");
    }
    vsnprintf(text, (size_t)len + 1, fmt, again);
    va_end(again);
    *list = grown;
    (*list)[(*n)++] = text;
    return RANKSNAP_OK;
}

ranksnap_status rs_notes_add(char ***list, size_t *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ranksnap_status st = rs_notes_vadd(list, n, fmt, ap);
    va_end(ap);
    return st;
}
