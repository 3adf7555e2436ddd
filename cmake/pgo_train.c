/*
 * pgo_train.c — the training run of the pickle decoders' profile (cmake/pgo.cmake): decodes
 * each file given as `ranksnap report` does, twice. A build tool, never installed.
 */
#include <stdio.h>

#include "decode.h"
#include "file_map.h"

int main(int argc, char **argv)
{
    (void)rs_file_map_enable();
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 1; i < argc; i++) {
            rs_torch_opts o;
            rs_torch_opts_default(&o);
            o.rank = i - 1;
            rs_snap *s = NULL;
            ranksnap_status st = rs_decode_file_ex(argv[i], &o, &s, NULL, NULL);
            if (st != RANKSNAP_OK) { /* the decoder's message names the file */
                const char *why = ranksnap_last_error();
                if (why[0])
                    fprintf(stderr, "pgo_train: %s\n", why);
                else
                    fprintf(stderr, "pgo_train: %s: %s\n", argv[i], ranksnap_strerror(st));
                return 1;
            }
            rs_snap_free(s);
        }
    }
    return 0;
}
