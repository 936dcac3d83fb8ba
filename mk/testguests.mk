# Test guests: testguests/NAME.c (+ optional NAME.S, NAME.user.c) and testguests/lib/, linked three
# times:
#   build/testguests/plain/NAME.elf   plain GNU as, booted under qemu-system-i386 -kernel
#   build/testguests/ring3/NAME.elf   gcc -B build/asbin/ (ring3-as), booted under ring3 run
#   build/testguests/insert/NAME.elf  the same with ring3-as --ring3-mode=insert, under ring3 run
# NAME.user.c holds the code that runs at CPL 3; it is assembled by the plain assembler in both,
# since ring3 runs guest processes unrewritten (DESIGN.md).
# tests/test_guests.py runs them all and compares their serial transcripts and exit statuses.

TG_NAMES := hello segments exceptions pit uart-input paging paging-pae accessed-dirty usermode \
            msr-unknown cpuid-msr syscall-loop timer-storm virtio-blk virtio-net
TG_DIR   := $(B)/testguests

# -fno-tree-loop-distribute-patterns: keep gcc from turning memset's own loop into a call to memset.
TG_CFLAGS := -std=c11 -m32 -O2 -g -ffreestanding -fno-pic -fno-pie -fno-stack-protector \
             -fno-asynchronous-unwind-tables -fno-tree-loop-distribute-patterns -mgeneral-regs-only \
             -nostdlib -Wall -Wextra -Werror -Itestguests/lib
TG_LDFLAGS := -m elf_i386 -nostdlib -T testguests/lib/link.ld -z max-page-size=0x1000 \
              --build-id=none -z noexecstack --no-warn-rwx-segments

TG_LIB_SRCS := $(sort $(wildcard testguests/lib/*.c testguests/lib/*.S))
tg_guest_srcs = $(wildcard testguests/$(1).c testguests/$(1).S testguests/$(1).user.c)
TG_GUEST_SRCS := $(foreach n,$(TG_NAMES),$(call tg_guest_srcs,$(n)))
tg_objs = $(patsubst testguests/%,$(TG_DIR)/$(1)/obj/%.o,$(2))

# $(1): variant (plain, ring3); $(2): the compiler command; $(3): extra prerequisites of every
# rewritten object; $(4): a command run first.
define TG_VARIANT
$(TG_DIR)/$(1)/obj/%.user.c.o: testguests/%.user.c
	@mkdir -p $$(@D)
	$(CC) $$(TG_CFLAGS) -MMD -MP -c -o $$@ $$<

$(TG_DIR)/$(1)/obj/%.c.o: testguests/%.c $(3)
	@mkdir -p $$(@D)
	$(4)$(2) $$(TG_CFLAGS) -MMD -MP -c -o $$@ $$<

$(TG_DIR)/$(1)/obj/%.S.o: testguests/%.S $(3)
	@mkdir -p $$(@D)
	$(4)$(2) $$(TG_CFLAGS) -MMD -MP -c -o $$@ $$<

TG_$(1)_ELFS := $(patsubst %,$(TG_DIR)/$(1)/%.elf,$(TG_NAMES))
-include $(patsubst %.o,%.d,$(call tg_objs,$(1),$(TG_LIB_SRCS) $(TG_GUEST_SRCS)))
endef

# $(1): variant; $(2): guest name.
define TG_GUEST
$(TG_DIR)/$(1)/$(2).elf: $(call tg_objs,$(1),$(call tg_guest_srcs,$(2)) $(TG_LIB_SRCS)) testguests/lib/link.ld
	$(LD) $(TG_LDFLAGS) -o $$@ $$(filter %.o,$$^)
endef

$(eval $(call TG_VARIANT,plain,$(CC),))
# gcc -B silently falls back to the system `as` when build/asbin/as is missing: refuse instead.
TG_CHECK_AS := test -x $(B)/asbin/as || { echo "$(B)/asbin/as is missing" >&2; exit 1; }; 
$(eval $(call TG_VARIANT,ring3,$(CC) -B $(B)/asbin/,$(BIN)/ring3-as,$(TG_CHECK_AS)))
TG_INSERT_CC := $(CC) -B $(B)/asbin/ -Wa,--ring3-mode=insert
$(eval $(call TG_VARIANT,insert,$(TG_INSERT_CC),$(BIN)/ring3-as,$(TG_CHECK_AS)))
$(foreach v,plain ring3 insert,$(foreach n,$(TG_NAMES),$(eval $(call TG_GUEST,$(v),$(n)))))

.PHONY: testguests testguests-ring3 testguests-insert
testguests: $(TG_plain_ELFS)
testguests-ring3: $(TG_ring3_ELFS)
testguests-insert: $(TG_insert_ELFS)

TEST_DEPS += $(TG_plain_ELFS) $(TG_ring3_ELFS) $(TG_insert_ELFS)
