/*
 * stacks.h — native call stacks: captured cheaply, stored once, resolved late.
 *
 * Capture keeps return addresses only (RANKSNAP_STACKS=native unwinds with the compiler's unwinder,
 * fp walks frame pointers, none captures nothing). Each distinct stack is interned: stored once in
 * a hash table and named by a 32-bit id (0 = no stack). Symbols, files and lines are resolved once
 * per distinct frame, at dump time (libbacktrace reading DWARF where debug info exists, dladdr as
 * the fallback), never per event. Not thread-safe: the caller serialises (the allocator lock).
 */
#ifndef RANKSNAP_STACKS_H
#define RANKSNAP_STACKS_H

#include <stddef.h>
#include <stdint.h>

#include "options.h"
#include "ranksnap.h"

typedef struct rs_stacks rs_stacks;

ranksnap_status rs_stacks_create(rs_stacks_mode mode, int depth, rs_stacks **out);
void rs_stacks_destroy(rs_stacks *s);
rs_stacks_mode rs_stacks_mode_of(const rs_stacks *s);

/* Captures the caller's stack, leaving out the `skip` innermost frames (ranksnap's own), interns
 * it and returns its id; 0 when the mode is none, nothing could be captured, or the table could
 * not grow (counted in rs_stacks_failed). */
uint32_t rs_stacks_capture(rs_stacks *s, int skip);
/* Captures return addresses only, without interning, into pcs[0..depth) and returns how many.
 * Needs no lock: the caller unwinds outside the allocator lock and interns under it. */
int rs_stacks_capture_pcs(const rs_stacks *s, int skip, uintptr_t *pcs);

/* Interns an already captured stack (innermost first). */
uint32_t rs_stacks_intern(rs_stacks *s, const uintptr_t *pcs, int n);
/* Captures the caller's stack into `pcs` (room for RS_MAX_STACK_DEPTH, innermost first) without
 * interning it, leaving out `skip` innermost frames; returns the number of frames, 0 with mode
 * none. Reads only the mode and depth, so it needs no lock: the expensive unwinding can run
 * before the allocator lock is taken, and rs_stacks_intern under it. */
int rs_stacks_capture_pcs(const rs_stacks *s, int skip, uintptr_t *pcs);

size_t rs_stacks_count(const rs_stacks *s); /* ids are 1..count */
const uintptr_t *rs_stacks_get(const rs_stacks *s, uint32_t id, int *n);
size_t rs_stacks_memory_bytes(const rs_stacks *s);
uint64_t rs_stacks_failed(const rs_stacks *s);
/* Test hook (fault injection): after `n` more successful table growths every growth fails, as a
 * failing malloc would; UINT64_MAX (the default) never fails. */
void rs_stacks_fail_allocs_after(rs_stacks *s, uint64_t n);

/* Every interned stack's pcs, one after another (symbols.c resolves them). */
const uintptr_t *rs_stacks_pcs(const rs_stacks *s, size_t *n);

#endif
