/*
 * trampoline.h — RS_TRAMPOLINE(name, hook, target): an exported function `name` of two pointer
 * arguments that answers hook(a, b) when that is not NULL, and otherwise jumps to target()'s
 * answer with its arguments and its return address as its caller left them: the function jumped
 * to sees the trampoline's caller as its own. rank/intercept/driver.c makes the process's dlsym
 * one, since glibc's dlsym resolves RTLD_NEXT relative to its caller's return address.
 *
 * Defined where the processor's version is written (x86-64); elsewhere RS_TRAMPOLINE is not
 * defined, and nothing is taken over. Used once per program: the labels are its own.
 */
#ifndef RANKSNAP_TRAMPOLINE_H
#define RANKSNAP_TRAMPOLINE_H

#if defined(__x86_64__)
/* The arguments are saved around the hook (rdi, rsi, and 8 bytes more that keep the stack
 * 16-byte aligned at the calls); NULL when target() has no function to jump to. */
#define RS_TRAMPOLINE(name, hook, target)                                                          \
    __asm__(".text\n"                                                                              \
            ".globl " #name "\n"                                                                   \
            ".type " #name ", @function\n" #name ":\n"                                             \
            "    push %rdi\n"                                                                      \
            "    push %rsi\n"                                                                      \
            "    sub $8, %rsp\n"                                                                   \
            "    call " #hook "\n"                                                                 \
            "    test %rax, %rax\n"                                                                \
            "    jnz 1f\n"                                                                         \
            "    call " #target "\n"                                                               \
            "    add $8, %rsp\n"                                                                   \
            "    pop %rsi\n"                                                                       \
            "    pop %rdi\n"                                                                       \
            "    test %rax, %rax\n"                                                                \
            "    jz 2f\n"                                                                          \
            "    jmp *%rax\n"                                                                      \
            "1:  add $24, %rsp\n"                                                                  \
            "    ret\n"                                                                            \
            "2:  ret\n"                                                                            \
            ".size " #name ", .-" #name "\n")
#endif

#endif
