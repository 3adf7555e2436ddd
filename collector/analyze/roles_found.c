/*
 * roles_found.c — owns finding the roles of a job's ranks from the communicators they belonged
 * to (roles_found.h): the members of each communicator put together from every rank's list, the
 * families of communicators that partition the ranks, the replica family, the labels, and the
 * sentence that says what the grouping was based on, or why there is none.
 */
#include "roles_found.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"

/* One rank's view of one communicator. */
typedef struct entry {
    const rs_snap_comm *c;
    int32_t rank; /* in the world */
} entry;

/* A communicator put together from its members' views. */
typedef struct comm {
    uint64_t id;
    const rs_snap_comm *first; /* kind and name */
    int32_t size;
    uint64_t allreduces;       /* the most any member made */
    int32_t *members;          /* [size]: world ranks by their index in it */
    int32_t low;               /* its lowest world rank */
    int family;                /* -1: in none */
} comm;

typedef struct family {
    const rs_snap_comm *first;
    int32_t size;
    int32_t covered;
    size_t n_comms;
    uint64_t allreduces;  /* over its communicators */
    unsigned char *taken; /* [world] */
} family;

/* Why no family was taken for the replicas. */
enum { RS_REP_OK, RS_REP_INCOMPLETE, RS_REP_UNDECIDED };

ranksnap_status rs_rank_comms_of(const rs_snap *s, rs_rank_comms *out)
{
    memset(out, 0, sizeof *out);
    out->rank = s->rank;
    out->left_out = s->comms_left_out;
    if (!s->n_comms) return RANKSNAP_OK;
    out->v = malloc(s->n_comms * sizeof *out->v);
    if (!out->v) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for %zu communicators", s->n_comms);
    memcpy(out->v, s->comms, s->n_comms * sizeof *out->v);
    out->n = s->n_comms;
    return RANKSNAP_OK;
}

void rs_rank_comms_free(rs_rank_comms *c)
{
    if (!c) return;
    free(c->v);
    memset(c, 0, sizeof *c);
}

static void add(char *dst, size_t dn, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Appends to dst[dn], cut where it does not fit. */
static void add(char *dst, size_t dn, const char *fmt, ...)
{
    size_t used = strlen(dst);
    if (used + 1 >= dn) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst + used, dn - used, fmt, ap);
    va_end(ap);
}

static int by_id(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->c->id != y->c->id) return x->c->id < y->c->id ? -1 : 1;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* size, then kind and name, then whether it all-reduced, then the lowest member: families are
 * made in this order, of communicators of one shape */
static int by_shape(const void *a, const void *b)
{
    const comm *x = a, *y = b;
    if (x->size != y->size) return x->size < y->size ? -1 : 1;
    if ((x->allreduces > 0) != (y->allreduces > 0)) return x->allreduces > 0 ? -1 : 1;
    int k = strncmp(x->first->kind, y->first->kind, sizeof x->first->kind);
    if (!k) k = strncmp(x->first->name, y->first->name, sizeof x->first->name);
    if (k) return k;
    return x->low < y->low ? -1 : x->low > y->low;
}

static int same_members(const comm *a, const comm *b, int world, unsigned char *scratch)
{
    if (a->size != b->size) return 0;
    memset(scratch, 0, (size_t)world);
    for (int32_t i = 0; i < a->size; i++) scratch[a->members[i]] = 1;
    for (int32_t i = 0; i < b->size; i++)
        if (!scratch[b->members[i]]) return 0;
    return 1;
}

/* Puts each id's entries together; a communicator whose members disagree or are not all known
 * is left out (members NULL). */
