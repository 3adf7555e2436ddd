/*
 * fake_share.h — one fake device shared by several processes: the table fake_cudart.c keeps in
 * the file FAKE_CUDA_SHARED names (each process's bytes on each device, its CUDA context
 * included) and fake_nvml.c reads back as NVML's list of processes. Without the variable each
 * process's fake devices are its own, as before.
 */
#ifndef RANKSNAP_FAKE_SHARE_H
#define RANKSNAP_FAKE_SHARE_H

#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define FAKE_SHARE_PROCESSES 16
#define FAKE_SHARE_DEVICES 8
/* What a process's CUDA context holds on a device it used, in the shared mode. */
#define FAKE_SHARE_CONTEXT ((uint64_t)64 << 20)

typedef struct fake_share {
    _Atomic uint32_t pid[FAKE_SHARE_PROCESSES]; /* 0: a free slot */
    /* a slot's bytes on each device, its context included; 0: the device is not used */
    _Atomic uint64_t bytes[FAKE_SHARE_PROCESSES][FAKE_SHARE_DEVICES];
} fake_share;

/* The table in FAKE_CUDA_SHARED's file, mapped once per process; NULL without the variable. */
static inline fake_share *fake_share_map(void)
{
    static fake_share *mapped;
    static int tried;
    if (tried) return mapped;
    tried = 1;
    const char *path = getenv("FAKE_CUDA_SHARED");
    if (!path || !*path) return NULL;
    int fd = open(path, O_RDWR | O_CREAT, 0600);
    if (fd < 0) return NULL;
    /* a new file reads as zeros: every slot free */
    if (ftruncate(fd, sizeof(fake_share)) == 0) {
        void *p = mmap(NULL, sizeof(fake_share), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) mapped = p;
    }
    close(fd);
    return mapped;
}

/* The device's used bytes: every process's together. */
static inline uint64_t fake_share_device_used(const fake_share *t, int dev)
{
    uint64_t sum = 0;
    for (int i = 0; i < FAKE_SHARE_PROCESSES; i++)
        if (atomic_load(&t->pid[i])) sum += atomic_load(&t->bytes[i][dev]);
    return sum;
}

#endif
