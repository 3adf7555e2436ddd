/*
 * test_decode_bounds.c — the decoders' promises at scale: memory a small multiple of the input
 * whatever the input holds (a pickle that repeats one segment, block or trace entry through its
 * memo is refused instead of multiplied; 1 MB inputs built to be expensive stay under 64 MB),
 * the PyTorch trace streamed out of the pickle as it is decoded (the same snapshot whatever the
 * pickle's protocol or layout), and errors that name the offset of what was wrong.
 *
 * Memory is the peak RSS a decode and its summary add in a child process (ru_maxrss); those
 * checks skip under sanitizers, whose shadow memory and quarantine are not the program's. The
 * pickles are written by Python's own pickle module: those tests skip without python3.
 */
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "file_read.h"
#include "find_python.h"
#include "rsnap_decode.h"
#include "sanitized.h"
#include "snap_check.h"
#include "snap_same.h"
#include "snapshot_fixture.h"
#include "summary.h"
#include "torch_decode.h"

#define MIB ((long)1 << 20)

static char g_dir[512];
static const char *g_python;

/* Writes `name` in g_dir with python3 running `code` (which writes sys.argv[1]); its length in
 * *len and its bytes returned (malloc'ed), NULL when python3 is missing or failed. */
static char *python_file(const char *name, const char *code, size_t *len)
{
    if (!g_python) return NULL;
    char path[700], script[700], cmd[1600];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    snprintf(script, sizeof script, "%s/%s.py", g_dir, name);
    FILE *f = fopen(script, "w");
    if (!f) return NULL;
    fputs("import pickle, sys\n", f);
    fputs(code, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s '%s' '%s'", g_python, script, path);
    if (system(cmd) != 0) return NULL;
    char *buf = NULL;
    if (rs_file_read(path, 0, &buf, len) != RANKSNAP_OK) return NULL;
    return buf;
}

typedef ranksnap_status (*decoder)(const char *buf, size_t len, rs_snap **s);

static ranksnap_status torch(const char *buf, size_t len, rs_snap **s)
{
    return rs_torch_decode(buf, len, "crafted.pickle", NULL, s);
}

static ranksnap_status rsnap(const char *buf, size_t len, rs_snap **s)
{
    return rs_rsnap_decode(buf, len, "crafted.rsnap", s);
}

/* Decodes (and summarizes what decodes) in a child; its peak RSS growth in KiB, -1 when the child
 * died. *status gets the decode's status. */
static long decode_in_child(decoder dec, const char *buf, size_t len, ranksnap_status *status)
{
    int fds[2];
    if (pipe(fds) != 0) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        long before = ru.ru_maxrss;
        rs_snap *s = NULL;
        long out[2];
        out[1] = dec(buf, len, &s);
        if (s) {
            rs_summary sum;
            if (!(rs_snap_check(s, "decoded") == RANKSNAP_OK)) out[1] = -1;
            rs_summary_of(s, &sum);
        }
        getrusage(RUSAGE_SELF, &ru);
        out[0] = ru.ru_maxrss - before;
        _exit(write(fds[1], out, sizeof out) == (ssize_t)sizeof out ? 0 : 1);
    }
    close(fds[1]);
    long out[2] = {-1, -1};
    if (pid < 0 || read(fds[0], out, sizeof out) != (ssize_t)sizeof out) out[0] = -1;
    close(fds[0]);
    if (pid > 0) waitpid(pid, NULL, 0);
    *status = (ranksnap_status)out[1];
    return out[0];
}

/* The decode of `buf` is a format error (`want` in its message) or a consistent snapshot, and
 * takes less than `limit_mib` of memory on top of the input. */
static void expect_bounded(const char *what, decoder dec, const char *buf, size_t len,
                           long limit_mib, const char *want)
{
    ranksnap_status st = RANKSNAP_OK;
    long kib = decode_in_child(dec, buf, len, &st);
    printf("  %s: %zu bytes, %s, %ld KiB held\n", what, len,
           st == RANKSNAP_OK ? "decoded" : "refused", kib);
    CHECK(kib >= 0);
    CHECK(st == RANKSNAP_OK || st == RANKSNAP_ERR_FORMAT);
    if (want) {
        rs_snap *s = NULL;
        CHECK(dec(buf, len, &s) == RANKSNAP_ERR_FORMAT);
        CHECK_STR_CONTAINS(ranksnap_last_error(), want);
        rs_snap_free(s);
    }
#if defined(RS_TEST_SANITIZED)
    (void)limit_mib;
#else
    CHECK(kib < limit_mib * 1024);
#endif
}