static size_t assemble(const entry *e, size_t n_e, comm *out)
{
    size_t n = 0;
    for (size_t i = 0; i < n_e;) {
        size_t j = i;
        while (j < n_e && e[j].c->id == e[i].c->id) j++;
        comm *c = &out[n++];
        memset(c, 0, sizeof *c);
        c->id = e[i].c->id;
        c->first = e[i].c;
        c->size = e[i].c->size;
        c->family = -1;
        c->members = malloc((size_t)c->size * sizeof *c->members);
        int ok = c->members != NULL;
        for (int32_t k = 0; ok && k < c->size; k++) c->members[k] = -1;
        for (size_t k = i; ok && k < j; k++) {
            const rs_snap_comm *v = e[k].c;
            if (v->size != c->size || v->rank < 0 || v->rank >= c->size ||
                (c->members[v->rank] >= 0 && c->members[v->rank] != e[k].rank)) {
                ok = 0;
                break;
            }
            c->members[v->rank] = e[k].rank;
            if (v->allreduces > c->allreduces) c->allreduces = v->allreduces;
            if (!c->first->name[0] && v->name[0]) c->first = v;
        }
        c->low = INT32_MAX;
        for (int32_t k = 0; ok && k < c->size; k++) {
            if (c->members[k] < 0) ok = 0;
            else if (c->members[k] < c->low) c->low = c->members[k];
        }
        if (!ok) {
            free(c->members);
            c->members = NULL;
        }
        i = j;
    }
    return n;
}

/* The index in family f's communicator that holds world rank r; -1: none. */
static int index_in(const comm *cs, size_t n, int f, int32_t r)
{
    for (size_t i = 0; i < n; i++) {
        if (cs[i].family != f) continue;
        for (int32_t k = 0; k < cs[i].size; k++)
            if (cs[i].members[k] == r) return k;
    }
    return -1;
}

static void label_ranks(char *dst, size_t dn, const comm *c, int world, unsigned char *scratch)
{
    memset(scratch, 0, (size_t)world);
    int32_t hi = c->low;
    for (int32_t k = 0; k < c->size; k++) {
        scratch[c->members[k]] = 1;
        if (c->members[k] > hi) hi = c->members[k];
    }
    size_t used = strlen(dst);
    if (hi - c->low + 1 == c->size) {
        snprintf(dst + used, dn - used, " (ranks %d-%d)", (int)c->low, (int)hi);
        return;
    }
    const char *sep = " (ranks ";
    for (int32_t r = c->low; r <= hi && used + 16 < dn; r++) {
        if (!scratch[r]) continue;
        int k = snprintf(dst + used, dn - used, "%s%d", sep, (int)r);
        if (k > 0) used += (size_t)k;
        sep = ",";
    }
    snprintf(dst + used, dn - used, "%s)", used + 16 < dn ? "" : ",...");
}

static const char *kind_source(const char *kind)
{
    if (!strncmp(kind, "mpi", 8)) return "the job's MPI communicators";
    if (!strncmp(kind, "nccl", 8)) return "the job's NCCL communicators";
    if (!strncmp(kind, "torch", 8)) return "the job's torch DeviceMesh";
    return "the job's communicators";
}

/* All-reduces per communicator: a family of many small groups does not outweigh one of a few
 * large groups by its number. */
static double per_comm(const family *f)
{
    return f->n_comms ? (double)f->allreduces / (double)f->n_comms : 0.0;
}

/* The replica family (roles_found.h), or -1 and *why. An incomplete family counts against the
 * others: where the replicas' communicators are not all known, another family is not taken for
 * them. */
static int replica_family(const family *fs, int n_f, int world, int *why)
{
    int best = -1, ties = 0;
    *why = RS_REP_OK;
    for (int f = 0; f < n_f; f++)
        if (rs_roles_is_replicas(fs[f].first->name)) {
            if (fs[f].covered == world) return f;
            *why = RS_REP_INCOMPLETE;
            return -1;
        }
    for (int f = 0; f < n_f; f++) {
        if (best < 0 || per_comm(&fs[f]) > per_comm(&fs[best])) {
            best = f;
            ties = 0;
        } else if (per_comm(&fs[f]) == per_comm(&fs[best])) {
            ties++;
        }
    }
    if (best < 0 || fs[best].covered != world) {
        *why = RS_REP_INCOMPLETE;
        return -1;
    }
    if ((fs[best].allreduces > 0 && !ties) || n_f == 1) return best;
    *why = RS_REP_UNDECIDED;
    return -1;
}

