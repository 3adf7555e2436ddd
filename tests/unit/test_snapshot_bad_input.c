/*
 * test_snapshot_bad_input.c — the reader rejects what it does not understand, with a message that
 * names the file and the problem, and never crashes, reads past its buffer or allocates what the
 * input cannot back. Damaged files are made from a valid one: truncated at every length, bit
 * flipped at every bit, corrupted at random (fixed seed), or unpacked, edited as msgpack objects
 * and packed again.
 */
#include <fcntl.h>
#include <stddef.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "snap_check.h"
#include "snapshot_fixture.h"

/* Decodes; returns 1 when the outcome is acceptable for damaged input: a format error with the
 * name in front, or a snapshot that keeps the model's promises. */
static int decode_is_safe(const void *buf, size_t len)
{
    rs_snap *s = NULL;
    ranksnap_status st = rs_rsnap_decode(buf, len, "damaged.rsnap", &s);
    int ok;
    if (st == RANKSNAP_OK)
        ok = s != NULL && rs_snap_check(s, "decoded") == RANKSNAP_OK;
    else
        ok = st == RANKSNAP_ERR_FORMAT && s == NULL &&
             strncmp(ranksnap_last_error(), "damaged.rsnap: ", 15) == 0;
    rs_snap_free(s);
    return ok;
}

static char *valid_snapshot(fixture *f, size_t *len)
{
    CHECK(fixture_init(f, 1) == 0);
    char *buf = fixture_encode(f, len);
    CHECK(buf != NULL);
    return buf;
}

TEST(every_truncation_of_a_valid_snapshot_is_a_format_error)
{
    fixture f;
    size_t len;
    char *buf = valid_snapshot(&f, &len);
    size_t bad = 0;
    for (size_t i = 0; buf && i < len; i++) {
        rs_snap *s = NULL;
        ranksnap_status st = rs_rsnap_decode(buf, i, "cut.rsnap", &s);
        char want[96];
        snprintf(want, sizeof want, "cut.rsnap: truncated: %zu bytes, the msgpack map ends", i);
        if (st != RANKSNAP_ERR_FORMAT || s != NULL ||
            (i > 0 && strstr(ranksnap_last_error(), want) == NULL)) {
            if (bad++ < 5) fprintf(stderr, "length %zu: %s\n", i, ranksnap_last_error());
        }
        rs_snap_free(s);
    }
    CHECK_EQ_U64(bad, 0);
    free(buf);
    fixture_free(&f);
}

TEST(every_single_bit_flip_decodes_or_fails_cleanly)
{
    fixture f;
    size_t len;
    char *buf = valid_snapshot(&f, &len);
    size_t bad = 0;
    for (size_t i = 0; buf && i < len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            buf[i] ^= (char)(1u << bit);
            if (!decode_is_safe(buf, len) && bad++ < 5)
                fprintf(stderr, "byte %zu bit %d: %s\n", i, bit, ranksnap_last_error());
            buf[i] ^= (char)(1u << bit);
        }
    }
    CHECK_EQ_U64(bad, 0);
    free(buf);
    fixture_free(&f);
}

TEST(random_corruption_decodes_or_fails_cleanly)
{
    fixture f;
    size_t len;
    char *buf = valid_snapshot(&f, &len);
    char *copy = malloc(len ? len : 1);
    uint64_t x = 0x2545f4914f6cdd1dull;
    size_t bad = 0;
    for (int iter = 0; buf && copy && iter < 20000; iter++) {
        memcpy(copy, buf, len);
        int n = 1 + (int)(x % 8);
        for (int k = 0; k < n; k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            copy[(x >> 8) % len] = (char)(x >> 56);
        }
        if (!decode_is_safe(copy, len) && bad++ < 5)
            fprintf(stderr, "iteration %d: %s\n", iter, ranksnap_last_error());
    }
    CHECK_EQ_U64(bad, 0);
    free(copy);
    free(buf);
    fixture_free(&f);
}

/* ---- edited snapshots ---------------------------------------------------------------------- */

typedef struct edit {
    fixture f;
    char *buf;
    size_t len;
    msgpack_unpacked u;
    msgpack_object *root;
    msgpack_sbuffer out;
    msgpack_object_kv *grown; /* a map made bigger by add_key */
} edit;

static void edit_begin(edit *e)
{
    memset(e, 0, sizeof *e);
    e->buf = valid_snapshot(&e->f, &e->len);
    msgpack_unpacked_init(&e->u);
    size_t off = 0;
    CHECK(e->buf && msgpack_unpack_next(&e->u, e->buf, e->len, &off) == MSGPACK_UNPACK_SUCCESS);
    e->root = &e->u.data;
    msgpack_sbuffer_init(&e->out);
}

