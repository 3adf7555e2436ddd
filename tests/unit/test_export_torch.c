/*
 * test_export_torch.c — the torch export writes pickles that Python reads back exactly, in the
 * shape PyTorch's viewer reads, and that the viewer can replay without losing a block.
 *
 * The pickle writer is checked byte by byte where the encoding matters to MemoryViz.js (integer
 * widths, memo references, batch sizes) and value by value through python3's pickle module. The
 * export is checked on a snapshot written by the real runtime (a forked child on the sim backend)
 * and on hand-built ones: python3 loads each pickle and runs the checks of CHECK_PY below, which
 * include the backward replay MemoryViz.js's "Allocator State History" performs. Without python3
 * those checks are skipped with a message; the C-side checks still run.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "export_torch.h"
#include "pickler.h"
#include "ranksnap.h"
#include "rsnap_decode.h"
#include "runtime_child.h"
#include "scratch_dir.h"
#include "synth_snapshot.h"

#define MIB ((size_t)1 << 20)

static char tmpdir[256];
static int have_python;

/* argv: PICKLE DEVICE N_ALLOCS N_ANNOTATIONS. Checks the keys and types the viewer reads and
 * replays the trace backwards from the segments as MemoryViz.js does: every free_requested must
 * find its block, every segment_alloc its segment, every live block a segment around it. */
static const char CHECK_PY[] =
    "import pickle, sys\n"
    "d = pickle.load(open(sys.argv[1], 'rb'))\n"
    "dev, n_alloc, n_ann = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])\n"
    "assert set(d) == {'segments', 'device_traces', 'allocator_settings', 'external_annotations'}, d.keys()\n"
    "assert isinstance(d['segments'], list) and isinstance(d['device_traces'], list)\n"
    "assert len(d['device_traces']) == dev + 1 and all(t == [] for t in d['device_traces'][:dev])\n"
    "tr = d['device_traces'][dev]\n"
    "def frames_ok(fs):\n"
    "    assert isinstance(fs, list)\n"
    "    for f in fs:\n"
    "        assert set(f) == {'name', 'filename', 'line'}, f\n"
    "        assert isinstance(f['name'], str) and isinstance(f['filename'], str) and isinstance(f['line'], int)\n"
    "keys = {'action', 'size', 'stream', 'time_us', 'compile_context', 'user_metadata', 'frames'}\n"
    "for e in tr:\n"
    "    assert set(e) == keys | {'device_free' if e['action'] == 'oom' else 'addr'}, e\n"
    "    assert e['action'] in ('alloc', 'free_requested', 'free_completed', 'segment_alloc', 'segment_free', 'oom'), e\n"
    "    assert all(isinstance(e[k], int) for k in ('size', 'stream', 'time_us'))\n"
    "    frames_ok(e['frames'])\n"
    "assert sum(e['action'] == 'alloc' for e in tr) == n_alloc\n"
    "segs, blocks = {}, {}\n"
    "for s in d['segments']:\n"
    "    assert s['device'] == dev and s['segment_type'] in ('small', 'large')\n"
    "    assert s['segment_pool_id'] == (0, 0) and s['is_expandable'] is False\n"
    "    frames_ok(s['frames'])\n"
    "    a = s['address']\n"
    "    for b in s['blocks']:\n"
    "        assert set(b) == {'address', 'size', 'requested_size', 'state', 'frames'}, b\n"
    "        assert b['address'] == a and b['state'] in ('active_allocated', 'active_pending_free', 'inactive')\n"
    "        frames_ok(b['frames'])\n"
    "        if b['state'] != 'inactive': blocks[a] = True\n"
    "        a += b['size']\n"
    "    assert a - s['address'] == s['total_size'], 'blocks do not tile the segment'\n"
    "    assert s['allocated_size'] == sum(b['size'] for b in s['blocks'] if b['state'] == 'active_allocated')\n"
    "    segs[s['address']] = s['total_size']\n"
    "ann = d['external_annotations']\n"
    "assert len(ann) == n_ann, (len(ann), n_ann)\n"
    "for x in ann:\n"
    "    assert set(x) == {'name', 'stage', 'device', 'time_us'} and x['stage'] in ('START', 'END') and x['device'] == dev\n"
    "st = d['allocator_settings']\n"
    "assert isinstance(st['max_split_size'], int) and isinstance(st['expandable_segments'], bool)\n"
    "ev = []\n"
    "for e in tr:\n"
    "    if e['action'] == 'free_completed' and ev and ev[-1]['action'] == 'free_requested' and ev[-1]['addr'] == e['addr']:\n"
    "        ev[-1] = dict(ev[-1], action='free'); continue\n"
    "    ev.append(e)\n"
    "def inside(i):\n"
    "    for a in blocks:\n"
    "        assert any(s <= a < s + n for s, n in segs.items()), ('block outside every segment', i, a)\n"
    "inside(len(ev))\n"
    "for i in range(len(ev) - 1, -1, -1):\n"
    "    e = ev[i]; a = e['action']\n"
    "    if a in ('free', 'free_completed'): blocks[e['addr']] = True\n"
    "    elif a == 'free_requested': assert e['addr'] in blocks, ('free_requested of a lost block', i, e)\n"
    "    elif a == 'alloc': blocks.pop(e['addr'], None)\n"
    "    elif a == 'segment_free': segs[e['addr']] = e['size']\n"
    "    elif a == 'segment_alloc':\n"
    "        assert e['addr'] in segs, ('segment_alloc of a lost segment', i, e)\n"
    "        del segs[e['addr']]\n"
    "    inside(i)\n"
    "print('python: %d trace entries, %d segments, %d annotations' % (len(tr), len(d['segments']), len(ann)))\n";