/* A segment of 300 distinct blocks, listed 8,000 times through the memo: 26 KB that would be
 * 2.4 million blocks (issue 14: 32 KB took 5 GB). */
static const char repeated_segment[] =
    "blocks = [{'address': (1 << 40) + 512 * i, 'size': 512, 'requested_size': 512,\n"
    "           'state': 'active_allocated', 'frames': []} for i in range(300)]\n"
    "s = {'device': 0, 'address': 1 << 40, 'total_size': 2 << 20, 'stream': 0,\n"
    "     'segment_type': 'small', 'blocks': blocks, 'frames': []}\n"
    "pickle.dump({'segments': [s] * 8000, 'device_traces': [[]]}, open(sys.argv[1], 'wb'), 4)\n";

static const char repeated_block[] =
    "b = {'address': 1 << 40, 'size': 512, 'requested_size': 512, 'state': 'active_allocated',\n"
    "     'frames': []}\n"
    "s = {'device': 0, 'address': 1 << 40, 'total_size': 2 << 20, 'stream': 0,\n"
    "     'segment_type': 'small', 'blocks': [b] * 200000, 'frames': []}\n"
    "pickle.dump({'segments': [s], 'device_traces': [[]]}, open(sys.argv[1], 'wb'), 4)\n";

static const char repeated_entry[] =
    "f = [{'name': 'f', 'filename': 'x.py', 'line': 1}] * 1000\n"
    "e = {'action': 'alloc', 'addr': 1 << 40, 'size': 512, 'stream': 0, 'time_us': 1, 'frames': f}\n"
    "pickle.dump({'segments': [], 'device_traces': [[e] * 400000]}, open(sys.argv[1], 'wb'), 4)\n";

/* The pickle `code` writes is refused with `want` in the message, within 64 MB. */
static void expect_pickle_refused(const char *name, const char *code, const char *what,
                                  const char *want)
{
    size_t len = 0;
    char *buf = python_file(name, code, &len);
    if (!buf) {
        printf("skip: no python3\n");
        return;
    }
    expect_bounded(what, torch, buf, len, 64, want);
    free(buf);
}

TEST(a_segment_repeated_through_the_memo_is_refused_naming_it)
{
    expect_pickle_refused("segment.pickle", repeated_segment, "[S] * 8000",
                          "segments[1]: the same segment dict as one before it (a memo reference)");
}

TEST(a_block_repeated_through_the_memo_is_refused_naming_it)
{
    expect_pickle_refused("block.pickle", repeated_block, "[B] * 200000",
                          "segments[0].blocks[1]: the same block dict as one before it");
}

TEST(a_trace_entry_referred_to_twice_is_refused_naming_the_memo_key)
{
    expect_pickle_refused("entry.pickle", repeated_entry, "[E] * 400000",
                          "an item the reader took as it streamed");
}

TEST(a_megabyte_of_empty_dicts_stays_under_64_mb)
{
    /* the value tree's worst case: one value per input byte, in a list that is no snapshot */
    size_t n = (size_t)1 << 20;
    char *buf = malloc(n);
    CHECK(buf != NULL);
    if (!buf) return;
    memcpy(buf, "\x80\x04]\x94(", 5);
    memset(buf + 5, '}', n - 7);
    memcpy(buf + n - 2, "e.", 2);
    expect_bounded("1 MB of EMPTY_DICT", torch, buf, n, 64,
                   "expected a dict at the top (torch.cuda.memory._snapshot()), found a list");
    free(buf);
}

TEST(a_megabyte_of_distinct_trace_entries_stays_under_64_mb)
{
    size_t len = 0;
    char *buf = python_file(
        "entries.pickle",
        "t = [{'action': a, 'addr': (1 << 40) + 512 * (i // 2), 'size': 512, 'stream': 0,\n"
        "      'time_us': i, 'frames': []} for i, a in\n"
        "     ((i, 'alloc' if i % 2 == 0 else 'free_requested') for i in range(28000))]\n"
        "pickle.dump({'segments': [], 'device_traces': [t]}, open(sys.argv[1], 'wb'), 4)\n",
        &len);
    if (!buf) {
        printf("skip: no python3\n");
        return;
    }
    CHECK(len < (size_t)3 << 19);
    expect_bounded("28,000 distinct entries", torch, buf, len, 64, NULL);
    free(buf);
}

/* An .rsnap whose history is ~1 MB of one-byte deltas: every event an allocation at a new
 * address (the walk's table holds one slot per address). */
