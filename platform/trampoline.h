/*
 * trampoline.h — RS_TRAMPOLINE(name, hook, target): an exported function `name` of two pointer
 * arguments that answers hook(a, b) when that is not NULL, and otherwise jumps to target()'s
 * answer with its arguments and its return address as its caller left them: the function jumped
 * to sees the trampoline's caller as its own. rank/intercept/driver.c makes the process's dlsym
 * one, since glibc's dlsym resolves RTLD_NEXT relative to its caller's return address.
 *
 * Written for x86-64 and aarch64; elsewhere RS_TRAMPOLINE is not defined, and nothing is taken
 * over. Used once per program: the labels are its own.
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
#elif defined(__aarch64__)
/* The return address is x30 (lr), not on the stack: it is saved with the frame pointer and the
 * arguments (x0, x1) around the calls and put back before the jump, made through x16, the
 * register the ABI keeps for such veneers. `hint #34` is `bti c`, the landing pad of a library
 * built with branch protection (a no-op on processors without it); the jump through x16 may land
 * on the target's own. */
#define RS_TRAMPOLINE(name, hook, target)                                                          \
    __asm__(".text\n"                                                                              \
            ".p2align 2\n"                                                                         \
            ".globl " #name "\n"                                                                   \
            ".type " #name ", %function\n" #name ":\n"                                             \
            "    hint #34\n"                                                                       \
            "    stp x29, x30, [sp, #-32]!\n"                                                      \
            "    mov x29, sp\n"                                                                    \
            "    stp x0, x1, [sp, #16]\n"                                                          \
            "    bl " #hook "\n"                                                                   \
            "    cbnz x0, 1f\n"                                                                    \
            "    bl " #target "\n"                                                                 \
            "    mov x16, x0\n"                                                                    \
            "    ldp x0, x1, [sp, #16]\n"                                                          \
            "    ldp x29, x30, [sp], #32\n"                                                        \
            "    cbz x16, 2f\n"                                                                    \
            "    br x16\n"                                                                         \
            "1:  ldp x29, x30, [sp], #32\n"                                                        \
            "    ret\n"                                                                            \
            "2:  mov x0, xzr\n"                                                                    \
            "    ret\n"                                                                            \
            ".size " #name ", .-" #name "\n")
#endif

#endif
