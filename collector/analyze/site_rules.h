/*
 * site_rules.h — which frames of a stack may be an allocation site, and what a frame is.
 *
 * A site is the user's line, so a frame is looked past when it is ranksnap's own, the CUDA runtime's
 * or driver's, NCCL's, the C library's or the Python interpreter's, PyTorch's machinery (its C++
 * capture, allocator, dispatcher and kernels; its Python such as torch/nn/modules/module.py) or
 * the Python standard library's; or when it matches one of the user's patterns
 * (RANKSNAP_SITE_SKIP, `--site-skip`). The default lists and the matching rules are in
 * site_rules.c and docs/PYTORCH.md ("Sites"). Frames of PyTorch's autograd engine and dispatcher
 * also carry what they stand for: the autograd node (`AddmmBackward0`) or the operator
 * (`aten::addmm`), the name a backward allocation with no Python frame is given.
 *
 * The rules are the process's: set once by the command from its flags (rs_site_rules_set), or,
 * when nobody sets them, the defaults and RANKSNAP_SITE_SKIP from the environment (the live
 * report inside a job).
 */
#ifndef RANKSNAP_SITE_RULES_H
#define RANKSNAP_SITE_RULES_H

#include <stdint.h>

#include "ranksnap.h"
#include "snapshot.h"

/* Patterns a user may give: comma-separated, each at most this long, at most this many. */
#define RS_SITE_SKIP_PATTERN_LEN 256
#define RS_SITE_SKIP_MAX_PATTERNS 64

/* Sets the rules: `skip` is a comma-separated list of shell patterns (fnmatch, `*` crossing
 * '/', '\' an ordinary character so that Windows paths match as written) added to the defaults, each matched against a frame's function name (demangled, and its
 * qualified name without return type and arguments), its source file and its module's path;
 * "" adds none, NULL keeps RANKSNAP_SITE_SKIP's. all_frames 1 turns every rule off but the one that looks past ranksnap's
 * own frames: a site is then the innermost other frame, as recorded. RANKSNAP_ERR_OPTION for a
 * list with too many or too long patterns ("--site-skip" or RANKSNAP_SITE_SKIP is the caller's to
 * name). */
ranksnap_status rs_site_rules_set(const char *skip, int all_frames);

/* Whether each thread remembers the frames it classifies (frame_memo.h), for the next file
 * that names them: on in the commands that read one file after another; off by default, so
 * that the library inside a rank keeps no table after its report. */
void rs_site_rules_remember(int on);

/* 1 when the rules say --all-frames. */
int rs_site_rules_all_frames(void);

typedef enum rs_site_rules_kind {
    RS_SITE_FRAME_OWN = 0,     /* ranksnap's own frame: never a site                                  */
    RS_SITE_FRAME_SKIPPED = 1, /* a runtime's, the framework's or a user pattern's: looked past       */
    RS_SITE_FRAME_PYTHON = 2,  /* a Python line that may be a site                                     */
    RS_SITE_FRAME_NATIVE = 3,  /* a C/C++ frame that may be a site                                     */
} rs_site_rules_kind;

typedef enum rs_site_rules_label {
    RS_SITE_LABEL_NONE = 0,
    RS_SITE_LABEL_NODE = 1,    /* an autograd node's apply: label "AddmmBackward0"                     */
    RS_SITE_LABEL_OP = 2,      /* an operator's entry in the dispatcher: label "aten::addmm"          */
} rs_site_rules_label;

/* What one frame is, for the site picker. `name` and `label` are malloc'ed (NULL when absent). */
typedef struct rs_site_rules_frame {
    uint8_t kind;        /* rs_site_rules_kind                                                          */
    uint8_t python;      /* a Python frame, skipped or not                                         */
    uint8_t installed;   /* a Python file of an installed package (site-packages, dist-packages) */
    uint8_t label_kind;  /* rs_site_rules_label                                                         */
    char *name;          /* the function demangled, NULL when the recorded name is already readable */
    char *label;         /* "AddmmBackward0", "aten::addmm"; NULL for RS_SITE_LABEL_NONE              */
} rs_site_rules_frame;

/* Classifies frame index `frame` of `s` under the current rules. Without memory for a demangled
 * name or a label the frame keeps its recorded name and no label. */
void rs_site_rules_classify(const rs_snap *s, uint32_t frame, rs_site_rules_frame *out);
void rs_site_rules_frame_free(rs_site_rules_frame *info);

/* 1 for a frame of ranksnap itself (ranksnap_*, rs_*, the __wrap_cuda* of ranksnap::wrap, or
 * any frame in libranksnap). */
int rs_site_rules_is_ranksnaps(const rs_snap *s, const rs_snap_frame *f);

/* A source file as the reports show it: the path inside an installed package
 * ("transformers/models/gpt2/modeling_gpt2.py"), otherwise the file's base name; '/' and '\'
 * both separate. */
const char *rs_site_rules_display_file(const char *file);

#endif
