/*
 * pyframes.h — the Python stack of the calling thread, taken from the running interpreter (through
 * its C API when the thread holds the GIL, read as memory when not), as stack entries the interning and the symbols of stacks.c and
 * symbols.c take like return addresses (pyframes.c).
 *
 * Each distinct (code object, line) gets a number, and a frame's entry is that number under a
 * tag no return address has (rs_pyframes_is): the stack tables keep it as they keep a pc, and the
 * snapshot's frame table names it by function, file and line at dump time, from the strings
 * copied when the frame was first seen.
 */
#ifndef RANKSNAP_PYFRAMES_H
#define RANKSNAP_PYFRAMES_H

#include <stddef.h>
#include <stdint.h>

/* Fills pcs[0..depth) with the calling thread's Python frames, innermost first, and returns how
 * many; of a deeper stack, its innermost frames and its outermost few (the script's own lines); 0 when no interpreter is running in the process, the thread does not hold its GIL and
 * rs_pyframes_calibrate did not succeed, the interpreter lacks a call used here (before Python
 * 3.10), or the thread runs no Python code. Calls the interpreter only on a thread that holds the
 * GIL. */
int rs_pyframes_capture(uintptr_t *pcs, int depth);

/* Called on a thread that holds the GIL, once the process is known to run PyTorch's allocations
 * on threads that release it: finds how to read a thread's frames without the GIL, and checks
 * the finding against the interpreter's own walk of the caller's frames. 0 when captures on
 * threads without the GIL will have Python frames from now on; else -1, with why not in why[n]. */
int rs_pyframes_calibrate(char *why, size_t n);

/* The entries of frames the caller read itself (a traceback's: codes[i] a code object, lines[i]
 * its line, i < n, innermost first) into pcs (room for `depth`), numbered as rs_pyframes_capture
 * numbers them and cut to `depth` as it cuts a stack; returns how many (a NULL code is left out),
 * or -1 when the calling thread does not hold the GIL of a running interpreter, whose code
 * objects it reads. The code objects must stay alive through the call. */
int rs_pyframes_intern(const uintptr_t *codes, const int *lines, int n, int depth, uintptr_t *pcs);

/* 1 when `pc` is an entry made by rs_pyframes_capture or rs_pyframes_intern. */
int rs_pyframes_is(uint64_t pc);

/* The function, file and line of such an entry (strings owned by pyframes.c, never freed while
 * the process runs): 1, or 0 when the entry is not known. */
int rs_pyframes_lookup(uint64_t pc, const char **function, const char **file, int *line);

#endif
