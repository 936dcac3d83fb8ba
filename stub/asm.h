/* Offsets into struct stub_ctl for assembly code (stub/entry.S, tests/stub/guest.S, the hostile guest
 * program's forged event); stub.c checks them. */
#ifndef RING3_STUB_ASM_H
#define RING3_STUB_ASM_H

#define CTL_STATE      0
#define CTL_KIND       16
#define CTL_ENTRY      20
#define CTL_SIG        24
#define CTL_SI_CODE    28
#define CTL_ADDR       32
#define CTL_FSBASE     56
#define CTL_GSBASE     64
#define CTL_RIP64      80
#define CTL_R          88
#define CTL_R_REG(n)   (CTL_R + 4 * (n))     /* ModRM order: 0 eax ... 7 edi */
#define CTL_R_EIP      (CTL_R + 32)
#define CTL_R_EFLAGS   (CTL_R + 36)
#define CTL_R_SEL(n)   (CTL_R + 40 + 4 * (n)) /* 0 es 1 cs 2 ss 3 ds 4 fs 5 gs */
#define CTL_NMAP       152
#define CTL_NUNMAP     156
#define CTL_MAP        168
#define CTL_UNMAP      (CTL_MAP + 64 * RANGE_SIZE)   /* after map[STUB_MAX_RANGES] */
#define CTL_TRAP_SITE  3320
#define CTL_TRAP_HANDOFF 3336
#define RANGE_SIZE     24                     /* struct stub_range */
#define RANGE_LINEAR   0
#define RANGE_PAGES    4
#define RANGE_OFFSET   8
#define RANGE_PROT     16

#define HOST_CS32      0x23                   /* the host GDT's 32-bit user code selector */
#define HOST_CS64      0x33                   /* ... and its 64-bit one */
#define HOST_DS        0x2b                   /* ... and its user data selector */
/* The EFLAGS bits guest code may choose: CF PF AF ZF SF TF DF OF NT AC ID (SDM vol. 1, 3.4.3). */
#define EFLAGS_USER    0x244DD5
#define EFLAGS_TF      0x100
#define EFLAGS_IF      0x200
#define EFLAGS_ID      0x200000
#define EFLAGS_NT      0x4000

#endif