static void edit_end(edit *e)
{
    msgpack_sbuffer_destroy(&e->out);
    msgpack_unpacked_destroy(&e->u);
    free(e->grown);
    free(e->buf);
    fixture_free(&e->f);
}

static msgpack_object *get(msgpack_object *map, const char *key)
{
    size_t n = strlen(key);
    if (!map || map->type != MSGPACK_OBJECT_MAP) return NULL;
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        msgpack_object *k = &map->via.map.ptr[i].key;
        if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == n &&
            memcmp(k->via.str.ptr, key, n) == 0)
            return &map->via.map.ptr[i].val;
    }
    return NULL;
}

static msgpack_object *at(msgpack_object *array, uint32_t i)
{
    if (!array || array->type != MSGPACK_OBJECT_ARRAY || i >= array->via.array.size) return NULL;
    return &array->via.array.ptr[i];
}

static void set_uint(msgpack_object *o, uint64_t v)
{
    CHECK(o != NULL);
    if (!o) return;
    o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
    o->via.u64 = v;
}

static void set_str(msgpack_object *o, const char *s)
{
    CHECK(o != NULL);
    if (!o) return;
    o->type = MSGPACK_OBJECT_STR;
    o->via.str.ptr = s;
    o->via.str.size = (uint32_t)strlen(s);
}

static void remove_key(msgpack_object *map, const char *key)
{
    msgpack_object *v = get(map, key);
    CHECK(v != NULL);
    if (!v) return;
    msgpack_object_kv *kv = (msgpack_object_kv *)((char *)v - offsetof(msgpack_object_kv, val));
    size_t i = (size_t)(kv - map->via.map.ptr);
    memmove(kv, kv + 1, (map->via.map.size - i - 1) * sizeof *kv);
    map->via.map.size--;
}

static void add_key(edit *e, msgpack_object *map, const char *key, msgpack_object val)
{
    uint32_t n = map->via.map.size;
    msgpack_object_kv *kv = malloc((n + 1) * sizeof *kv);
    CHECK(kv != NULL);
    if (!kv) return;
    memcpy(kv, map->via.map.ptr, n * sizeof *kv);
    set_str(&kv[n].key, key);
    kv[n].val = val;
    free(e->grown);
    e->grown = kv;
    map->via.map.ptr = kv;
    map->via.map.size = n + 1;
}

static ranksnap_status edit_decode(edit *e, rs_snap **s)
{
    msgpack_packer pk;
    msgpack_sbuffer_destroy(&e->out);
    msgpack_sbuffer_init(&e->out);
    msgpack_packer_init(&pk, &e->out, msgpack_sbuffer_write);
    CHECK(msgpack_pack_object(&pk, *e->root) == 0);
    return rs_rsnap_decode(e->out.data, e->out.size, "edited.rsnap", s);
}

/* The edited snapshot is rejected as malformed with exactly this message. */
static void expect_error(edit *e, const char *message)
{
    rs_snap *s = NULL;
    char want[512];
    snprintf(want, sizeof want, "edited.rsnap: %s", message);
    CHECK(edit_decode(e, &s) == RANKSNAP_ERR_FORMAT);
    CHECK(s == NULL);
    CHECK_STR_CONTAINS(ranksnap_last_error(), want);
    rs_snap_free(s);
}

TEST(unedited_snapshot_repacks_and_decodes)
{
    edit e;
    rs_snap *s = NULL;
    edit_begin(&e);
    CHECK(edit_decode(&e, &s) == RANKSNAP_OK);
    CHECK(s && rs_snap_check(s, "decoded") == RANKSNAP_OK);
    rs_snap_free(s);
    edit_end(&e);
}

TEST(foreign_format_string_is_rejected)
{
    edit e;
    edit_begin(&e);
    set_str(get(e.root, "format"), "x");
    expect_error(&e, "not a ranksnap snapshot (format is \"x\", expected \"ranksnap\")");
    remove_key(e.root, "format");
    expect_error(&e, "not a ranksnap snapshot (no 'format' field)");
    edit_end(&e);
}

TEST(newer_version_is_rejected_and_names_both_versions)
{
    edit e;
    edit_begin(&e);
    set_uint(get(e.root, "version"), 7);
    expect_error(&e, "version 7 is newer than this reader (1)");
    set_uint(get(e.root, "version"), 0);
    expect_error(&e, "version 0 is not a valid version");
    edit_end(&e);
}

