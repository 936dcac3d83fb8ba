# The stub process (build/bin/ring3-stub: static x86-64 at STUB_TEXT_ADDR, no libc), embedded in
# build/bin/ring3 through stub/blob.S; and its test driver build/tests/stub/test_stub.

# -mcmodel=large: the image lies above 4 GiB. -mgeneral-regs-only: stub code never touches x87/SSE/AVX, so a guest's vector state stays live
# in the registers across a gate hand-off. -fno-tree-loop-distribute-patterns: no memcpy calls.
STUB_CFLAGS := -std=c11 -O2 -g -Wall -Wextra -Werror -ffreestanding -fno-stack-protector -fno-pic \
               -no-pie -mcmodel=large -mgeneral-regs-only -fno-asynchronous-unwind-tables -fno-builtin \
               -fno-tree-loop-distribute-patterns -fcf-protection=none -Iinclude -Istub
STUB_LDFLAGS := -nostdlib -static -no-pie -Wl,-T,stub/stub.ld -Wl,--build-id=none \
                -Wl,-z,max-page-size=0x1000 -Wl,-z,noexecstack
STUB_HDRS := stub/protocol.h stub/asm.h include/ring3/abi.h

$(B)/obj/stubimg/%.o: stub/% $(STUB_HDRS) mk/stub.mk
	@mkdir -p $(@D)
	$(CC) $(STUB_CFLAGS) -c -o $@ $<

$(BIN)/ring3-stub: $(B)/obj/stubimg/stub.c.o $(B)/obj/stubimg/entry.S.o stub/stub.ld
	@mkdir -p $(@D)
	$(CC) $(STUB_CFLAGS) $(STUB_LDFLAGS) -o $@ $(filter %.o,$^)

$(B)/obj/stubimg/stub.c.o: stub/stub.c
$(B)/obj/stubimg/entry.S.o: stub/entry.S

# The embedded image: .incbin is invisible to -MMD, hence the explicit prerequisite.
$(OBJ)/stub/blob.S.o: stub/blob.S $(BIN)/ring3-stub
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -DSTUB_IMAGE='"$(BIN)/ring3-stub"' -c -o $@ $<

# The test driver: hand-assembled 32/64-bit guest code (tests/stub/guest.S) as a flat binary.
$(B)/tests/stub/guest.o: tests/stub/guest.S tests/stub/guest.h $(STUB_HDRS)
	@mkdir -p $(@D)
	$(CC) -m32 -c -Iinclude -Istub -Itests/stub -o $@ $<

# linked at G_CODE (guest.h), where the driver maps it
$(B)/tests/stub/guest.bin: $(B)/tests/stub/guest.o
	ld -m elf_i386 -Ttext=0x10000 -e 0x10000 --build-id=none -o $(@:.bin=.elf) $<
	objcopy -O binary -j .text $(@:.bin=.elf) $@

$(B)/tests/stub/test_stub: tests/stub/test_stub.c tests/stub/guest.h stub/host.c stub/host.h stub/placement.c stub/placement.h stub/trace.c stub/trace.h $(STUB_HDRS) \
                           lib/tsc.c lib/tsc.h x86/xstate.c x86/xstate.h $(OBJ)/stub/blob.S.o $(B)/tests/stub/guest.bin $(SAN_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Istub -Itests/stub -DGUEST_BIN='"$(B)/tests/stub/guest.bin"' -o $@ \
	    tests/stub/test_stub.c stub/host.c stub/placement.c stub/trace.c lib/tsc.c x86/xstate.c $(OBJ)/stub/blob.S.o

TEST_DEPS += $(B)/tests/stub/test_stub