/* The fixture's snapshot, encoded (snapshot_fixture.h); NULL after a failed CHECK. */
static char *fixture_bytes(fixture *f, size_t *len)
{
    CHECK(fixture_init(f, 1) == 0);
    char *buf = fixture_encode(f, len);
    CHECK(buf != NULL);
    if (!buf) fixture_free(f);
    return buf;
}

TEST(a_megabyte_of_distinct_addresses_in_a_rsnap_stays_under_64_mb)
{
    fixture f;
    size_t len = 0;
    char *valid = fixture_bytes(&f, &len);
    if (!valid) return;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    CHECK(msgpack_unpack_next(&u, valid, len, &off) == MSGPACK_UNPACK_SUCCESS);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    const uint32_t n = 170000;
    const msgpack_object_map *top = &u.data.via.map;
    msgpack_pack_map(&pk, top->size);
    for (uint32_t i = 0; i < top->size; i++) {
        const msgpack_object_kv *kv = &top->ptr[i];
        msgpack_pack_object(&pk, kv->key);
        if (!(kv->key.via.str.size == 7 && !memcmp(kv->key.via.str.ptr, "history", 7))) {
            msgpack_pack_object(&pk, kv->val);
            continue;
        }
        static const char *const cols[] = {"time_us", "action", "addr", "size", "stream", "stack"};
        msgpack_pack_map(&pk, 9);
        msgpack_pack_str_with_body(&pk, "count", 5);
        msgpack_pack_uint32(&pk, n);
        msgpack_pack_str_with_body(&pk, "dropped", 7);
        msgpack_pack_uint32(&pk, 0);
        msgpack_pack_str_with_body(&pk, "capacity", 8);
        msgpack_pack_uint32(&pk, n);
        for (int c = 0; c < 6; c++) {
            msgpack_pack_str_with_body(&pk, cols[c], strlen(cols[c]));
            msgpack_pack_array(&pk, n);
            for (uint32_t k = 0; k < n; k++) {
                uint64_t v = c == 3 ? 100 : c == 1 || c >= 4 ? 0 : 1; /* deltas of 1, allocs */
                if (k == 0 && c == 2) v = (uint64_t)1 << 40;
                msgpack_pack_uint64(&pk, v);
            }
        }
    }
    printf("  crafted .rsnap: %zu bytes, %u allocations at distinct addresses\n", sb.size, n);
    expect_bounded("distinct addresses", rsnap, sb.data, sb.size, 64, NULL);
    msgpack_sbuffer_destroy(&sb);
    msgpack_unpacked_destroy(&u);
    free(valid);
    fixture_free(&f);
}

/* ---- the trace streamed out of the pickle ----------------------------------------------------- */

/* Entries with 0 to 3 frames (an empty list, one APPEND, MARK ... APPENDS), negative streams,
 * sizes that need a LONG1, shared frame dicts, a new str in every entry (PyTorch 2.11's
 * compile_context "N/A") and non-ASCII ones: what the decoder runs as one step and what it runs
 * opcode by opcode must agree. */
static const char torch_like[] =
    "frames = [[{'name': 'f%d' % k, 'filename': '/u/m.py', 'line': k} for k in range(j, j + j % 4)]\n"
    "          for j in range(5)]\n"
    "t = []\n"
    "for i in range(3001):\n"
    "    a = ['alloc', 'free_requested', 'free_completed'][i % 3]\n"
    "    t.append({'action': a, 'addr': (1 << 40) + 512 * (i // 3 % 7),\n"
    "              'size': (1 << 33) + i // 3 if i // 3 % 5 == 0 else 512 + i // 3,\n"
    "              'stream': -1 if i // 3 % 11 == 0 else 0, 'time_us': 1000 + i,\n"
    "              'frames': list(frames[i // 3 % 5]),\n"
    "              'compile_context': ''.join(['N/', 'A']), 'user_metadata': '\\u00e9t\\u00e9 %d' % (i % 4)})\n"
    "t.insert(5, {'action': 'snapshot', 'addr': 0, 'size': 0, 'stream': 0, 'time_us': 1, 'frames': []})\n"
    "segs = [{'device': 0, 'address': 1 << 40, 'total_size': 2 << 20, 'stream': 0,\n"
    "         'segment_type': 'small', 'blocks': [], 'frames': []}]\n";

