/*
 * pickle_names.c — the names of pickle opcodes (as pickletools spells them) and of the value
 * kinds, for error messages.
 */
#include "pickle_names.h"
#include "pickle_value.h"

const char *rs_pickle_opcode_name(unsigned char op)
{
    switch (op) {
    case 0x28: return "MARK";
    case 0x2e: return "STOP";
    case 0x30: return "POP";
    case 0x31: return "POP_MARK";
    case 0x32: return "DUP";
    case 0x46: return "FLOAT";
    case 0x49: return "INT";
    case 0x4a: return "BININT";
    case 0x4b: return "BININT1";
    case 0x4c: return "LONG";
    case 0x4d: return "BININT2";
    case 0x4e: return "NONE";
    case 0x50: return "PERSID";
    case 0x51: return "BINPERSID";
    case 0x52: return "REDUCE";
    case 0x53: return "STRING";
    case 0x54: return "BINSTRING";
    case 0x55: return "SHORT_BINSTRING";
    case 0x56: return "UNICODE";
    case 0x58: return "BINUNICODE";
    case 0x61: return "APPEND";
    case 0x62: return "BUILD";
    case 0x63: return "GLOBAL";
    case 0x64: return "DICT";
    case 0x7d: return "EMPTY_DICT";
    case 0x65: return "APPENDS";
    case 0x67: return "GET";
    case 0x68: return "BINGET";
    case 0x69: return "INST";
    case 0x6a: return "LONG_BINGET";
    case 0x6c: return "LIST";
    case 0x5d: return "EMPTY_LIST";
    case 0x6f: return "OBJ";
    case 0x70: return "PUT";
    case 0x71: return "BINPUT";
    case 0x72: return "LONG_BINPUT";
    case 0x73: return "SETITEM";
    case 0x74: return "TUPLE";
    case 0x29: return "EMPTY_TUPLE";
    case 0x75: return "SETITEMS";
    case 0x47: return "BINFLOAT";
    case 0x80: return "PROTO";
    case 0x81: return "NEWOBJ";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case 0x88: return "NEWTRUE";
    case 0x89: return "NEWFALSE";
    case 0x8a: return "LONG1";
    case 0x8b: return "LONG4";
    case 0x42: return "BINBYTES";
    case 0x43: return "SHORT_BINBYTES";
    case 0x8c: return "SHORT_BINUNICODE";
    case 0x8d: return "BINUNICODE8";
    case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x92: return "NEWOBJ_EX";
    case 0x93: return "STACK_GLOBAL";
    case 0x94: return "MEMOIZE";
    case 0x95: return "FRAME";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    }
    return "unknown";
}

const char *rs_pickle_kind_name(unsigned kind)
{
    static const char *const names[RS_PICKLE_KIND_COUNT_] = {
        "None", "a bool", "an int", "an int wider than 64 bits", "a float", "a str", "bytes",
        "a list", "a tuple", "a set", "a frozenset", "a dict"};
    return kind < RS_PICKLE_KIND_COUNT_ ? names[kind] : "an unknown value";
}
