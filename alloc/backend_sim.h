/*
 * backend_sim.h — the simulated device (backend_sim.c): synthetic addresses, a capacity, no
 * memory touched; and the hooks tests and replays drive it with.
 */
#ifndef RANKSNAP_BACKEND_SIM_H
#define RANKSNAP_BACKEND_SIM_H

#include <stdint.h>

#include "backend.h"
#include "ranksnap.h"

/* Simulated device of `capacity` bytes (device "index" 0). */
ranksnap_status rs_backend_sim_create(uint64_t capacity, rs_backend **out);
/* A simulated device of ordinal `device` (0..63), whose addresses never meet another's. */
ranksnap_status rs_backend_sim_create_on(int device, uint64_t capacity, rs_backend **out);

/* Test hooks of the sim device, so that tests can break what production breaks:
 * - mark a stream busy (events recorded on it stay pending until rs_backend_sim_stream_complete);
 * - make the n-th reservation from now fail (1 = the next one) with OUT_OF_MEMORY, 0 = never;
 * - read how much the device has handed out (segments and mapped pages). */
void rs_backend_sim_stream_set_busy(rs_backend *b, void *stream, int busy);
void rs_backend_sim_stream_complete(rs_backend *b, void *stream);
void rs_backend_sim_fail_reserve_after(rs_backend *b, unsigned n);
/* Replays (backend_sim.c): enable hints (before the first reservation; the sim's own addresses
 * then start at 2^56), give the address a reservation of `size` bytes should get (an address
 * range: the next one, whatever its size), and drop the hints not taken. */
void rs_backend_sim_hints_enable(rs_backend *b);
void rs_backend_sim_hint(rs_backend *b, uint64_t addr, uint64_t size);
void rs_backend_sim_hints_clear(rs_backend *b);
uint64_t rs_backend_sim_used_bytes(const rs_backend *b);
unsigned rs_backend_sim_live_events(const rs_backend *b);

#endif
