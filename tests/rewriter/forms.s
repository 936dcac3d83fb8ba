# Every sensitive instruction ring3-as rewrites, in every operand form it accepts.
# One statement per line; tests/test_rewriter.py checks the rewritten text
# against forms.rewrite.golden and forms.insert.golden, and each site's bytes
# against Capstone's decoding of the original instruction.
	cli
	sti
	pushf
	pushfl
	popf
	popfl
	iret
	iretl
	hlt
	inb $0x60, %al
	inb $0x60
	inw $0x71, %ax
	inl $0x80, %eax
	inb %dx, %al
	inb (%dx), %al
	inw %dx, %ax
	inl (%dx), %eax
	in %dx, %eax
	outb %al, $0x80
	outb $0x80
	outw %ax, $0x70
	outl %eax, (%dx)
	out %al, %dx
	outw %ax, %dx
	insb
	insw
	insl
	insl (%dx), %es:(%edi)
	rep insb
	rep insw
	rep insl
	outsb
	outsl
	rep outsw
	rep outsb %fs:(%esi), (%dx)
	outsl %es:(%esi), (%dx)
	lgdt gdt_descr
	lgdt (%eax)
	lgdtl 4(%esp)
	lgdtw 2(%ebx,%ecx,8)
	lidt idt_descr+6
	lidt %fs:(,%eax,4)
	sgdt (%edi)
	sgdt -6(%ebp)
	sidt 0x10(%esp,%esi)
	lldt %ax
	lldt (%ebx)
	ltr %cx
	ltrw 8(%esp)
	sldt %eax
	sldt %ax
	sldt (%eax)
	str %ebx
	str 4(%esp)
	smsw %eax
	smsw %dx
	smsw (%ecx)
	lmsw %ax
	lmsw (%edx)
	clts
	invd
	wbinvd
	wbnoinvd
	invlpg (%eax)
	invlpg 0x1000(%ebx,%edx,4)
	invlpg %gs:4(%esp)
	rdmsr
	wrmsr
	rdpmc
	cpuid
	movl %eax, %cr0
	mov %ebx, %cr3
	movl %ecx, %cr4
	mov %edx, %cr2
	movl %cr0, %eax
	mov %cr2, %esi
	movl %cr3, %edi
	mov %cr4, %ebp
	movl %eax, %db7
	mov %ecx, %dr0
	movl %db6, %edx
	mov %dr7, %esp
	movw %ax, %ds
	movl %eax, %es
	mov %ax, %ss
	mov %cx, %fs
	movw %dx, %gs
	movw (%eax), %ds
	mov 4(%esp), %es
	movw %ss:8(%ebp), %fs
	mov gs_sel, %gs
	movl %ds, %eax
	movw %es, %bx
	mov %cs, %ecx
	mov %ss, %dx
	movw %fs, (%eax)
	mov %gs, 12(%esp)
	mov %ds, sel_store
	pushl %ds
	push %es
	pushw %fs
	push %gs
	pushl %cs
	push %ss
	popl %ds
	pop %es
	popw %fs
	pop %gs
	popl %ss
	lds (%eax), %ebx
	les 4(%esp), %ecx
	lfs far_ptr, %edx
	lgs (%ebx,%esi,2), %edi
	lss stack_start, %esp
	lssl 8(%esp), %esp
	lds (%eax), %bx
	ljmp $0x10, $target
	ljmpl $(0x60), $target+4
	ljmp *(%eax)
	ljmpl *far_ptr
	ljmpw *4(%esp)
	jmp $0x23, $target
	lcall $0x10, $target
	lcall *(%ebx)
	lcalll *8(%esp,%eax,4)
	call $0x23, $target
	lret
	lretl
	lret $8
	lretw
	int $0x81
	into
	sysenter
	sysexit
	lar %ax, %ebx
	lar %ecx, %edx
	larl (%eax), %esi
	lar %ax, %bx
	lsl %cx, %eax
	lsl 4(%esp), %ebp
	verr %ax
	verr (%eax)
	verw %cx
	verw %cs:mds_sel
	xsetbv
	stac
	clac
	monitor
	monitor %eax, %ecx, %edx
	mwait
	mwait %eax, %ecx
	xsaves (%edi)
	xrstors 64(%esp)
	invpcid (%eax), %ecx
	CLI
	MOVL %EAX, %CR3
	.byte 0x0f, 0x01, 0xca
	.byte 0x0f,0xc7,0x2f
	.byte 0xfa
