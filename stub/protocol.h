/* The control area shared by the monitor and one stub process: layout and hand-off rules.
 *
 * A stub is the host process a guest address space runs in (--isolation=process).
 * It is a small static x86-64 program (stub/stub.c, stub/entry.S) linked above
 * 4 GiB; the low 4 GiB of its address space hold only the pages of one guest
 * process, which the monitor asked it to map. It never holds a descriptor of
 * guest memory except between a checked hand-off and the close that follows
 * (see "Mapping" below), and a seccomp filter leaves it a handful of system
 * calls, so guest code that takes it over (64-bit mode, any byte of its code,
 * any registers) reaches nothing but that process's pages. Nor can it leave any
 * memory of its own behind for the next process that gets this stub (the cache
 * is keyed by page directory, which the guest kernel reuses): the filter lets
 * mmap map only STUB_MEMFD, and neither mmap nor munmap touch the runtime area.
 *
 * The control area is a memfd mapping at STUB_CTL_ADDR in the stub and
 * anywhere in the monitor. Guest code can write it at any time, so the
 * monitor reads every field of it as hostile input, once.
 *
 * Hand-off. `state` is a futex word (shared, not private):
 *   monitor: writes r, the commands and fpu; state := STUB_RUN (from
 *            STUB_EVENT, or answering the parked call: "Parking" below);
 *            waits (spinning, then FUTEX_WAIT with monitor_sleeps set) for
 *            state == STUB_EVENT or STUB_PARKED.
 *   stub:    runs the commands, resumes guest code; on a host signal or a
 *            gate call writes the event and r, state := STUB_EVENT, wakes
 *            the monitor if monitor_sleeps, then spins for STUB_RUN (for
 *            `spin_ticks` of the TSC), and parks when it does not come.
 *
 * Under --syscalls=sysemu (stub/trace.h) the monitor is the stub's ptrace
 * tracer and sets trap_handoff: the stub then stops at its trap site (int3)
 * in place of the futex wake, and the monitor, which saw the stop, sets
 * STUB_RUN and continues it. Guest system calls and the monitor's preemption
 * reach the monitor as ptrace stops without the stub's help at all; to run
 * commands after one, the monitor points the stopped stub at cmd_entry.
 *
 * Mapping. When cmd has STUB_CMD_MAP (there are pages to map or to unmap),
 * the stub, before anything else, makes
 * system call STUB_NR_MAP at its one map site. The seccomp filter sends that
 * call to the monitor (user notification), which is proof that the stub's
 * only task is stopped in the kernel at that site. The monitor checks the
 * notification's instruction pointer against the map site the stub reported
 * before any guest code ran, then writes unmap[], nunmap, map[] and nmap, installs the guest
 * memory memfd as descriptor STUB_MEMFD and answers the call in the same step
 * (SECCOMP_IOCTL_NOTIF_ADDFD with SECCOMP_ADDFD_FLAG_SEND): the call returns
 * STUB_MEMFD, and any other result means "map nothing". The code after the map site reads only constants and
 * this area: it unmaps unmap[0..min(nunmap, STUB_MAX_RANGES)), maps
 * map[0..min(nmap, STUB_MAX_RANGES)) with MAP_SHARED |
 * MAP_FIXED from STUB_MEMFD (and MAP_POPULATE when writable, below), closes
 * STUB_MEMFD, and only then goes on. A
 * signal that interrupts that code (guest code may enter the map site with
 * TF set, and the trap follows the call) is taken by a handler that closes
 * STUB_MEMFD and, if it was open, does the unmaps before it goes back to guest
 * code. So the descriptor exists only while no guest code can run, and no
 * guest code runs before the unmaps: guest code can forge an event in this
 * area and run on (--syscalls=sud), or stop at the trap site and return from
 * it elsewhere (sysemu), but then never reaches the map site, and the monitor,
 * which waits for it there before it runs anything else, gives the stub up as
 * silent. Unmaps written with the resume instead could be skipped, and the
 * pages kept after the guest kernel freed them (tests/stub: 6h). A
 * preemption that reaches the stub while it waits in the call (commands after
 * a gate event run outside the signal handler, with signals open) before the
 * monitor read the call makes it again (SA_RESTART): the monitor, which finds
 * the notification gone (ENOENT) or its answer refused (ESRCH), answers the
 * new one. Once read, the call waits killably only (stub.c: the filter's
 * WAIT_KILLABLE_RECV), so that no answer given is lost to a restart.
 *
 * A writable range is mapped populated: the monitor maps a page writable only
 * once its entry is dirty (monitor/mmu/mmu.c, page_prot), written or about to
 * be, as in a folio the guest kernel just filled, whose pages would each cost
 * a host fault at their first touch. A read-only range (text, copy-on-write
 * pages after a fork, of which a process touches few) is left to fault in.
 *
 * Parking (--syscalls=sud). A stub whose spin ends without STUB_RUN turns
 * state from STUB_EVENT to STUB_PARKED (compare-and-swap; the monitor's
 * resume turns it from STUB_EVENT to STUB_RUN the same way, so exactly one
 * of them wins) and makes the map site's call. The monitor that finds it
 * parked sets STUB_RUN and answers that call as the resume itself: with
 * STUB_MEMFD when there are pages to map or unmap, else with 0. One wake-up
 * then resumes the stub, where a futex wake and a map call took two, and the
 * parked stub is held already (below). The monitor sets STUB_RUN before its
 * answer. The stub goes on only when its call was answered; a refusal it takes
 * as none, and calls again, whatever state says by then: the monitor, waiting
 * for an event, refuses the calls it finds while state is neither STUB_EVENT
 * nor STUB_PARKED, and a parked stub's call can be among them when it parked
 * while the monitor was refusing. That monitor then sees STUB_PARKED, and its
 * resume sets STUB_RUN and waits for the call, which must come again
 * (tests/stub: 9). Under sysemu a stub parks only after READY, before the
 * monitor traces it; later hand-offs stop at its trap site.
 *
 * Holding (--syscalls=sud). An event in this area is no proof that the stub
 * waits: guest code can forge one and run on while the guest kernel handles
 * it. Before the guest kernel drops a translation of this stub's address
 * space (invlpg, a CR3 write: then it may free the page) or switches to
 * another one, the monitor holds the stub: it sets cmd to STUB_CMD_MAP and
 * STUB_RUN as for a resume, and waits for the call at the map site, which it
 * answers only at the real resume, having written the registers and the other
 * commands first; the stub reads cmd again after its map code. A stub that
 * does not come is given up, and the monitor waits for its end before it goes
 * on (tests/stub: 6i).
 *
 * CPUID. Where the host has CPUID faulting (Intel SDM vol. 4, MSR 140H bit
 * 0), the stub turns it on, and a guest process's cpuid raises #GP(0), which
 * the monitor answers with the guest kernel's filtered view: a hand-off for
 * each of the 50 to 60 that a glibc program asks at start-up. The monitor
 * also writes each answer it gives into one page that all stubs map
 * read-only at STUB_CPUID_ADDR (a memfd sealed against any other writable
 * mapping, F_SEAL_FUTURE_WRITE; nor does the filter let guest code map or
 * mprotect anything above 4 GiB), and the stub's handler answers a cpuid
 * found there itself, as the monitor would. What a stub reads there is only
 * ever what the monitor gives every process, so no process can leave an
 * answer for another. The handler leaves to the monitor every cpuid it cannot
 * answer so: one not in the page, one with a prefix, one under a code segment
 * other than the flat one (an LDT segment may have a base), and one with TF
 * set (the single-step trap after it, SDM vol. 3, 18.3.1.4, is the
 * monitor's). The monitor empties the page when an answer changes (XSETBV:
 * leaf 0xD), before any stub runs again.
 */