/* "4 communicators of 4 ranks named pp (12 all-reduces each)"; the count left out for
 * communicators whose all-reduces are not counted (a DeviceMesh's). */
static void describe(char *dst, size_t dn, const family *f)
{
    add(dst, dn, "%zu communicator%s of %d rank%s", f->n_comms, f->n_comms == 1 ? "" : "s",
        (int)f->size, f->size == 1 ? "" : "s");
    if (f->first->name[0]) add(dst, dn, " named %.16s", f->first->name);
    if (strncmp(f->first->kind, "torch", 8))
        add(dst, dn, " (%.0f all-reduce%s each)", per_comm(f), per_comm(f) == 1.0 ? "" : "s");
}

/* The most communicators a rank's file counted and did not list, and the fewest (*least). */
static uint64_t most_left_out(const rs_rank_comms *ranks, size_t n, uint64_t *least)
{
    uint64_t hi = 0, lo = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        if (ranks[i].left_out > hi) hi = ranks[i].left_out;
        if (ranks[i].left_out < lo) lo = ranks[i].left_out;
    }
    if (least) *least = lo;
    return hi;
}

/* "; left out: the communicators not alive while the range recorded (6 on each rank)" */
static void describe_left_out(char *dst, size_t dn, const rs_rank_comms *ranks, size_t n)
{
    uint64_t lo = 0, hi = most_left_out(ranks, n, &lo);
    if (!hi) return;
    add(dst, dn, "; left out: the communicators not alive while the range recorded (%s%llu %s)",
        lo == hi ? "" : "up to ", (unsigned long long)hi, lo == hi ? "on each rank" : "a rank");
}

static void describe_found(char *dst, size_t dn, const family *fs, int n_f, int rep, int world)
{
    if (rs_roles_is_replicas(fs[rep].first->name))
        add(dst, dn, "the replicas by their name: ");
    else if (n_f == 1)
        add(dst, dn, "the replicas, the only communicators that divide the ranks: ");
    else
        add(dst, dn, "the replicas, the communicators with the most all-reduces: ");
    describe(dst, dn, &fs[rep]);
    const char *sep = "; beside them ";
    for (int f = 0; f < n_f; f++) {
        if (f == rep || fs[f].covered != world) continue;
        add(dst, dn, "%s", sep);
        describe(dst, dn, &fs[f]);
        sep = ", ";
    }
}

static void describe_none(char *dst, size_t dn, const family *fs, int n_f, int world, int why)
{
    if (why == RS_REP_INCOMPLETE) {
        add(dst, dn, "the communicators alive while the range recorded do not hold every rank once "
                     "(a rank's file is missing or says nothing of them, or they join some ranks only)");
        return;
    }
    int k = 0;
    for (int f = 0; f < n_f; f++) k += fs[f].covered == world;
    add(dst, dn, "%d kinds of communicators divide the ranks (", k);
    const char *sep = "";
    for (int f = 0; f < n_f; f++) {
        if (fs[f].covered != world) continue;
        add(dst, dn, "%s", sep);
        describe(dst, dn, &fs[f]);
        sep = "; ";
    }
    add(dst, dn, ") and none made more all-reduces than the others: which holds the replicas is "
                 "not known");
}

