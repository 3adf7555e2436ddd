/*
 * pickle_names.h — the names of pickle opcodes and of the value kinds (pickle_names.c), for
 * messages saying what was found instead of what was expected.
 */
#ifndef RANKSNAP_PICKLE_NAMES_H
#define RANKSNAP_PICKLE_NAMES_H

/* "a str", "a dict", ...: for messages saying what was found instead of what was expected. */
const char *rs_pickle_kind_name(unsigned kind);

/* The opcode's name as pickletools spells it ("SHORT_BINUNICODE"), "unknown" when not one. */
const char *rs_pickle_opcode_name(unsigned char op);

#endif