TEST(unknown_keys_are_ignored)
{
    edit e;
    rs_snap *s = NULL;
    edit_begin(&e);
    msgpack_object extra = *get(e.root, "device");
    add_key(&e, e.root, "added_in_a_later_writer", extra);
    CHECK(edit_decode(&e, &s) == RANKSNAP_OK);
    CHECK(s != NULL);
    rs_snap_free(s);
    edit_end(&e);
}

TEST(column_lengths_must_match_history_count)
{
    edit e;
    edit_begin(&e);
    msgpack_object *h = get(e.root, "history");
    uint64_t count = get(h, "count")->via.u64;
    get(h, "addr")->via.array.size -= 2;
    char want[128];
    snprintf(want, sizeof want, "history.addr has %u entries, history.count says %u",
             (unsigned)count - 2, (unsigned)count);
    expect_error(&e, want);
    edit_end(&e);
}

TEST(out_of_range_indexes_are_rejected)
{
    edit e;
    edit_begin(&e);
    size_t n_stacks = get(e.root, "stacks")->via.array.size;
    size_t n_frames = get(e.root, "frames")->via.array.size;
    char want[128];

    msgpack_object *stack = at(get(get(e.root, "history"), "stack"), 0);
    uint64_t saved = stack->via.u64;
    set_uint(stack, n_stacks + 1);
    snprintf(want, sizeof want, "field 'history.stack[0]' is %zu, but stacks has %zu entries",
             n_stacks + 1, n_stacks);
    expect_error(&e, want);
    set_uint(stack, saved);

    msgpack_object *frame = at(at(get(e.root, "stacks"), 0), 0);
    saved = frame->via.u64;
    set_uint(frame, n_frames);
    snprintf(want, sizeof want, "field 'stacks[0][0]' is %zu, but frames has %zu entries",
             n_frames, n_frames);
    expect_error(&e, want);
    set_uint(frame, saved);

    msgpack_object *module = at(at(get(e.root, "frames"), 0), 1);
    set_uint(module, 2);
    expect_error(&e, "field 'frames[0]' names module 2, but modules has 2 entries");
    set_uint(module, 0);

    msgpack_object *stream = get(at(get(e.root, "segments"), 0), "stream");
    set_uint(stream, 40);
    expect_error(&e, "field 'segments[0].stream' is 40, but streams has");
    set_uint(stream, 0);

    msgpack_object *block_stack = at(at(get(at(get(e.root, "segments"), 1), "blocks"), 0), 4);
    set_uint(block_stack, 1000);
    expect_error(&e, "field 'segments[1].blocks[0]' is 1000, but stacks has");
    edit_end(&e);
}

TEST(annotation_naming_a_missing_string_is_rejected)
{
    edit e;
    edit_begin(&e);
    msgpack_object *h = get(e.root, "history");
    /* the fixture's fourth event is annotation_begin "forward" (string 0), as the first delta */
    CHECK_EQ_U64(at(get(h, "action"), 3)->via.u64, RS_ACT_ANNOTATION_BEGIN);
    get(e.root, "strings")->via.array.size = 0;
    expect_error(&e, "history.addr[3] names annotation 0, but strings has 0 entries");
    edit_end(&e);
}

TEST(wrong_types_name_the_field_and_the_expectation)
{
    edit e;
    edit_begin(&e);
    set_str(get(e.root, "rank"), "three");
    expect_error(&e, "field 'rank' must be an integer");
    set_uint(get(e.root, "rank"), 9);
    expect_error(&e, "field 'rank' is 9, but world_size is 4");
    set_uint(get(e.root, "rank"), 1);

    set_str(get(get(e.root, "device"), "total_bytes"), "80GB");
    expect_error(&e, "field 'device.total_bytes' must be an unsigned integer, not a string");
    set_uint(get(get(e.root, "device"), "total_bytes"), 1);

    set_str(get(at(get(e.root, "segments"), 0), "segment_type"), "huge");
    expect_error(&e, "field 'segments[0].segment_type' must be \"small\" or \"large\"");
    set_str(get(at(get(e.root, "segments"), 0), "segment_type"), "large");

    set_uint(at(at(get(at(get(e.root, "segments"), 0), "blocks"), 0), 3), 3);
    expect_error(&e, "field 'segments[0].blocks[0]' has block state 3, expected 0 to 2");
    set_uint(at(at(get(at(get(e.root, "segments"), 0), "blocks"), 0), 3), 1);

    at(get(e.root, "frames"), 0)->via.array.size = 4;
    expect_error(&e, "field 'frames[0]' must be an array of 5 elements");
    edit_end(&e);
}

/* The optional communicators (docs/FORMAT.md) and time.steps_from: a good one decodes, a bad one
 * is named with what was expected. */