static ranksnap_status make_roles(comm *cs, size_t n_c, const family *fs, int n_f, int rep, int world,
                                  unsigned char *scratch, rs_roles *out)
{
    size_t n_roles = (size_t)(world / fs[rep].size);
    out->world_size = world;
    out->role_of = malloc((size_t)world * sizeof *out->role_of);
    out->replica_of = malloc((size_t)world * sizeof *out->replica_of);
    out->labels = calloc(n_roles, sizeof *out->labels);
    out->keys = calloc(n_roles, sizeof *out->keys);
    if (!out->role_of || !out->replica_of || !out->labels || !out->keys)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for %zu roles", n_roles);
    out->n_roles = n_roles;
    snprintf(out->source, sizeof out->source, "%s", kind_source(fs[rep].first->kind));
    int named = 0, others = 0, other = -1;
    for (int f = 0; f < n_f; f++) {
        if (f == rep || fs[f].covered != world) continue;
        others++;
        other = f;
        if (fs[f].first->name[0]) named++;
    }
    /* unnamed, with more than one other family (or none): "group K" is the K-th by lowest rank */
    out->keys_by_order = !named && others != 1;
    /* the replica family's communicators are in order of their lowest rank (by_shape) */
    size_t role = 0;
    for (size_t i = 0; i < n_c; i++) {
        const comm *c = &cs[i];
        if (c->family != rep) continue;
        for (int32_t k = 0; k < c->size; k++) {
            out->role_of[c->members[k]] = (int32_t)role;
            out->replica_of[c->members[k]] = k;
        }
        char *l = out->labels[role];
        size_t ln = sizeof out->labels[role], used = 0;
        for (int f = 0; named && f < n_f; f++) {
            if (f == rep || fs[f].covered != world || !fs[f].first->name[0]) continue;
            int k = snprintf(l + used, ln - used, "%s%s=%d", used ? "," : "", fs[f].first->name,
                             index_in(cs, n_c, f, c->low));
            if (k > 0 && (size_t)k < ln - used) used += (size_t)k;
        }
        if (!named) {
            int k = others == 1 ? index_in(cs, n_c, other, c->low) : (int)role;
            snprintf(l, ln, "group %d", k);
            memcpy(out->keys[role], l, ln);
            label_ranks(l, ln, c, world, scratch);
        } else {
            memcpy(out->keys[role], l, ln);
        }
        role++;
    }
    return RANKSNAP_OK;
}

/* Each communicator into the first family of its shape that it does not overlap; the families
 * grow as needed (a job has a handful of dimensions, several meshes a few more). */
static ranksnap_status make_families(comm *cs, size_t n_c, int world, family **fs_out, int *n_out)
{
    family *fs = NULL;
    int n_f = 0, cap = 0;
    for (size_t i = 0; i < n_c; i++) {
        comm *c = &cs[i];
        int f = 0;
        for (; f < n_f; f++) {
            if (fs[f].size != c->size || (fs[f].allreduces > 0) != (c->allreduces > 0) ||
                strncmp(fs[f].first->kind, c->first->kind, 8) ||
                strncmp(fs[f].first->name, c->first->name, 16))
                continue;
            int32_t k = 0;
            while (k < c->size && !fs[f].taken[c->members[k]]) k++;
            if (k == c->size) break;
        }
        if (f == n_f) {
            if (n_f == cap) {
                int grown = cap ? 2 * cap : 8;
                family *more = realloc(fs, (size_t)grown * sizeof *fs);
                if (!more) break;
                fs = more;
                cap = grown;
            }
            fs[f] = (family){c->first, c->size, 0, 0, 0, calloc((size_t)world, 1)};
            if (!fs[f].taken) break;
            n_f++;
        }
        for (int32_t k = 0; k < c->size; k++) fs[f].taken[c->members[k]] = 1;
        fs[f].covered += c->size;
        fs[f].allreduces += c->allreduces;
        fs[f].n_comms++;
        c->family = f;
    }
    *fs_out = fs;
    *n_out = n_f;
    int done = 1;
    for (size_t i = 0; i < n_c; i++) done &= cs[i].family >= 0;
    return done ? RANKSNAP_OK : rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for a family of communicators");
}

