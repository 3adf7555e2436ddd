/*
 * ring_format.h — the layout of a rank's ring file (RANKSNAP_RING=mmap), shared by the writer
 * (rank/record/ring_file.c, through a MAP_SHARED mapping) and the reader (collector/decode/ring_decode.c).
 *
 * rank-RRRRR.ring in RANKSNAP_DIR: one 4 KiB header, then the segment table (RS_RING_MAX_SEGMENTS
 * entries), then `capacity` events of 32 bytes, written in place as they happen. Because the
 * pages belong to the file, whatever the process wrote is in the page cache the moment it is
 * written and survives SIGKILL or the kernel's OOM killer; the report recovers it and marks it
 * complete: false. `total` is stored after the event it counts, so a reader never counts a slot
 * that was half written. All integers little-endian, the host's (the reader checks `endian`).
 */
#ifndef RANKSNAP_RING_FORMAT_H
#define RANKSNAP_RING_FORMAT_H

#include <stdint.h>

#include "format.h"

#define RS_RING_MAGIC "RSRING1"
#define RS_RING_VERSION 1u
#define RS_RING_HEADER_SIZE 4096u
#define RS_RING_MAX_STREAMS 128u
#define RS_RING_MAX_SEGMENTS 8192u
#define RS_RING_ENDIAN 0x01020304u
#define RS_RING_ALLOC_CONF_MAX 1024u
#define RS_RING_STEPS_FROM_MAX 160u

typedef struct rs_ring_segment {
    uint64_t addr;  /* 0 = free slot */
    uint64_t size;
    uint32_t stream; /* index into streams */
    uint32_t is_small;
} rs_ring_segment;

typedef struct rs_ring_event {
    uint64_t time_us;
    uint64_t addr;
    uint64_t size;
    uint32_t stack_id;
    uint16_t stream;
    uint8_t action;
    uint8_t flags;
} rs_ring_event;

typedef struct rs_ring_header {
    char magic[8];
    uint32_t version;
    uint32_t endian;
    uint32_t header_size;
    uint32_t event_size;
    uint64_t capacity;
    uint64_t max_segments;
    int32_t rank;
    int32_t world_size;
    int64_t pid;
    char job[256];
    char host[64];
    char device_name[96];
    uint64_t device_total;
    uint64_t memory_limit;
    int64_t clock_offset_us;
    uint64_t created_us;
    /* updated while the process runs */
    uint64_t total;          /* events appended since the ring was last cleared */
    int64_t step;            /* current step */
    uint64_t n_streams;      /* entries of streams[] in use */
    uint64_t streams[RS_RING_MAX_STREAMS];
    uint64_t segments_overflow; /* segments that did not fit the table */
    uint64_t reserved_bytes; /* sum of the table's sizes plus the overflow's */
    uint64_t snapshot_time_us; /* time_us of the last complete .rsnap this rank wrote, 0 none */
    uint32_t closed;         /* 1: finalized cleanly (the file is then removed) */
    uint32_t pad;
    /* the allocator's totals at the last step boundary, and `total` then: events before the
     * ring's window are gone, these anchor the replay of the ones that remain */
    uint64_t step_total;
    uint64_t allocated_at_step;
    uint64_t allocated_peak_at_step;
    uint64_t reserved_peak_at_step;
    /* the allocator's settings in PYTORCH_CUDA_ALLOC_CONF's syntax (rs_alloc_conf_describe), so
     * that a recovered ring replays under them; "" = PyTorch's defaults, and in a ring written
     * before the field (the header's unused bytes are zero) */
    char alloc_conf[RS_RING_ALLOC_CONF_MAX];
    /* how the steps are numbered (a snapshot's time.steps_from): "" before anything numbered
     * them, and in a ring written before the field */
    char steps_from[RS_RING_STEPS_FROM_MAX];
    /* how the process ended, as far as it saw (format.h): zero while it runs, after a SIGKILL,
     * and in a ring written before the field */
    rs_end end;
} rs_ring_header;
_Static_assert(sizeof(rs_ring_header) <= RS_RING_HEADER_SIZE, "the ring header fits its 4 KiB");

/* The format's own fields of a new header (not the magic: a writer stores it last). */
static inline void rs_ring_header_init(rs_ring_header *h, uint64_t capacity, uint64_t max_segments)
{
    h->version = RS_RING_VERSION;
    h->endian = RS_RING_ENDIAN;
    h->header_size = RS_RING_HEADER_SIZE;
    h->event_size = sizeof(rs_ring_event);
    h->capacity = capacity;
    h->max_segments = max_segments;
    h->step = -1;
}

#endif
