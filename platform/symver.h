/*
 * symver.h — the C library's functions by symbol version, for the names ranksnap defines itself
 * (rank/intercept/driver.c's dlsym): their name alone would find ranksnap's own.
 */
#ifndef RANKSNAP_SYMVER_H
#define RANKSNAP_SYMVER_H

/* The versions glibc has given dlsym on this processor, newest first, NULL-terminated. */
extern const char *const rs_symver_dlsym[];

/* `name` as the objects loaded after the one this code is linked into define it (RTLD_NEXT),
 * under the first of `versions` that they have; NULL when none is. */
void *rs_symver_next(const char *name, const char *const *versions);

#endif
