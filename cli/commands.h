/* commands.h — verbs of the `ranksnap` command that live outside main.c. Each takes the
 * arguments after the verb and returns the exit status (0 ok, 1 failed, 2 usage). */
#ifndef RANKSNAP_COMMANDS_H
#define RANKSNAP_COMMANDS_H

int rs_cmd_trigger(int argc, char **argv);
/* `report` renders the report over a directory (main.c's report verb). */
int rs_cmd_collect(int argc, char **argv, int (*report)(const char *dir, int json));
int rs_cmd_export(int argc, char **argv);  /* cmd_export.c */
int rs_cmd_replay(int argc, char **argv);  /* cmd_replay.c */

#endif