static int write_file(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(buf, 1, len, f);
    return (fclose(f) == 0 && w == len) ? 0 : -1;
}

/* Runs python3 on `script` with `args` appended; returns its exit status, or -1. */
static int run_python(const char *script, const char *args)
{
    char spath[300], cmd[1200];
    snprintf(spath, sizeof spath, "%s/check.py", tmpdir);
    if (write_file(spath, script, strlen(script)) != 0) return -1;
    snprintf(cmd, sizeof cmd, "python3 %s %s", spath, args);
    fflush(NULL);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* Finishes the pickle `w` writes and saves it as tmpdir/NAME, whose path goes to `path`. */
static void finish_into_file(rs_pickler *w, const char *name, char *path, size_t size)
{
    unsigned char *buf = NULL;
    size_t len = 0;
    CHECK(rs_pickler_finish(w, &buf, &len) == RANKSNAP_OK);
    rs_pickler_free(w);
    snprintf(path, size, "%s/%s", tmpdir, name);
    CHECK(write_file(path, buf, len) == 0);
    free(buf);
}

static uint64_t count_action(const rs_snap *s, uint8_t action)
{
    uint64_t n = 0;
    for (uint64_t i = 0; i < s->history.count; i++) n += s->history.action[i] == action;
    return n;
}

/* Exports `s`, checks it through CHECK_PY; returns the info for further checks. */
static void export_and_check(const rs_snap *s, const char *name, rs_export_torch_info *info)
{
    unsigned char *buf = NULL;
    size_t len = 0;
    CHECK(rs_export_torch(s, name, NULL, &buf, &len, info) == RANKSNAP_OK);
    CHECK(buf && len > 2 && buf[0] == 0x80 && buf[1] == 4 && buf[len - 1] == '.');
    CHECK_EQ_U64(info->allocs, count_action(s, RS_ACT_ALLOC));
    if (!buf) return;
    char path[300], args[600];
    snprintf(path, sizeof path, "%s/%s.pickle", tmpdir, name);
    CHECK(write_file(path, buf, len) == 0);
    free(buf);
    if (!have_python) return;
    snprintf(args, sizeof args, "%s %d %llu %llu", path, s->device.index < 0 ? 0 : s->device.index,
             (unsigned long long)info->allocs, (unsigned long long)info->annotations);
    CHECK(run_python(CHECK_PY, args) == 0);
}

/* ---- the writer ---------------------------------------------------------------------------- */

static int bytes_are(const rs_pickler *w, size_t at, const char *expect, size_t n)
{
    return w->len >= at + n && memcmp(w->buf + at, expect, n) == 0;
}

TEST(pickle_writer_uses_the_narrowest_integer_opcode)
{
    rs_pickler w;
    rs_pickler_init(&w);
    rs_pickler_int(&w, 0);
    CHECK(bytes_are(&w, 0, "K\x00", 2));
    rs_pickler_int(&w, 255);
    CHECK(bytes_are(&w, 2, "K\xff", 2));
    rs_pickler_int(&w, 256);
    CHECK(bytes_are(&w, 4, "M\x00\x01", 3));
    rs_pickler_int(&w, -1);
    CHECK(bytes_are(&w, 7, "J\xff\xff\xff\xff", 5));
    rs_pickler_int(&w, INT32_MAX);
    CHECK(bytes_are(&w, 12, "J\xff\xff\xff\x7f", 5));
    /* 2^31 needs a fifth byte to stay positive in two's complement. */
    rs_pickler_int(&w, (int64_t)1 << 31);
    CHECK(bytes_are(&w, 17, "\x8a\x05\x00\x00\x00\x80\x00", 7));
    rs_pickler_int(&w, INT32_MIN - (int64_t)1);
    CHECK(bytes_are(&w, 24, "\x8a\x05\xff\xff\xff\x7f\xff", 7));
    /* A device address: 6 bytes, within what MemoryViz.js reads as a Number. */
    rs_pickler_uint(&w, 0x7f3a00000000ull);
    CHECK(bytes_are(&w, 31, "\x8a\x06\x00\x00\x00\x00\x3a\x7f", 8));
    rs_pickler_uint(&w, UINT64_MAX);
    CHECK(bytes_are(&w, 39, "\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00", 11));
    CHECK_EQ_U64(w.len, 50);
    rs_pickler_free(&w);
}

TEST(pickle_writer_values_read_back_in_python)
{
    static const int64_t ints[] = {0, 1, 255, 256, 65535, 65536, -1, -256, INT32_MAX, INT32_MIN,
                                   (int64_t)INT32_MAX + 1, (int64_t)INT32_MIN - 1,
                                   0x7f3a00001200, 1795365201292756, INT64_MAX, INT64_MIN};
    rs_pickler w;
    rs_pickler_seq l;
    rs_pickler_init(&w);
    rs_pickler_proto(&w);
    rs_pickler_list_open(&w, &l);
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        rs_pickler_item(&w, &l);
        rs_pickler_int(&w, ints[i]);
    }
    rs_pickler_item(&w, &l);
    rs_pickler_uint(&w, UINT64_MAX);
    rs_pickler_item(&w, &l);
    rs_pickler_float(&w, 0.8);
    rs_pickler_item(&w, &l);
    rs_pickler_bool(&w, 1);
    rs_pickler_item(&w, &l);
    rs_pickler_none(&w);
    rs_pickler_item(&w, &l);
    rs_pickler_str(&w, "attention_scores");
    rs_pickler_item(&w, &l);
    rs_pickler_str(&w, "bad \xff byte, caf\xc3\xa9, \xe2\x82"); /* invalid, valid, truncated */
    rs_pickler_item(&w, &l);
    rs_pickler_int(&w, 7);
    rs_pickler_int(&w, 8);
    rs_pickler_tuple2(&w);
    rs_pickler_close(&w, &l);
    rs_pickler_stop(&w);
    char path[300];
    finish_into_file(&w, "values.pickle", path, sizeof path);
    if (!have_python) return;
    CHECK(run_python("import pickle, sys\n"
                     "v = pickle.load(open(sys.argv[1], 'rb'))\n"
                     "want = [0, 1, 255, 256, 65535, 65536, -1, -256, 2**31 - 1, -2**31, 2**31,\n"
                     "        -2**31 - 1, 0x7f3a00001200, 1795365201292756, 2**63 - 1, -2**63,\n"
                     "        2**64 - 1, 0.8, True, None, 'attention_scores',\n"
                     "        'bad \\ufffd byte, caf\\u00e9, \\ufffd\\ufffd', (7, 8)]\n"
                     "assert v == want, v\n",
                     path) == 0);
}

