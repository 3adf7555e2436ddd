/*
 * bad_include.c — a file of the bottom layer (common/) that includes a header of an upper one
 * (collector/analyze/summary.h). It must not compile: tests/arch/CMakeLists.txt builds it with
 * common's include folders only and expects the compiler to say the header is not there.
 */
#include "errors.h"
#include "summary.h"

int rs_arch_probe_bad(void);
int rs_arch_probe_bad(void)
{
    return (int)sizeof(rs_summary);
}
