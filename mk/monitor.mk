# build/bin/ring3 (64-bit C): the command (cli/) and its subcommands `run` (the monitor, with
# the rooms it sits on) and `audit` (audit/).

MONITOR_SRCS := $(sort $(wildcard cli/*.c monitor/*/*.c monitor/*/*.S audit/*.c x86/*.c lib/*.c \
                  memory/*.c boot/*.c machine/*.c hw/*.c virtio/*.c block/*.c net/*.c ikc/*.c)) stub/host.c stub/placement.c stub/trace.c stub/blob.S
MONITOR_OBJS := $(patsubst %,$(OBJ)/%.o,$(MONITOR_SRCS))
MONITOR_LIBS := -lcapstone -lslirp

$(OBJ)/%.c.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

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