TEST(pickle_writer_memoizes_repeated_strings)
{
    rs_pickler w;
    rs_pickler_init(&w);
    rs_pickler_str_shared(&w, "frames");
    size_t first = w.len;
    rs_pickler_str_shared(&w, "frames");
    CHECK_EQ_U64(first, 1 + 1 + 6 + 1); /* SHORT_BINUNICODE, length, bytes, MEMOIZE */
    CHECK(bytes_are(&w, first, "h\x00", 2));
    /* Past 256 memo entries a reference takes LONG_BINGET and a 4-byte index. */
    char s[16];
    for (int i = 0; i < 300; i++) {
        snprintf(s, sizeof s, "name%d", i);
        rs_pickler_str_shared(&w, s);
    }
    size_t at = w.len;
    rs_pickler_str_shared(&w, "name299");
    CHECK(bytes_are(&w, at, "j\x2c\x01\x00\x00", 5));
    CHECK_EQ_U64(w.memo_next, 301);
    rs_pickler_free(&w);
}

TEST(pickle_writer_fills_long_lists_in_batches_of_1000)
{
    rs_pickler w;
    rs_pickler_seq l;
    rs_pickler_init(&w);
    rs_pickler_proto(&w);
    rs_pickler_list_open(&w, &l);
    for (int i = 0; i < 2500; i++) {
        rs_pickler_item(&w, &l);
        rs_pickler_int(&w, i % 200);
    }
    rs_pickler_close(&w, &l);
    rs_pickler_stop(&w);
    size_t marks = 0, appends = 0;
    for (size_t i = 3; i < w.len; i += 2) { /* PROTO 4, EMPTY_LIST, then 1- or 2-byte ops */
        if (w.buf[i] == '(') {
            marks++;
            i--;
        } else if (w.buf[i] == 'e') {
            appends++;
            i--;
        }
    }
    CHECK_EQ_U64(marks, 3);
    CHECK_EQ_U64(appends, 3);
    char path[300];
    finish_into_file(&w, "list.pickle", path, sizeof path);
    if (have_python)
        CHECK(run_python("import pickle, sys\n"
                         "v = pickle.load(open(sys.argv[1], 'rb'))\n"
                         "assert v == [i % 200 for i in range(2500)], len(v)\n",
                         path) == 0);
}

