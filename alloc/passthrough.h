/* passthrough.h — RANKSNAP_DISABLE=1: ranksnap_malloc/free go straight to the device (cudaMalloc
 * and cudaFree, or the sim device), with no cache, no recording and no files. */
#ifndef RANKSNAP_PASSTHROUGH_H
#define RANKSNAP_PASSTHROUGH_H

#include <stddef.h>
#include <stdint.h>

#include "options.h"
#include "ranksnap.h"

ranksnap_status rs_passthrough_init(rs_backend_kind kind, uint64_t sim_capacity);
int rs_passthrough_on(void);
ranksnap_status rs_passthrough_malloc(void **ptr, size_t size);
ranksnap_status rs_passthrough_free(void *ptr);
void rs_passthrough_shutdown(void);

#endif
