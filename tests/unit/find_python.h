/*
 * find_python.h — the python3 that tests write pickles with. Debian's own /usr/bin/python3 comes
 * first, as in tests/CMakeLists.txt, so that another python3 earlier on PATH does not decide what
 * the tests see; python3 from PATH where there is no Debian one.
 */
#ifndef RANKSNAP_TEST_FIND_PYTHON_H
#define RANKSNAP_TEST_FIND_PYTHON_H

#include <stdio.h>
#include <stdlib.h>

/* The command that runs a python3 able to import pickle, or NULL: the tests that need one skip. */
static inline const char *find_python(void)
{
    static const char *const candidates[] = {"/usr/bin/python3", "python3"};
    for (size_t i = 0; i < 2; i++) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "%s -c 'import pickle' >/dev/null 2>&1", candidates[i]);
        if (system(cmd) == 0) return candidates[i];
    }
    return NULL;
}

#endif
