/*
 * site_path.h — the site of a stack and its path as the text report writes it, for the tests of
 * site attribution (test_sites, test_read_pickle).
 */
#ifndef RANKSNAP_TEST_SITE_PATH_H
#define RANKSNAP_TEST_SITE_PATH_H

#include <stddef.h>
#include <stdint.h>

#include "sites.h"

static inline void site_path_of(const rs_snap *s, uint32_t stack, rs_site *site, char *buf, size_t n)
{
    rs_site_picker pk;
    rs_site_picker_init(&pk, s);
    rs_site_path path;
    rs_site_pick_path(&pk, stack, site, &path);
    rs_site_path_format(&path, buf, n);
    rs_site_picker_free(&pk);
}

#endif
