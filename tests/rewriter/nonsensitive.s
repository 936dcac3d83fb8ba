# Instructions that look like sensitive ones but are not: ring3-as leaves them alone.
	movl %eax, %ebx
	mov 4(%esp), %eax
	mov %fs:4, %eax
	movl $str, %eax
	pushl %eax
	push $0x2b
	popl %ebx
	jmp *%eax
	jmp target
	call target
	call *0xffff0014
	ret
	ret $4
	rep movsl
	rep stosb
	lock incl (%eax)
	int1_label: nop
	.pushsection .rodata, "a"
	.byte 0xfa
	.popsection
	.byte 0x0f, 0x0b
	.ascii "cli; sti"
	movsbl %al, %eax
	int3
	int $3
	int $0x80
	inc %eax
	outside_code = 1
	lretfoo = 2
	strlen_ptr: .long 0
