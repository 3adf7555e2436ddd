/*
 * frame_memo.c — frame_memo.h: the process's table of the frames its threads have classified.
 *
 * Open addressing over a power-of-two table, grown by doubling at three quarters full. A slot
 * owns its key (the three strings and the two flags, one after another) and its classification
 * (name and label); a hit hands out copies, so that what the caller frees is always its own.
 * One lock: a lookup or an insertion holds it for a probe and the copies (about a microsecond),
 * against the 0.5 µs to 2 µs a classification takes outside it.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "addr_hash.h"
#include "frame_memo.h"

#define FIRST_SLOTS 1024
#define MAX_PROBES 16

typedef struct memo_slot {
    uint64_t hash;
    char *key; /* NULL: an empty slot */
    size_t key_len;
    rs_site_rules_frame info;
} memo_slot;

typedef struct frame_memo {
    unsigned gen;
    size_t n, mask;
    memo_slot *slot;
} frame_memo;

static frame_memo memo_table;
static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;

/* The copies a slot made (its own: not site_rules.c's to free, which calls this file). */
static void info_free(rs_site_rules_frame *info)
{
    free(info->name);
    free(info->label);
}

static void memo_clear(frame_memo *m)
{
    for (size_t i = 0; m->slot && i <= m->mask; i++) {
        if (!m->slot[i].key) continue;
        free(m->slot[i].key);
        info_free(&m->slot[i].info);
        m->slot[i].key = NULL;
    }
    m->n = 0;
}

/* n bytes (a module's path), eight at a time, into h. Not SipHash (addr_hash.h), which took as
 * long as the classifications it saved: the function's and file's names come hashed by the
 * decoder (rs_snap_frame_text_hash), the seed is the process's, and a file whose names collide
 * only has its frames go unremembered, as a lookup or an insertion gives up after MAX_PROBES
 * slots. */
static uint64_t text_hash(uint64_t h, const char *p, size_t n)
{
    const uint64_t k = 0x9e3779b97f4a7c15ull;
    h = (h ^ n) * k;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * k;
        h ^= h >> 32;
    }
    uint64_t w = 0;
    for (; i < n; i++) w = w << 8 | (unsigned char)p[i];
    h = (h ^ w) * k;
    return h ^ h >> 29;
}

void rs_frame_memo_key_init(rs_frame_memo_key *k, const char *function, const char *file,
                            const char *module, int no_module, int line_known, uint64_t names_hash)
{
    k->s[0] = function ? function : "";
    k->s[1] = file ? file : "";
    k->s[2] = module ? module : "";
    k->no_module = no_module != 0;
    k->line_known = line_known != 0;
    uint64_t h = rs_addr_hash_seed() ^ ((uint64_t)k->no_module | (uint64_t)k->line_known << 1);
    for (int i = 0; i < 3; i++) k->len[i] = strlen(k->s[i]);
    h = text_hash(h ^ names_hash, k->s[2], k->len[2]);
    k->hash = rs_addr_hash(h, rs_addr_hash_seed());
}

static size_t key_bytes(const rs_frame_memo_key *k)
{
    return k->len[0] + k->len[1] + k->len[2] + 5;
}

static int key_is(const memo_slot *s, const rs_frame_memo_key *k)
{
    if (s->hash != k->hash || s->key_len != key_bytes(k)) return 0;
    const char *p = s->key;
    for (int i = 0; i < 3; i++) {
        if (memcmp(p, k->s[i], k->len[i] + 1) != 0) return 0;
        p += k->len[i] + 1;
    }
    return (uint8_t)p[0] == k->no_module && (uint8_t)p[1] == k->line_known;
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static int memo_get(frame_memo *m, unsigned gen, const rs_frame_memo_key *k, rs_site_rules_frame *out)
{
    if (m->gen != gen || m->n == 0) return 0;
    size_t i = k->hash & m->mask;
    for (int probe = 0; probe < MAX_PROBES && m->slot[i].key; probe++, i = (i + 1) & m->mask) {
        const memo_slot *s = &m->slot[i];
        if (!key_is(s, k)) continue;
        *out = s->info;
        out->name = dup_or_null(s->info.name);
        out->label = dup_or_null(s->info.label);
        if ((s->info.name && !out->name) || (s->info.label && !out->label)) {
            info_free(out); /* no memory for the copies: the caller classifies, as without */
            return 0;
        }
        return 1;
    }
    return 0;
}

int rs_frame_memo_get(unsigned gen, const rs_frame_memo_key *k, rs_site_rules_frame *out)
{
    pthread_mutex_lock(&memo_lock);
    int hit = memo_get(&memo_table, gen, k, out);
    pthread_mutex_unlock(&memo_lock);
    return hit;
}

/* Twice the slots, the keys moved over; -1 without memory for them (the table stays). */
static int memo_grow(frame_memo *m)
{
    size_t cap = m->slot ? 2 * (m->mask + 1) : FIRST_SLOTS;
    memo_slot *slot = calloc(cap, sizeof *slot);
    if (!slot) return -1;
    for (size_t i = 0; m->slot && i <= m->mask; i++) {
        if (!m->slot[i].key) continue;
        size_t j = m->slot[i].hash & (cap - 1);
        while (slot[j].key) j = (j + 1) & (cap - 1);
        slot[j] = m->slot[i];
    }
    free(m->slot);
    m->slot = slot;
    m->mask = cap - 1;
    return 0;
}

static void memo_put(frame_memo *m, unsigned gen, const rs_frame_memo_key *k,
                     const rs_site_rules_frame *info)
{
    if (m->gen != gen) {
        memo_clear(m);
        m->gen = gen;
    }
    if (m->n >= RS_FRAME_MEMO_MAX) return;
    if ((!m->slot || 4 * (m->n + 1) > 3 * (m->mask + 1)) && memo_grow(m) != 0) return;
    size_t i = k->hash & m->mask;
    for (int probe = 0; m->slot[i].key; probe++, i = (i + 1) & m->mask)
        if (probe == MAX_PROBES || key_is(&m->slot[i], k)) return; /* crowded here, or there */
    size_t len = key_bytes(k);
    char *key = malloc(len), *p = key;
    if (!key) return;
    for (int j = 0; j < 3; j++) {
        memcpy(p, k->s[j], k->len[j] + 1);
        p += k->len[j] + 1;
    }
    p[0] = (char)k->no_module;
    p[1] = (char)k->line_known;
    memo_slot s = {k->hash, key, len, *info};
    s.info.name = dup_or_null(info->name);
    s.info.label = dup_or_null(info->label);
    if ((info->name && !s.info.name) || (info->label && !s.info.label)) {
        free(key);
        info_free(&s.info);
        return;
    }
    m->slot[i] = s;
    m->n++;
}

void rs_frame_memo_put(unsigned gen, const rs_frame_memo_key *k, const rs_site_rules_frame *info)
{
    pthread_mutex_lock(&memo_lock);
    memo_put(&memo_table, gen, k, info);
    pthread_mutex_unlock(&memo_lock);
}

size_t rs_frame_memo_count(void)
{
    pthread_mutex_lock(&memo_lock);
    size_t n = memo_table.n;
    pthread_mutex_unlock(&memo_lock);
    return n;
}
