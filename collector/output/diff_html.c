/*
 * diff_html.c — owns the diff's page (diff_html.h): report.html's head and style sheet
 * (report_html.h), one inline data blob and the script that draws it (page_common.js, then
 * diff_page.js). The blob, <script type="application/json" id="ranksnap-data">, holds
 *   diff   the diff exactly as `ranksnap diff --json` writes it (docs/DIFF.md), so that the page
 *          and the JSON cannot disagree;
 *   text   the text, shown as is in a collapsed section.
 * As in report.html, every '<', '>', '&' and '/' of the blob is a JSON escape, so that nothing in
 * it can end the element or name a URL.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "diff_html.h"
#include "diff_json.h"
#include "diff_text.h"
#include "errors.h"
#include "report_html.h"

ranksnap_status rs_diff_render(rs_diff_render_fn fn, const rs_diff_result *r,
                               const rs_diff_gate *g, char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    FILE *m = open_memstream(buf, len);
    if (!m) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "the diff's page: no memory");
    ranksnap_status st = fn(m, r, g);
    if (fclose(m) != 0 && st == RANKSNAP_OK)
        st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "the diff's page: no memory");
    if (st != RANKSNAP_OK) {
        free(*buf);
        *buf = NULL;
    }
    return st;
}

ranksnap_status rs_diff_html(FILE *f, const rs_diff_result *r, const rs_diff_gate *gate)
{
    if (!f || !r) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_diff_html: NULL argument");
    char *json = NULL, *text = NULL;
    size_t json_len = 0, text_len = 0;
    RS_CHECK(rs_diff_render(rs_diff_json, r, gate, &json, &json_len));
    ranksnap_status st = rs_diff_render(rs_diff_text, r, gate, &text, &text_len);
    if (st != RANKSNAP_OK) {
        free(json);
        return st;
    }
    rs_report_html_head(f, "ranksnap diff");
    fputs("<header id=\"head\"></header>\n"
          "<section><h2>Peaks, before and after</h2><div id=\"overview\"></div></section>\n"
          "<section id=\"roles-section\"><h2>Roles</h2><table id=\"roles\"></table></section>\n"
          "<section><h2>Ranks</h2><table id=\"pairs\"></table></section>\n"
          "<section id=\"detail\"></section>\n"
          "<section><h2>Text</h2><details><summary>as printed by <code>ranksnap diff</code>"
          "</summary><pre class=\"text\" id=\"text\"></pre></details></section>\n",
          f);
    rs_report_html_data(f, "diff", json, json_len, text);
    free(json);
    free(text);
    fprintf(f, "}</script>\n<footer>ranksnap %s &middot; one self-contained file: nothing is "
               "fetched</footer>\n<div id=\"tip\"></div>\n<script>\n", ranksnap_version());
    fputs(rs_report_html_common_js, f);
    fputs(rs_diff_html_js, f);
    fputs("</script>\n</body>\n</html>\n", f);
    if (ferror(f) || fflush(f) != 0)
        return rs_error(RANKSNAP_ERR_IO, "writing the diff's page failed: %s", strerror(errno));
    return RANKSNAP_OK;
}
