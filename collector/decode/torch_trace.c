/*
 * torch_trace.c — torch_trace.h: PyTorch's names, and a trace entry read from its bytes with
 * what the reader learnt of the memo (which keys hold which names) kept between entries.
 */
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "pickle_ops.h"
#include "torch_trace.h"

static const char *const field_names[F_COUNT_] = {
    "", "action", "addr", "size", "stream", "time_us", "frames", "device_free", "name",
    "filename", "line", "address", "total_size", "allocated_size", "active_size",
    "requested_size", "segment_type", "blocks", "state", "device"};

int rs_torch_field(const char *p, size_t n)
{
    for (int f = 1; f < F_COUNT_; f++)
        if (n == strlen(field_names[f]) && memcmp(p, field_names[f], n) == 0) return f;
    return F_OTHER;
}

const char *rs_torch_field_name(int id)
{
    return id > 0 && id < F_COUNT_ ? field_names[id] : "";
}

int rs_torch_action(const char *p, size_t n)
{
    static const struct {
        const char *name;
        int action;
    } map[] = {
        {"alloc", RS_ACT_ALLOC},
        {"free_requested", RS_ACT_FREE_REQUESTED},
        {"free_completed", RS_ACT_FREE_COMPLETED},
        {"segment_alloc", RS_ACT_SEGMENT_ALLOC},
        {"segment_free", RS_ACT_SEGMENT_FREE},
        /* expandable segments map and unmap pages of a reserved range: reserved bytes move */
        {"segment_map", RS_ACT_SEGMENT_ALLOC},
        {"segment_unmap", RS_ACT_SEGMENT_FREE},
        {"oom", RS_ACT_OOM},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (n == strlen(map[i].name) && memcmp(p, map[i].name, n) == 0) return map[i].action;
    return -1;
}

/* Memo keys met as an entry's keys and as its action, with what they name: a handful of keys
 * serve a whole trace (a direct-mapped table; a collision costs a lookup in the memo). */
#define NAME_CACHE 64
#define NOT_A_STR (-2)

#define MAX_PAIRS 32

/* The keys of the entry read last, as bytes (a GET's opcode and key, little-endian, in the low
 * bytes) and what each names: PyTorch writes every entry's keys as the same GETs in the same
 * order, and a key whose bytes are the ones met at its place names what they named. */
typedef struct key_shape {
    uint64_t bytes; /* 0: none */
    uint8_t len;
    int8_t field;
} key_shape;

struct rs_torch_trace {
    uint64_t gen;                  /* rs_pickle_read_memo_gen when they were learnt */
    key_shape shape[MAX_PAIRS];
    uint64_t key_key[NAME_CACHE];  /* memo key + 1; 0: empty */
    int8_t key_field[NAME_CACHE];  /* F_*, or NOT_A_STR */
    uint64_t act_key[NAME_CACHE];
    int8_t act_code[NAME_CACHE];   /* RS_ACT_*, -1, or NOT_A_STR */
};

rs_torch_trace *rs_torch_trace_new(void)
{
    return calloc(1, sizeof(rs_torch_trace));
}

void rs_torch_trace_free(rs_torch_trace *t)
{
    free(t);
}

/* What the str memo key `key` holds names: F_* as a key (action 0), RS_ACT_* or -1 as an action
 * (1). NOT_A_STR when it holds no str (the machine's reader says what it is). */
static int learn(rs_torch_trace *t, rs_pickle_reader *r, uint64_t key, int action)
{
    const rs_pickle_value *v = rs_pickle_read_memo(r, key);
    int name = !v || v->kind != RS_PICKLE_STR ? NOT_A_STR
               : action                      ? rs_torch_action(v->v.str.p, v->v.str.n)
                                             : rs_torch_field(v->v.str.p, v->v.str.n);
    size_t slot = key & (NAME_CACHE - 1);
    if (action) {
        t->act_key[slot] = key + 1;
        t->act_code[slot] = (int8_t)name;
    } else {
        t->key_key[slot] = key + 1;
        t->key_field[slot] = (int8_t)name;
    }
    return name;
}

static inline int key_named(rs_torch_trace *t, rs_pickle_reader *r, uint64_t key)
{
    size_t slot = key & (NAME_CACHE - 1);
    return t->key_key[slot] == key + 1 ? t->key_field[slot] : learn(t, r, key, 0);
}

static inline int action_named(rs_torch_trace *t, rs_pickle_reader *r, uint64_t key)
{
    size_t slot = key & (NAME_CACHE - 1);
    return t->act_key[slot] == key + 1 ? t->act_code[slot] : learn(t, r, key, 1);
}

#define MAX_MEMO (2 * MAX_PAIRS + 2)

/* The str at b[p] (SHORT_BINUNICODE, BINUNICODE) and the MEMOIZE that may follow it, noted in
 * memo[*n_memo]: where they end; 0 when there is no str there. */
static inline size_t new_str(const unsigned char *b, size_t len, size_t p, rs_pickle_memo_new *memo,
                             size_t *n_memo, const char **text, size_t *tn)
{
    size_t n = rs_pk_str(b + p, len - p, text, tn);
    if (!n || p + n >= len || b[p + n] != 0x94) return n ? p + n : 0;
    memo[(*n_memo)++] = (rs_pickle_memo_new){NULL, p};
    return p + n + 1;
}

/* Bit f of `present`, `is_int`: field f is there; its value came from an int opcode. */
#define HAS(set, f) ((set) >> (f) & 1)

int rs_torch_trace_read(rs_torch_trace *t, rs_pickle_reader *r, size_t at, rs_torch_entry *e)
{
    size_t len, n, q, tn;
    const unsigned char *b = rs_pickle_read_input(r, &len);
    uint64_t gen = rs_pickle_read_memo_gen(r), key = 0, u;
    if (gen != t->gen) { /* a PUT gave a key another value: learnt again */
        memset(t->key_key, 0, sizeof t->key_key);
        memset(t->act_key, 0, sizeof t->act_key);
        memset(t->shape, 0, sizeof t->shape);
        t->gen = gen;
    }
    rs_pickle_memo_new memo[MAX_MEMO];
    size_t n_memo = 0, p = at + 1;
    const char *text;
    if (p < len && b[p] == 0x94) /* MEMOIZE: the dict, taken */
        memo[n_memo++] = (rs_pickle_memo_new){NULL, SIZE_MAX}, p++;
    if (p >= len || b[p] != 0x28) return 0;
    p++;
    /* the fields' values in registers: a value stored by a field's index was loaded back from
     * memory at the end (13% of this function) */
    uint32_t present = 0, is_int = 0;
    uint64_t addr = 0, size = 0, stream = 0, time_us = 0, device_free = 0;
    const rs_pickle_value *frames = NULL;
    int frames_ok = 1, action = -1; /* frames: a list, a tuple or None */
    for (size_t pairs = 0;; pairs++) {
        if (p >= len || pairs == MAX_PAIRS) return 0;
        if (b[p] == 0x75) break; /* SETITEMS */
        int f;
        key_shape *ks = &t->shape[pairs];
        uint64_t word = 0;
        if (len - p >= 8) memcpy(&word, b + p, 8);
        if (ks->bytes && (word & (~(uint64_t)0 >> (64 - 8 * ks->len))) == ks->bytes) {
            f = ks->field; /* the key at this place in the entry before */
            p += ks->len;
        } else if ((n = rs_pk_get(b + p, len - p, &key)) != 0) {
            if ((f = key_named(t, r, key)) == NOT_A_STR) return 0;
            if (len - p >= 8) {
                ks->bytes = word & (~(uint64_t)0 >> (64 - 8 * n));
                ks->len = (uint8_t)n;
                ks->field = (int8_t)f;
            }
            p += n;
        } else if ((q = new_str(b, len, p, memo, &n_memo, &text, &tn)) != 0) {
            f = rs_torch_field(text, tn);
            p = q;
        } else {
            return 0;
        }
        if (p >= len) return 0;
        const uint32_t bit = (uint32_t)1 << f;
        present |= bit;
        switch (f) {
        case F_ACTION:
            if ((n = rs_pk_get(b + p, len - p, &key)) != 0) {
                if ((action = action_named(t, r, key)) == NOT_A_STR) return 0;
                p += n;
            } else if ((q = new_str(b, len, p, memo, &n_memo, &text, &tn)) != 0) {
                action = rs_torch_action(text, tn);
                p = q;
            } else {
                return 0;
            }
            continue;
        case F_ADDR:
        case F_SIZE:
        case F_STREAM:
        case F_TIME_US:
        case F_DEVICE_FREE:
            if ((n = rs_pk_int(b + p, len - p, &u)) != 0) {
                if (f == F_ADDR) addr = u;
                if (f == F_SIZE) size = u;
                if (f == F_STREAM) stream = u;
                if (f == F_TIME_US) time_us = u;
                if (f == F_DEVICE_FREE) device_free = u;
                is_int |= bit;
                p += n;
                continue;
            }
            break;
        case F_FRAMES:
            if (b[p] == 0x5d) { /* EMPTY_LIST (MEMOIZE), then its GETs */
                size_t list_at = p++, list_memo = SIZE_MAX;
                if (p < len && b[p] == 0x94) list_memo = n_memo++, p++;
                if (!(frames = rs_pickle_read_gets(r, list_at, p, &p))) return 0;
                if (list_memo != SIZE_MAX) memo[list_memo] = (rs_pickle_memo_new){frames, 0};
                frames_ok = 1;
                continue;
            }
            break;
        default:
            break;
        }
        /* any other value: only its shape matters, and that the memo has what it GETs */
        is_int &= ~bit;
        if (f == F_FRAMES) frames_ok = 0, frames = NULL;
        if ((n = rs_pk_get(b + p, len - p, &key)) != 0) {
            const rs_pickle_value *got = rs_pickle_read_memo(r, key);
            if (!got) return 0; /* the machine says why */
            if (f == F_FRAMES && (got->kind == RS_PICKLE_LIST || got->kind == RS_PICKLE_TUPLE))
                frames_ok = 1, frames = got;
            frames_ok |= f == F_FRAMES && got->kind == RS_PICKLE_NONE;
            p += n;
        } else if ((n = rs_pk_int(b + p, len - p, &u)) != 0) {
            p += n; /* not one of the int fields, whose ints the switch took */
        } else if ((q = new_str(b, len, p, memo, &n_memo, &text, &tn)) != 0) {
            p = q;
        } else if (b[p] == 0x4e) { /* NONE */
            frames_ok |= f == F_FRAMES;
            p++;
        } else {
            return 0;
        }
    }
    /* what torch_decode.c's entry_of takes; anything else is left for it to say */
    if (!HAS(present, F_ACTION)) return 0;
    memset(e, 0, sizeof *e);
    e->action = action;
    if (action >= 0) {
        /* as val_u64 takes them: absent (0), or a non-negative int; the stream any int */
        const int where = action == RS_ACT_OOM ? F_DEVICE_FREE : F_ADDR;
        uint32_t need = (uint32_t)1 << where | 1u << F_SIZE | 1u << F_TIME_US | 1u << F_STREAM;
        if ((present & need) != (present & need & is_int) || (HAS(present, F_FRAMES) && !frames_ok))
            return 0;
        e->addr = HAS(present, where) ? where == F_ADDR ? addr : device_free : 0;
        e->size = HAS(present, F_SIZE) ? size : 0;
        e->time_us = HAS(present, F_TIME_US) ? time_us : 0;
        e->stream = HAS(present, F_STREAM) ? stream : 0;
        if ((int64_t)e->addr < 0 || (int64_t)e->size < 0 || (int64_t)e->time_us < 0) return 0;
        e->frames = HAS(present, F_FRAMES) ? frames : NULL;
    }
    return rs_pickle_read_done(r, at, p + 1, memo, n_memo) == 0;
}
