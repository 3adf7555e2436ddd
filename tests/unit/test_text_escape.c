/*
 * test_text_escape.c — text read from files never drives the terminal: the escaping helper
 * (common/text.c) and every text output that prints names from a snapshot (the text report, the
 * summary, error details, log lines). The hostile names are those of the issue: a window title
 * (ESC ] 0 ; ... BEL), a screen clear (ESC [ 2 J), an 8-bit CSI, a newline that would forge a
 * line of the report.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "cmd_summary.h"
#include "compare.h"
#include "errors.h"
#include "log.h"
#include "report_text.h"
#include "synth_snapshot.h"
#include "text.h"

#define TITLE "\x1b]0;pwned\x07"
#define CLEAR "\x1b[2J"
#define CSI8 "\xc2\x9b" "31m" /* U+009B, the C1 CSI, in UTF-8 */
#define STRAY "\x9b" "31m"    /* a lone 0x9b: CSI to a terminal not in UTF-8 mode */

/* 1 when `s` holds a byte a terminal acts on: C0 (but newline), DEL, C1 in UTF-8, or a byte
 * outside valid UTF-8. */
static int has_control(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        if (*p == '\n') {
            p++;
            continue;
        }
        if (*p < 0x20 || *p == 0x7f) return 1;
        if (*p < 0x80) {
            p++;
            continue;
        }
        int n = rs_utf8_len(p);
        if (n == 0 || (p[0] == 0xC2 && p[1] < 0xA0)) return 1;
        p += n;
    }
    return 0;
}

static void hostile(rs_snap *s)
{
    free(s->host);
    s->host = strdup("node" TITLE CLEAR);
    free(s->job);
    s->job = strdup("job" CSI8 "\nrank 9 ran out of memory");
    free(s->device.name);
    s->device.name = strdup("gpu" STRAY);
    /* the site the report names: the innermost application frame of every stack */
    for (size_t i = 0; i < s->n_frames; i++) {
        if (strcmp(s->frames[i].function, "attention_scores") == 0) {
            free(s->frames[i].function);
            s->frames[i].function = strdup("attn" CLEAR "\x7f");
            free(s->frames[i].file);
            s->frames[i].file = strdup("src/m" TITLE ".c");
        }
    }
}

static char *memstream_text(int summary, rs_snap *s, const rs_compare_result *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m) return NULL;
    if (summary)
        CHECK(rs_cmd_summary_print(m, s, "rank-00002" CLEAR ".rsnap") == RANKSNAP_OK);
    else
        CHECK(rs_report_text(m, r) == RANKSNAP_OK);
    fclose(m);
    return text;
}

TEST(escape_writes_controls_c1_and_stray_bytes_as_hex_and_keeps_utf8)
{
    char buf[256];
    CHECK(strcmp(rs_text_escape(buf, sizeof buf, "a" TITLE "b"), "a\\x1b]0;pwned\\x07b") == 0);
    CHECK(strcmp(rs_text_escape(buf, sizeof buf, CLEAR), "\\x1b[2J") == 0);
    CHECK(strcmp(rs_text_escape(buf, sizeof buf, CSI8), "\\xc2\\x9b31m") == 0);
    CHECK(strcmp(rs_text_escape(buf, sizeof buf, STRAY), "\\x9b31m") == 0);
    CHECK(strcmp(rs_text_escape(buf, sizeof buf, "l1\nl2\tx\x7f"), "l1\\x0al2\\x09x\\x7f") == 0);
    /* ordinary names read as they are: paths, C++ names, UTF-8 (é, 日本, an emoji, U+00A0) */
    const char *plain = "src/model.cpp:Foo<int>::bar() caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac "
                        "\xf0\x9f\x98\x80 \xc2\xa0";
    CHECK(strcmp(rs_text_escape(buf, sizeof buf, plain), plain) == 0);
}

TEST(escape_cuts_at_a_character_boundary_never_inside_an_escape)
{
    char buf[7];
    CHECK(strcmp(rs_text_escape(buf, sizeof buf, "ab\x1b" "cd"), "ab\\x1b") == 0);
    CHECK(strcmp(rs_text_escape(buf, sizeof buf, "abcd\x1b"), "abcd") == 0);
    CHECK(strcmp(rs_text_escape(buf, sizeof buf, "abcd\xc3\xa9"), "abcd\xc3\xa9") == 0);
    CHECK(strcmp(rs_text_escape(buf, sizeof buf, "abcde\xc3\xa9"), "abcde") == 0);
}

