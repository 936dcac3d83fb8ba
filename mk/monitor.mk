# build/bin/ring3 (64-bit C): the command (cli/) and its subcommands `run` (the monitor, with
# the rooms it sits on) and `audit` (audit/).

MONITOR_SRCS := $(sort $(wildcard cli/*.c monitor/*/*.c monitor/*/*.S audit/*.c x86/*.c lib/*.c \
                  memory/*.c boot/*.c machine/*.c hw/*.c virtio/*.c block/*.c net/*.c ikc/*.c)) stub/host.c stub/placement.c stub/trace.c stub/blob.S
MONITOR_OBJS := $(patsubst %,$(OBJ)/%.o,$(MONITOR_SRCS))
MONITOR_LIBS := -lcapstone -lslirp

$(OBJ)/%.c.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

# fast_syscall.c runs while the guest's vector registers are live (monitor/cpu/fast_syscall.h):
# general registers only, and no call out of it (no libc, sanitizer, stack protector or profiling
# hook), which its object's undefined symbols show: only the data it reads.
FAST_CFLAGS := $(filter-out -fsanitize=% -fno-sanitize-recover=%,$(CFLAGS)) -mgeneral-regs-only \
               -ffreestanding -fno-builtin -fno-stack-protector -fno-tree-loop-distribute-patterns
FAST_DATA   := the_vcpu fast_facts ldt_generation mmu_own_lowest_privileged mmu_own_mapped \
               mmu_own_privileged stats_enabled runtime_sysenter_gate runtime_sysenter_lazy

$(OBJ)/monitor/cpu/fast_syscall.c.o: monitor/cpu/fast_syscall.c mk/monitor.mk
	@mkdir -p $(@D)
	$(CC) $(FAST_CFLAGS) -MMD -MP -c -o $@ $<
	@calls="$$(nm -u $@ | awk '{print $$2}' | grep -vxF $(addprefix -e ,$(FAST_DATA)))"; \
	if [ -n "$$calls" ]; then echo "$@ must call nothing, but names: $$calls" >&2; rm -f $@; exit 1; fi

$(OBJ)/%.S.o: %.S
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

$(B)/obj-asan/%.c.o: %.c
	@mkdir -p $(@D)
	$(CC) $(ASAN_CFLAGS) -MMD -MP -c -o $@ $<

$(BIN)/ring3: $(MONITOR_OBJS) $(SAN_STAMP)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(MONITOR_OBJS) $(MONITOR_LIBS)

-include $(MONITOR_OBJS:.o=.d)
