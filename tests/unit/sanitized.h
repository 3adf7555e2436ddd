/*
 * sanitized.h — RS_TEST_SANITIZED is defined in a build with AddressSanitizer, ThreadSanitizer
 * or MemorySanitizer (GCC's and clang's ways of saying so): their allocator serves malloc, and
 * what a test measures of glibc's (memory held, where blocks go) is theirs there.
 */
#ifndef RANKSNAP_TEST_SANITIZED_H
#define RANKSNAP_TEST_SANITIZED_H

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RS_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                          \
    __has_feature(memory_sanitizer)
#define RS_TEST_SANITIZED 1
#endif
#endif

#endif