TEST(text_report_of_hostile_host_and_site_names_has_no_control_bytes)
{
    rs_snap *full[2];
    rs_summary sums[2];
    for (int i = 0; i < 2; i++) {
        train_cfg c = train_default();
        if (i == 1) c.act_factor = 1.5;
        full[i] = synth_train(i, 2, "job-1", &c);
        hostile(full[i]);
        rs_summary_of(full[i], &sums[i]);
    }
    rs_compare_result *r = NULL;
    CHECK(rs_compare(sums, (const rs_snap *const *)full, 2, 0, NULL, &r) == RANKSNAP_OK);
    char *text = r ? memstream_text(0, NULL, r) : NULL;
    CHECK(text != NULL);
    if (text) {
        CHECK(!has_control(text));
        /* still there, readable */
        CHECK_STR_CONTAINS(text, "  node\\x1b]0;pwned  "); /* the table's 16 columns */
        CHECK_STR_CONTAINS(text, "attn\\x1b[2J\\x7f (m\\x1b]0;pwned\\x07.c:211)");
    }
    free(text);
    rs_compare_result_free(r);
    for (int i = 0; i < 2; i++) rs_snap_free(full[i]);
}

TEST(summary_of_hostile_names_has_no_control_bytes)
{
    train_cfg c = train_default();
    c.leak_from = 2;
    c.leak_bytes = 4 * SY_MIB;
    rs_snap *s = synth_train(2, 4, "job-1", &c);
    hostile(s);
    char *text = memstream_text(1, s, NULL);
    CHECK(text != NULL);
    if (text) {
        CHECK(!has_control(text));
        CHECK_STR_CONTAINS(text, "rank-00002\\x1b[2J.rsnap");
        CHECK_STR_CONTAINS(text, "job job\\xc2\\x9b31m\\x0arank 9 ran out of memory");
        CHECK_STR_CONTAINS(text, "gpu\\x9b31m");
    }
    free(text);
    rs_snap_free(s);
}

TEST(error_details_and_log_lines_are_escaped)
{
    rs_error(RANKSNAP_ERR_FORMAT, "%s: job %s", "rank-00001.rsnap", "j" TITLE);
    CHECK(!has_control(ranksnap_last_error()));
    CHECK_STR_CONTAINS(ranksnap_last_error(), "job j\\x1b]0;pwned\\x07");
    /* an argument may be the previous detail itself */
    rs_error(RANKSNAP_ERR_FORMAT, "again: %s", ranksnap_last_error());
    CHECK_STR_CONTAINS(ranksnap_last_error(), "again: rank-00001.rsnap: job j\\x1b]0;pwned\\x07");

    char path[] = "/tmp/test_text_escape.XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    rs_log_configure(RS_LOG_WARN, RS_SUB_ALL, 3);
    RS_WARN(RS_SUB_DUMP, "another job's ring: job %s", "x" CLEAR "\ny");
    dup2(saved, STDERR_FILENO);
    close(saved);
    char line[512] = "";
    ssize_t n = pread(fd, line, sizeof line - 1, 0);
    close(fd);
    unlink(path);
    line[n > 0 ? n : 0] = '\0';
    CHECK(!has_control(line));
    CHECK_STR_CONTAINS(line, "job x\\x1b[2J\\x0ay\n");
    /* one line: the newline in the message did not end it */
    CHECK(strchr(line, '\n') == line + strlen(line) - 1);
}

int main(void)
{
    RUN(escape_writes_controls_c1_and_stray_bytes_as_hex_and_keeps_utf8);
    RUN(escape_cuts_at_a_character_boundary_never_inside_an_escape);
    RUN(text_report_of_hostile_host_and_site_names_has_no_control_bytes);
    RUN(summary_of_hostile_names_has_no_control_bytes);
    RUN(error_details_and_log_lines_are_escaped);
    return check_summary();
}