#ifndef RING3_STUB_PROTOCOL_H
#define RING3_STUB_PROTOCOL_H

#define STUB_TEXT_ADDR  0x1000000000ull    /* the stub's image is linked here ... */
#define STUB_TEXT_END   0x1000100000ull    /* ... and ends below this (the filter's "stub code") */
#define STUB_CTL_ADDR   0x2000000000ull    /* the control area in the stub */
#define STUB_CTL_SIZE   0x24000u
#define STUB_CPUID_ADDR 0x2000080000ull    /* the monitor's CPUID answers, read-only ("CPUID" above) */
#define STUB_FPU_OFF    0x1000u            /* the XSAVE image inside the control area */
#define STUB_LDT_OFF    0x4000u            /* then the LDT entries to write (STUB_CMD_LDT) */
#define STUB_FPU_MAX    (STUB_LDT_OFF - STUB_FPU_OFF)
#define STUB_LDT_MAX    8192u              /* a whole LDT (SDM vol. 3, 3.5.1) */
#define STUB_MEMFD      100                /* guest memory's descriptor, only while mapping */
#define STUB_SCRATCH    0xFFFFF000u        /* a page of the runtime area, PROT_NONE but while set_tls
                                            * writes a descriptor there (i386 pointers are 32-bit) */
#define STUB_NR_MAP     39                 /* __NR_getpid: the map site's call, sent to the monitor */
#define STUB_MAX_RANGES 64
#define STUB_PREEMPT_SIG 10                /* SIGUSR1: the monitor wants the CPU back */

/* Descriptors the monitor gives a new stub (stub_exec sets them up). */
#define STUB_FD_CTL     3                  /* the control area's memfd; closed once mapped */
#define STUB_FD_SOCK    4                  /* a socket: the seccomp listener goes back over it */
#define STUB_FD_CPUID   5                  /* the CPUID answers' memfd; closed once mapped */

/* state */
#define STUB_STARTING   0                  /* the stub has not reported ready yet */
#define STUB_RUN        1
#define STUB_EVENT      2
#define STUB_PARKED     3                  /* an event, and the stub waits in its map site's call */

