/*
 * owners.c — the libraries that allocate device memory for their callers, by module name
 * (owners.h).
 */
#include <string.h>

#include "owners.h"

const char *rs_owner_of_module(const char *path)
{
    static const char *const owners[][2] = {{"libnccl", "nccl"},   {"libcublas", "cublas"},
                                            {"libcudnn", "cudnn"}, {"libtorch", "torch"},
                                            {"libc10", "torch"}};
    if (!path) return NULL;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    for (size_t k = 0; k < sizeof owners / sizeof owners[0]; k++)
        if (!strncmp(base, owners[k][0], strlen(owners[k][0]))) return owners[k][1];
    return NULL;
}
