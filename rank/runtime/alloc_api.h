/*
 * alloc_api.h — the allocator's observer, which instance.c wires to the recorder.
 */
#ifndef RANKSNAP_ALLOC_API_H
#define RANKSNAP_ALLOC_API_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "ranksnap.h"

/* The allocator's observer (rs_alloc_config.observer; ctx is the instance): records the event
 * with the stack unwound before the allocator lock was taken. */
uint32_t rs_alloc_api_observe(void *ctx, rs_action act, uint64_t addr, uint64_t size, void *stream);

#endif
