/*
 * torch_trace.c — torch_trace.h: PyTorch's names, and a trace entry read from its bytes with
 * what the reader learnt kept between entries: which memo keys hold which names, and the shapes
 * of the entries met last (whole entries compared a word at a time).
 */
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "pickle_ops.h"
#include "torch_trace.h"

static const char *const field_names[F_COUNT_] = {
    "", "action", "addr", "size", "stream", "time_us", "frames", "device_free", "name",
    "filename", "line", "address", "total_size", "allocated_size", "active_size",
    "requested_size", "segment_type", "blocks", "state", "device", "segment_pool_id"};

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

enum { FR_NONE, FR_LIST, FR_GET };

/* An entry read the general way (below) as a shape: its bytes, those that differ from entry to
 * entry masked off, in words compared at once, where the general way walks them opcode by
 * opcode (each opcode's place depending on the one before). An entry with these bytes is the
 * same run of opcodes: the same keys (GETs of the same memo keys, or the same new strs), the
 * same action, the same int opcodes at the same places, the frames list where it was. Its ints
 * are read where they are, its frames list (the last value) as the general way reads it. The
 * memo keys its GETs read hold strs, which keep their values (nothing but PUT, which changes the
 * memo's generation, gives a key another one). */
#define SHAPES 8
#define SHAPE_WORDS 16
#define SHAPE_MEMO 8

/* An int field's value where a shape has it: `n` bytes at `at` (0: the field is not there),
 * two's complement when `sign` (BININT, LONG1), else unsigned (BININT1, BININT2). */
typedef struct shape_int {
    uint8_t at, n, sign;
    uint8_t shift; /* 64 - 8 * n when sign and n < 8: the sign extended by two shifts */
    uint64_t mask; /* the n bytes of the 8 read */
} shape_int;

/* The int fields a shape reads, in the order of its ints[] (and of shape_read's values). */
static const int8_t shape_int_field[5] = {F_ADDR, F_SIZE, F_STREAM, F_TIME_US, F_DEVICE_FREE};

typedef struct entry_shape {
    uint16_t len;   /* its bytes from the EMPTY_DICT compared (then a frames list's items) */
    uint8_t words;  /* (len + 7) / 8 */
    uint8_t frames; /* FR_NONE: len ends at SETITEMS; FR_LIST: at the list's items, after which
                     * SETITEMS; FR_GET: at SETITEMS, the GET's key (at frames_at) read */
    uint16_t frames_at;
    shape_int ints[5]; /* shape_int_field's */
    uint32_t present;
    uint32_t is_int;   /* the fields of ints that are there (entry_vals.is_int) */
    int action;        /* NOT_A_STR: the memo key of the action's GET at action_at names it */
    uint16_t action_at;
    uint8_t n_memo;
    uint8_t next;   /* the shape of the entry after the last one of this shape */
    uint16_t memo_at[SHAPE_MEMO]; /* a MEMOIZE's str; MEMO_DICT, MEMO_LIST */
    uint64_t want[SHAPE_WORDS], mask[SHAPE_WORDS];
} entry_shape;

struct rs_torch_trace {
    uint64_t gen;                  /* rs_pickle_read_memo_gen when they were learnt */
    entry_shape shapes[SHAPES];
    uint8_t order[SHAPES];         /* shapes' indexes, the one met last first */
    uint8_t last;                  /* the shape of the entry read last (SHAPES: none) */
    uint64_t key_key[NAME_CACHE];  /* memo key + 1; 0: empty */
    int8_t key_field[NAME_CACHE];  /* F_*, or NOT_A_STR */
    uint64_t act_key[NAME_CACHE];
    int8_t act_code[NAME_CACHE];   /* RS_ACT_*, -1, or NOT_A_STR */
};