/* kind of event */
#define STUB_EV_READY   1                  /* start-up done: map_site is valid; r is not */
#define STUB_EV_SIGNAL  2                  /* a host signal in guest code: sig, si_code, addr, perf_data, trapno, err */
#define STUB_EV_GATE    3                  /* a gate call through the stub's runtime table: entry */

/* cmd bits */
#define STUB_CMD_MAP    0x1                /* take the memfd at the map site, map map[] */
#define STUB_CMD_FPU    0x2                /* load the vector state from fpu[] (else: keep the stub's) */
#define STUB_CMD_TLS    0x4                /* set_thread_area for tls[0..ntls) */
#define STUB_CMD_EXIT   0x8                /* exit(0) */
#define STUB_CMD_LDT    0x10               /* modify_ldt (func 0x11) for ldt[0..nldt) */

#ifndef __ASSEMBLER__
#include <stdint.h>

/* A guest register state, 32-bit. sel: host selectors in sreg order es cs ss
 * ds fs gs (in an event: as the CPU had them; cs 0x33 means guest code ran in
 * 64-bit mode). On resume cs must be 0x23 or an LDT selector with RPL 3 (the
 * guest's own LDT code segment, mirrored there) and ss a data selector; the
 * stub loads ds, es, fs and gs itself. */
struct stub_regs {
    uint32_t regs[8];           /* eax ecx edx ebx esp ebp esi edi, ModRM order */
    uint32_t eip, eflags;
    uint32_t sel[6];
};

struct stub_range {
    uint32_t linear, pages;     /* guest linear address (page-aligned) and page count */
    uint64_t offset;            /* map: offset in guest memory (the guest-physical address) */
    uint32_t prot, pad;         /* map: PROT_* */
};

struct stub_tls {               /* the layout of the kernel's struct user_desc (TLS and LDT entries) */
    uint32_t entry_number, base_addr, limit, flags;
};

struct stub_ctl {
    volatile uint32_t state;
    volatile uint32_t monitor_sleeps;
    uint32_t reserved;
    uint32_t cmd;
    /* the event, stub -> monitor */
    uint32_t kind, entry;
    int32_t sig, si_code;
    uint64_t addr;              /* si_addr */
    uint64_t trapno, err;       /* from the signal frame */
    uint64_t fsbase, gsbase;
    uint64_t map_site;          /* STUB_EV_READY: the address of the map site's syscall instruction */
    uint64_t rip64;             /* the full RIP of the event (above 4 GiB: guest code ran in 64-bit mode) */
    struct stub_regs r;         /* both ways */
    uint32_t nmap, nunmap, ntls, fpu_size;
    struct stub_range map[STUB_MAX_RANGES];
    struct stub_range unmap[STUB_MAX_RANGES];
    struct stub_tls tls[3];
    uint32_t spin_ticks;        /* TSC ticks the stub spins for STUB_RUN before it parks (set by the monitor) */
    uint32_t pad;
    uint64_t vdso;              /* STUB_EV_READY: the stub's vDSO base (AT_SYSINFO_EHDR), where the host
                                 * kernel's landing pad for a compat-mode sysenter lies (Intel) */
    uint64_t perf_data;         /* the event's si_perf_data (si_code TRAP_PERF: a guest breakpoint slot) */
    uint32_t nldt, pad2;        /* STUB_CMD_LDT: how many of STUB_CTL_LDT's entries to write */
    uint64_t trap_site;         /* STUB_EV_READY: the address after the int3 of a traced hand-off */
    uint64_t cmd_entry;         /* STUB_EV_READY: where a traced stub runs its commands, then guest code */
    uint32_t trap_handoff;      /* set by the monitor once it traces the stub (--syscalls=sysemu) */
    uint32_t cpuids_here;       /* cpuids the stub answered itself ("CPUID" below) since the monitor
                                 * last took the count: for --stats only, as guest code can write it */
};

_Static_assert(sizeof(struct stub_ctl) <= STUB_FPU_OFF, "the control fields fit below the XSAVE image");

/* The page at STUB_CPUID_ADDR ("CPUID" above): a[0..count) are answers the monitor gave, each
 * written before count covers it. (leaf, sub) is what EAX and ECX held; a leaf that ignores ECX
 * has any_sub set and matches any. */
#define STUB_CPUID_MAX 127
struct stub_cpuid_answer {
    uint32_t leaf, sub, any_sub, out[4], pad;   /* out: EAX EBX ECX EDX */
};
struct stub_cpuid_page {
    volatile uint32_t count;
    uint32_t pad[7];
    struct stub_cpuid_answer a[STUB_CPUID_MAX];
};
_Static_assert(sizeof(struct stub_cpuid_page) == 4096, "the CPUID answers are one page");

#define STUB_CTL_FPU(ctl) ((uint8_t *)(ctl) + STUB_FPU_OFF)
#define STUB_CTL_LDT(ctl) ((struct stub_tls *)((uint8_t *)(ctl) + STUB_LDT_OFF))
_Static_assert(STUB_LDT_OFF + STUB_LDT_MAX * sizeof(struct stub_tls) <= STUB_CTL_SIZE,
               "the LDT entries fit in the control area");
#endif

#endif