TEST(the_trace_decodes_alike_at_every_protocol_and_layout)
{
    if (!g_python) {
        printf("skip: no python3\n");
        return;
    }
    /* protocols 2 and 3 memoize with BINPUT, 4 and 5 with MEMOIZE and FRAME; two devices put the
     * traces in a MARK ... APPENDS batch of their own; the keys in another order; the trace
     * pickled first under another key, so that device_traces refers to it through the memo and
     * it is read from the value tree instead of streamed */
    const char *cases[][2] = {
        {"p2", "pickle.dump({'segments': segs, 'device_traces': [t]}, open(sys.argv[1], 'wb'), 2)\n"},
        {"p3", "pickle.dump({'segments': segs, 'device_traces': [t]}, open(sys.argv[1], 'wb'), 3)\n"},
        {"p4", "pickle.dump({'segments': segs, 'device_traces': [t]}, open(sys.argv[1], 'wb'), 4)\n"},
        {"p5", "pickle.dump({'segments': segs, 'device_traces': [t]}, open(sys.argv[1], 'wb'), 5)\n"},
        {"two", "pickle.dump({'segments': segs, 'device_traces': [t, [dict(e) for e in t[:10]]]},\n"
                "            open(sys.argv[1], 'wb'), 4)\n"},
        {"order", "pickle.dump({'device_traces': [t], 'segments': segs}, open(sys.argv[1], 'wb'), 4)\n"},
        {"tree", "pickle.dump({'other': t, 'segments': segs, 'device_traces': [t]}, open(sys.argv[1], 'wb'), 4)\n"},
    };
    rs_snap *first = NULL;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char code[4096], name[64];
        size_t len = 0;
        snprintf(code, sizeof code, "%s%s", torch_like, cases[c][1]);
        snprintf(name, sizeof name, "trace-%s.pickle", cases[c][0]);
        char *buf = python_file(name, code, &len);
        CHECK(buf != NULL);
        if (!buf) continue;
        rs_snap *s = NULL;
        ranksnap_status st = torch(buf, len, &s);
        if (st != RANKSNAP_OK) fprintf(stderr, "%s: %s\n", name, ranksnap_last_error());
        CHECK(st == RANKSNAP_OK && s && (rs_snap_check(s, "decoded") == RANKSNAP_OK));
        if (s) CHECK(s->history.count >= 3001); /* the snapshot entry left out; steps inferred */
        if (s && !first) {
            first = s;
        } else if (s) {
            const char *differs = snap_same(first, s);
            if (differs) fprintf(stderr, "%s: %s differs from trace-p2.pickle\n", name, differs);
            CHECK(differs == NULL);
            rs_snap_free(s);
        }
        free(buf);
    }
    rs_snap_free(first);
}

/* ---- offsets in the .rsnap decoder's messages -------------------------------------------------- */

TEST(rsnap_errors_name_the_offset_of_the_value)
{
    fixture f;
    size_t len = 0;
    char *buf = fixture_bytes(&f, &len);
    if (!buf) return;
    /* the value of "complete", a boolean, made nil */
    const char *key = memmem(buf, len, "\xa8" "complete", 9);
    CHECK(key != NULL);
    if (key) {
        size_t at = (size_t)(key - buf) + 9;
        char want[128];
        buf[at] = (char)0xc0;
        rs_snap *s = NULL;
        snprintf(want, sizeof want, "field 'complete' must be a boolean, not nil (offset %zu)", at);
        CHECK(rs_rsnap_decode(buf, len, "off.rsnap", &s) == RANKSNAP_ERR_FORMAT);
        CHECK_STR_CONTAINS(ranksnap_last_error(), want);
        rs_snap_free(s);
    }
    free(buf);
    fixture_free(&f);
}

int main(void)
{
    g_python = find_python();
    const char *base = getenv("RANKSNAP_DIR");
    snprintf(g_dir, sizeof g_dir, "%s/decode-bounds", base && *base ? base : "/tmp/ranksnap-test-decode-bounds");
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", g_dir, g_dir);
    if (system(cmd) != 0) g_python = NULL;
    RUN(a_segment_repeated_through_the_memo_is_refused_naming_it);
    RUN(a_block_repeated_through_the_memo_is_refused_naming_it);
    RUN(a_trace_entry_referred_to_twice_is_refused_naming_the_memo_key);
    RUN(a_megabyte_of_empty_dicts_stays_under_64_mb);
    RUN(a_megabyte_of_distinct_trace_entries_stays_under_64_mb);
    RUN(a_megabyte_of_distinct_addresses_in_a_rsnap_stays_under_64_mb);
    RUN(the_trace_decodes_alike_at_every_protocol_and_layout);
    RUN(rsnap_errors_name_the_offset_of_the_value);
    return check_summary();
}
