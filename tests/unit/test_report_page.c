/*
 * test_report_page.c — report.html's style sheet and scripts as the binary carries them: the
 * arrays that cmake/embed_text.cmake generates hold report_page.css, report_page.js and
 * page_common.js byte for byte, less each file's leading comment, and nothing in them ends the <style> or <script>
 * element that the page puts them in.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "report_html.h"

#ifndef RS_REPORT_PAGE_DIR
#error "RS_REPORT_PAGE_DIR (collector/output) is set by tests/CMakeLists.txt"
#endif

/* The whole file, 0-terminated, with its length in *len; NULL when it cannot be read. */
static char *slurp(const char *name, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", RS_REPORT_PAGE_DIR, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (n + 1 >= cap) buf = realloc(buf, cap *= 2);
        if (!buf) abort();
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        if (r == 0) break;
        n += r;
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Where the embedded text starts: after the comment that opens the file and its line break,
 * as embed_text.cmake decides (written again here, so that the two must agree). */
static size_t after_leading_comment(const char *text)
{
    if (strncmp(text, "/*", 2) != 0) return 0;
    const char *end = strstr(text, "*/\n");
    return end ? (size_t)(end + 3 - text) : 0;
}

/* Checks `embedded` against the file `name`, less its leading comment. */
static void check_embedded(const char *name, const char *embedded)
{
    size_t len = 0;
    char *file = slurp(name, &len);
    CHECK(file != NULL);
    if (!file) return;
    /* The sources keep a comment on top (what the file owns); the page does without it. */
    CHECK(strncmp(file, "/*", 2) == 0);
    size_t skip = after_leading_comment(file);
    CHECK(skip > 0);
    /* strlen, not the array's size: a 0 byte in the file would cut the page short. */
    CHECK_EQ_U64(strlen(embedded), len - skip);
    CHECK(memcmp(embedded, file + skip, len - skip) == 0);
    free(file);
}

/* Whether `hay` holds `needle` (lower case), ignoring case, as the HTML parser matches tags. */
static int contains_nocase(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && tolower((unsigned char)hay[i]) == needle[i]) i++;
        if (i == n) return 1;
    }
    return 0;
}

TEST(embedded_style_sheet_is_report_page_css_without_its_leading_comment)
{
    check_embedded("report_page.css", rs_report_html_css);
}

TEST(embedded_script_is_report_page_js_without_its_leading_comment)
{
    check_embedded("report_page.js", rs_report_html_js);
}

TEST(embedded_common_script_is_page_common_js_without_its_leading_comment)
{
    check_embedded("page_common.js", rs_report_html_common_js);
}

TEST(nothing_in_them_closes_their_element_early)
{
    CHECK(!contains_nocase(rs_report_html_css, "</style"));
    CHECK(!contains_nocase(rs_report_html_js, "</script"));
    CHECK(!contains_nocase(rs_report_html_common_js, "</script"));
    CHECK(contains_nocase("a</SCRIPT>", "</script"));
}

int main(void)
{
    RUN(embedded_style_sheet_is_report_page_css_without_its_leading_comment);
    RUN(embedded_script_is_report_page_js_without_its_leading_comment);
    RUN(embedded_common_script_is_page_common_js_without_its_leading_comment);
    RUN(nothing_in_them_closes_their_element_early);
    return check_summary();
}
