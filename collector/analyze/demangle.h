/*
 * demangle.h — C++ symbol names made readable: Itanium-ABI names (`_ZN5torch4cuda...`) turned into
 * `torch::cuda::...` by the C++ runtime's __cxa_demangle, found at run time so that ranksnap stays
 * a C library; and the parts of a demangled name the sites need (the qualified name without return
 * type and arguments, a short form that fits a report's column).
 */
#ifndef RANKSNAP_DEMANGLE_H
#define RANKSNAP_DEMANGLE_H

#include <stddef.h>

/* The demangled form of `name`, malloc'ed (the caller frees it), or NULL when `name` is not a
 * mangled C++ name, when no C++ runtime can be loaded (libstdc++.so.6, libc++abi.so.1), or when
 * the runtime refuses it (a name cut short). A name keeps its mangled form then. */
char *rs_demangle(const char *name);

/* 1 when the C++ runtime's demangler was found (tests use it to skip what needs it). */
int rs_demangle_available(void);

/* The qualified name of a demangled function, without its return type, its argument list and
 * what follows it (` const`, ` [clone .isra.0]`): "at::TensorBase at::detail::_empty_generic<long>(
 * c10::ArrayRef<long>, ...)" gives "at::detail::_empty_generic<long>". "(anonymous namespace)" is
 * kept as a part of the name. Writes at most n - 1 bytes and a NUL into out (n > 0). */
void rs_demangle_qualified(const char *name, char *out, size_t n);

/* `name` cut to fit out[n] by leaving out, first, the argument list ("f(...)") and then the
 * template arguments ("g<...>::h"), which a reader rarely needs to tell two sites apart; a name
 * that fits is copied as it is. */
void rs_demangle_short(const char *name, char *out, size_t n);

#endif