rs_torch_trace *rs_torch_trace_new(void)
{
    rs_torch_trace *t = calloc(1, sizeof *t);
    for (uint8_t i = 0; t && i < SHAPES; i++) t->order[i] = t->shapes[i].next = i;
    if (t) t->last = SHAPES;
    return t;
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

/* An entry's values as read, by either way below. */
typedef struct entry_vals {
    uint32_t present, is_int;
    uint64_t addr, size, stream, time_us, device_free;
    const rs_pickle_value *frames;
    int frames_ok, action; /* frames: a list, a tuple or None */
} entry_vals;

/* What torch_decode.c's entry_of takes, into *e: 1; 0 for anything it would refuse or read
 * otherwise (left for it to say). */
static inline int entry_of_vals(const entry_vals *x, rs_torch_entry *e)
{
    if (!HAS(x->present, F_ACTION)) return 0;
    memset(e, 0, sizeof *e);
    e->action = x->action;
    if (x->action < 0) return 1;
    /* as val_u64 takes them: absent (0), or a non-negative int; the stream any int */
    const int where = x->action == RS_ACT_OOM ? F_DEVICE_FREE : F_ADDR;
    uint32_t need = (uint32_t)1 << where | 1u << F_SIZE | 1u << F_TIME_US | 1u << F_STREAM;
    if ((x->present & need) != (x->present & need & x->is_int) ||
        (HAS(x->present, F_FRAMES) && !x->frames_ok))
        return 0;
    e->addr = HAS(x->present, where) ? where == F_ADDR ? x->addr : x->device_free : 0;
    e->size = HAS(x->present, F_SIZE) ? x->size : 0;
    e->time_us = HAS(x->present, F_TIME_US) ? x->time_us : 0;
    e->stream = HAS(x->present, F_STREAM) ? x->stream : 0;
    if ((int64_t)e->addr < 0 || (int64_t)e->size < 0 || (int64_t)e->time_us < 0) return 0;
    e->frames = HAS(x->present, F_FRAMES) ? x->frames : NULL;
    return 1;
}

/* Int field f's value. */
static inline void set_int(entry_vals *x, int f, uint64_t v)
{
    if (f == F_ADDR) x->addr = v;
    if (f == F_SIZE) x->size = v;
    if (f == F_STREAM) x->stream = v;
    if (f == F_TIME_US) x->time_us = v;
    if (f == F_DEVICE_FREE) x->device_free = v;
    x->is_int |= (uint32_t)1 << f;
}

/* ---- a whole entry by its shape ----------------------------------------------------------- */

/* What the general way below notes of an entry it read, from which a shape is made. */
typedef struct shape_notes {
    size_t at;
    int ok;                    /* 0: the entry makes no shape */
    uint8_t n_var;             /* the bytes that differ between entries of a shape: */
    uint16_t var_at[2 * MAX_PAIRS + 2], var_n[2 * MAX_PAIRS + 2]; /* ints, GETs' keys */
    shape_int ints[5];         /* the int fields' values (int_slot) */
    uint16_t action_at;        /* the action's GET (0: a new str) */
    uint8_t frames;            /* FR_* */
    uint16_t frames_at, items_at;
} shape_notes;

/* With `n` bytes from offset `off` of the entry differing from entry to entry. */
static void note_var(shape_notes *sn, size_t off, size_t n)
{
    if (sn->n_var == sizeof sn->var_at / sizeof sn->var_at[0] || off + n > UINT16_MAX) {
        sn->ok = 0;
        return;
    }
    sn->var_at[sn->n_var] = (uint16_t)off;
    sn->var_n[sn->n_var++] = (uint16_t)n;
}

/* The int opcode at b[p] (rs_pk_int's, n bytes), its value's bytes noted as differing. */
static void note_int(shape_notes *sn, const unsigned char *b, size_t p, size_t n)
{
    size_t head = b[p] == 0x8a ? 2 : 1;
    note_var(sn, p - sn->at + head, n - head);
}

/* Where shape_int keeps field f: addr, size, stream, time_us, device_free. */
static int int_slot(int f)
{
    int i = 0;
    while (i < 4 && shape_int_field[i] != f) i++;
    return i;
}

/* Int field f's opcode at b[p] (n bytes): where a shape reads its value. */
static void note_int_field(shape_notes *sn, const unsigned char *b, size_t p, size_t n, int f)
{
    size_t head = b[p] == 0x8a ? 2 : 1, off = p - sn->at + head;
    note_int(sn, b, p, n);
    if (off + 8 > 8 * SHAPE_WORDS) { /* its eight bytes read at once are within the words */
        sn->ok = 0;
        return;
    }
    const uint8_t bytes = (uint8_t)(n - head), sign = b[p] == 0x4a || b[p] == 0x8a;
    sn->ints[int_slot(f)] =
        (shape_int){(uint8_t)off, bytes, sign, (uint8_t)(sign && bytes < 8 ? 64 - 8 * bytes : 0),
                    bytes >= 8 ? ~(uint64_t)0 : ((uint64_t)1 << (8 * bytes)) - 1};
}

#define MEMO_DICT 0xffff
#define MEMO_LIST 0xfffe

/* The entry the general way read (sn, x, memo) kept as shape t->shapes[t->order[SHAPES - 1]],
 * which becomes the first tried. */
static void learn_shape(rs_torch_trace *t, const unsigned char *b, const shape_notes *sn,
                        const entry_vals *x, const rs_pickle_memo_new *memo, size_t n_memo,
                        size_t end)
{
    size_t len = sn->frames == FR_LIST ? sn->items_at : end - sn->at;
    if (!sn->ok || len > 8 * SHAPE_WORDS || n_memo > SHAPE_MEMO) {
        t->last = SHAPES;
        return;
    }
    uint8_t slot = t->order[SHAPES - 1];
    entry_shape *s = &t->shapes[slot];
    s->len = (uint16_t)len;
    s->words = (uint8_t)((len + 7) / 8);
    s->frames = sn->frames;
    s->frames_at = sn->frames_at;
    memcpy(s->ints, sn->ints, sizeof s->ints);
    s->present = x->present;
    s->is_int = 0;
    for (size_t i = 0; i < sizeof shape_int_field; i++)
        if (s->ints[i].at) s->is_int |= (uint32_t)1 << shape_int_field[i];
    s->action = sn->action_at ? NOT_A_STR : x->action;
    s->action_at = sn->action_at;
    s->n_memo = (uint8_t)n_memo;
    for (size_t i = 0; i < n_memo; i++)
        s->memo_at[i] = memo[i].value ? MEMO_LIST
                        : memo[i].at == SIZE_MAX ? MEMO_DICT
                                                 : (uint16_t)(memo[i].at - sn->at);
    unsigned char m[8 * SHAPE_WORDS];
    memset(m, 0xff, len);
    memset(m + len, 0, sizeof m - len);
    for (size_t i = 0; i < sn->n_var; i++) memset(m + sn->var_at[i], 0, sn->var_n[i]);
    for (size_t w = 0; w < s->words; w++) {
        uint64_t word, mask;
        memcpy(&word, b + sn->at + 8 * w, 8); /* the caller saw 8 * SHAPE_WORDS bytes there */
        memcpy(&mask, m + 8 * w, 8);
        s->want[w] = word & mask;
        s->mask[w] = mask;
    }
    memmove(t->order + 1, t->order, SHAPES - 1);
    t->order[0] = slot;
    for (int i = 0; i < SHAPES; i++) /* what followed the shape it replaces is not known */
        if (t->shapes[i].next == slot) t->shapes[i].next = (uint8_t)i;
    if (t->last < SHAPES && t->last != slot) t->shapes[t->last].next = slot;
    s->next = slot;
    t->last = slot;
}

/* 1 when the entry whose SETITEMS ends before `end` is done with: the next opcode starts the next
 * entry (EMPTY_DICT) or puts this one in its list (APPENDS, APPEND). Anything else may go on
 * filling the same dict (a second MARK ... SETITEMS, a SETITEM), which the machine reads. */
static int entry_closed(const unsigned char *b, size_t len, size_t end)
{
    return end < len && (b[end] == 0x7d || b[end] == 0x65 || b[end] == 0x61);
}

/* The entry at `at` read by a shape it has: 1 (e filled, the memo told); 0 when it has none of
 * them, or its frames list is laid out otherwise (the general way then reads it). */
static int shape_read(rs_torch_trace *t, rs_pickle_reader *r, const unsigned char *b, size_t len,
                      size_t at, rs_torch_entry *e)
{
    const unsigned char *q = b + at;
    /* the shape that followed the last entry's last time first: a trace cycles through a few
     * (an alloc's, its free_requested's, its free_completed's), which a most-recent-first
     * order would try last */
    const int guess = t->last < SHAPES ? t->shapes[t->last].next : -1;
    for (int k = -1; k < SHAPES; k++) {
        if (k >= 0 && t->order[k] == guess) continue;
        if (k < 0 && guess < 0) continue;
        const uint8_t slot = k < 0 ? (uint8_t)guess : t->order[k];
        const entry_shape *s = &t->shapes[slot];
        size_t w = 0;
        for (; w < s->words; w++) {
            uint64_t word;
            memcpy(&word, q + 8 * w, 8);
            if ((word & s->mask[w]) != s->want[w]) break;
        }
        if (!s->words || w < s->words) continue;
        entry_vals x;
        memset(&x, 0, sizeof x);
        x.present = s->present;
        x.action = s->action;
        x.frames_ok = 1;
        uint64_t k64;
        if (s->action == NOT_A_STR && (!rs_pk_get(q + s->action_at, len - at - s->action_at, &k64) ||
                                       (x.action = action_named(t, r, k64)) == NOT_A_STR))
            return 0;
        uint64_t v[5] = {0, 0, 0, 0, 0};
        for (size_t i = 0; i < 5; i++) {
            const shape_int *si = &s->ints[i];
            if (!si->at) continue;
            memcpy(&v[i], q + si->at, 8); /* little-endian, as rs_pk_int reads */
            v[i] &= si->mask;
            if (si->shift) v[i] = (uint64_t)((int64_t)(v[i] << si->shift) >> si->shift);
        }
        /* shape_int_field's order */
        x.addr = v[0], x.size = v[1], x.stream = v[2], x.time_us = v[3], x.device_free = v[4];
        x.is_int = s->is_int;
        size_t end = at + s->len;
        if (s->frames == FR_LIST) {
            x.frames = rs_pickle_read_gets(r, at + s->frames_at, at + s->len, &end);
            if (!x.frames || end >= len || b[end] != 0x75) return 0;
            end++;
        } else if (s->frames == FR_GET) {
            if (!rs_pk_get(q + s->frames_at, len - at - s->frames_at, &k64)) return 0;
            const rs_pickle_value *got = rs_pickle_read_memo(r, k64);
            if (!got) return 0;
            x.frames_ok = got->kind == RS_PICKLE_LIST || got->kind == RS_PICKLE_TUPLE ||
                          got->kind == RS_PICKLE_NONE;
            x.frames = got->kind == RS_PICKLE_NONE ? NULL : got;
        }
        if (!entry_closed(b, len, end) || !entry_of_vals(&x, e)) return 0;
        rs_pickle_memo_new memo[SHAPE_MEMO];
        for (size_t i = 0; i < s->n_memo; i++) {
            size_t off = s->memo_at[i];
            memo[i] = off == MEMO_LIST   ? (rs_pickle_memo_new){x.frames, 0}
                      : off == MEMO_DICT ? (rs_pickle_memo_new){NULL, SIZE_MAX}
                                         : (rs_pickle_memo_new){NULL, at + off};
        }
        if (rs_pickle_read_done(r, at, end, memo, s->n_memo) != 0) return 0;
        if (t->last < SHAPES) t->shapes[t->last].next = slot;
        t->last = slot;
        if (k > 0) { /* the shape met last is tried first */
            memmove(t->order + 1, t->order, (size_t)k);
            t->order[0] = slot;
        }
        return 1;
    }
    return 0;
}

/* ---- an entry opcode by opcode ------------------------------------------------------------ */

int rs_torch_trace_read(rs_torch_trace *t, rs_pickle_reader *r, size_t at, rs_torch_entry *e)
{
    size_t len, n, q, tn;
    const unsigned char *b = rs_pickle_read_input(r, &len);
    uint64_t gen = rs_pickle_read_memo_gen(r), key = 0, u;
    if (gen != t->gen) { /* a PUT gave a key another value: learnt again */
        memset(t->key_key, 0, sizeof t->key_key);
        memset(t->act_key, 0, sizeof t->act_key);
        for (uint8_t i = 0; i < SHAPES; i++) t->shapes[i].words = 0, t->shapes[i].next = i;
        t->last = SHAPES;
        t->gen = gen;
    }
    /* 8 * SHAPE_WORDS bytes there to compare: all but a trace's last entries */
    const int shapes = len - at >= 8 * SHAPE_WORDS;
    if (shapes && shape_read(t, r, b, len, at, e)) return 1;
    shape_notes sn;
    sn.at = at;
    sn.ok = shapes;
    sn.n_var = 0;
    sn.frames = FR_NONE;
    memset(sn.ints, 0, sizeof sn.ints);
    sn.action_at = 0;
    rs_pickle_memo_new memo[MAX_MEMO];
    size_t n_memo = 0, p = at + 1;
    const char *text;
    if (p < len && b[p] == 0x94) /* MEMOIZE: the dict, taken */
        memo[n_memo++] = (rs_pickle_memo_new){NULL, SIZE_MAX}, p++;
    if (p >= len || b[p] != 0x28) return 0;
    p++;
    /* the fields' values in registers: a value stored by a field's index was loaded back from
     * memory at the end (13% of this function) */
    entry_vals x;
    memset(&x, 0, sizeof x);
    x.frames_ok = 1;
    x.action = -1;
    for (size_t pairs = 0;; pairs++) {
        if (p >= len || pairs == MAX_PAIRS) return 0;
        if (b[p] == 0x75) break; /* SETITEMS */
        int f;
        if ((n = rs_pk_get(b + p, len - p, &key)) != 0) {
            if ((f = key_named(t, r, key)) == NOT_A_STR) return 0;
            p += n;
        } else if ((q = new_str(b, len, p, memo, &n_memo, &text, &tn)) != 0) {
            f = rs_torch_field(text, tn);
            p = q;
        } else {
            return 0;
        }
        if (p >= len) return 0;
        const uint32_t bit = (uint32_t)1 << f;
        /* a shape's frames list is its last value; a key it has twice makes none */
        sn.ok &= sn.frames != FR_LIST && (f == F_OTHER || !(x.present & bit));
        x.present |= bit;
        switch (f) {
        case F_ACTION:
            if ((n = rs_pk_get(b + p, len - p, &key)) != 0) {
                if ((x.action = action_named(t, r, key)) == NOT_A_STR) return 0;
                /* entries of a shape differ in their actions: the key read each time */
                if (p - at < 8 * SHAPE_WORDS) sn.action_at = (uint16_t)(p - at);
                note_var(&sn, p - at + 1, n - 1);
                p += n;
            } else if ((q = new_str(b, len, p, memo, &n_memo, &text, &tn)) != 0) {
                x.action = rs_torch_action(text, tn);
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
                set_int(&x, f, u);
                if (sn.ok) note_int_field(&sn, b, p, n, f);
                p += n;
                continue;
            }
            break;
        case F_FRAMES:
            if (b[p] == 0x5d) { /* EMPTY_LIST (MEMOIZE), then its GETs */
                size_t list_at = p++, list_memo = SIZE_MAX;
                if (p < len && b[p] == 0x94) list_memo = n_memo++, p++;
                sn.frames = FR_LIST;
                sn.frames_at = (uint16_t)(list_at - at < UINT16_MAX ? list_at - at : 0);
                sn.items_at = (uint16_t)(p - at < UINT16_MAX ? p - at : 0);
                if (!(x.frames = rs_pickle_read_gets(r, list_at, p, &p))) return 0;
                if (list_memo != SIZE_MAX) memo[list_memo] = (rs_pickle_memo_new){x.frames, 0};
                x.frames_ok = 1;
                continue;
            }
            break;
        default:
            break;
        }
        /* any other value: only its shape matters, and that the memo has what it GETs */
        x.is_int &= ~bit;
        if (f == F_FRAMES) x.frames_ok = 0, x.frames = NULL, sn.frames = FR_NONE;
        if ((n = rs_pk_get(b + p, len - p, &key)) != 0) {
            const rs_pickle_value *got = rs_pickle_read_memo(r, key);
            if (!got) return 0; /* the machine says why */
            if (f == F_FRAMES) {
                x.frames_ok = got->kind == RS_PICKLE_LIST || got->kind == RS_PICKLE_TUPLE ||
                              got->kind == RS_PICKLE_NONE;
                x.frames = got->kind == RS_PICKLE_NONE ? NULL : got;
                sn.frames = FR_GET;
                sn.frames_at = (uint16_t)(p - at < UINT16_MAX ? p - at : 0);
                note_var(&sn, p - at + 1, n - 1);
            } else if (got->kind != RS_PICKLE_STR && got->kind != RS_PICKLE_INT &&
                       got->kind != RS_PICKLE_NONE && got->kind != RS_PICKLE_BOOL) {
                sn.ok = 0; /* a container may be taken later: read from the memo each time */
            }
            p += n;
        } else if ((n = rs_pk_int(b + p, len - p, &u)) != 0) {
            note_int(&sn, b, p, n);
            p += n; /* not one of the int fields, whose ints the switch took */
        } else if ((q = new_str(b, len, p, memo, &n_memo, &text, &tn)) != 0) {
            p = q;
        } else if (b[p] == 0x4e) { /* NONE */
            x.frames_ok |= f == F_FRAMES;
            p++;
        } else {
            return 0;
        }
    }
    if (!entry_closed(b, len, p + 1) || !entry_of_vals(&x, e) ||
        rs_pickle_read_done(r, at, p + 1, memo, n_memo) != 0)
        return 0;
    learn_shape(t, b, &sn, &x, memo, n_memo, p + 1);
    return 1;
}