/* ---- the export ---------------------------------------------------------------------------- */

/* One rank's allocations, in a child (runtime_child.h): steps, annotations, two streams, blocks
 * left alive at the end. */
static int export_workload(void)
{
    void *side = (void *)(uintptr_t)0x5000;
    void *w[3], *acts[6], *ws;
    int ok = 1;
    for (int i = 0; i < 3 && ok; i++) ok = ranksnap_malloc(&w[i], (size_t)(i + 5) * MIB, NULL) == 0;
    for (int step = 0; step < 4 && ok; step++) {
        ok = ranksnap_step(step) == 0 && ranksnap_annotate_begin("forward") == 0;
        for (int l = 0; l < 6 && ok; l++) {
            ok = ranksnap_malloc(&acts[l], l % 2 ? 3 * MIB : 700 * 1024, l == 5 ? side : NULL) == 0 &&
                 ranksnap_malloc(&ws, 300 * 1024, NULL) == 0 && ranksnap_free(ws) == 0;
        }
        ok = ok && ranksnap_annotate_end("forward") == 0;
        for (int l = 6; l-- > 0 && ok;) ok = ranksnap_free(acts[l]) == 0;
    }
    return ok && ranksnap_free(w[1]) == 0;
}

/* The snapshot export_workload dumped into tmpdir/rt, or NULL. */
static rs_snap *runtime_snapshot(void)
{
    char dir[300], path[320];
    snprintf(dir, sizeof dir, "%s/rt", tmpdir);
    if (!runtime_child_run(dir, export_workload)) return NULL;
    snprintf(path, sizeof path, "%s/rank-00000.rsnap", dir);
    rs_snap *s = NULL;
    if (rs_rsnap_decode_file(path, &s) != RANKSNAP_OK) {
        fprintf(stderr, "%s\n", ranksnap_last_error());
        return NULL;
    }
    return s;
}

