/*
 * symbols.h — function, file, line and module of every distinct pc of the interned stacks,
 * resolved once per pc when a snapshot is written (symbols.c).
 */
#ifndef RANKSNAP_SYMBOLS_H
#define RANKSNAP_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"
#include "stacks.h"

/* Resolution of every distinct pc of every interned stack. */
typedef struct rs_module_info {
    char *path;           /* as the dynamic loader knows it ("" = main program, resolved) */
    uint64_t base;        /* load address                                                */
    char build_id[65];    /* hex of NT_GNU_BUILD_ID, "" if none                          */
} rs_module_info;

typedef struct rs_frame_info {
    uint64_t pc;
    int32_t module;       /* index into modules, -1 if unknown        */
    char *function;       /* demangling is left to readers; "??" if unknown */
    char *file;           /* "??" if unknown                          */
    int32_t line;         /* 0 if unknown                             */
} rs_frame_info;

typedef struct rs_symbols {
    size_t n_modules;
    rs_module_info *modules;
    size_t n_frames;
    rs_frame_info *frames; /* sorted by pc; a pc in inlined code has one frame per inline level,
                            * innermost first, all with that pc           */
} rs_symbols;

ranksnap_status rs_symbols_resolve(const rs_stacks *s, rs_symbols *out);
/* Index of the first (innermost) frame of `pc` in sym->frames and, in *levels, how many
 * consecutive frames it has (its inline levels); -1 and 0 when the symbols do not know it. */
long rs_symbols_find(const rs_symbols *sym, uint64_t pc, int *levels);
void rs_symbols_free(rs_symbols *sym);
/* Loads the debug info resolution needs, ahead of the first dump (the dumper thread does this
 * while the program starts, so that a dump on a fatal signal fits in its time budget). */
void rs_symbols_prewarm(void);
/* 1 when this build resolves file and line (libbacktrace reading DWARF), 0 when frames get only
 * the dynamic symbol name from dladdr. */
int rs_symbols_have_file_lines(void);

#endif
