#!/bin/sh
# report.html as check_html.py (CHECK_HTML, run by PYTHON) sees it, on the pages of
# tests/html/make_fixtures.sh; the browser checks skip (77) inside check_html.py without chromium.
# usage: html_page.sh CASE PYTHON CHECK_HTML ARGS... (each case below says its ARGS)
set -u
name=$1 python=$2 check_html=$3
shift 3

# OUT PAGE_OUT: `report --out OUT` wrote report.txt, report.json and report.html, and the page
# renders in chromium (screenshots into PAGE_OUT)
case_report_out_dir_writes_a_page_that_renders_in_chromium() {
    out=$1 page_out=$2
    for f in report.txt report.json report.html; do test -s "$out/$f" || { echo "no $f in $out"; exit 1; }; done
    exec "$python" "$check_html" "$out/report.html" --ranks 4 --divergent 2 --window 1024,768 --out "$page_out"
}

# DEMO: the divergent and the OOM page reference nothing outside themselves (no browser needed)
case_page_references_nothing_outside_itself() {
    demo=$1
    "$python" "$check_html" --static-only "$demo/divergent/report.html" && "$python" "$check_html" --static-only "$demo/oom.html"
}

# PAGE BROKEN: a copy of PAGE whose script throws is caught, through data-errors
case_check_sees_a_script_error() {
    page=$1 broken=$2
    sed 's|</body>|<script>throw new Error("injected for the test");</script></body>|' "$page" > "$broken" &&
        exec "$python" "$check_html" "$broken" --expect-error 'injected for the test'
}

command -v "case_$name" >/dev/null || { echo "html_page.sh: no case '$name'" >&2; exit 2; }
"case_$name" "$@"
