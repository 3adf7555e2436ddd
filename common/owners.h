/*
 * owners.h — which library device memory was taken through, from the file name of a module on
 * the allocation's stack (owners.c): the one table that the rank's driver interposers (the
 * outside labels) and the report's outside sites both read.
 */
#ifndef RANKSNAP_OWNERS_H
#define RANKSNAP_OWNERS_H

/* The owner label of the module at `path` (a path or a base name): "nccl", "cublas", "cudnn" or
 * "torch", the names of docs/FORMAT.md's outside labels; NULL for any other module. */
const char *rs_owner_of_module(const char *path);

#endif
