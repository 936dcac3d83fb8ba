/* The stub program (build/bin/ring3-stub), embedded in the monitor; stub/host.c writes it into a memfd. */
#ifndef STUB_IMAGE
#define STUB_IMAGE "build/bin/ring3-stub"
#endif
    .section .rodata.ring3_stub, "a"
    .balign 16
    .globl ring3_stub_image, ring3_stub_image_end
ring3_stub_image:
    .incbin STUB_IMAGE
ring3_stub_image_end:
    .section .note.GNU-stack, "", @progbits
