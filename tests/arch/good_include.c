/*
 * good_include.c — the control for bad_include.c: a file built with the analyze layer's include
 * folders, including a header of a layer below it (collector/model/snapshot.h). It must compile,
 * so that bad_include.c's failure is the layering's doing and not a broken probe.
 */
#include "snapshot.h"
#include "summary.h"

int rs_arch_probe_good(void);
int rs_arch_probe_good(void)
{
    return (int)sizeof(rs_summary) + (int)sizeof(rs_snap);
}
