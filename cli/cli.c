/*
 * cli.c — cli.h: the pieces every verb of the command shares.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "atomic_file.h"
#include "cli.h"
#include "options.h"
#include "text.h"

void rs_cli_usage(FILE *out, const rs_cli_verb *verb)
{
    fprintf(out, "usage: ranksnap %s %s\n  %s\n", verb->name, verb->args, verb->summary);
    if (verb->details) fprintf(out, "\n%s", verb->details);
}

int rs_cli_usage_error(const rs_cli_verb *verb, const char *fmt, ...)
{
    fprintf(stderr, "ranksnap %s: ", verb->name);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    rs_cli_usage(stderr, verb);
    return RS_EXIT_USAGE;
}

int rs_cli_number(const char *s, long lo, long hi, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || end == s || *end || errno || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int rs_cli_flag_value(const char *name, int argc, char **argv, int *i, const char **value)
{
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n) != 0) return 0;
    if (a[n] == '=' && name[1] == '-') {
        *value = a + n + 1;
        return 1;
    }
    if (a[n] != '\0') return 0;
    if (*i + 1 >= argc) return -1;
    *value = argv[++*i];
    return 1;
}

void rs_cli_args_init(rs_cli_args *a, int argc, char **argv)
{
    a->argc = argc;
    a->argv = argv;
    a->i = -1;
    a->flags_done = 0;
}

int rs_cli_next(const rs_cli_verb *verb, rs_cli_args *a, const char **arg)
{
    while (++a->i < a->argc) {
        const char *s = a->argv[a->i];
        *arg = s;
        if (a->flags_done || s[0] != '-' || s[1] == '\0') return RS_CLI_OPERAND;
        if (strcmp(s, "--") == 0) {
            a->flags_done = 1;
            continue;
        }
        if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
            rs_cli_usage(stdout, verb);
            return RS_CLI_HELP;
        }
        return RS_CLI_FLAG;
    }
    return RS_CLI_END;
}

void rs_cli_failure(const char *who, const char *path, ranksnap_status st)
{
    const char *detail = ranksnap_last_error();
    if (!detail[0]) detail = ranksnap_strerror(st);
    /* a name from a directory listing may hold escapes; the detail has them escaped already */
    char name[1024];
    rs_text_escape(name, sizeof name, path);
    if (strstr(detail, name))
        fprintf(stderr, "%s: %s\n", who, detail);
    else
        fprintf(stderr, "%s: %s: %s\n", who, name, detail);
}

int rs_cli_file_operands(const rs_cli_verb *verb, int argc, char **argv, int *code)
{
    rs_cli_args it;
    rs_cli_args_init(&it, argc, argv);
    const char *arg;
    int n = 0, kind;
    while ((kind = rs_cli_next(verb, &it, &arg)) != RS_CLI_END) {
        if (kind == RS_CLI_HELP) {
            *code = RS_EXIT_OK;
            return -1;
        }
        if (kind == RS_CLI_FLAG) {
            *code = rs_cli_usage_error(verb, "unknown option '%s'", arg);
            return -1;
        }
        argv[n++] = (char *)arg;
    }
    if (n == 0) {
        *code = rs_cli_usage_error(verb, "expected at least one FILE");
        return -1;
    }
    return n;
}

int rs_cli_groups(const char *who, const char *flag, const char *value, rs_roles *out)
{
    rs_options opts;
    memset(out, 0, sizeof *out);
    if (rs_options_load_one(&opts, "RANKSNAP_GROUPS", value) != RANKSNAP_OK) {
        /* the option table names the variable: a value given as the flag is named as the flag */
        const char *e = ranksnap_last_error(), *why = value ? strstr(e, ": ") : NULL;
        if (why)
            fprintf(stderr, "%s: %s %s%s\n", who, flag, value, why);
        else
            fprintf(stderr, "ranksnap: %s\n", e);
        return -1;
    }
    if (!opts.groups[0]) return 0;
    char source[320];
    snprintf(source, sizeof source, "%s %s", value ? flag : "RANKSNAP_GROUPS", opts.groups);
    if (rs_roles_parse(opts.groups, source, out) != RANKSNAP_OK) {
        fprintf(stderr, "%s: %s\n", who, ranksnap_last_error());
        return -1;
    }
    return 0;
}

int rs_cli_switch_of(const char *arg, const rs_cli_switch *sw, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        if (strcmp(arg, sw[k].name) != 0) continue;
        *sw[k].dst = sw[k].value;
        return 1;
    }
    return 0;
}

int rs_cli_jobs_flag(const rs_cli_verb *verb, int argc, char **argv, int *i, int max, int *jobs,
                     int *code)
{
    const char *v = NULL;
    long n = 0;
    int got = rs_cli_flag_value("--jobs", argc, argv, i, &v);
    if (got == 0) return 0;
    if (got < 0 || rs_cli_number(v, 1, max, &n) != 0) {
        *code = rs_cli_usage_error(verb, "--jobs expects a number of threads, 1 to %d", max);
        return -1;
    }
    *jobs = (int)n;
    return 1;
}

int rs_cli_write_files(const char *dir, const char *const *names, char *const *bufs,
                       const size_t *lens, int n)
{
    struct stat sb;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "ranksnap: --out %s: cannot create the directory: %s\n", dir,
                strerror(errno));
        return -1;
    }
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "ranksnap: --out %s: not a directory\n", dir);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        size_t len = strlen(dir) + strlen(names[i]) + 2;
        char *path = malloc(len);
        if (!path) {
            fprintf(stderr, "ranksnap: out of memory\n");
            return -1;
        }
        snprintf(path, len, "%s/%s", dir, names[i]);
        ranksnap_status st = rs_atomic_file_write(path, bufs[i], lens[i]);
        if (st != RANKSNAP_OK) rs_cli_failure("ranksnap", path, st);
        free(path);
        if (st != RANKSNAP_OK) return -1;
    }
    return 0;
}
