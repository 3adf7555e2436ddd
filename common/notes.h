/*
 * notes.h — a report's notes: what a comparison (compare.h) or a diff (diff.h) could not do and
 * why, appended to a list of malloc'ed strings that the result frees.
 */
#ifndef RANKSNAP_NOTES_H
#define RANKSNAP_NOTES_H

#include <stdarg.h>
#include <stddef.h>

#include "ranksnap.h"

/* Appends the string formatted from `fmt` to (*list)[*n]: RANKSNAP_ERR_HOST_MEMORY, the list
 * unchanged, without memory. */
ranksnap_status rs_notes_vadd(char ***list, size_t *n, const char *fmt, va_list ap);
ranksnap_status rs_notes_add(char ***list, size_t *n, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif
