# Test programs built from the monitor's sources: the semantics harness for rewritten sites, and
# insert mode's decoder on its own (tests/test_rewriter.py feeds it what ring3-as assembles).

HARNESS_SRCS := tests/semantics/harness.c monitor/cpu/runtime.S monitor/cpu/runtime.c monitor/cpu/operand.c

$(B)/tests/semantics/harness: $(HARNESS_SRCS) $(SAN_STAMP) include/ring3/abi.h monitor/cpu/shared.h monitor/cpu/runtime.h monitor/cpu/operand.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $(HARNESS_SRCS)

TEST_DEPS += $(B)/tests/semantics/harness $(BIN)/ring3-as

INSERT_DECODE_SRCS := tests/insert/decode.c monitor/cpu/insert_decode.c x86/sensitive.c

$(B)/tests/insert/decode: $(INSERT_DECODE_SRCS) $(SAN_STAMP) include/ring3/abi.h monitor/cpu/insert.h x86/sensitive.h x86/capstone_regs.h monitor/cpu/operand.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $(INSERT_DECODE_SRCS) -lcapstone

TEST_DEPS += $(B)/tests/insert/decode

# A fault in monitor code run by the signal handler, injected by LD_PRELOAD
# (tests/test_internal_error.py). Not sanitized: it only has to fault.
$(B)/tests/fault/fault_in_handler.so: tests/fault/fault_in_handler.c
	@mkdir -p $(@D)
	$(CC) -O2 -Wall -Wextra -Werror -shared -fPIC -o $@ $<

TEST_DEPS += $(B)/tests/fault/fault_in_handler.so