/* The edited file decodes, with no communicators and `why` in comms_error. */
static void expect_comms_left_out(edit *e, const char *why)
{
    rs_snap *s = NULL;
    CHECK(edit_decode(e, &s) == RANKSNAP_OK && s != NULL);
    CHECK(s && s->n_comms == 0 && s->comms == NULL);
    CHECK_STR_CONTAINS(s ? s->comms_error : NULL, why);
    rs_snap_free(s);
}

TEST(communicators_and_steps_from_name_the_field_and_the_expectation)
{
    edit e;
    edit_begin(&e);
    msgpack_object f[6];
    set_uint(&f[0], 7);
    set_uint(&f[1], 2);
    set_uint(&f[2], 1);
    set_str(&f[3], "mpi");
    set_str(&f[4], "dp");
    set_uint(&f[5], 12);
    msgpack_object tuple = {.type = MSGPACK_OBJECT_ARRAY, .via.array = {6, f}};
    msgpack_object list = {.type = MSGPACK_OBJECT_ARRAY, .via.array = {1, &tuple}};
    add_key(&e, e.root, "communicators", list);
    rs_snap *s = NULL;
    CHECK(edit_decode(&e, &s) == RANKSNAP_OK);
    CHECK(s && s->n_comms == 1 && s->comms[0].id == 7 && s->comms[0].size == 2 &&
          s->comms[0].rank == 1 && !strcmp(s->comms[0].name, "dp") && s->comms[0].allreduces == 12);
    rs_snap_free(s);
    /* malformed: the rank is read all the same, without its communicators, saying why */
    set_uint(&f[2], 2); /* its rank must be below its size */
    expect_comms_left_out(&e, "field 'communicators[0]'");
    set_uint(&f[2], 1);
    set_uint(&f[3], 4);
    expect_comms_left_out(&e, "field 'communicators[0]'");
    set_str(&f[3], "mpi");
    tuple.via.array.size = 5;
    expect_comms_left_out(&e, "field 'communicators[0]' must be an array of 6 elements");
    tuple.via.array.size = 6;
    /* the count of those the rank did not list */
    msgpack_object left;
    set_uint(&left, 6);
    add_key(&e, e.root, "communicators_left_out", left);
    CHECK(edit_decode(&e, &s) == RANKSNAP_OK);
    CHECK(s && s->n_comms == 1 && s->comms_left_out == 6);
    rs_snap_free(s);
    set_str(get(e.root, "communicators_left_out"), "six");
    expect_comms_left_out(&e, "field 'communicators_left_out' must be an unsigned integer");
    set_uint(get(e.root, "communicators_left_out"), 6);
    set_uint(get(e.root, "communicators"), 3);
    expect_comms_left_out(&e, "field 'communicators' must be an array");

    edit_end(&e);

    edit_begin(&e);
    msgpack_object how;
    set_uint(&how, 5);
    add_key(&e, get(e.root, "time"), "steps_from", how);
    expect_error(&e, "field 'time.steps_from' must be a string, not an integer");
    edit_end(&e);
}

TEST(missing_and_duplicate_fields_are_rejected)
{
    edit e;
    edit_begin(&e);
    remove_key(get(e.root, "totals"), "num_ooms");
    expect_error(&e, "missing field 'totals.num_ooms'");
    remove_key(e.root, "totals");
    expect_error(&e, "missing field 'totals'");
    edit_end(&e);

    edit_begin(&e);
    set_str(&e.root->via.map.ptr[1].key, "format");
    expect_error(&e, "field 'format' appears twice");
    edit_end(&e);
}

/* ---- raw bytes ---------------------------------------------------------------------------- */

static void expect_raw_error(const void *buf, size_t len, const char *message)
{
    rs_snap *s = NULL;
    char want[256];
    snprintf(want, sizeof want, "raw.rsnap: %s", message);
    CHECK(rs_rsnap_decode(buf, len, "raw.rsnap", &s) == RANKSNAP_ERR_FORMAT);
    CHECK(s == NULL);
    CHECK_STR_CONTAINS(ranksnap_last_error(), want);
    rs_snap_free(s);
}

TEST(empty_and_non_map_inputs_are_rejected)
{
    expect_raw_error("", 0, "empty file (0 bytes)");
    expect_raw_error("\x93\x01\x02\x03", 4,
                     "not a ranksnap snapshot (the top level is a msgpack array, expected a map)");
    expect_raw_error("\xa3" "abc", 4,
                     "not a ranksnap snapshot (the top level is a msgpack string, expected a map)");
    expect_raw_error("\x81\xa1x\x01", 4, "not a ranksnap snapshot (no 'format' field)");
    expect_raw_error("\x80", 1, "not a ranksnap snapshot (no 'format' field)");
    expect_raw_error("\xc1", 1, "not a ranksnap snapshot (the top level is the byte 0xc1");
    expect_raw_error("\x81\xa1x\xc1", 4, "byte 0xc1 at offset 3 is not valid msgpack");
}

