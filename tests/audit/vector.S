/* Instructions that read or write the x87/SSE/AVX state, each at a symbol of its own, between
 * instructions of the same Capstone groups that touch no vector register. Assembled by gas, each
 * is reported (no FPU site before it); assembled by ring3-as, none is (tests/test_audit.py). */
#define V(name, ...) .globl name; name: __VA_ARGS__

	.text
	.globl vector_code
vector_code:
	pause
	lfence
	V(v_fninit, fninit)
	V(v_fxsave, fxsave (%eax))
	V(v_xrstor, xrstor (%edi))
	V(v_xsave_bytes, .byte 0x0f, 0xae, 0x27)
	V(v_fwait, fwait)
	V(v_fnstcw, fnstcw (%eax))
	V(v_fldl, fldl 8(%esp))
	V(v_fistpll, fistpll (%eax))
	prefetchnta (%eax)
	V(v_movaps, movaps %xmm1, (%eax))
	V(v_ldmxcsr, ldmxcsr (%esp))
	V(v_emms, emms)
	V(v_xgetbv, xgetbv)
	V(v_vzeroupper, vzeroupper)
	mfence
	movnti %eax, (%ebx)
	clflush (%eax)
	ret