ranksnap_status rs_roles_found(const rs_rank_comms *ranks, size_t n, int world, rs_roles *out)
{
    if (!out || (!ranks && n)) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_roles_found: NULL");
    memset(out, 0, sizeof *out);
    /* two unnamed dimensions need at least 2 x 2 ranks; named ones say what they are at any size */
    if (world < 2) return RANKSNAP_OK;
    size_t n_e = 0;
    for (size_t i = 0; i < n; i++) n_e += ranks[i].n;
    entry *e = malloc((n_e ? n_e : 1) * sizeof *e);
    comm *cs = malloc((n_e ? n_e : 1) * sizeof *cs);
    unsigned char *scratch = malloc((size_t)world);
    family *fs = NULL;
    int n_f = 0;
    size_t n_c = 0;
    ranksnap_status st = RANKSNAP_OK;
    if (!e || !cs || !scratch) {
        st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for %zu communicators", n_e);
        goto done;
    }
    n_e = 0;
    for (size_t i = 0; i < n; i++) {
        if (ranks[i].rank < 0 || ranks[i].rank >= world) continue;
        for (size_t k = 0; k < ranks[i].n; k++) {
            const rs_snap_comm *c = &ranks[i].v[k];
            /* the whole world and one rank alone are not a dimension, unless a framework named
             * them one (a mesh of pp=2 x dp=1: the dp groups are single ranks, pp the world) */
            int named = c->name[0] && c->size >= 1 && c->size <= world;
            if ((named || (c->size > 1 && c->size < world && world >= 4)) && world % c->size == 0)
                e[n_e++] = (entry){c, ranks[i].rank};
        }
    }
    qsort(e, n_e, sizeof *e, by_id);
    n_c = assemble(e, n_e, cs);
    /* incomplete ones out, and a communicator with another's members (a dup, an NCCL
     * communicator made over an MPI one) counted once */
    size_t kept = 0;
    for (size_t i = 0; i < n_c; i++) {
        int dup = !cs[i].members;
        for (size_t j = 0; !dup && j < kept; j++) {
            if (!same_members(&cs[j], &cs[i], world, scratch)) continue;
            dup = 1;
            if (cs[i].allreduces > cs[j].allreduces) cs[j].allreduces = cs[i].allreduces;
            if (!cs[j].first->name[0] && cs[i].first->name[0]) cs[j].first = cs[i].first;
        }
        if (dup) {
            free(cs[i].members);
            continue;
        }
        cs[kept++] = cs[i];
    }
    n_c = kept;
    qsort(cs, n_c, sizeof *cs, by_shape);
    if ((st = make_families(cs, n_c, world, &fs, &n_f)) != RANKSNAP_OK) goto done;
    int why = RS_REP_OK;
    int rep = replica_family(fs, n_f, world, &why);
    if (rep >= 0) {
        st = make_roles(cs, n_c, fs, n_f, rep, world, scratch, out);
        describe_found(out->basis, sizeof out->basis, fs, n_f, rep, world);
    } else if (n_e) {
        describe_none(out->basis, sizeof out->basis, fs, n_f, world, why);
    } else if (most_left_out(ranks, n, NULL)) {
        /* with nothing at all to go by nothing is said: a plain data-parallel job has no roles
         * to find */
        add(out->basis, sizeof out->basis, "no communicator alive while the range recorded "
                                           "divides the ranks");
    }
    describe_left_out(out->basis, sizeof out->basis, ranks, n);
    if (st != RANKSNAP_OK) rs_roles_free(out);
done:
    for (int f = 0; f < n_f; f++) free(fs[f].taken);
    free(fs);
    for (size_t i = 0; i < n_c; i++) free(cs[i].members);
    free(cs);
    free(e);
    free(scratch);
    return st;
}

void rs_roles_found_apply(rs_compare_config *cfg, const rs_rank_comms *ranks, size_t n, int world,
                          rs_roles *found)
{
    /* without memory to find them the ranks are compared with all ranks, as with none found */
    if (rs_roles_found(ranks, n, world, found) != RANKSNAP_OK) return;
    if (found->n_roles) cfg->roles = found;
    else cfg->ungrouped = found->basis;
}
