/*
 * roles.c — owns the grouping of ranks into roles: parsing a declared grouping ("pp=4,dp=4") and
 * the role of each rank (roles.h).
 */
#include "roles.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "errors.h"

/* The names people give the dimension whose ranks are replicas of one another (its index is not
 * part of the role): Megatron's and DeepSpeed's dp / data_parallel, torchtitan's dp_replicate,
 * dp_shard and their flattened dp_shard_cp / dp_cp, FSDP's and HSDP's own words. Compared without
 * case, '-' read as '_'. */
static const char *const rs_replica_names[] = {
    "dp", "data", "data_parallel", "dataparallel", "ddp", "fsdp", "hsdp", "zero", "replicate",
    "shard", "dp_replicate", "dp_shard", "dp_shard_cp", "dp_cp", "replica", "replicas"};

int rs_roles_is_replicas(const char *name)
{
    char low[16];
    size_t n = 0;
    for (; name[n] && n + 1 < sizeof low; n++)
        low[n] = name[n] == '-' ? '_' : (char)tolower((unsigned char)name[n]);
    low[n] = '\0';
    for (size_t i = 0; i < sizeof rs_replica_names / sizeof *rs_replica_names; i++)
        if (!strcmp(low, rs_replica_names[i])) return 1;
    return 0;
}

void rs_roles_free(rs_roles *r)
{
    if (!r) return;
    free(r->role_of);
    free(r->replica_of);
    free(r->labels);
    free(r->keys);
    memset(r, 0, sizeof *r);
}

int32_t rs_roles_of(const rs_roles *r, int32_t rank)
{
    if (!r || !r->role_of || rank < 0 || rank >= r->world_size) return -1;
    return r->role_of[rank];
}

int32_t rs_roles_replica_of(const rs_roles *r, int32_t rank)
{
    if (!r || !r->replica_of || rank < 0 || rank >= r->world_size) return -1;
    return r->replica_of[rank];
}

static ranksnap_status parse_dims(const char *spec, rs_roles *out)
{
    const char *p = spec;
    while (*p) {
        if (out->n_dims == RS_ROLES_MAX_DIMS)
            return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "groups '%s': more than %d dimensions",
                            spec, RS_ROLES_MAX_DIMS);
        size_t len = 0;
        while (isalnum((unsigned char)p[len]) || p[len] == '_' || p[len] == '-') len++;
        if (len == 0 || len >= sizeof out->names[0] || p[len] != '=')
            return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT,
                            "groups '%s': expected NAME=SIZE such as pp=4,dp=8", spec);
        memcpy(out->names[out->n_dims], p, len);
        out->names[out->n_dims][len] = '\0';
        p += len + 1;
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 1 << 20 || (*end && *end != ','))
            return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT,
                            "groups '%s': the size of %s must be a positive integer", spec,
                            out->names[out->n_dims]);
        for (int d = 0; d < out->n_dims; d++)
            if (!strcasecmp(out->names[d], out->names[out->n_dims]))
                return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "groups '%s': %s given twice",
                                spec, out->names[d]);
        out->sizes[out->n_dims++] = (int)v;
        p = *end ? end + 1 : end;
    }
    if (out->n_dims == 0)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "groups: empty");
    long long w = 1;
    for (int d = 0; d < out->n_dims; d++) {
        w *= out->sizes[d];
        if (w > 1 << 24)
            return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "groups '%s': too many ranks", spec);
    }
    out->world_size = (int)w;
    return RANKSNAP_OK;
}

ranksnap_status rs_roles_parse(const char *spec, const char *source, rs_roles *out)
{
    if (!spec || !out) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_roles_parse: NULL");
    memset(out, 0, sizeof *out);
    snprintf(out->source, sizeof out->source, "%s", source ? source : "");
    ranksnap_status st = parse_dims(spec, out);
    if (st != RANKSNAP_OK) return st;
    /* roles: the mixed-radix number of the non-data-parallel coordinates */
    size_t n_roles = 1;
    size_t said = 0;
    int replicas = 0;
    for (int d = 0; d < out->n_dims; d++) {
        if (!rs_roles_is_replicas(out->names[d])) {
            n_roles *= (size_t)out->sizes[d];
            continue;
        }
        int k = snprintf(out->replicas + said, sizeof out->replicas - said, "%s%s",
                         replicas++ ? "," : "", out->names[d]);
        if (k > 0 && (size_t)k < sizeof out->replicas - said) said += (size_t)k;
    }
    /* every rank its own role: nothing to compare, and a report that says "no rank diverges"
     * would be a verdict made of nothing */
    if (n_roles == (size_t)out->world_size) {
        if (!replicas) {
            /* the fix, in the user's own words: the innermost dimension named dp */
            char fix[256] = "";
            size_t f = 0;
            for (int d = 0; d + 1 < out->n_dims && f < sizeof fix; d++) {
                int k = snprintf(fix + f, sizeof fix - f, "%s=%d,", out->names[d], out->sizes[d]);
                if (k > 0) f += (size_t)k;
            }
            int last = out->sizes[out->n_dims - 1];
            if (out->n_dims == 1 && last % 2 == 0) /* one dimension: split it, same ranks */
                snprintf(fix, sizeof fix, "%s=%d,dp=2", out->names[0], last / 2);
            else if (f < sizeof fix)
                snprintf(fix + f, sizeof fix - f, "dp=%d", last);
            return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT,
                            "groups '%s': no dimension holds the replicas, so no rank has a peer "
                            "to be compared with; name the data-parallel dimension dp (or data, "
                            "fsdp, ddp, dp_replicate, dp_shard), e.g. %s",
                            spec, fix);
        }
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT,
                        "groups '%s': the replicas' dimension has size 1, so no rank has a peer to "
                        "be compared with; leave the grouping out to compare all ranks", spec);
    }
    out->role_of = malloc((size_t)out->world_size * sizeof *out->role_of);
    out->replica_of = malloc((size_t)out->world_size * sizeof *out->replica_of);
    out->labels = calloc(n_roles, sizeof *out->labels);
    out->keys = calloc(n_roles, sizeof *out->keys);
    if (!out->role_of || !out->replica_of || !out->labels || !out->keys) {
        rs_roles_free(out);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for %zu roles", n_roles);
    }
    out->n_roles = n_roles;
    for (int32_t rank = 0; rank < out->world_size; rank++) {
        int coord[RS_ROLES_MAX_DIMS];
        int32_t rest = rank;
        for (int d = out->n_dims - 1; d >= 0; d--) {
            coord[d] = rest % out->sizes[d];
            rest /= out->sizes[d];
        }
        int32_t role = 0, replica = 0;
        char label[64] = "";
        size_t used = 0;
        for (int d = 0; d < out->n_dims; d++) {
            if (rs_roles_is_replicas(out->names[d])) {
                replica = replica * out->sizes[d] + coord[d];
                continue;
            }
            role = role * out->sizes[d] + coord[d];
            int k = snprintf(label + used, sizeof label - used, "%s%s=%d", used ? "," : "",
                             out->names[d], coord[d]);
            if (k > 0 && (size_t)k < sizeof label - used) used += (size_t)k;
        }
        out->role_of[rank] = role;
        out->replica_of[rank] = replica;
        if (!out->labels[role][0]) {
            snprintf(out->labels[role], sizeof out->labels[role], "%s", used ? label : "all");
            memcpy(out->keys[role], out->labels[role], sizeof out->keys[role]);
        }
    }
    return RANKSNAP_OK;
}
