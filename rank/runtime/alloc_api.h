/*
 * alloc_api.h — the allocators' observer, which devices.c wires to the recorder, and the
 * allocation call of the interposers, which name the device themselves.
 */
#ifndef RANKSNAP_ALLOC_API_H
#define RANKSNAP_ALLOC_API_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "ranksnap.h"

/* The allocators' observer (rs_alloc_config.observer; ctx is the device, devices.h): records the
 * event, tagged with the device, with the stack unwound before the lock was taken. */
uint32_t rs_alloc_api_observe(void *ctx, rs_action act, uint64_t addr, uint64_t size, void *stream);

/* ranksnap_malloc on device `device` rather than the calling thread's current one: for callers
 * that know the device the program meant (the interposers ask the program's own runtime, PyTorch
 * passes it). */
/* `caller` is the return address of the program's call (the interposer's), the block's site when
 * nothing records its stack. */
ranksnap_status rs_alloc_api_malloc_on(int device, void **ptr, size_t size, void *stream,
                                       const void *caller);

#endif
