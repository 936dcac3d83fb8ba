# build/bin/ring3 (64-bit C): the command (cli/) and its subcommands `run` (the monitor, with
# the rooms it sits on) and `audit` (audit/).

MONITOR_SRCS := $(sort $(wildcard cli/*.c monitor/*/*.c monitor/*/*.S audit/*.c x86/*.c lib/*.c \
                  memory/*.c boot/*.c machine/*.c hw/*.c virtio/*.c block/*.c net/*.c ikc/*.c)) stub/host.c stub/trace.c stub/blob.S
MONITOR_OBJS := $(patsubst %,$(B)/obj/%.o,$(MONITOR_SRCS))
MONITOR_LIBS := -lcapstone -lslirp

$(B)/obj/%.c.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

$(B)/obj/%.S.o: %.S
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

$(BIN)/ring3: $(MONITOR_OBJS)
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(MONITOR_LIBS)

-include $(MONITOR_OBJS:.o=.d)
