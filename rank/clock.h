/* clock.h — the time base of events: wall-clock microseconds since the epoch, as PyTorch's
 * time_us, so that ranks on different hosts can be put on rank 0's time base later. */
#ifndef RANKSNAP_CLOCK_H
#define RANKSNAP_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t rs_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

#endif