TEST(trailing_bytes_after_the_map_are_rejected)
{
    fixture f;
    size_t len;
    char *buf = valid_snapshot(&f, &len);
    char *longer = malloc(len + 3);
    CHECK(buf && longer);
    if (buf && longer) {
        memcpy(longer, buf, len);
        memcpy(longer + len, "\x01\x02\x03", 3);
        char want[128];
        snprintf(want, sizeof want,
                 "trailing data after the snapshot map (3 bytes from offset %zu)", len);
        expect_raw_error(longer, len + 3, want);
    }
    free(longer);
    free(buf);
    fixture_free(&f);
}

TEST(huge_counts_are_refused_before_anything_is_allocated)
{
    /* msgpack-c would allocate count * 24 bytes for these headers if asked to unpack them */
    expect_raw_error("\x81\xa1x\xdd\xff\xff\xff\xff\x01", 9, "truncated: 9 bytes");
    expect_raw_error("\x81\xa1x\xdf\xff\xff\xff\xff", 8, "truncated: 8 bytes");
    expect_raw_error("\x81\xa1x\xdb\xff\xff\xff\xff", 8, "truncated: 8 bytes");
    expect_raw_error("\xdf\xff\xff\xff\xff", 5, "truncated: 5 bytes");
    /* a count that fits the bytes left but not with the items still pending after it */
    expect_raw_error("\x82\xa1x\x94\xc0\xc0\xc0\xa1y", 9, "truncated: 9 bytes");
}

TEST(deep_nesting_is_rejected)
{
    unsigned char buf[300];
    size_t n = 0;
    buf[n++] = 0x81;
    buf[n++] = 0xa1;
    buf[n++] = 'x';
    for (int i = 0; i < 200; i++) buf[n++] = 0x91;
    buf[n++] = 0xc0;
    expect_raw_error(buf, n, "msgpack nested deeper than 24 levels at offset");
}

TEST(files_that_cannot_be_read_are_io_errors_naming_the_path)
{
    rs_snap *s = NULL;
    CHECK(rs_rsnap_decode_file("/nonexistent-ranksnap-dir/rank-00000.rsnap", &s) == RANKSNAP_ERR_IO);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "/nonexistent-ranksnap-dir/rank-00000.rsnap");
    CHECK_STR_CONTAINS(ranksnap_last_error(), "No such file or directory");
    CHECK(s == NULL);

    char dir[] = "/tmp/ranksnap-bad-XXXXXX", path[128];
    CHECK(mkdtemp(dir) != NULL);
    CHECK(rs_rsnap_decode_file(dir, &s) == RANKSNAP_ERR_IO);
    CHECK_STR_CONTAINS(ranksnap_last_error(), dir);

    snprintf(path, sizeof path, "%s/empty.rsnap", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    CHECK(rs_rsnap_decode_file(path, &s) == RANKSNAP_ERR_FORMAT);
    CHECK_STR_CONTAINS(ranksnap_last_error(), path);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "empty file");
    CHECK(s == NULL);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    RUN(every_truncation_of_a_valid_snapshot_is_a_format_error);
    RUN(every_single_bit_flip_decodes_or_fails_cleanly);
    RUN(random_corruption_decodes_or_fails_cleanly);
    RUN(unedited_snapshot_repacks_and_decodes);
    RUN(foreign_format_string_is_rejected);
    RUN(newer_version_is_rejected_and_names_both_versions);
    RUN(unknown_keys_are_ignored);
    RUN(column_lengths_must_match_history_count);
    RUN(out_of_range_indexes_are_rejected);
    RUN(annotation_naming_a_missing_string_is_rejected);
    RUN(wrong_types_name_the_field_and_the_expectation);
    RUN(communicators_and_steps_from_name_the_field_and_the_expectation);
    RUN(missing_and_duplicate_fields_are_rejected);
    RUN(empty_and_non_map_inputs_are_rejected);
    RUN(trailing_bytes_after_the_map_are_rejected);
    RUN(huge_counts_are_refused_before_anything_is_allocated);
    RUN(deep_nesting_is_rejected);
    RUN(files_that_cannot_be_read_are_io_errors_naming_the_path);
    return check_summary();
}