TEST(export_of_a_runtime_snapshot_is_what_the_viewer_reads)
{
    rs_snap *s = runtime_snapshot();
    CHECK(s != NULL);
    if (!s) return;
    CHECK(s->history.count > 0 && s->history.dropped == 0);
    rs_export_torch_info info;
    export_and_check(s, "runtime", &info);
    CHECK_EQ_U64(info.left_out, 0);
    CHECK_EQ_U64(info.unknown_actions, 0);
    /* 4 steps: 4 START and 3 END; 4 forward ranges: 8 more. */
    CHECK_EQ_U64(info.annotations, 15);
    CHECK_EQ_U64(info.trace_entries, count_action(s, RS_ACT_ALLOC) +
                                         count_action(s, RS_ACT_FREE_REQUESTED) +
                                         count_action(s, RS_ACT_FREE_COMPLETED) +
                                         count_action(s, RS_ACT_SEGMENT_ALLOC) +
                                         count_action(s, RS_ACT_SEGMENT_FREE));
    rs_snap_free(s);
}

/* A synthetic rank on device 2, with a ring that lost its oldest events and an OOM. */
TEST(export_puts_the_trace_at_the_device_index_and_keeps_the_oom)
{
    train_cfg c = train_default();
    c.steps = 3;
    c.oom_step = 2;
    c.oom_request = 40ull << 30;
    rs_snap *s = synth_train(0, 1, "job", &c);
    s->device.index = 2;
    rs_export_torch_info info;
    export_and_check(s, "device2", &info);
    CHECK_EQ_U64(info.left_out, 0);
    CHECK_EQ_U64(info.annotations, 5); /* steps 0, 1, 2: three START, two END */
    if (have_python) {
        char args[300];
        snprintf(args, sizeof args, "%s/device2.pickle", tmpdir);
        CHECK(run_python("import pickle, sys\n"
                         "d = pickle.load(open(sys.argv[1], 'rb'))\n"
                         "o = [e for e in d['device_traces'][2] if e['action'] == 'oom']\n"
                         "assert len(o) == 1 and o[0]['size'] == 40 << 30 and o[0]['device_free'] > 0, o\n"
                         "a = d['external_annotations']\n"
                         "assert [x['name'] for x in a] == ['ProfilerStep#0', 'ProfilerStep#0', 'ProfilerStep#1',\n"
                         "                                  'ProfilerStep#1', 'ProfilerStep#2'], a\n"
                         "assert [x['stage'] for x in a] == ['START', 'END', 'START', 'END', 'START'], a\n"
                         "f = o[0]['frames']\n"
                         "assert [x['name'] for x in f] == ['train_step', 'main'], f\n",
                         args) == 0);
    }
    rs_snap_free(s);
}

TEST(export_cuts_ranksnap_frames_unless_asked_to_keep_them)
{
    synth y;
    synth_init(&y, 0, 1, "job");
    uint32_t site = synth_site(&y, "load_weights", "src/model.c", 42);
    synth_alloc(&y, 4 * SY_MIB, site);
    rs_snap *s = synth_finish(&y);
    unsigned char *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    rs_export_torch_options keep = {1};
    CHECK(rs_export_torch(s, "frames", NULL, &a, &la, NULL) == RANKSNAP_OK);
    CHECK(rs_export_torch(s, "frames", &keep, &b, &lb, NULL) == RANKSNAP_OK);
    /* The frame names appear in the bytes as they are. */
    CHECK(a && memmem(a, la, "load_weights", 12) && !memmem(a, la, "rs_alloc_malloc", 15) &&
          !memmem(a, la, "capture_pcs", 11));
    CHECK(b && memmem(b, lb, "rs_alloc_malloc", 15) && memmem(b, lb, "capture_pcs", 11));
    free(a);
    free(b);
    rs_snap_free(s);
}

/* Recording paused between two ranges: blocks and segments change while nothing is recorded, so
 * the trace refers to things the end state no longer has. The export leaves out what the
 * viewer's replay cannot take, and only that. */
TEST(export_of_a_history_with_a_gap_stays_replayable)
{
    synth y;
    synth_init(&y, 0, 1, "job");
    uint32_t site = synth_site(&y, "layer", "src/model.c", 7);
    uint64_t keep = synth_alloc(&y, 4 * SY_MIB, site);
    uint64_t a = synth_alloc(&y, 6 * SY_MIB, site);
    uint64_t gone = synth_alloc(&y, 2 * SY_MIB, site);
    synth_free(&y, a);
    uint64_t mark = y.s->history.count;
    /* Unrecorded: `gone` is freed and its segment released. */
    synth_free(&y, gone);
    y.s->history.count = mark;
    synth_free(&y, synth_alloc(&y, 8 * SY_MIB, site));
    (void)keep;
    rs_snap *s = synth_finish(&y);
    rs_export_torch_info info;
    export_and_check(s, "gap", &info);
    /* gone's alloc stays; its segment_alloc cannot (the viewer would lose the segment). */
    CHECK(info.left_out >= 1);
    CHECK_EQ_U64(info.allocs, 4);
    rs_snap_free(s);
}

TEST(export_refuses_an_absurd_device_index)
{
    synth y;
    synth_init(&y, 0, 1, "job");
    rs_snap *s = synth_finish(&y);
    s->device.index = 100000;
    unsigned char *buf = (unsigned char *)"x";
    size_t len = 1;
    CHECK(rs_export_torch(s, "huge.rsnap", NULL, &buf, &len, NULL) == RANKSNAP_ERR_FORMAT);
    CHECK(buf == NULL && len == 0);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "huge.rsnap: device index 100000");
    rs_snap_free(s);
}

int main(void)
{
    if (scratch_dir_make(tmpdir, sizeof tmpdir, "test_export_torch") != 0) return 1;
    have_python = system("python3 -c 'import pickle' >/dev/null 2>&1") == 0;
    if (!have_python) printf("note: python3 not found, the checks through pickle.load are skipped\n");
    RUN(pickle_writer_uses_the_narrowest_integer_opcode);
    RUN(pickle_writer_values_read_back_in_python);
    RUN(pickle_writer_memoizes_repeated_strings);
    RUN(pickle_writer_fills_long_lists_in_batches_of_1000);
    RUN(export_of_a_runtime_snapshot_is_what_the_viewer_reads);
    RUN(export_puts_the_trace_at_the_device_index_and_keeps_the_oom);
    RUN(export_cuts_ranksnap_frames_unless_asked_to_keep_them);
    RUN(export_of_a_history_with_a_gap_stays_replayable);
    RUN(export_refuses_an_absurd_device_index);
    return scratch_dir_done(tmpdir, check_summary());
}
